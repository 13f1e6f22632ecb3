"""The build descriptions agree with each other (docs/design.md §13).

The version is written once (CR_VERSION_* in core/cellrate.h) and the flags
once (core/flags.mk); these tests check that everything that carries either
derives it, and that the rockspec's build, run as LuaRocks runs it, gives a
module that loads and exports only its entry point. Under make test-py the
suite runs against the wheel installed outside the tree: the tests below
check that it did, the wheel's tags and the metadata; make install's C
library is built against through pkg-config.
"""

import ctypes
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import cellrate
import cellrate._cellrate

REPO = pathlib.Path(__file__).resolve().parents[2]
ROCKSPECS = sorted((REPO / "lua").glob("cellrate-*.rockspec"))
# The Redis server scripts both faces send, in redis/ (shipped by the wheel and the rock)
REDIS_SCRIPTS = ("decide.lua", "hold.lua", "share.lua", "batch.lua")


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
    if os.environ.get("CELLRATE_INTERPRETER_ONLY"):
        # make, the C compiler and Lua: nothing of this interpreter (tools/wheels/run.sh)
        pytest.skip("the rock's build does not depend on the interpreter: make test-py runs it "
                    "on the first and last")
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
    # The Redis scripts, from redis/, beside cellrate.redis, which reads them there
    for name in REDIS_SCRIPTS:
        assert (tmp_path / "share" / "cellrate" / "redis" / name).read_bytes() == \
            (REPO / "redis" / name).read_bytes()
    script = lua_eval(f'package.path = "{tmp_path / "share"}/?.lua;" .. package.path; '
                      'io.write(require("cellrate.redis").script)', str(module.parent))
    assert script == (REPO / "redis" / "decide.lua").read_text()
    hold_script = lua_eval(f'package.path = "{tmp_path / "share"}/?.lua;" .. package.path; '
                           'io.write(require("cellrate.redis").hold_script)', str(module.parent))
    assert hold_script == (REPO / "redis" / "hold.lua").read_text()
    # The flags of core/flags.mk were applied: the x86-64 build inlines the
    # 16-byte compare-and-swap instead of calling libatomic for it.
    if subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip() == "x86_64":
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(module)],
                                   capture_output=True, text=True, check=True).stdout
        assert "__atomic_compare_exchange_16" not in undefined


def test_the_python_package_ships_the_redis_scripts(tmp_path):
    # One copy in the repository (redis/): the wheel's package (build_py) carries it as
    # cellrate/redis/scripts/, the sdist as redis/; nothing is copied into the tree.
    if os.environ.get("CELLRATE_INSTALLED_IN"):
        # the run against an installed wheel, made from the sdist, checks the
        # wheel's files instead; its virtualenv's own setuptools is not the tree's
        pytest.skip("checked in the wheel: test_the_wheel_is_a_manylinux_wheel_of_this_interpreter")
    for command in (["build_py", "-d", str(tmp_path / "lib")],
                    ["sdist", "-d", str(tmp_path / "dist")]):
        subprocess.run([sys.executable, "setup.py", "-q", *command], cwd=REPO, check=True,
                       capture_output=True)
    (sdist,) = (tmp_path / "dist").glob("cellrate-*.tar.gz")
    for name in REDIS_SCRIPTS:
        script = (REPO / "redis" / name).read_bytes()
        assert (tmp_path / "lib" / "cellrate" / "redis" / "scripts" / name).read_bytes() == script
        with tarfile.open(sdist) as tar:
            member = tar.extractfile(f"{sdist.name[:-len('.tar.gz')]}/redis/{name}")
            assert member is not None and member.read() == script
    assert not (REPO / "python" / "cellrate" / "redis" / "scripts").exists()



