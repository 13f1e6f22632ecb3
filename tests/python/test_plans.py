"""Plans, a limit per key (docs/design/plans.md): tests/vectors/plans.txt through
KeyedLimiter(plans=...) and plan= on check, peek and allow (gcra and
token_bucket), reconfigure(plan=...), the plan tables the core refuses, and the
plan names a decision may give."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

import cellrate
from test_vectors import STATUS, seconds_match  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "plans.txt"


def name_of(token: str) -> str | bytes:
    raw = bytes.fromhex(token[1:])
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


@dataclass
class Block:
    plans: list[tuple[str, int, int]] = field(default_factory=list)
    steps: list[tuple[int, str, list[str]]] = field(default_factory=list)


# where a plan is taken: (line, status, count, keyed, named)
ITEMS: list[tuple[int, str, int, bool, bool]] = []


def read_vectors() -> tuple[list[Block], list[tuple[int, str, list[tuple[object, str]]]],
                            list[tuple[int, str, str | bytes]]]:
    blocks: list[Block] = []
    checks = []
    finds = []
    for lineno, line in enumerate(VECTORS.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split(" ")
        if word == "table":
            blocks.append(Block())
        elif word == "plan":
            blocks[-1].plans.append((rest[0], int(rest[1]), int(rest[2])))
        elif word in ("op", "edit"):
            blocks[-1].steps.append((lineno, word, rest))
        elif word == "check":
            status, count = rest[0], int(rest[1])
            pairs = [(name_of(rest[2 + 2 * i]), rest[3 + 2 * i]) for i in range(count)]
            checks.append((lineno, status, pairs))
        elif word == "find":
            finds.append((lineno, rest[0], name_of(rest[1])))
        elif word == "items":
            ITEMS.append((lineno, rest[0], int(rest[1]), rest[2] == "1", rest[3] == "1"))
        else:
            raise AssertionError(f"plans.txt:{lineno}: {line}")
    assert len(blocks) >= 3 and sum(len(b.steps) for b in blocks) > 900
    return blocks, checks, finds


BLOCKS, CHECKS, FINDS = read_vectors()


def limit_of(emission: int, burst: int, algorithm: str) -> cellrate.Limit:
    return cellrate.Limit(1.0, emission / 1e9, burst=burst, algorithm=algorithm)


def table_of(block: Block, algorithm: str) -> cellrate.KeyedLimiter:
    (_, emission, burst), *others = block.plans
    return cellrate.KeyedLimiter(1.0, emission / 1e9, burst=burst, algorithm=algorithm,
                                 capacity=1000,
                                 plans={n: limit_of(e, b, algorithm) for n, e, b in others})


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_vectors(index: int, algorithm: str) -> None:
    block = BLOCKS[index]
    keyed, allow_only = table_of(block, algorithm), table_of(block, algorithm)
    for lineno, word, rest in block.steps:
        where = f"{algorithm}, plans.txt:{lineno}"
        if word == "edit":
            plan, now, emission, burst = rest[0], int(rest[1]), int(rest[2]), int(rest[3])
            for lim in (keyed, allow_only):
                lim.reconfigure(1.0, emission / 1e9, burst=burst, now=now / 1e9, plan=plan)
            continue
        key, plan, now, cost, commit, allowed, remaining, retry, reset = rest
        now_s = int(now) / 1e9
        method = keyed.check if commit == "1" else keyed.peek
        d = method(key, int(cost), now=now_s, plan=plan)
        assert d.allowed == (allowed == "1"), where
        assert d.remaining == int(remaining), where
        assert seconds_match(d.retry_after, int(retry)), where
        assert seconds_match(d.reset_after, int(reset)), where
        if commit == "1":
            got = allow_only.allow(key, int(cost), now=now_s, plan=plan)
        else:
            got = allow_only.peek(key, int(cost), now=now_s, plan=plan).allowed
        assert got == (allowed == "1"), f"allow, {where}"


@pytest.mark.parametrize("lineno,status,pairs", CHECKS)
def test_tables(lineno: int, status: str, pairs: list[tuple[object, str]]) -> None:
    plans = {name: cellrate.Limit(100, burst=20, algorithm=algorithm)
             if not algorithm.endswith("_window") else cellrate.Limit(100, algorithm=algorithm)
             for name, algorithm in pairs}
    if len(plans) != len(pairs) or any(isinstance(n, bytes) or "\0" in n for n, _ in pairs):
        pytest.skip("a duplicate name or one that is not a str: no Python mapping holds it")
    if status == "OK":
        lim = cellrate.KeyedLimiter(10, burst=10, plans=plans)
        for name in plans:
            assert lim.peek("k", plan=name, now=0).limit == 20
        return
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter(10, burst=10, plans=plans)
    param, message = STATUS[status]
    assert str(info.value) == message and info.value.param == param, f"plans.txt:{lineno}"


@pytest.mark.parametrize("lineno,status,count,keyed,named", ITEMS)
def test_items(lineno: int, status: str, count: int, keyed: bool, named: bool) -> None:
    """The core's rule of where a plan is taken, as the web policy and the
    decorator ask it."""
    if status == "OK":
        assert cellrate._cellrate._check_plan_items(count, keyed, named) is None
        return
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate._cellrate._check_plan_items(count, keyed, named)
    param, message = STATUS[status]
    assert (info.value.param, str(info.value)) == (param, message), f"plans.txt:{lineno}"


def test_items_in_the_policy_and_the_decorator() -> None:
    """The web policy and the decorator refuse a plan where the core's rule does,
    in its words: several limits as one, a limit without keys."""
    def refused(status: str, make: object) -> None:
        with pytest.raises(cellrate.InvalidArgument) as info:
            make()  # type: ignore[operator]
        assert (info.value.param, str(info.value)) == STATUS[status]

    from cellrate.web import Policy
    refused("E_PLAN_SEVERAL", lambda: Policy("5/s;100/day", plans={"pro": "50/s"}, plan="pro"))
    refused("E_PLAN_KEYED", lambda: Policy(cellrate.Limiter(5), plan="pro"))
    refused("E_PLANS_KEYED", lambda: cellrate.limit("5/s", plans={"pro": "50/s"}))
    refused("E_PLAN_KEYED", lambda: cellrate.limit(limiter=cellrate.Limiter(5), plan="pro"))
    refused("E_PLAN_SEVERAL", lambda: cellrate.limit("5/s;100/day", key=lambda: "k",
                                                     plans={"pro": "50/s"}, plan="pro"))
    assert Policy("5/s", plans={"pro": "50/s"}, plan="pro").plan == "pro"


@pytest.mark.parametrize("lineno,status,name", FINDS)
def test_find(lineno: int, status: str, name: str | bytes) -> None:
    lim = table_of(BLOCKS[-1], "gcra")
    if status == "OK":
        assert lim.peek("k", plan=name, now=0).allowed
        return
    if isinstance(name, bytes):
        pytest.skip("not a str")
    for call in (lim.allow, lim.check, lim.peek):
        with pytest.raises(cellrate.InvalidArgument) as info:
            call("k", plan=name)
        assert str(info.value) == STATUS[status][1], f"plans.txt:{lineno}"
        assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure("5/s", plan=name)
    assert info.value.param == "plan"


def test_rate_strings_take_the_tables_options() -> None:
    lim = cellrate.KeyedLimiter("10/s", algorithm="token_bucket",
                                plans={"pro": "100/s",
                                       "gold": cellrate.Limit("1000/s", algorithm="token_bucket")})
    assert lim.peek("k", plan="pro", now=0).limit == 100
    assert lim.peek("k", plan="gold", now=0).limit == 1000
    assert lim.peek("k", now=0).limit == 10
    assert lim.peek("k", plan="default", now=0).limit == 10


def test_bad_input() -> None:
    for plans in ({}, {"default": "1/s"}, {"x" * 32: "1/s"}, {f"p{i}": "1/s" for i in range(16)}):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.KeyedLimiter("10/s", plans=plans)
        assert info.value.param == "plans"
    for plans in (["pro"], "pro", {"pro": object()}, {1: "1/s"}):
        with pytest.raises(cellrate.InvalidArgumentType) as info:
            cellrate.KeyedLimiter("10/s", plans=plans)
        assert info.value.param == "plans"
    # a rate string takes the table's algorithm; a Limit has its own
    assert cellrate.KeyedLimiter(10, plans={"pro": "20/s"}, algorithm="fixed_window").allow("k")
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter("10/s", plans={"pro": cellrate.Limit("1/s", algorithm="fixed_window")})
    assert info.value.param == "plans"
    lim = cellrate.KeyedLimiter("10/s", plans={"pro": "100/s"})
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        lim.allow("k", plan=1)
    assert info.value.param == "plan"
    with pytest.raises(TypeError):
        cellrate.Limiter("10/s").allow(plan="pro")  # type: ignore[call-arg]
    plain = cellrate.KeyedLimiter("10/s")
    assert plain.allow("k", plan="default")
    with pytest.raises(cellrate.InvalidArgument):
        plain.allow("k", plan="pro")


def _in_other_process(path: pathlib.Path, plans: str, code: str) -> str:
    """Runs `code` in another Python process on the region at `path`
    (`lim`, a KeyedLimiter with `plans`); its output."""
    script = (f"import cellrate\nlim = cellrate.KeyedLimiter('10/s', burst=10, plans={plans}, "
              f"shared={str(path)!r})\n{code}")
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def test_shared_region_holds_the_plans(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "r"
    pro = "{'pro': cellrate.Limit(100, burst=20)}"
    lim = cellrate.KeyedLimiter("10/s", burst=10, plans={"pro": cellrate.Limit(100, burst=20)},
                                shared=str(path))
    assert sum(lim.allow("k", now=0) for _ in range(6)) == 6
    # upgraded in another process: the 6 units used carry into pro (counted, not fresh)
    out = _in_other_process(path, pro, "print(lim.check('k', now=0, plan='pro').remaining)")
    assert out == str(20 - 7)
    assert lim.check("k", now=0, plan="pro").remaining == 20 - 8
    assert sum(lim.allow("k", now=0, plan="pro") for _ in range(30)) == 20 - 8


def test_shared_region_another_table(tmp_path: pathlib.Path) -> None:
    # on the clock (a change happens at its opener's instant); per hour, so
    # that no unit comes back while the test runs, however slow the machine
    path = tmp_path / "r"
    lim = cellrate.KeyedLimiter("10/h", burst=10, shared=str(path),
                                plans={"pro": cellrate.Limit("100/h", burst=20)})
    assert sum(lim.allow("k", plan="pro") for _ in range(4)) == 4
    # the newest opener's table: pro changed live (its keys carry), gold new
    other = "{'pro': cellrate.Limit('50/h', burst=20), 'gold': cellrate.Limit('20/h', burst=5)}"
    script = ("import cellrate\n"
              f"lim = cellrate.KeyedLimiter('10/h', burst=10, plans={other}, shared={str(path)!r})\n"
              "print(lim.check('g', plan='gold').remaining)")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=120).stdout.strip()
    assert out == "4"
    assert lim.check("k", plan="pro").limit == 20
    # 4 units of pro carried through its change (counted): 20 - 5 after this one
    assert lim.check("k", plan="pro").remaining == 20 - 6
    assert lim.check("g", plan="gold").remaining == 5 - 2  # a name another opener gave
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.check("k", plan="platinum")
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument):  # another pro, on_change='refuse'
        cellrate.KeyedLimiter("10/h", burst=10, plans={"pro": cellrate.Limit("10/h", burst=20)},
                              shared=str(path), on_change="refuse")


def test_shared_region_bound(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "r"
    cellrate.KeyedLimiter("10/s", plans={f"p{i}": "1/s" for i in range(10)}, shared=str(path))
    with pytest.raises(cellrate.InvalidArgument) as info:  # 1 + 10 + 6 names
        cellrate.KeyedLimiter("10/s", plans={f"q{i}": "1/s" for i in range(6)}, shared=str(path))
    assert info.value.param == "plans"
    assert "16 plans" in str(info.value)


def test_priorities_are_the_tables() -> None:
    lim = cellrate.KeyedLimiter(10, burst=10, priorities={"high": 0.0, "low": 0.5},
                                plans={"pro": cellrate.Limit(100, burst=20)})
    admitted = sum(lim.allow("k", now=0, plan="pro", priority="low") for _ in range(30))
    assert admitted == 10  # half of pro's burst of 20
    assert sum(lim.allow("k", now=0, plan="pro", priority="high") for _ in range(30)) == 10


def moved_table() -> cellrate.KeyedLimiter:
    """Key "a" spent 2 of the default's burst of 2 (1/s) at 0: moved to "paid"
    (10/s, burst 5) at 0 it carries TAT' = ceil(2e9 * 1e8 / 1e9) = 2e8 ns,
    2 units used, 3 left (§8's rule)."""
    lim = cellrate.KeyedLimiter("1/s", burst=2, plans={"paid": cellrate.Limit("10/s", burst=5)})
    assert lim.allow("a", 2, now=0)
    return lim


def test_every_operation_on_a_key_takes_its_plan() -> None:
    lim = moved_table()
    assert lim.take("a", 10, now=0, plan="paid") == 3  # "default" would give none
    assert lim.peek("a", now=0, plan="paid").remaining == 0
    lim = moved_table()
    assert lim.reserve("a", 3, timeout=0, now=0, plan="paid") == 0.0
    assert lim.reserve("a", 1, timeout=0, now=0, plan="paid") is None
    lim = moved_table()
    decision = lim.charge("a", 3, now=0, plan="paid")
    assert (decision.allowed, decision.remaining, decision.limit) == (True, 0, 5)
    lim = moved_table()
    lim.refund("a", 2, now=0, plan="paid")
    assert lim.peek("a", now=0, plan="paid").remaining == 4  # idle again (the peek's unit aside)
    lim = moved_table()
    lim.anchor("a", 1, now=0, plan="paid")
    assert lim.peek("a", now=0, plan="paid").remaining == 2  # 2 carried, the peek's unit
    lim = moved_table()
    assert lim.follow("a", {"Retry-After": "30"}, 429, now=0, plan="paid")
    refusal = lim.peek("a", now=0, plan="paid")
    assert not refusal.allowed and refusal.limit == 5 and refusal.retry_after >= 29


def test_check_all_items_name_a_keys_plan() -> None:
    """An item may name its key's plan, (keyed, key, plan), as the Redis store's
    pairs do: each is what check(key, cost, plan=) alone answers, the decision's
    limit its plan's."""
    lim = cellrate.KeyedLimiter(10, burst=10, plans={"pro": cellrate.Limit(100, burst=20)})
    other = cellrate.KeyedLimiter(1000, burst=1000)
    d = cellrate.check_all([(lim, "k", "pro"), (other, "k")], 6, now=5.0)
    assert d.allowed and d.remaining == 14 and d.limit == 20
    assert lim.peek("k", now=5.0, plan="pro").remaining == 13  # committed under pro
    d = cellrate.check_all([(lim, "k", None), (other, "k")], 1, now=5.0)  # back to "default"
    assert d.allowed and d.limit == 10 and d.remaining == 10 - 6 - 1  # 6 units carried
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.check_all([(lim, "k", "gold")], now=5.0)
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgumentType) as type_info:
        cellrate.check_all([(lim, "k", "pro", 1)], now=5.0)
    assert type_info.value.param == "items"


