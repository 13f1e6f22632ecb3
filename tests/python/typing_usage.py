"""Every public name of cellrate, used with the types its stub declares.

test_typing.py checks this file with `mypy --strict` and also runs it, so the
stub and the runtime must agree.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import tempfile
from typing import Tuple

import cellrate
from cellrate import (
    CellrateError,
    Decision,
    InvalidArgument,
    InvalidArgumentType,
    KeyedLimiter,
    Limiter,
    RateLimited,
)


def fields(decision: Decision) -> Tuple[bool, int, float, float, int]:
    allowed: bool = decision.allowed
    remaining: int = decision.remaining
    retry_after: float = decision.retry_after
    reset_after: float = decision.reset_after
    limit: int = decision.limit
    return allowed, remaining, retry_after, reset_after, limit


def use_limiter() -> Limiter:
    limiter: Limiter = cellrate.Limiter(300, 60, burst=60)
    Limiter("300/minute")
    Limiter(0.5, period=2.0, burst=None)
    Limiter(rate=10, period=None)
    fast = Limiter("10/s", clock="fast")
    name: str = fast.clock
    ok: bool = limiter.allow()
    ok = limiter.allow(2, now=1.0)
    ok = limiter.allow(cost=0, now=None) and ok
    decision: Decision = limiter.check()
    decision = limiter.check(1, now=2.5)
    decision = limiter.peek(cost=3)
    decision = limiter.peek()
    fields(decision)
    limiter.reset()
    rate: float = limiter.rate
    period: float = limiter.period
    burst: int = limiter.burst
    assert (rate, period, burst) == (300.0, 60.0, 60)
    return limiter


def use_keyed() -> KeyedLimiter:
    keyed: KeyedLimiter = KeyedLimiter("10/s", burst=5, capacity=1000)
    KeyedLimiter(10, 1.0, burst=None, capacity=None, shared=None, shared_mode=None, clock=None)
    assert KeyedLimiter(10, clock="monotonic").clock == "monotonic"
    with tempfile.TemporaryDirectory() as folder:
        KeyedLimiter("10/s", capacity=10, shared=os.path.join(folder, "keyed"), shared_mode=0o600)
        Limiter("10/s", shared=pathlib.Path(folder) / "one")
        Limiter("10/s", shared=os.path.join(folder, "two").encode(), shared_mode=None)
    ok: bool = keyed.allow("user:1")
    ok = keyed.allow(b"user:1", 2, now=3.0) or ok
    decision: Decision = keyed.check(key="user:2", cost=1, now=None)
    decision = keyed.peek(b"user:3")
    fields(decision)
    keyed.reset("user:1")
    keyed.reset(b"user:1")
    held: int = len(keyed)
    capacity: int = keyed.capacity
    evictions: int = keyed.evictions
    assert (keyed.rate, keyed.period, keyed.burst) == (10.0, 1.0, 5)
    assert held >= 1 and capacity == 1000 and evictions == 0
    if not keyed:
        raise AssertionError("a KeyedLimiter is always true")
    return keyed


def use_decision() -> Decision:
    made = Decision(allowed=True, remaining=1, retry_after=0.0, reset_after=0.5, limit=2)
    same = Decision(True, 1, 0.0, 0.5, 2)
    assert made == same and not (made != same) and hash(made) == hash(same)
    fields: dict[str, str] = made.headers("api", legacy=True)
    window: float = Decision(True, 1, 0.0, 0.5, 2, window=1.0).window
    assert fields["RateLimit"] == '"api";r=1;t=1' and window == 1.0
    return made


def use_errors() -> list[str]:
    params: list[str] = []
    try:
        Limiter("10/s", tz="UTC")
    except InvalidArgument as error:
        params.append(error.param)
    try:
        Limiter(10, burst=1.5)  # type: ignore[call-overload]
    except InvalidArgumentType as error:
        params.append(error.param)
    try:
        KeyedLimiter(10, capacity=0)
    except ValueError as error:
        params.append(str(error).split()[0])
    try:
        Limiter(10).allow(-1)
    except CellrateError as error:
        params.append(error.param)
    return params


def use_penalty() -> None:
    penalty = cellrate.Penalty("5/minute", 10, max_ban=60)
    ban: float = penalty.ban
    assert ban == 10 and penalty.after == "5/minute" and penalty.max_ban == 60
    keyed = cellrate.KeyedLimiter("10/s", penalty=penalty)
    assert keyed.allow("k")


def use_calendar() -> None:
    quota = Limiter("1000000/month", algorithm="calendar", tz="Europe/Berlin")
    start, end = cellrate.calendar_period("Europe/Berlin", "month", now=1700000000.0)
    assert quota.check(now=1700000000.0).reset_after == end - 1700000000.0 and start < end


def use_catalogue() -> None:
    window = Limiter("100/minute", algorithm="fixed_window")
    name: str = window.algorithm
    assert name == "fixed_window" and window.clock == "realtime"
    keyed = KeyedLimiter(10, burst=2, algorithm="token_bucket")
    delay: float | None = keyed.reserve("k", 1, timeout=1.0, now=0.0)
    assert delay == 0.0
    keyed.refund("k", 1, now=0.0)
    assert Limiter(10).reserve(timeout=None) == 0.0
    decision: Decision = cellrate.check_all([Limiter(10), (keyed, "k")], 1, now=None)
    assert decision.allowed


def use_costs_after_the_fact() -> None:
    limiter = Limiter("1000/minute", burst=4000, max_cost=4000)
    decision: Decision = limiter.charge(250, now=0.0)
    clipped: bool = decision.clipped
    assert decision.allowed and not clipped
    taken: int = limiter.take(10)
    keyed = KeyedLimiter(100, algorithm="sliding_window", max_cost=100)
    assert keyed.charge("k", 3).allowed and keyed.take(b"k", 5, now=None) >= 0 and taken == 10


def use_waiting() -> float:
    limiter = Limiter(1000, burst=10)
    limiter.wait()
    limiter.wait(2, timeout=1.0)
    keyed = KeyedLimiter(1000, burst=10)
    keyed.wait("user", timeout=None)
    keyed.wait(b"user", 1)
    delay: float | None = limiter.reserve(1, timeout=0.5)
    limiter.refund(1)
    keyed.refund("user")

    async def waiting() -> None:
        await limiter.acquire()
        await keyed.acquire("user", 1, timeout=1.0)

    asyncio.run(waiting())
    try:
        limiter.wait(11)
    except RateLimited as error:
        decision: Decision = error.decision
        return error.retry_after + (delay or 0.0) + decision.retry_after
    raise AssertionError("a cost above the burst must raise")


@cellrate.limit("100/second", burst=10)
def limited(x: int) -> int:
    return x


@cellrate.limit(100, key=lambda user, n: user, cost=lambda user, n: n, block=False)
async def limited_async(user: str, n: int) -> str:
    return user * n


def use_decorators() -> None:
    value: int = limited(2)
    text: str = asyncio.run(limited_async("a", 2))
    shared = cellrate.limit(limiter=Limiter(10), timeout=0.5)(len)
    assert value == 2 and text == "aa" and shared("abc") == 3


def use_web() -> None:
    """The web adapters: Policy's options in every adapter's signature."""
    import flask
    from starlette.applications import Starlette

    import cellrate.asgi
    import cellrate.django
    import cellrate.fastapi
    import cellrate.flask
    import cellrate.wsgi
    from cellrate.web import Policy, Request, header

    def by_user(request: Request) -> str:
        return request.header("X-User") or request.client

    policy = Policy("100/minute", key=header("X-API-Key"), burst=10,
                    routes={"POST /login": "5/minute"}, exempt_paths=["/health"], status=503)
    assert policy.status == 503
    app = Starlette()
    app.add_middleware(cellrate.asgi.RateLimitMiddleware, limit="100/minute", key=by_user,
                       trusted_proxies=["10.0.0.0/8"])
    cellrate.asgi.RateLimitMiddleware(Starlette(), "100/minute", ipv6_prefix=56, dry_run=True)
    cellrate.wsgi.RateLimitMiddleware(flask.Flask(__name__).wsgi_app,
                                      ["10/second", (cellrate.KeyedLimiter(5), by_user)],
                                      admitted_headers=True)
    cellrate.fastapi.RateLimit("5/minute", cost=2, name="login")
    cellrate.flask.RateLimit(cellrate.Limiter("1000/second"), exempt_methods=["GET"])
    cellrate.django.limit("5/minute", key=by_user, body="slow down")


def use_limit() -> None:
    limit = cellrate.Limit("300/minute", burst=60, algorithm="token_bucket")
    window: float = limit.window
    fields: tuple[float, float, int, str, int, int] = (
        limit.rate, limit.period, limit.burst, limit.algorithm, limit.emission_ns,
        limit.tolerance_ns)
    same: bool = limit == cellrate.Limit(300, 60.0, burst=60, algorithm="token_bucket")
    assert window == 12.0 and fields[2] == 60 and same and hash(limit) == hash(limit)
    cellrate.check_policy_name("api")


def use_concurrency() -> int:
    c = cellrate.Concurrency(2, lease=30.0)
    slot: cellrate.Slot | None = c.try_acquire(cost=1)
    assert slot is not None and slot.concurrency is c and slot.cost == 1
    released: bool = slot.release()
    with c.hold(timeout=1.0) as held:
        assert held.cost == 1 and c.in_flight() == 1

    async def held_async() -> int:
        async with c.hold() as slot:
            return slot.cost

    keyed = cellrate.Concurrency(1, capacity=10)
    assert keyed.try_acquire(b"client") is not None and keyed.capacity == 10

    @cellrate.concurrent(3, timeout=0.5)
    def work(x: int) -> int:
        return x

    lease: float | None = c.lease
    assert released and lease == 30.0 and asyncio.run(held_async()) == 1
    return work(2) + c.limit


def use_prometheus() -> None:
    import prometheus_client

    import cellrate.prometheus
    from cellrate.web import Policy

    registry = prometheus_client.CollectorRegistry()
    cellrate.prometheus.register(cellrate.Limiter(10), name="typed", registry=registry)
    cellrate.prometheus.register(Policy("5/minute"), name="web", registry=registry)
    cellrate.prometheus.unregister("typed", registry=registry)
    text: bytes = prometheus_client.generate_latest(registry)
    assert b"cellrate_decisions_total" in text


def use_follow() -> None:
    import httpx
    import requests

    import cellrate.httpx
    import cellrate.requests

    limiter = cellrate.Limiter("10/second")
    pulled: bool = limiter.follow({"Retry-After": "1"}, 429, quota="requests", now=1000.0)
    assert pulled
    keyed = cellrate.KeyedLimiter("10/second")
    keyed.follow("user", [("x-ratelimit-remaining-requests", "3")], pending=1, share=0.5)
    bounds: list[tuple[int, float]] = cellrate.read_signal({"Retry-After": "2"}, 429)
    assert bounds == [(0, 2.0)]
    tokens = cellrate.Limiter(1000, burst=1000)
    transport = cellrate.httpx.RateLimitTransport(limiter, tokens=tokens,
                                                  estimate=lambda request: 10, retries=2)
    httpx.Client(transport=transport).close()
    httpx.AsyncClient(transport=cellrate.httpx.AsyncRateLimitTransport(limiter))
    session = requests.Session()
    session.mount("https://", cellrate.requests.RateLimitAdapter(limiter, backoff=0.1))
    session.close()

    @cellrate.limit("5/second", follow=True)
    def call() -> requests.Response:
        return requests.Response()

    assert callable(call)


def main() -> None:
    version: str = cellrate.__version__
    assert version.count(".") == 2
    use_limiter()
    use_keyed()
    use_decision()
    assert use_errors() == ["tz", "burst", "capacity", "cost"]
    assert use_waiting() == float("inf")
    use_decorators()
    use_calendar()
    use_web()
    use_follow()
    assert sorted(cellrate.__all__) == sorted(
        [
            "CellrateError",
            "Concurrency",
            "Decision",
            "InvalidArgument",
            "InvalidArgumentType",
            "KeyedLimiter",
            "Limit",
            "Limiter",
            "Penalty",
            "RateLimited",
            "Slot",
            "__version__",
            "calendar_period",
            "check_all",
            "check_policy_name",
            "concurrent",
            "limit",
            "read_signal",
        ]
    )
    use_catalogue()
    use_costs_after_the_fact()
    use_limit()
    assert use_concurrency() == 4
    use_prometheus()


if __name__ == "__main__":
    main()
