# cellrate — `make help` lists the targets.

# The compiler flags, written once for every build description.
include core/flags.mk

CC      ?= cc
CFLAGS  ?= -O2 -g
# Python runs in a virtualenv under the tree, made from BASE_PYTHON by the
# deps steps (tests/venv.sh); nothing is pip installed into BASE_PYTHON.
BASE_PYTHON ?= python3
VENV    ?= .venv
PYTHON   = $(VENV)/bin/python
# The interpreters the pytest suite runs on (make test-py; make dist builds a
# wheel for each): found under pyenv or on PATH, an absent one skipped.
PY_VERSIONS ?= 3.9 3.10 3.11 3.12 3.13
# Warnings are errors in the project's own builds (the targets below that
# test, lint or package), never in a user's make core, make lua or pip install.
WERROR  ?=
DEV_TARGETS = test check check-py check-lua layers symbols test-c test-py test-lua test-ft test-nginx test-fuzz lint dist
$(DEV_TARGETS): WERROR = -Werror
ARCHFLAGS := $(if $(filter x86_64,$(shell uname -m)),$(CR_X86_64))
ALLCFLAGS = $(CR_STD) $(CR_WARN) $(WERROR) $(CR_VISIBILITY) $(ARCHFLAGS) $(CFLAGS) -fPIC -Icore
LDLIBS   = $(CR_LIBS)