def test_waits_take_the_plan() -> None:
    import asyncio

    # slow limits: no unit comes back while the test runs, however loaded the machine
    lim = cellrate.KeyedLimiter("1/min", burst=2,
                                plans={"paid": cellrate.Limit("10/min", burst=5)})
    assert lim.allow("a", 2)
    lim.wait("a", 2, timeout=0, plan="paid")
    asyncio.run(lim.acquire("a", 1, timeout=0, plan="paid"))
    with pytest.raises(cellrate.RateLimited):
        lim.wait("a", 1, timeout=0, plan="paid")
    with pytest.raises(cellrate.RateLimited):
        asyncio.run(lim.acquire("a", 1, timeout=0, plan="paid"))
    assert lim.peek("a", plan="paid").remaining == 0


def test_every_operation_refuses_an_unknown_plan() -> None:
    import asyncio

    lim = moved_table()
    calls = [lambda: lim.take("a", 1, plan="gold"), lambda: lim.reserve("a", plan="gold"),
             lambda: lim.charge("a", 1, plan="gold"), lambda: lim.refund("a", plan="gold"),
             lambda: lim.anchor("a", plan="gold"), lambda: lim.wait("a", plan="gold"),
             lambda: asyncio.run(lim.acquire("a", plan="gold")),
             lambda: lim.follow("a", {}, 200, plan="gold")]
    for call in calls:
        with pytest.raises(cellrate.InvalidArgument) as info:
            call()
        assert info.value.param == "plan"
        assert str(info.value) == STATUS["E_PLAN"][1]
    assert lim.peek("a", now=0).remaining == 0  # nothing moved, nothing spent


