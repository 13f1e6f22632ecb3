"""Builds cellrate._cellrate: bindings/python/module.c compiled with the C core.

Metadata lives in pyproject.toml, except the version (core/cellrate.h) and
the compiler flags (core/flags.mk), read from the files that hold them.
Environment knobs:
  CELLRATE_WERROR=1        turn compiler warnings into errors (tests and CI)
  CELLRATE_RELEASE_GIL=1   release the GIL around each decision (benchmark copy)
"""

import glob
import os
import platform
import re

from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def relative(pattern):
    """Sorted paths matching `pattern`, relative to this file (as sdist needs)."""
    return sorted(os.path.relpath(path, HERE) for path in glob.glob(os.path.join(HERE, pattern)))


def build_flags():
    """The `NAME = value` lines of core/flags.mk, the one place the flags are written."""
    flags = {}
    with open(os.path.join(HERE, "core", "flags.mk")) as f:
        for line in f:
            name, sep, value = line.partition("=")
            if sep and not line.lstrip().startswith("#"):
                flags[name.strip()] = value.split()
    return flags


def version():
    """MAJOR.MINOR.PATCH from the CR_VERSION_* macros of core/cellrate.h."""
    with open(os.path.join(HERE, "core", "cellrate.h")) as f:
        header = f.read()
    parts = [re.search(rf"^#define CR_VERSION_{part} (\d+)$", header, re.M) for part in
             ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError("core/cellrate.h: CR_VERSION_MAJOR, _MINOR and _PATCH not found")
    return ".".join(m.group(1) for m in parts)


def parallel_compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                     extra_preargs=None, extra_postargs=None, depends=None):
    """CCompiler.compile, but the sources (independent translation units)
    compiled side by side, one per processor."""
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        if obj in build:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(one, objects))  # list(): the first error is raised here
    return objects


class BuildExt(build_ext):
    """build_ext with the extension's sources compiled in parallel where the
    compiler has the hooks CCompiler.compile is made of (else one by one)."""

    def build_extensions(self):
        if all(hasattr(self.compiler, name) for name in ("_setup_compile", "_get_cc_args",
                                                         "_compile")):
            self.compiler.compile = parallel_compile.__get__(self.compiler)
        super().build_extensions()


FLAGS = build_flags()
# The core is compiled in and hidden (CR_EMBED): only PyInit__cellrate is exported.
compile_args = FLAGS["CR_STD"] + FLAGS["CR_WARN"] + FLAGS["CR_VISIBILITY"] + FLAGS["CR_EMBED"]
if platform.machine() in ("x86_64", "AMD64"):
    compile_args += FLAGS["CR_X86_64"]
if os.environ.get("CELLRATE_WERROR"):
    compile_args.append("-Werror")

define_macros = []
if os.environ.get("CELLRATE_RELEASE_GIL"):
    define_macros.append(("CELLRATE_RELEASE_GIL", None))

# 16-byte atomics go through libatomic on Linux; it is part of GCC's runtime.
libraries = [flag[2:] for flag in FLAGS["CR_LIBS"] if flag.startswith("-l")]

# keep setuptools' products (objects, egg-info) apart from the sources and
# from the Makefile's build/*.o
BUILD_BASE = os.path.join("build", "python")
os.makedirs(os.path.join(HERE, BUILD_BASE), exist_ok=True)

setup(
    version=version(),
    ext_modules=[
        Extension(
            "cellrate._cellrate",
            # module.c includes the other files of bindings/python/: one translation unit
            sources=["bindings/python/module.c"] + relative("core/*.c"),
            depends=(relative("bindings/python/*") + relative("core/*.h") +
                     relative("core/cellrate/*.h") + ["core/flags.mk"]),
            include_dirs=["core"],
            define_macros=define_macros,
            extra_compile_args=compile_args,
            libraries=libraries,
        )
    ],
    # The Redis server scripts both faces send live once, in redis/ at the top of the
    # repository: the wheel ships that folder as the data of cellrate/redis/scripts/.
    cmdclass={"build_ext": BuildExt},
    package_dir={"": "python", "cellrate.redis.scripts": "redis"},
    packages=["cellrate", "cellrate.redis", "cellrate.redis.scripts"],
    package_data={"cellrate": ["py.typed", "*.pyi"], "cellrate.redis.scripts": ["*.lua"]},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