def test_the_sdist_carries_every_file_of_the_python_binding(tmp_path):
    # The extension is one translation unit (bindings/python/module.c includes
    # the others): a file the sdist lacks fails every wheel built from it.
    if os.environ.get("CELLRATE_INSTALLED_IN"):
        pytest.skip("the wheels of that run were built from the sdist")
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=REPO,
                   check=True, capture_output=True)
    (sdist,) = tmp_path.glob("cellrate-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    root = sdist.name[:-len(".tar.gz")]
    binding = sorted((REPO / "bindings" / "python").iterdir())
    assert binding
    for path in binding:
        assert f"{root}/bindings/python/{path.name}" in names, path.name


# --- the package as installed from its wheel (tools/wheels/run.sh) -----------

def test_the_suite_runs_against_the_installed_wheel():
    installed_in = os.environ.get("CELLRATE_INSTALLED_IN")
    if not installed_in:
        pytest.skip("an in-place or pip install . run: tools/wheels/run.sh sets CELLRATE_INSTALLED_IN")
    venv = pathlib.Path(installed_in).resolve()
    for module in (cellrate, cellrate._cellrate):
        path = pathlib.Path(module.__file__).resolve()
        assert venv in path.parents, f"{module.__name__} from {path}, not from {venv}"
        assert REPO not in path.parents, f"{module.__name__} from the source tree: {path}"


def makefile_python_versions():
    found = re.search(r"^PY_VERSIONS \?= (.+)$", (REPO / "Makefile").read_text(), re.M)
    assert found, "the Makefile sets PY_VERSIONS"
    return found.group(1).split()


def test_the_metadata_describes_the_package():
    meta = importlib.metadata.metadata("cellrate")
    readme = (REPO / "README.md").read_text()
    # the README is the long description (PyPI's page)
    assert meta["Description-Content-Type"] == "text/markdown"
    assert (meta.get_payload() or meta.get("Description", "")).strip() == readme.strip()
    assert meta["Summary"]
    # the interpreters make test runs on are the ones declared, from the lowest
    versions = makefile_python_versions()
    assert meta["Requires-Python"] == f">={versions[0]}"
    classifiers = meta.get_all("Classifier")
    declared = sorted((c.rsplit(" :: ", 1)[1] for c in classifiers
                       if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)),
                      key=lambda v: tuple(map(int, v.split("."))))
    assert declared == versions
    assert "Programming Language :: Python :: Implementation :: CPython" in classifiers
    # no runtime dependencies: every requirement belongs to an extra
    requirements = meta.get_all("Requires-Dist") or []
    assert all("extra ==" in r for r in requirements), requirements
    assert set(meta.get_all("Provides-Extra")) == {"test", "redis", "fastapi", "starlette", "flask",
                                                   "django", "prometheus", "grpc", "otel",
                                                   "httpx", "requests", "valkey", "tzdata"}
    # the one console script: the cellrate command (python -m cellrate)
    scripts = [point for point in importlib.metadata.distribution("cellrate").entry_points
               if point.group == "console_scripts"]
    assert [(point.name, point.value) for point in scripts] == [("cellrate", "cellrate._cli:run")]
    # no public address is known for the project, so none is claimed
    assert not meta.get_all("Project-URL") and "Home-page" not in meta


def test_the_wheel_is_a_manylinux_wheel_of_this_interpreter():
    wheel = os.environ.get("CELLRATE_WHEEL")
    if not wheel:
        pytest.skip("an in-place or pip install . run: tools/wheels/run.sh sets CELLRATE_WHEEL")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = [line.split(": ", 1)[1] for line in archive.read(info).decode().splitlines()
                if line.startswith("Tag: ")]
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert tags and all(re.fullmatch(rf"{cp}-{cp}-manylinux_\d+_\d+_x86_64", t) for t in tags), tags
    for data in ("cellrate/py.typed", "cellrate/_cellrate.pyi",
                 *(f"cellrate/redis/scripts/{name}" for name in REDIS_SCRIPTS)):
        assert data in names
    # auditwheel grafts what is not part of manylinux into the wheel: nothing on
    # x86-64 (libc and libm only), libatomic where the 16-byte CAS is not inlined
    grafted = [n for n in names if n.startswith("cellrate.libs/")]
    assert all(pathlib.PurePath(n).name.startswith("libatomic") for n in grafted), grafted