# -- where users take plans: the web policy (every adapter), the decorators -------------

from test_web import FACES, Clock  # noqa: E402

API_KEYS = {"k-paid": "paid"}  # looked up on the server: a client's header never names a plan


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_web_policy_plan_of_the_request(face) -> None:
    clock = Clock()
    app = face("1/hour", burst=2, now=clock, plans={"paid": cellrate.Limit("10/hour", burst=5)},
               plan=lambda request: API_KEYS.get(request.header("x-api-key") or ""))
    assert [app.request()[0] for _ in range(3)] == [200, 200, 429]
    status, headers, _ = app.request()
    assert headers["ratelimit-policy"] == '"default";q=2;w=7200'
    paid = {"X-Api-Key": "k-paid"}
    # the upgraded key carries its 2 units into "paid" (of 5): 3 more, not a fresh 5
    assert [app.request(headers=paid)[0] for _ in range(4)] == [200, 200, 200, 429]
    status, headers, _ = app.request(headers=paid)
    assert status == 429 and headers["ratelimit-policy"] == '"paid";q=5;w=1800'
    # a header the client makes up is no plan: it is decided under "default"
    status, headers, _ = app.request(headers={"X-Api-Key": "paid"})
    assert headers["ratelimit-policy"].startswith('"default";')


