"""The build descriptions agree with each other (docs/design.md §13).

The version is written once (CR_VERSION_* in core/cellrate.h) and the flags
once (core/flags.mk); these tests check that everything that carries either
derives it, and that the rockspec's build, run as LuaRocks runs it, gives a
module that loads and exports only its entry point.
"""

import ctypes
import importlib.metadata
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

import cellrate
import cellrate._cellrate

REPO = pathlib.Path(__file__).resolve().parents[2]
ROCKSPECS = sorted((REPO / "lua").glob("cellrate-*.rockspec"))


def header_version():
    header = (REPO / "core" / "cellrate.h").read_text()
    parts = [re.search(rf"^#define CR_VERSION_{p} (\d+)$", header, re.M)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert all(parts), "CR_VERSION_MAJOR, _MINOR and _PATCH are defined as numbers"
    return ".".join(m.group(1) for m in parts)


def lua_eval(source, cpath=None):
    """The output of `source` run by lua5.4 (with the cellrate module of `cpath`)."""
    prefix = f'package.cpath = "{cpath}/?.so;" .. package.cpath; ' if cpath else ""
    return subprocess.run(["lua5.4", "-e", prefix + source], capture_output=True, text=True,
                          check=True).stdout


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[2] for line in out.splitlines() if len(line.split()) == 3}


def test_one_rockspec():
    assert len(ROCKSPECS) == 1, ROCKSPECS


def test_every_carrier_of_the_version_agrees():
    version = header_version()
    rockspec = ROCKSPECS[0]
    fields = lua_eval(f'dofile("{rockspec}"); print(version); print(source.tag)').split()
    lua_version = lua_eval('print(require("cellrate")._VERSION)', str(REPO / "build" / "lua5.4"))
    carriers = {
        "pyproject/setup metadata": importlib.metadata.version("cellrate"),
        "cellrate.__version__": cellrate.__version__,
        "Lua _VERSION": lua_version.strip(),
        "rockspec file name": rockspec.name[len("cellrate-"):-len("-1.rockspec")],
        "rockspec version": fields[0].rsplit("-", 1)[0],
        "rockspec source.tag": fields[1].lstrip("v"),
    }
    assert carriers == {name: version for name in carriers}


def test_cr_version_of_the_library_is_the_header_version():
    subprocess.run(["make", "-s", "core"], cwd=REPO, check=True, capture_output=True)
    library = ctypes.CDLL(str(REPO / "build" / "libcellrate.so"))
    library.cr_version.restype = ctypes.c_char_p
    assert library.cr_version().decode() == header_version()


def test_pyproject_takes_the_version_from_the_header():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert not re.search(r"^version\s*=", pyproject, re.M)


def test_the_license_is_mit_everywhere():
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert importlib.metadata.metadata("cellrate")["License"] == "MIT"
    assert lua_eval(f'dofile("{ROCKSPECS[0]}"); print(description.license)').strip() == "MIT"


def test_the_extension_exports_only_its_entry_point():
    assert exported(cellrate._cellrate.__file__) == {"PyInit__cellrate"}


@pytest.mark.skipif(shutil.which("lua5.4") is None, reason="lua5.4 is needed to read the rockspec")
def test_the_rockspec_builds_through_the_makefile_as_luarocks_would(tmp_path):
    # LuaRocks' "make" backend: `make <build_target> VAR=value ...` in the
    # source tree, then `make <install_target> VAR=value ...`; its own
    # variables ($(CFLAGS), $(LUA_INCDIR), $(LIBDIR)) are filled in.
    build = lua_eval(
        f'dofile("{ROCKSPECS[0]}"); local b = build; print(b.type, b.build_target, '
        'b.install_target); for k, v in pairs(b.build_variables) do print("B", k, v) end; '
        'for k, v in pairs(b.install_variables) do print("I", k, v) end').splitlines()
    kind, build_target, install_target = build[0].split()
    assert kind == "make"
    luarocks = {"CFLAGS": "-O2 -fPIC", "LUA_INCDIR": "/usr/include/lua5.4",
                "LIBDIR": str(tmp_path / "lib"), "LUADIR": str(tmp_path / "share")}

    def variables(tag):
        out = []
        for line in build[1:]:
            which, name, value = line.split("\t")
            if which == tag:
                filled = re.sub(r"[$][(](\w+)[)]", lambda m: luarocks[m[1]], value)
                out.append(f"{name}={filled}")
        return out

    build_dir = f"BUILD={tmp_path / 'build'}"
    for target, tag in ((build_target, "B"), (install_target, "I")):
        subprocess.run(["make", "-s", build_dir, target] + variables(tag), cwd=REPO, check=True,
                       capture_output=True)
    module = tmp_path / "lib" / "cellrate.so"
    assert exported(module) == {"luaopen_cellrate"}
    # The pure-Lua modules go to LUADIR: cellrate.nginx (docs/design.md §12).
    assert (tmp_path / "share" / "cellrate" / "nginx.lua").read_bytes() == \
        (REPO / "lua" / "cellrate" / "nginx.lua").read_bytes()
    assert lua_eval('print(require("cellrate")._VERSION)', str(module.parent)).strip() == \
        header_version()
    # cellrate.redis and the one copy of its script, found on package.path
    script = lua_eval(f'package.path = "{tmp_path / "share"}/?.lua;" .. package.path; '
                      'io.write(require("cellrate.redis").script)', str(module.parent))
    assert script == (REPO / "lua" / "cellrate" / "redis_decide.lua").read_text()
    # The flags of core/flags.mk were applied: the x86-64 build inlines the
    # 16-byte compare-and-swap instead of calling libatomic for it.
    if subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip() == "x86_64":
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(module)],
                                   capture_output=True, text=True, check=True).stdout
        assert "__atomic_compare_exchange_16" not in undefined


def test_the_python_package_ships_the_redis_script(tmp_path):
    # One copy in the repository (lua/cellrate/redis_decide.lua); the wheel's
    # package (build_py) and the sdist carry it.
    script = (REPO / "lua" / "cellrate" / "redis_decide.lua").read_bytes()
    for command in (["build_py", "-d", str(tmp_path / "lib")],
                    ["sdist", "-d", str(tmp_path / "dist")]):
        subprocess.run([sys.executable, "setup.py", "-q", *command], cwd=REPO, check=True,
                       capture_output=True)
    assert (tmp_path / "lib" / "cellrate" / "redis_decide.lua").read_bytes() == script
    (sdist,) = (tmp_path / "dist").glob("cellrate-*.tar.gz")
    with tarfile.open(sdist) as tar:
        member = tar.extractfile(f"{sdist.name[:-len('.tar.gz')]}/lua/cellrate/redis_decide.lua")
        assert member is not None and member.read() == script
