"""Real redis-server processes for the tests: loopback, free ports, always stopped.

RedisServer starts one server (optionally in cluster mode) in a temporary
directory and stops it in stop(), which the fixtures call in `finally`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

needs_redis = pytest.mark.skipif(
    REDIS_SERVER is None or REDIS_CLI is None,
    reason="redis-server and redis-cli are installed by tests/install-deps.sh",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (a cluster also needs port + 10000)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class RedisServer:
    """One redis-server on 127.0.0.1; start() again after kill() reuses the port."""

    def __init__(self, *, cluster: bool = False, port: int | None = None):
        self.port = port or free_port()
        self.cluster = cluster
        self.dir = tempfile.mkdtemp(prefix="cellrate-redis-")
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--enable-debug-command", "local",
            "--logfile", os.path.join(self.dir, "redis.log"),
        ]
        if self.cluster:
            args += ["--cluster-enabled", "yes",
                     "--cluster-config-file", os.path.join(self.dir, "nodes.conf"),
                     "--cluster-node-timeout", "2000"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown, nothing saved."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args: str) -> str:
        return subprocess.run([REDIS_CLI, "-p", str(self.port), *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout


@contextlib.contextmanager
def redis_server(**kwargs):
    server = RedisServer(**kwargs)
    try:
        yield server.start()
    finally:
        server.stop()