def test_web_policy_async_plan_function() -> None:
    from test_web import StarletteMiddleware

    async def plan(request: cellrate.web.Request) -> str | None:
        return API_KEYS.get(request.header("x-api-key") or "")

    app = StarletteMiddleware("1/hour", burst=2, now=Clock(), plan=plan,
                              plans={"paid": cellrate.Limit("10/hour", burst=5)})
    assert [app.request(headers={"X-Api-Key": "k-paid"})[0] for _ in range(6)] == [200] * 5 + [429]
    status, headers, _ = app.request(headers={"X-Api-Key": "k-paid"})
    assert headers["ratelimit-policy"] == '"paid";q=5;w=1800'


def test_web_policy_plan_mistakes() -> None:
    app = cellrate.wsgi.RateLimitMiddleware(lambda environ, start: [b""], "10/s",
                                            plans={"paid": "100/s"}, plan=lambda r: "gold")
    with pytest.raises(cellrate.InvalidArgument) as info:  # a server error, never another limit
        app({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1"},
            lambda *args: None)
    assert info.value.param == "plan" and str(info.value) == STATUS["E_PLAN"][1]

    async def coroutine_plan(request: object) -> str:
        return "paid"

    app = cellrate.wsgi.RateLimitMiddleware(lambda environ, start: [b""], "10/s",
                                            plans={"paid": "100/s"}, plan=coroutine_plan)
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        app({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1"},
            lambda *args: None)
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.web.Policy("10/s;100/minute", plans={"paid": "100/s"}, plan="paid")
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.web.Policy("10/s", plans={"paid": "100/s"}, plan=3)
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.web.Policy("10/s", plans={"p\u00e4id": "100/s"})  # also a policy name
    assert info.value.param == "name"


def test_web_policy_settles_under_the_plan() -> None:
    clock = Clock()
    policy = cellrate.web.Policy("1/hour", burst=2, now=clock, plan="paid",
                                 plans={"paid": cellrate.Limit("10/hour", burst=5)})
    request = cellrate.web.Request(policy, "GET", "/", None, {"REMOTE_ADDR": "192.0.2.1"})
    limits = policy.limits_for(request)
    assert policy.decide(limits, request).limit == 5
    charged = policy.charger(limits, request)(2)  # the endpoint's own charge
    assert charged.limit == 5 and charged.remaining == 2  # 1 + 2 of 5, under "paid"


def test_decorator_plan() -> None:
    @cellrate.limit("1/hour", burst=2, key=lambda user: user, block=False,
                    plans={"paid": cellrate.Limit("10/hour", burst=5)}, plan="paid")
    def call(user: str) -> int:
        return 1

    admitted = 0
    for _ in range(7):
        try:
            admitted += call("u")
        except cellrate.RateLimited as refused:
            assert refused.decision.limit == 5  # the plan's
    assert admitted == 5
    lim = cellrate.KeyedLimiter(1000, burst=2, plans={"paid": cellrate.Limit(1000, burst=4)})

    @cellrate.limit(limiter=lim, key=lambda user: user, plan="paid", timeout=5)
    def waits(user: str) -> None:
        pass

    for _ in range(6):  # blocked calls retry on the plan's retry_after
        waits("u")
    assert lim.stats()["admitted"] == 6
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.limit("10/s", plans={"paid": "100/s"}, plan="paid")
    assert info.value.param == "plans"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.limit(limiter=cellrate.Limiter(10), plan="paid")
    assert info.value.param == "plan"
