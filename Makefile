# cellrate — `make help` lists the targets.

CC      ?= cc
PYTHON  ?= python3
CSTD     = -std=c11 -D_GNU_SOURCE
WARN     = -Wall -Wextra -Wpedantic -Wshadow -Wmissing-prototypes -Werror
ARCHFLAGS := $(shell [ "$$(uname -m)" = x86_64 ] && echo -mcx16)
CFLAGS  ?= -O2 -g
ALLCFLAGS = $(CSTD) $(WARN) $(ARCHFLAGS) $(CFLAGS) -fPIC -Icore
LDLIBS   = -lpthread -latomic

CORE_SRC = $(wildcard core/*.c)
CORE_HDR = $(wildcard core/*.h)
BUILD    = build

LUA54_INC  = /usr/include/lua5.4
LUAJIT_INC = /usr/include/luajit-2.1

.DEFAULT_GOAL := help
.PHONY: help deps core lua py vectors test test-c test-asan test-tsan test-py test-lua test-ft demo bench symbols clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

deps: ## install what building and testing need (apt-get, pip)
	@sh tests/install-deps.sh

core: $(BUILD)/libcellrate.a ## build the C core (static library)

$(BUILD)/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(ALLCFLAGS) -c $< -o $@

$(BUILD)/libcellrate.a: $(patsubst core/%.c,$(BUILD)/%.o,$(CORE_SRC))
	ar rcs $@ $^

symbols: $(BUILD)/libcellrate.a ## fail on any exported symbol without the cr_ prefix
	@bad=$$(nm -g --defined-only $< | awk 'NF==3 {print $$3}' | grep -v '^cr_' || true); \
	if [ -n "$$bad" ]; then echo "unprefixed exported symbols:"; echo "$$bad"; exit 1; fi; \
	echo "symbols: all exported symbols carry the cr_ prefix"

# The Lua module: one source, built for Lua 5.4 and for LuaJIT (5.1 API).
LUA_MODULE_SRC = bindings/cellrate_lua.c $(CORE_SRC)
LUA_MODULE_DEPS = $(LUA_MODULE_SRC) $(CORE_HDR) bindings/cellrate_lua_compat.h

lua: $(BUILD)/lua5.4/cellrate.so $(BUILD)/luajit/cellrate.so ## build the Lua module (5.4 and LuaJIT)

$(BUILD)/lua5.4/cellrate.so: $(LUA_MODULE_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ALLCFLAGS) -fvisibility=hidden -I$(LUA54_INC) -shared -o $@ $(LUA_MODULE_SRC) -lm $(LDLIBS)

$(BUILD)/luajit/cellrate.so: $(LUA_MODULE_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ALLCFLAGS) -fvisibility=hidden -I$(LUAJIT_INC) -shared -o $@ $(LUA_MODULE_SRC) -lm $(LDLIBS)

test-lua: lua ## busted specs under Lua 5.4 and LuaJIT
	tests/lua/run.sh lua5.4 $(BUILD)/lua5.4
	tests/lua/run.sh luajit $(BUILD)/luajit

vectors: ## regenerate tests/vectors/ from the reference model
	$(PYTHON) tests/model/make_vectors.py

py: ## build and install the Python package (pip install .)
	CELLRATE_WERROR=1 $(PYTHON) -m pip install -q --root-user-action=ignore --no-build-isolation .

test-c: core ## C tests: vectors, core, threads, shared regions
	tests/c/run.sh plain

test-asan: ## C tests under AddressSanitizer + UndefinedBehaviorSanitizer
	tests/c/run.sh asan

test-tsan: ## C tests under ThreadSanitizer
	tests/c/run.sh tsan

test-py: py lua ## pytest suite (vectors, model, properties, API, errors, threads, shared, typing)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/model tests/python

test-ft: lua ## pytest suite on a free-threaded CPython 3.13 built from Debian's source (GIL must stay off)
	tests/freethreaded/run.sh

test: deps symbols test-c test-asan test-tsan test-py test-lua test-ft ## every suite (installs what it needs)
	@echo "make test: every suite passed"

demo: deps py lua ## show decisions in Python and in Lua
	@echo "==================== Python ===================="
	@CELLRATE_LUA_CPATH="$(CURDIR)/$(BUILD)/lua5.4/?.so" $(PYTHON) examples/demo.py
	@echo
	@echo "==================== Lua 5.4 ===================="
	@lua5.4 -e 'package.cpath = "$(BUILD)/lua5.4/?.so;" .. package.cpath' examples/demo.lua
	@echo
	@echo "==================== LuaJIT ====================="
	@luajit -e 'package.cpath = "$(BUILD)/luajit/?.so;" .. package.cpath' examples/demo.lua

bench: ## benchmarks against the peers (installs them under bench/.peers); writes bench/results/
	bench/run.sh

clean: ## remove build products
	rm -rf $(BUILD) python/cellrate/*.so *.egg-info
