"""Real redis-server processes for the tests: loopback, free ports, always stopped.

RedisServer starts one server (optionally in cluster mode, or as a replica) in a
temporary directory and stops it in stop(), which the fixtures call in
`finally`; RedisSentinel starts a Sentinel watching a master the same way.
"""

from __future__ import annotations

import binascii
import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

try:
    import pytest
except ImportError:  # the bench's harnesses (bench/python) start servers without pytest
    pytest = None

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
# Debian's redis-sentinel is the server binary under another name; without the
# package, the server itself runs as a Sentinel with --sentinel.
REDIS_SENTINEL = [shutil.which("redis-sentinel")] if shutil.which("redis-sentinel") else \
    [REDIS_SERVER, "--sentinel"] if REDIS_SERVER else None

needs_redis = pytest and pytest.mark.skipif(
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

    def __init__(self, *, cluster: bool = False, port: int | None = None,
                 replica_of: int | None = None, in_service: bool = True):
        self.port = port or free_port()
        # each start() writes every slot's wipe marker, found an age ago: a Redis in
        # service for long, whose keys have their burst (on_wipe="refuse" reads an empty
        # one as wiped); False for the tests of a wipe (test_redis_wipe.py)
        self.in_service = in_service and not cluster and replica_of is None
        self.cluster = cluster
        self.replica_of = replica_of
        self.dir = tempfile.mkdtemp(prefix="cellrate-redis-")
        self.process: subprocess.Popen | None = None

    def _command(self) -> list:
        return [REDIS_SERVER]

    def _arguments(self) -> list:
        args = [
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
        if self.replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        return args

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(self._command() + self._arguments(),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                if self.in_service:
                    self._mark_in_service()
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _mark_in_service(self) -> None:
        """in_service(), by hand: every slot's marker SET, the 16,384 OKs read."""
        commands = b"".join(b"*3\r\n$3\r\nSET\r\n$14\r\ncellrate{%s}\r\n$10\r\n1000000000\r\n"
                            % tag for tag in _slot_tags())
        with socket.create_connection(("127.0.0.1", self.port), 30) as sock:
            sock.sendall(commands)
            replies = b""
            while replies.count(b"\r\n") < len(_slot_tags()):
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("redis-server closed the connection")
                replies += chunk

    def ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown, nothing saved (a stopped process too)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections; nothing answers them."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args: str) -> str:
        return subprocess.run([REDIS_CLI, "-p", str(self.port), *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout


class RedisSentinel(RedisServer):
    """A Sentinel on 127.0.0.1 watching the master `master_port` as `service`, which it
    judges down after `down_after_ms` (a quorum of `quorum` Sentinels fails it over).
    Its configuration is a file of its own (Sentinel rewrites it)."""

    def __init__(self, master_port: int, *, service: str = "cellrate", quorum: int = 1,
                 down_after_ms: int = 1000):
        super().__init__(in_service=False)
        self.service = service
        config = os.path.join(self.dir, "sentinel.conf")
        with open(config, "w") as file:
            file.write(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n"
                       f"logfile {os.path.join(self.dir, 'sentinel.log')}\n"
                       f"sentinel monitor {service} 127.0.0.1 {master_port} {quorum}\n"
                       f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
                       f"sentinel failover-timeout {service} 10000\n")
        self.config = config

    def _command(self) -> list:
        assert REDIS_SENTINEL is not None
        return [REDIS_SENTINEL[0], self.config, *REDIS_SENTINEL[1:]]

    def _arguments(self) -> list:
        return []

    def master(self) -> tuple:
        """(host, port) of the master this Sentinel names now."""
        reply = self.cli("sentinel", "get-master-addr-by-name", self.service).split()
        return reply[0], int(reply[1])


def _until(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the servers never settled")
        time.sleep(0.02)


@contextlib.contextmanager
def watched_master(sentinels: int = 2, *, replicas: int = 0, quorum: int = 1,
                   down_after_ms: int = 1000):
    """A master, `replicas` replicas in sync with it and `sentinels` Sentinels watching it
    as "cellrate" (each knowing the replicas and the other Sentinels), on loopback; every
    process continued and killed at the end, however the test ends. Yields (master,
    Sentinels, replicas)."""
    master = RedisServer()
    followers = [RedisServer(replica_of=master.port) for _ in range(replicas)]
    watchers = [RedisSentinel(master.port, quorum=quorum, down_after_ms=down_after_ms)
                for _ in range(sentinels)]
    try:
        master.start()
        for follower in followers:
            follower.start()
        for follower in followers:
            _until(lambda f=follower: "master_link_status:up" in f.cli("info", "replication"))
        for watcher in watchers:
            watcher.start()
        for watcher in watchers:
            def settled(w=watcher) -> bool:
                state = w.cli("sentinel", "master", "cellrate").split()
                fields = dict(zip(state[::2], state[1::2]))
                return (w.master() == ("127.0.0.1", master.port)
                        and "s_down" not in fields.get("flags", "")
                        and int(fields.get("num-slaves", 0)) >= replicas
                        and int(fields.get("num-other-sentinels", 0)) >= (
                            sentinels - 1 if replicas else 0))
            _until(settled)
        yield master, watchers, followers
    finally:
        for process in (master, *followers, *watchers):
            process.resume()
            process.stop()


MARKERS = 16384  # the wipe markers in_service() writes, one a Cluster slot


@functools.lru_cache(maxsize=1)
def _slot_tags() -> list:
    """Each Cluster slot's wipe-marker tag: the least four letters 0x40 | a hex digit
    whose CRC16 is the slot (the core's cr_redis_wipe_marker, found here by search)."""
    tags = [b""] * 16384
    for x in range(65535, -1, -1):
        tag = bytes(0x40 | (x >> shift) & 15 for shift in (12, 8, 4, 0))
        tags[binascii.crc_hqx(tag, 0) & 0x3FFF] = tag
    return tags


def in_service(client) -> None:
    """Makes an empty Redis read as one in service for long (on_wipe="refuse" reads an
    empty one as wiped: no burst for a period): every slot's wipe marker, found an age
    ago."""
    pipe = client.pipeline(transaction=False)
    for tag in _slot_tags():
        pipe.set(b"cellrate{" + tag + b"}", b"1000000000")
    pipe.execute()


@contextlib.contextmanager
def redis_server(**kwargs):
    server = RedisServer(**kwargs)
    try:
        yield server.start()
    finally:
        server.stop()
