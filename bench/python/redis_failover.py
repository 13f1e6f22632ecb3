"""What Redis's own failures cost the Redis store: a Sentinel failover, a failover to
a replica that lagged, an empty restart. Not a benchmark of speed and not part of
`make bench`: it prints the figures the Redis page (docs/redis.md, "Sentinel,
replicas and restarts") quotes.

Each scenario starts its own servers on loopback (tests/python/redis_servers.py)
and asks one limit, 5/s with a burst of 50 and on_error="deny", every 2 ms for
12 s, on the server's clock, then counts what it admitted against the bound of
any 12 s (burst + rate * 12 s = 110), and how long the store answered on_error.

    .venv/bin/python bench/python/redis_failover.py [failover|lagging|restart|flush ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import redis
import redis.sentinel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
from redis_servers import RedisSentinel, RedisServer  # noqa: E402

from cellrate.redis import CHECK, RedisLimiter  # noqa: E402

RATE, BURST, RUN_S, EVERY_S, AT_S = 5, 50, 12.0, 0.002, 5.0
LAG_S = 1.5  # the writes a lagging replica had not received


class Run:
    """One limit asked every EVERY_S for RUN_S; each event (instant s, function) runs
    once at its instant and may return a limiter to ask from then on (a client
    repointed, as a failover does)."""

    def __init__(self, limiter: RedisLimiter):
        self.limiter = limiter
        self.admitted = 0
        self.on_error_s = 0.0

    def go(self, *events) -> "Run":
        pending = sorted(events, key=lambda event: event[0])
        started = time.monotonic()
        while (now := time.monotonic() - started) < RUN_S:
            while pending and now >= pending[0][0]:
                self.limiter = pending.pop(0)[1]() or self.limiter
            asked = time.monotonic()
            down = self.limiter._availability.outage is not None
            self.admitted += self.limiter.allow("k")
            if down or self.limiter._availability.outage is not None:
                self.on_error_s += time.monotonic() - asked + EVERY_S
            time.sleep(EVERY_S)
        return self

    def report(self, name: str) -> None:
        bound = BURST + RATE * RUN_S
        print(f"{name}: {self.admitted} admitted in {RUN_S:.0f} s against a bound of "
              f"{bound:.0f} ({self.admitted - bound:+.0f}); on_error for {self.on_error_s:.2f} s")


def limiter_on(client, on_wipe: str = "refuse") -> RedisLimiter:
    limiter = RedisLimiter(client, RATE, burst=BURST, name="failover", on_error="deny",
                           timeout=0.25, on_wipe=on_wipe)
    # a Redis in service for long: the key's wipe marker found an age ago (a fresh
    # Redis reads as wiped, so its first period has no burst with on_wipe="refuse")
    words = limiter._request(CHECK, "k", 1, None, limiter.limit)
    if int(words[0]) > 1:
        client.set(words[2], "1000000000")
    return limiter


def failover() -> None:
    """A master, an up-to-date replica, three Sentinels (quorum 2, the master down after
    1 s): the master is SIGKILLed; Sentinel promotes the replica."""
    master = RedisServer().start()
    replica = RedisServer(replica_of=master.port).start()
    sentinels = [RedisSentinel(master.port, quorum=2, down_after_ms=1000).start()
                 for _ in range(3)]
    try:
        while "master_link_status:up" not in replica.cli("info", "replication"):
            time.sleep(0.05)
        time.sleep(2)  # the Sentinels find the replica and one another
        client = redis.sentinel.Sentinel([("127.0.0.1", s.port) for s in sentinels],
                                          sentinel_kwargs={"socket_timeout": 0.1}) \
            .master_for("cellrate")
        Run(limiter_on(client)).go((AT_S, master.kill)).report(
            "Sentinel failover (replica in sync, down-after 1 s)")
        print(f"  the master now: {sentinels[0].master()}, the replica was "
              f"127.0.0.1:{replica.port}")
    finally:
        for process in (master, replica, *sentinels):
            process.stop()


def lagging() -> None:
    """A failover to a replica that lagged LAG_S: the replica stops receiving at
    AT_S - LAG_S, the master takes LAG_S more of writes, then it is SIGKILLed and the
    clients move to the replica, as Sentinel would move them."""
    master = RedisServer().start()
    replica = RedisServer(replica_of=master.port).start()
    try:
        while "master_link_status:up" not in replica.cli("info", "replication"):
            time.sleep(0.05)

        def promote() -> RedisLimiter:
            master.kill()
            return limiter_on(redis.Redis(port=replica.port))
        Run(limiter_on(redis.Redis(port=master.port))).go(
            (AT_S - LAG_S, lambda: replica.cli("replicaof", "no", "one") and None),
            (AT_S, promote)).report(f"failover to a replica {LAG_S} s behind")
    finally:
        master.stop()
        replica.stop()


def restart() -> None:
    """A Redis without persistence SIGKILLed and started again, empty, on its port; with
    on_wipe "refuse" (the default) and "allow"."""
    for on_wipe in ("refuse", "allow"):
        server = RedisServer().start()
        try:
            def wipe(server: RedisServer = server) -> None:
                server.in_service = False  # (the tests' servers start in service)
                server.kill()
                server.start()
            Run(limiter_on(redis.Redis(port=server.port), on_wipe)).go((AT_S, wipe)).report(
                f"empty restart (no persistence), on_wipe={on_wipe!r}")
        finally:
            server.stop()


def flush() -> None:
    """FLUSHALL on a running Redis, with on_wipe "refuse" and "allow"."""
    for on_wipe in ("refuse", "allow"):
        server = RedisServer().start()
        try:
            client = redis.Redis(port=server.port)
            Run(limiter_on(client, on_wipe)).go((AT_S, lambda c=client: c.flushall() and None)) \
                .report(f"FLUSHALL, on_wipe={on_wipe!r}")
        finally:
            server.stop()


SCENARIOS = {"failover": failover, "lagging": lagging, "restart": restart, "flush": flush}

if __name__ == "__main__":
    for name in sys.argv[1:] or SCENARIOS:
        SCENARIOS[name]()
