"""A Sentinel failover under traffic (docs/redis.md, "What a failover costs").

A master, a replica and three Sentinels on loopback; four threads (or four asyncio
tasks) call allow() through a store made from Sentinel's master_for() while the master
is SIGKILLed and the Sentinels promote the replica. Checked: the admissions against the
limit's bound from the start of the run (burst + rate * t, plus one per thread), with
on_error="fallback" and without it (on_error="deny"); the length of the on_error window
(from the kill to the first decision of the new master); and that the limiter decides on
the new master afterwards. The replica is in sync (loopback), so its keys and wipe
markers are the master's: the failover is no wipe.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import List

import pytest

pytest.importorskip("redis")
import redis.asyncio.sentinel  # noqa: E402
import redis.sentinel  # noqa: E402

import cellrate.redis as cr_redis  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from redis_servers import needs_redis, watched_master  # noqa: E402

pytestmark = needs_redis

THREADS = 4
RATE, BURST = 20, 20


def _excess(stamps: List[float], since: float) -> float:
    """The most admissions stamped in [since, t] beyond BURST + RATE * (t - since)."""
    worst, count = -float(BURST), 0
    for t in sorted(s for s in stamps if s >= since):
        count += 1
        worst = max(worst, count - (BURST + RATE * (t - since)))
    return worst


def _failover_cluster():
    # quorum 2 of 3; the master judged down after 1 s
    return watched_master(3, replicas=1, quorum=2, down_after_ms=1000)


def _check(kind: str, on_error: str, stamps: List[float], started: float, killed: float,
           back: float) -> None:
    """The bounds: from the kill on, burst + rate * (t - kill) (the fallback starts each
    process's local limiter with its burst: docs/redis.md, Fallback); without the
    fallback nothing is admitted in the window, so the whole run holds to the bound
    from its start."""
    from_start, from_kill = _excess(stamps, started), _excess(stamps, killed)
    during = sum(1 for t in stamps if killed <= t < back)
    print(f"failover {kind} on_error={on_error}: {len(stamps)} admitted in "
          f"{max(stamps) - started:.1f} s, {from_start:+.1f} over the bound from the start, "
          f"{from_kill:+.1f} from the kill; on_error window {back - killed:.2f} s, "
          f"{during} admitted in it")
    assert from_kill <= THREADS + 1
    if on_error != "fallback":
        assert from_start <= THREADS + 1
    assert back - killed < 45  # down-after 1 s, the election, the probe's back-off


class _Window:
    """The on_error window, watched: the instant Redis stopped deciding after the kill
    (the store's outage began) and the instant it decided again."""

    def __init__(self, limiter) -> None:
        self.limiter = limiter
        self.killed = 0.0
        self.down = 0.0
        self.back = 0.0

    def look(self) -> None:
        outage, now = self.limiter._availability.outage, time.monotonic()
        if self.killed and not self.down and outage is not None:
            self.down = now
        if self.down and not self.back and outage is None:
            self.back = now


@pytest.mark.parametrize("on_error", ["fallback", "deny"])
def test_a_failover_under_threads(on_error):
    with _failover_cluster() as (master, watchers, (replica,)):
        sentinel = redis.sentinel.Sentinel([("127.0.0.1", w.port) for w in watchers],
                                           socket_timeout=0.5)
        limiter = cr_redis.RedisLimiter(sentinel.master_for("cellrate", socket_timeout=0.5),
                                        RATE, burst=BURST, on_error=on_error, name="fo",
                                        timeout=0.5)
        window = _Window(limiter)
        stamps: List[float] = []
        stop = threading.Event()

        def work() -> None:
            mine = []
            while not stop.is_set():
                if limiter.allow("k"):
                    mine.append(time.monotonic())
                time.sleep(0.002)
            stamps.extend(mine)

        def watch() -> None:
            while not stop.is_set():
                window.look()
                time.sleep(0.005)

        started = time.monotonic()
        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        threads.append(threading.Thread(target=watch))
        for thread in threads:
            thread.start()
        try:
            time.sleep(1.0)
            window.killed = time.monotonic()
            master.kill()
            deadline = time.monotonic() + 60
            while not window.back:
                assert time.monotonic() < deadline, "the limiter never followed"
                time.sleep(0.05)
            time.sleep(1.5)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            limiter.close()
        _check("threads", on_error, stamps, started, window.killed, window.back)
        # the limiter follows the new master: the key lives there
        assert "role:master" in replica.cli("info", "replication")
        assert replica.cli("exists", limiter.redis_key("k").decode()).strip() == "1"
        if on_error == "deny":  # nothing admitted while Redis could not decide
            assert not [t for t in stamps if window.down + 0.1 < t < window.back - 0.1]


@pytest.mark.parametrize("on_error", ["fallback", "deny"])
def test_a_failover_under_asyncio(on_error):
    with _failover_cluster() as (master, watchers, (replica,)):
        addresses = [("127.0.0.1", w.port) for w in watchers]

        async def run() -> tuple:
            sentinel = redis.asyncio.sentinel.Sentinel(
                addresses, sentinel_kwargs={"socket_timeout": 0.3}, socket_timeout=0.5)
            limiter = cr_redis.AsyncRedisLimiter(
                sentinel.master_for("cellrate"), RATE, burst=BURST, on_error=on_error,
                name="fo", timeout=1.0)
            window = _Window(limiter)
            stamps: List[float] = []
            stop = asyncio.Event()

            async def work() -> None:
                while not stop.is_set():
                    if await limiter.allow("k"):
                        stamps.append(time.monotonic())
                    await asyncio.sleep(0.002)

            async def watch() -> None:
                while not stop.is_set():
                    window.look()
                    await asyncio.sleep(0.005)

            started = time.monotonic()
            tasks = [asyncio.ensure_future(work()) for _ in range(THREADS)]
            tasks.append(asyncio.ensure_future(watch()))
            try:
                await asyncio.sleep(1.0)
                window.killed = time.monotonic()
                master.kill()
                deadline = time.monotonic() + 60
                while not window.back:
                    assert time.monotonic() < deadline, "the limiter never followed"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.5)
            finally:
                stop.set()
                await asyncio.gather(*tasks)
                await limiter.aclose()
            return stamps, started, window

        stamps, started, window = asyncio.run(run())
        _check("asyncio", on_error, stamps, started, window.killed, window.back)
        assert "role:master" in replica.cli("info", "replication")
        assert replica.cli("exists", "cellrate:fo:k").strip() == "1"
        if on_error == "deny":
            assert not [t for t in stamps if window.down + 0.1 < t < window.back - 0.1]
