"""Builds cellrate._cellrate: bindings/cellrate_py.c compiled with the C core.

Metadata lives in pyproject.toml. Environment knobs:
  CELLRATE_WERROR=1        turn compiler warnings into errors (tests and CI)
  CELLRATE_RELEASE_GIL=1   release the GIL around each decision (benchmark copy)
"""

import glob
import os
import platform
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def relative(pattern):
    """Sorted paths matching `pattern`, relative to this file (as sdist needs)."""
    return sorted(os.path.relpath(path, HERE) for path in glob.glob(os.path.join(HERE, pattern)))


compile_args = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Wshadow",
    "-Wmissing-prototypes",
    # only PyInit__cellrate is exported; the core's cr_* symbols stay private
    "-fvisibility=hidden",
]
if platform.machine() in ("x86_64", "AMD64"):
    compile_args.append("-mcx16")  # 16-byte compare-and-swap
if os.environ.get("CELLRATE_WERROR"):
    compile_args.append("-Werror")

define_macros = []
if os.environ.get("CELLRATE_RELEASE_GIL"):
    define_macros.append(("CELLRATE_RELEASE_GIL", None))

# 16-byte atomics go through libatomic on Linux; it is part of GCC's runtime.
libraries = ["atomic", "pthread"] if sys.platform.startswith("linux") else []

# keep setuptools' products (objects, egg-info) apart from the sources and
# from the Makefile's build/*.o
BUILD_BASE = os.path.join("build", "python")
os.makedirs(os.path.join(HERE, BUILD_BASE), exist_ok=True)

setup(
    ext_modules=[
        Extension(
            "cellrate._cellrate",
            sources=["bindings/cellrate_py.c"] + relative("core/*.c"),
            depends=relative("core/*.h"),
            include_dirs=["core"],
            define_macros=define_macros,
            extra_compile_args=compile_args,
            libraries=libraries,
        )
    ],
    package_dir={"": "python"},
    packages=["cellrate"],
    package_data={"cellrate": ["py.typed", "*.pyi", "redis_decide.lua"]},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
