# cellrate — `make help` lists the targets.

# The compiler flags, written once for every build description.
include core/flags.mk

CC      ?= cc
PYTHON  ?= python3
CFLAGS  ?= -O2 -g
WERROR  ?= -Werror
ARCHFLAGS := $(if $(filter x86_64,$(shell uname -m)),$(CR_X86_64))
ALLCFLAGS = $(CR_STD) $(CR_WARN) $(WERROR) $(CR_VISIBILITY) $(ARCHFLAGS) $(CFLAGS) -fPIC -Icore
LDLIBS   = $(CR_LIBS)

CORE_SRC = $(wildcard core/*.c)
CORE_HDR = $(wildcard core/*.h) core/flags.mk
BUILD    = build
CORE_OBJ = $(patsubst core/%.c,$(BUILD)/%.o,$(CORE_SRC))

LUA54_INC  = /usr/include/lua5.4
LUAJIT_INC = /usr/include/luajit-2.1

.DEFAULT_GOAL := help
.PHONY: help deps core lua rock rock-install py vectors test test-c test-asan test-tsan test-py test-lua test-ft test-nginx test-fuzz fuzz fuzz-corpus demo bench symbols clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

deps: ## install what building and testing need (apt-get, pip)
	@sh tests/install-deps.sh

core: $(BUILD)/libcellrate.a $(BUILD)/libcellrate.so ## build the C core (static and shared library)

$(BUILD)/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(ALLCFLAGS) -c $< -o $@

$(BUILD)/libcellrate.a: $(CORE_OBJ)
	ar rcs $@ $^

$(BUILD)/libcellrate.so: $(CORE_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

symbols: core lua ## fail unless the exports are exactly what cellrate.h declares
	$(PYTHON) tests/check_symbols.py --header core/cellrate.h --library $(BUILD)/libcellrate.so \
		--archive $(BUILD)/libcellrate.a --module $(BUILD)/lua5.4/cellrate.so --module $(BUILD)/luajit/cellrate.so

# The Lua module: one source, the core compiled in (CR_EMBED: it exports only
# luaopen_cellrate), built for Lua 5.4 and for LuaJIT (5.1 API).
LUA_MODULE_SRC = bindings/cellrate_lua.c $(CORE_SRC)
LUA_MODULE_DEPS = $(LUA_MODULE_SRC) $(CORE_HDR) bindings/cellrate_lua_compat.h
lua_module = $(CC) $(ALLCFLAGS) $(CR_EMBED) -I$(1) -shared -o $(2) $(LUA_MODULE_SRC) $(LDLIBS)

lua: $(BUILD)/lua5.4/cellrate.so $(BUILD)/luajit/cellrate.so ## build the Lua module (5.4 and LuaJIT)

$(BUILD)/lua5.4/cellrate.so: $(LUA_MODULE_DEPS)
	@mkdir -p $(@D)
	$(call lua_module,$(LUA54_INC),$@)

$(BUILD)/luajit/cellrate.so: $(LUA_MODULE_DEPS)
	@mkdir -p $(@D)
	$(call lua_module,$(LUAJIT_INC),$@)

# `luarocks make lua/cellrate-*.rockspec` runs these two with its own CFLAGS,
# LUA_INCDIR and LIBDIR; a user's compiler is not held to -Werror.
rock: WERROR =
rock: ## the Lua module for LuaRocks (LUA_INCDIR=<Lua headers>; the rockspec runs it)
	@mkdir -p $(BUILD)/rock
	$(call lua_module,$(LUA_INCDIR),$(BUILD)/rock/cellrate.so)

rock-install:
	install -d $(LIBDIR)
	install -m 0755 $(BUILD)/rock/cellrate.so $(LIBDIR)/cellrate.so
	install -d $(LUADIR)/cellrate
	install -m 0644 lua/cellrate/nginx.lua lua/cellrate/ffi.lua $(LUADIR)/cellrate/
	install -m 0644 lua/cellrate/redis.lua lua/cellrate/redis_decide.lua $(LUADIR)/cellrate/

test-lua: lua ## busted specs under Lua 5.4 and LuaJIT
	tests/lua/run.sh lua5.4 $(BUILD)/lua5.4
	tests/lua/run.sh luajit $(BUILD)/luajit

vectors: ## regenerate tests/vectors/ from the reference model
	$(PYTHON) tests/model/make_vectors.py

py: ## build and install the Python package (pip install .)
	CELLRATE_WERROR=1 $(PYTHON) -m pip install -q --root-user-action=ignore --no-build-isolation .

test-c: core ## C tests: vectors, core, threads, clock, shared regions; the C example
	tests/c/run.sh plain

test-asan: ## C tests under AddressSanitizer + UndefinedBehaviorSanitizer
	tests/c/run.sh asan

test-tsan: ## C tests under ThreadSanitizer
	tests/c/run.sh tsan

test-py: py lua ## pytest suite (vectors, model, properties, API, errors, threads, shared, typing)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/model tests/python

test-ft: lua ## pytest suite on a free-threaded CPython 3.13 built from Debian's source (GIL must stay off)
	tests/freethreaded/run.sh

# libFuzzer targets under tests/fuzz/ (clang; ASan + UBSan): the rate parser and
# limit validation, the decision against its invariants, damaged region files.
FUZZ_SECONDS ?= 180

fuzz: ## run each fuzz target for FUZZ_SECONDS (default 180) seconds, growing build/fuzz/corpus
	tests/fuzz/run.sh long $(FUZZ_SECONDS)

fuzz-corpus: ## minimise the grown corpus (make fuzz) into the committed tests/fuzz/corpus
	tests/fuzz/run.sh merge

test-fuzz: ## a 10 s smoke run of each fuzz target over the committed corpus
	tests/fuzz/run.sh smoke 10


# nginx with its lua module, started by the tests on loopback (docs/design.md §12).
test-nginx: py lua ## cellrate.nginx inside real nginx workers (shared limit, precision, reload)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/nginx

test: deps symbols test-c test-asan test-tsan test-py test-lua test-ft test-nginx test-fuzz ## every suite (installs what it needs)
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