# --- make install: the C library for C programs (docs/design.md §13) ----------

def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kwargs)


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is installed by make deps")
def test_make_install_gives_a_library_that_pkg_config_finds(tmp_path):
    prefix = tmp_path / "prefix"
    run(["make", "-s", "install", f"PREFIX={prefix}"], cwd=REPO)
    lib = prefix / "lib"
    # the umbrella header and every part it includes, as the tree has them
    headers = [REPO / "core" / "cellrate.h", *sorted((REPO / "core" / "cellrate").glob("*.h"))]
    assert len(headers) > 1
    for header in headers:
        installed = prefix / "include" / header.relative_to(REPO / "core")
        assert installed.read_bytes() == header.read_bytes(), installed
    assert (lib / "libcellrate.a").is_file()
    assert os.readlink(lib / "libcellrate.so") == "libcellrate.so.0"
    assert os.readlink(lib / "libcellrate.so.0") == f"libcellrate.so.{header_version()}"
    env = dict(os.environ, PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    assert run(["pkg-config", "--modversion", "cellrate"], env=env).stdout.strip() == \
        header_version()
    flags = run(["pkg-config", "--cflags", "--libs", "cellrate"], env=env).stdout.split()
    static = run(["pkg-config", "--static", "--libs-only-l", "cellrate"], env=env).stdout.split()
    expected = (REPO / "examples" / "c" / "quickstart.out").read_text()
    source = str(REPO / "examples" / "c" / "quickstart.c")
    # against the shared library, found through its soname
    run(["cc", "-std=c11", source, *flags, "-o", str(tmp_path / "shared")])
    needed = run(["readelf", "-d", str(tmp_path / "shared")]).stdout
    assert "Shared library: [libcellrate.so.0]" in needed
    shared_env = dict(os.environ, LD_LIBRARY_PATH=str(lib))
    assert run([str(tmp_path / "shared")], env=shared_env).stdout == expected
    # against the archive, with the libraries pkg-config --static names
    others = [flag for flag in static if flag != "-lcellrate"]
    include = run(["pkg-config", "--cflags", "cellrate"], env=env).stdout.split()
    run(["cc", "-std=c11", source, *include, str(lib / "libcellrate.a"), *others,
         "-o", str(tmp_path / "static")])
    assert run([str(tmp_path / "static")]).stdout == expected


def test_make_install_honours_destdir(tmp_path):
    dest = tmp_path / "dest"
    run(["make", "-s", "install", f"DESTDIR={dest}", "PREFIX=/opt/cellrate"], cwd=REPO)
    root = dest / "opt" / "cellrate"
    assert (root / "include" / "cellrate.h").is_file()
    pc = (root / "lib" / "pkgconfig" / "cellrate.pc").read_text()
    # the file names where the library is at run time, not where it was staged
    assert "prefix=/opt/cellrate\n" in pc and str(dest) not in pc


def test_warnings_are_errors_only_in_the_projects_own_targets(tmp_path):
    # make -n -B: the commands every target would run, nothing built
    def commands(*targets):
        out = run(["make", "-n", "-B", f"BUILD={tmp_path}", *targets], cwd=REPO).stdout
        # the compilations: the core's objects and the Lua modules
        return [line for line in out.splitlines()
                if " -c core/" in line or "bindings/cellrate_lua.c" in line]

    for users_build in (("core",), ("lua",), ("install",)):
        lines = commands(*users_build)
        assert lines and not any("-Werror" in line for line in lines), users_build
    for own in (("test-c",), ("test-lua",), ("symbols",)):
        lines = commands(*own)
        assert lines and all("-Werror" in line for line in lines), own
