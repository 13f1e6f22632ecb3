"""An nginx for the tests and the benchmark: Debian's nginx with its lua
module, started from a config template (tests/nginx/nginx.conf.in by default)
in a private prefix on a free loopback port, and always stopped (its whole
process group) however the caller ends."""

from __future__ import annotations

import http.client
import os
import re
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "tests" / "nginx" / "nginx.conf.in"
# The limits, a Lua file of their own that the config's init_by_lua_block runs
# (dofile) and that the documented check runs with luajit before a reload.
LIMITS_TEMPLATE = REPO / "tests" / "nginx" / "limits.lua.in"
LUA_PATH = f"{REPO / 'lua'}/?.lua"
LUA_CPATH = f"{REPO / 'build' / 'luajit'}/?.so"
MODULES = pathlib.Path("/usr/lib/nginx/modules")
# ndk first: the lua module needs it loaded.
MODULE_FILES = ("ndk_http_module.so", "ngx_http_lua_module.so")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if found is None:
        raise RuntimeError("nginx not found: run make deps (tests/install-deps.sh)")
    return found


class Nginx:
    """One nginx master and its workers. Use as a context manager."""

    def __init__(self, *, workers: int = 2, rate: str = "1/1000s", burst: int = 10,
                 listen_options: str = "", precise_burst: int = 1, ipv6: bool = False,
                 template: pathlib.Path = TEMPLATE, fields: dict[str, str] | None = None):
        self.workers = workers
        self.port = free_port()
        self.prefix = pathlib.Path(tempfile.mkdtemp(prefix="cellrate-nginx-"))
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        self.region = f"{shm}/cellrate-nginx-test-{uuid.uuid4().hex}"
        self.limits = self.prefix / "limits.lua"
        self.fields = {
            "LOAD_MODULES": "\n".join(f"load_module {MODULES / name};" for name in MODULE_FILES),
            "WORKERS": str(workers),
            "PREFIX": str(self.prefix),
            "PORT": str(self.port),
            "LISTEN_OPTIONS": listen_options,
            # The same port on IPv6's loopback too, when asked.
            "LISTEN_IPV6": f"listen [::1]:{self.port} {listen_options};" if ipv6 else "",
            "LUA_PATH": LUA_PATH,
            "LUA_CPATH": LUA_CPATH,
            "REPO": str(REPO),
            "LIMITS": str(self.limits),
            "RATE": rate,
            "BURST": str(burst),
            "REGION": self.region,
            "PRECISE_BURST": str(precise_burst),
            **(fields or {}),  # a template's own
        }
        self.conf = self.prefix / "nginx.conf"
        self.conf.write_text(self.fill(template.read_text()))
        self.write_limits()
        self.process: subprocess.Popen | None = None

    def fill(self, text: str) -> str:
        for name, value in self.fields.items():
            text = text.replace(f"@{name}@", value)
        left = re.findall(r"@[A-Z_]+@", text)
        assert not left, f"template fields left unfilled: {left}"
        return text

    def write_limits(self, **changes: str) -> None:
        """The limits file, with RATE or BURST changed for what follows
        (a check, a reload)."""
        self.fields.update(changes)
        self.limits.write_text(self.fill(LIMITS_TEMPLATE.read_text()))

    def check_limits(self) -> subprocess.CompletedProcess:
        """The nginx page's check of a limits file (docs/nginx.md) before a reload: the file run
        by OpenResty's LuaJIT on nginx's Lua paths."""
        env = dict(os.environ, LUA_PATH=f"{LUA_PATH};;", LUA_CPATH=f"{LUA_CPATH};;")
        return subprocess.run(["luajit", str(self.limits)], env=env, capture_output=True,
                              text=True, timeout=30)

    # -- lifecycle ----------------------------------------------------------

    def __enter__(self) -> "Nginx":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def command(self, *args: str) -> list[str]:
        return [nginx_binary(), "-p", str(self.prefix), "-c", str(self.conf), *args]

    def start(self) -> None:
        check = subprocess.run(self.command("-t", "-q"), capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t failed:\n{check.stderr}")
        # Its own session: stop() ends the master and every worker by group id.
        self.process = subprocess.Popen(self.command(), start_new_session=True,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited at start:\n{self.log()}")
            if len(self.worker_pids()) == self.workers:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError(f"nginx did not start in 10 s:\n{self.log()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        # Workers of the group that outlived their master (none expected).
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for path in pathlib.Path(self.region).parent.glob(pathlib.Path(self.region).name + ".*"):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.prefix, ignore_errors=True)

    def signal_reload(self) -> subprocess.CompletedProcess:
        """nginx -s reload: a signal to the master, which exits 0 once sent
        (whether the new configuration then loads or not)."""
        return subprocess.run(self.command("-s", "reload"), capture_output=True, text=True)

    def reload(self) -> None:
        """nginx -s reload: a new generation of workers; returns once it serves."""
        before = set(self.worker_pids())
        result = self.signal_reload()
        if result.returncode != 0:
            raise RuntimeError(f"nginx -s reload failed:\n{result.stderr}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = set(self.worker_pids())
            if len(now - before) == self.workers:
                return
            time.sleep(0.02)
        raise RuntimeError(f"the reload brought no new workers in 10 s:\n{self.log()}")

    def worker_pids(self) -> list[int]:
        """The worker processes of this master (any generation)."""
        if self.process is None:
            return []
        pids = []
        for entry in pathlib.Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.process.pid and cmdline.startswith(b"nginx: worker process"):
                pids.append(int(entry.name))
        return pids

    def log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else "(no error.log)"

    # -- requests -----------------------------------------------------------

    def connection(self, host: str = "127.0.0.1") -> http.client.HTTPConnection:
        return http.client.HTTPConnection(host, self.port, timeout=10)

    def get(self, path: str, connection: http.client.HTTPConnection | None = None, *,
            headers: dict[str, str] | None = None, host: str = "127.0.0.1"):
        """One GET: (status, headers as a dict, body)."""
        own = connection is None
        connection = connection or self.connection(host)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            body = response.read()
            return response.status, dict(response.getheaders()), body
        finally:
            if own:
                connection.close()

    def stats(self) -> dict[str, int]:
        _, _, body = self.get("/stats")
        return {name: int(value) for name, value in
                (line.split() for line in body.decode().splitlines())}

    def in_flight_stats(self) -> dict[str, int]:
        """/in_flight_stats: the most /in_flight requests its handler saw at
        once, and the units limits.in_flight and limits.pair hold."""
        _, _, body = self.get("/in_flight_stats")
        return {name: int(value) for name, value in
                (line.split() for line in body.decode().splitlines())}

    def until_held(self, want: int = 0, limit: str = "held", within: float = 30.0) -> int:
        """The units `limit` of /in_flight_stats holds, once they are `want`
        (or `within` seconds on). A request's unit is released by its log
        phase, after the response: a client that saw the response may still
        find it held, for as long as the machine takes to run that phase."""
        deadline = time.monotonic() + within
        held = self.in_flight_stats()[limit]
        while held != want and time.monotonic() < deadline:
            time.sleep(0.01)
            held = self.in_flight_stats()[limit]
        return held