CORE_SRC = $(wildcard core/*.c)
CORE_HDR = $(wildcard core/*.h core/cellrate/*.h) core/flags.mk
BUILD    = build
CORE_OBJ = $(patsubst core/%.c,$(BUILD)/%.o,$(CORE_SRC))

LUA54_INC  = /usr/include/lua5.4
LUAJIT_INC = /usr/include/luajit-2.1

.DEFAULT_GOAL := help
.PHONY: help deps demo-deps core lua rock rock-install py vectors docs check check-py check-lua test layers test-c test-asan test-tsan test-py test-lua test-ft test-nginx test-fuzz fuzz fuzz-corpus demo bench symbols lint format dist install clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

DEPS_ENV = VENV="$(abspath $(VENV))" BASE_PYTHON="$(BASE_PYTHON)"

deps: ## install what building and testing need (apt-get; pip into .venv only)
	@$(DEPS_ENV) sh tests/install-deps.sh test

demo-deps: ## install what make demo needs: a C compiler, Python headers, Lua 5.4
	@$(DEPS_ENV) sh tests/install-deps.sh demo

# The bare virtualenv (setuptools, wheel, build) for targets that need no more,
# and the tools of make lint and make dist.
$(PYTHON):
	@tests/venv.sh "$(BASE_PYTHON)" "$(VENV)"
$(VENV)/bin/ruff $(VENV)/bin/auditwheel:
	@tests/venv.sh "$(BASE_PYTHON)" "$(VENV)" -r tools/requirements-tools.txt
$(VENV)/bin/mkdocs: tools/requirements-docs.txt
	@tests/venv.sh "$(BASE_PYTHON)" "$(VENV)" -r tools/requirements-docs.txt

core: $(BUILD)/libcellrate.a $(BUILD)/libcellrate.so ## build the C core (static and shared library)

$(BUILD)/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(ALLCFLAGS) -c $< -o $@

$(BUILD)/libcellrate.a: $(CORE_OBJ)
	ar rcs $@ $^

# The version, from core/cellrate.h (the one place it is written).
cr_version_part = $(shell sed -n 's/^\#define CR_VERSION_$(1) \([0-9]*\)$$/\1/p' core/cellrate.h)
VERSION = $(call cr_version_part,MAJOR).$(call cr_version_part,MINOR).$(call cr_version_part,PATCH)
SONAME  = libcellrate.so.$(call cr_version_part,MAJOR)

$(BUILD)/libcellrate.so: $(CORE_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

symbols: core lua | $(PYTHON) ## fail unless the exports are exactly what cellrate.h and its parts declare
	$(PYTHON) tools/check_symbols.py --header core/cellrate.h --library $(BUILD)/libcellrate.so \
		--archive $(BUILD)/libcellrate.a --module $(BUILD)/lua5.4/cellrate.so --module $(BUILD)/luajit/cellrate.so

layers: core | $(PYTHON) ## fail on a cycle among the core's units (calls go down)
	$(PYTHON) tools/check_layers.py --core core --objects $(BUILD)

# The Lua module: one source, the core compiled in (CR_EMBED: it exports only
# luaopen_cellrate), built for Lua 5.4 and for LuaJIT (5.1 API). The binding
# is one translation unit: bindings/cellrate_lua.c includes its parts in
# bindings/lua/, which are never compiled alone.
LUA_BINDING_PARTS = $(wildcard bindings/lua/*.c)
LUA_MODULE_SRC = bindings/cellrate_lua.c $(CORE_SRC)
LUA_MODULE_DEPS = $(LUA_MODULE_SRC) $(LUA_BINDING_PARTS) $(CORE_HDR) bindings/cellrate_lua_compat.h
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
	install -m 0644 lua/cellrate/redis.lua lua/cellrate/share.lua $(LUADIR)/cellrate/
	install -d $(LUADIR)/cellrate/redis
	install -m 0644 redis/*.lua $(LUADIR)/cellrate/redis/

test-lua: lua ## busted specs under Lua 5.4 and LuaJIT
	tests/lua/run.sh lua5.4 $(BUILD)/lua5.4
	tests/lua/run.sh luajit $(BUILD)/luajit

vectors: | $(PYTHON) ## regenerate tests/vectors/ from the reference model
	$(PYTHON) tests/model/make_vectors.py

py: | $(PYTHON) ## build and install the Python package into .venv (pip install .)
	CELLRATE_WERROR=$(if $(strip $(WERROR)),1) $(PYTHON) -m pip install -q --disable-pip-version-check \
		--no-build-isolation .

test-c: core ## C tests: vectors, core, threads, clock, shared regions; the C example
	tests/c/run.sh plain

test-asan: ## C tests under AddressSanitizer + UndefinedBehaviorSanitizer
	tests/c/run.sh asan

test-tsan: ## C tests under ThreadSanitizer
	tests/c/run.sh tsan

test-py: core lua | $(VENV)/bin/auditwheel ## pytest suite on each of PY_VERSIONS, against its wheel installed outside the tree
	CELLRATE_WERROR=1 $(DEPS_ENV) tools/wheels/run.sh test $(PY_VERSIONS)

dist: | $(VENV)/bin/auditwheel ## the sdist and a manylinux wheel per interpreter of PY_VERSIONS, in dist/
	CELLRATE_WERROR=1 $(DEPS_ENV) tools/wheels/run.sh dist $(PY_VERSIONS)

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

# The documentation site (mkdocs.yml; docs/contributing.md): strict, so a broken
# link or anchor, or a page missing from nav, fails it. The docs' runnable
# blocks run in the pytest suite (tests/python/test_docs.py).
docs: | $(VENV)/bin/mkdocs ## build the documentation site into build/site (strict)
	$(VENV)/bin/mkdocs build --strict --site-dir $(BUILD)/site
	@echo "make docs: the site is in $(BUILD)/site (open $(BUILD)/site/index.html)"

# make check: the quick loop while working (lint, the plain C tests, pytest on
# .venv's interpreter against the tree's build, busted on Lua 5.4). The tests
# that do not depend on the interpreter (CELLRATE_INTERPRETER_ONLY: the Lua
# rock built through the Makefile) are left to make test.
check: deps ## the quick suites (lint, C, pytest on one interpreter, busted on Lua 5.4); prints each one's time
	@MAKE="$(MAKE)" tools/suites.sh check lint layers test-c check-py check-lua

check-py: py lua
	CELLRATE_INTERPRETER_ONLY=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests/model tests/python

check-lua: $(BUILD)/lua5.4/cellrate.so
	tests/lua/run.sh lua5.4 $(BUILD)/lua5.4

# make test: every suite in turn, each one's time printed (tools/suites.sh).
SUITES = lint docs layers symbols test-c test-asan test-tsan test-py test-lua test-ft test-nginx test-fuzz
test: deps ## every suite and the docs (installs what it needs); prints each suite's time
	@MAKE="$(MAKE)" tools/suites.sh test $(SUITES)

# The demo needs Lua 5.4 and the extension only; LuaJIT is shown where it and
# its headers are installed (make deps installs OpenResty's luajit2).
demo: demo-deps ## show decisions in Python and in Lua (installs only what it needs)
	@$(MAKE) --no-print-directory py $(BUILD)/lua5.4/cellrate.so \
		$(if $(and $(shell command -v luajit),$(wildcard $(LUAJIT_INC)/lua.h)),$(BUILD)/luajit/cellrate.so)
	@echo "==================== Python ===================="
	@CELLRATE_LUA_CPATH="$(abspath $(BUILD))/lua5.4/?.so" $(PYTHON) examples/demo.py
	@echo
	@echo "==================== Lua 5.4 ===================="
	@lua5.4 -e 'package.cpath = "$(BUILD)/lua5.4/?.so;" .. package.cpath' examples/demo.lua
	@if [ -f $(BUILD)/luajit/cellrate.so ] && command -v luajit >/dev/null; then \
		echo; echo "==================== LuaJIT ====================="; \
		luajit -e 'package.cpath = "$(BUILD)/luajit/?.so;" .. package.cpath' examples/demo.lua; \
	else echo; echo "(LuaJIT is not installed: make deps installs OpenResty's luajit2)"; fi

bench: ## benchmarks against the peers (installs them under bench/.peers); writes bench/results/
	PYTHON="$(BASE_PYTHON)" bench/run.sh

# make install: the C library (static and shared), its header with its parts
# (cellrate/*.h) and a pkg-config file, as hiredis installs; PREFIX and
# DESTDIR as usual. The pkg-config file is written where it is installed,
# nothing in build/: installs with different PREFIXes may run at once (the
# interpreters' pytest suites of make test-py do).
PREFIX     ?= /usr/local
libdir     ?= $(PREFIX)/lib
includedir ?= $(PREFIX)/include
pkgconfigdir ?= $(libdir)/pkgconfig

install: core ## install libcellrate.{a,so}, cellrate.h (and cellrate/) and cellrate.pc under PREFIX
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(includedir)/cellrate $(DESTDIR)$(pkgconfigdir)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(libdir)' 'includedir=$(includedir)' '' \
		'Name: cellrate' 'Description: GCRA rate limiter with a lock-free C11 core' \
		'Version: $(VERSION)' 'Libs: -L$${libdir} -lcellrate' 'Libs.private: $(CR_LIBS)' \
		'Cflags: -I$${includedir}' >$(DESTDIR)$(pkgconfigdir)/cellrate.pc
	chmod 0644 $(DESTDIR)$(pkgconfigdir)/cellrate.pc
	install -m 0644 $(BUILD)/libcellrate.a $(DESTDIR)$(libdir)/libcellrate.a
	install -m 0755 $(BUILD)/libcellrate.so $(DESTDIR)$(libdir)/libcellrate.so.$(VERSION)
	ln -sf libcellrate.so.$(VERSION) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(libdir)/libcellrate.so
	install -m 0644 core/cellrate.h $(DESTDIR)$(includedir)/cellrate.h
	install -m 0644 core/cellrate/*.h $(DESTDIR)$(includedir)/cellrate/

# make lint (make test runs it): clang-format on the C, ruff on the Python,
# luacheck on the Lua. make format rewrites the C in place.
FORMAT_C = $(wildcard core/*.c core/*.h core/cellrate/*.h tests/c/*.c tests/c/*.h tests/fuzz/*.c \
	bench/c/*.c examples/c/*.c bindings/python/*.c bindings/python/*.h) bindings/cellrate_lua.c \
	bindings/cellrate_lua_compat.h $(LUA_BINDING_PARTS)
LUA_SOURCES = lua redis tests/lua tests/nginx/resp.lua examples/demo.lua

lint: | $(VENV)/bin/ruff ## clang-format (check), ruff, luacheck
	@command -v clang-format >/dev/null && command -v luacheck >/dev/null || \
		{ echo "make lint: clang-format and luacheck are installed by make deps" >&2; exit 1; }
	clang-format --dry-run --Werror $(FORMAT_C)
	$(VENV)/bin/ruff check --no-cache .
	luacheck -q $(LUA_SOURCES)

format: ## rewrite the C sources as .clang-format says (make lint checks it)
	clang-format -i $(FORMAT_C)

clean: ## remove build products (the virtualenvs in .venv stay)
	rm -rf $(BUILD) dist python/cellrate/*.so *.egg-info
