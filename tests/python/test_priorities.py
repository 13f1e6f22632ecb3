"""Priorities inside one limit (docs/design/priorities.md): tests/vectors/priorities.txt
through Limiter, KeyedLimiter and a shared region (gcra and token_bucket), the
class tables the core refuses, and every admission counted per class under
overload (threads, and processes on a shared region)."""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import threading
from dataclasses import dataclass, field

import pytest

import cellrate
from test_vectors import STATUS, seconds_match  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "priorities.txt"


def name_of(token: str) -> str | bytes:
    raw = bytes.fromhex(token[1:])
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


@dataclass
class Block:
    emission: int
    burst: int
    classes: dict[str, float] = field(default_factory=dict)
    reserve_ns: dict[str, int] = field(default_factory=dict)
    ops: list[tuple[int, list[str]]] = field(default_factory=list)


def read_vectors() -> tuple[list[Block], list[tuple[int, str, str, list[tuple[object, float]]]],
                            list[tuple[int, str, str | bytes]]]:
    blocks: list[Block] = []
    tables = []
    finds = []
    for lineno, line in enumerate(VECTORS.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split(" ")
        if word == "limit":
            blocks.append(Block(int(rest[0]), int(rest[1])))
        elif word == "class":
            blocks[-1].classes[rest[0]] = float(rest[1])
            blocks[-1].reserve_ns[rest[0]] = int(rest[2])
        elif word == "op":
            blocks[-1].ops.append((lineno, rest))
        elif word == "table":
            algorithm, status, count = rest[0], rest[1], int(rest[2])
            pairs = [(name_of(rest[3 + 2 * i]), float(rest[4 + 2 * i])) for i in range(count)]
            tables.append((lineno, algorithm, status, pairs))
        elif word == "find":
            finds.append((lineno, rest[0], name_of(rest[1])))
        elif word != "reserve":  # the rounding alone: the C tests read it
            raise AssertionError(f"priorities.txt:{lineno}: {line}")
    assert len(blocks) >= 6 and sum(len(b.ops) for b in blocks) > 900
    return blocks, tables, finds


BLOCKS, TABLES, FINDS = read_vectors()


def stores(block: Block, algorithm: str, tmp_path: pathlib.Path) -> list[tuple[str, object]]:
    kwargs = dict(period=block.emission / 1e9, burst=block.burst, algorithm=algorithm,
                  priorities=block.classes)
    path = tmp_path / f"{algorithm}-{block.emission}-{block.burst}"
    return [
        ("Limiter", cellrate.Limiter(1.0, **kwargs)),
        ("KeyedLimiter", cellrate.KeyedLimiter(1.0, capacity=64, **kwargs)),
        ("shared", cellrate.Limiter(1.0, shared=str(path), **kwargs)),
    ]


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_vectors(index: int, algorithm: str, tmp_path: pathlib.Path) -> None:
    block = BLOCKS[index]
    made = stores(block, algorithm, tmp_path)
    for _via, lim in made:
        assert lim.priorities == dict(sorted(block.classes.items()))
        assert lim.emission_ns == block.emission
    allow_only = cellrate.Limiter(1.0, period=block.emission / 1e9, burst=block.burst,
                                  algorithm=algorithm, priorities=block.classes)
    for lineno, (name, now, cost, commit, allowed, remaining, retry, reset, _after) in block.ops:
        now_s = int(now) / 1e9
        for via, lim in made:
            args = ("k",) if via == "KeyedLimiter" else ()
            method = lim.check if commit == "1" else lim.peek
            d = method(*args, int(cost), now=now_s, priority=name)
            where = f"{via} {algorithm}, priorities.txt:{lineno}"
            assert d.allowed == (allowed == "1"), where
            assert d.remaining == int(remaining), where
            assert seconds_match(d.retry_after, int(retry)), where
            assert seconds_match(d.reset_after, int(reset)), where
            assert d.limit == block.burst, where
        if commit == "1":
            got = allow_only.allow(int(cost), now=now_s, priority=name)
        else:
            got = allow_only.peek(int(cost), now=now_s, priority=name).allowed
        assert got == (allowed == "1"), f"allow, priorities.txt:{lineno}"


@pytest.mark.parametrize("lineno,algorithm,status,pairs", TABLES)
def test_tables(lineno: int, algorithm: str, status: str, pairs: list[tuple[object, float]]) -> None:
    classes = dict(pairs)
    if len(classes) != len(pairs) or any(isinstance(n, bytes) for n, _ in pairs):
        pytest.skip("a duplicate name or one that is not UTF-8: no Python mapping holds it")
    # a window takes no burst; a calendar quota counts per day
    kwargs = {} if algorithm.endswith("_window") or algorithm == "calendar" else {"burst": 10}
    rate = "10/day" if algorithm == "calendar" else 10
    if status == "OK":
        lim = cellrate.Limiter(rate, algorithm=algorithm, priorities=classes, **kwargs)
        assert lim.priorities == dict(sorted(classes.items()))
        return
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter(rate, algorithm=algorithm, priorities=classes, **kwargs)
    param, message = STATUS[status]
    assert str(info.value) == message and info.value.param == param, f"priorities.txt:{lineno}"


@pytest.mark.parametrize("lineno,status,name", FINDS)
def test_find(lineno: int, status: str, name: str | bytes) -> None:
    block = BLOCKS[-1]
    lim = cellrate.Limiter(10, burst=10, priorities=block.classes)
    if status == "OK":
        assert lim.peek(priority=name, now=0).allowed
        return
    if isinstance(name, bytes) or "\0" in name:
        pytest.skip("not a str")
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.allow(priority=name)
    assert str(info.value) == STATUS[status][1], f"priorities.txt:{lineno}"
    assert info.value.param == "priority"


def test_bad_input() -> None:
    lim = cellrate.Limiter(10, burst=10, priorities={"critical": 0, "bulk": 0.5})
    for bad, exc in ((3, cellrate.InvalidArgumentType), (b"bulk", cellrate.InvalidArgumentType),
                     ("Bulk", cellrate.InvalidArgument)):
        with pytest.raises(exc) as info:
            lim.allow(priority=bad)
        assert info.value.param == "priority"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter(10).check("k", priority="bulk")
    assert str(info.value) == STATUS["E_PRIORITY_NONE"][1]
    for bad in ([("critical", 0)], "critical", 5):
        with pytest.raises(cellrate.InvalidArgumentType) as info:
            cellrate.Limiter(10, priorities=bad)
        assert info.value.param == "priorities"
    for bad in ({"critical": 0, 7: 0.5}, {"critical": "0"}):
        with pytest.raises(cellrate.InvalidArgumentType) as info:
            cellrate.Limiter(10, priorities=bad)
        assert info.value.param == "priorities"
    assert lim.peek(priority=None).allowed  # None: no class, the whole burst
    with pytest.raises(TypeError):
        lim.reserve(priority="bulk")  # decisions take a class; reservations do not


def test_live_change_keeps_the_classes() -> None:
    lim = cellrate.Limiter(10, burst=10, priorities={"critical": 0, "bulk": 0.5})
    lim.reconfigure(10, burst=20, now=0)
    assert lim.priorities == {"bulk": 0.5, "critical": 0.0}
    assert sum(lim.allow(now=0, priority="bulk") for _ in range(15)) == 10
    assert sum(lim.allow(now=0, priority="critical") for _ in range(15)) == 10


def test_region_holds_its_classes(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "region")
    cellrate.Limiter(10, burst=10, shared=path, priorities={"critical": 0, "bulk": 0.5})
    for other in ({"critical": 0, "bulk": 0.4}, None):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.Limiter(10, burst=10, shared=path, priorities=other)
        assert str(info.value).startswith(STATUS["E_SHARED_PRIORITIES"][1])


BURST = 2000
CLASSES = {"critical": 0.0, "normal": 0.2, "bulk": 0.5}


def hammer(lim: cellrate.Limiter, priority: str, tries: int, counts: list[int]) -> None:
    admitted = 0
    for _ in range(tries):
        admitted += lim.allow(now=0, priority=priority)
    counts.append(admitted)


def test_overload_threads() -> None:
    """All at one instant: exact counts whatever the interleaving."""
    lim = cellrate.KeyedLimiter(1000, burst=BURST, priorities=CLASSES)
    keyed = lim  # one key of a keyed table, the web policy's store
    counts: dict[str, list[int]] = {"bulk": [], "critical": []}

    def run(priority: str) -> None:
        admitted = 0
        for _ in range(3 * BURST // 2):
            admitted += keyed.allow("k", now=0, priority=priority)
        counts[priority].append(admitted)

    threads = [threading.Thread(target=run, args=("bulk",)) for _ in range(3)]
    threads += [threading.Thread(target=run, args=("critical",)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bulk, critical = sum(counts["bulk"]), sum(counts["critical"])
    assert bulk + critical == BURST
    assert bulk <= BURST // 2 < critical + 1
    assert lim.stats()["admitted"] == BURST


def _child(path: str, priority: str, queue: multiprocessing.Queue) -> None:
    lim = cellrate.Limiter(1000, burst=BURST, shared=path, priorities=CLASSES)
    counts: list[int] = []
    hammer(lim, priority, 3 * BURST // 2, counts)
    queue.put((priority, counts[0]))


def test_overload_processes(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "overload")
    cellrate.Limiter(1000, burst=BURST, shared=path, priorities=CLASSES)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    children = [context.Process(target=_child, args=(path, p, queue))
                for p in ("bulk", "bulk", "bulk", "critical")]
    for child in children:
        child.start()
    results = [queue.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    bulk = sum(n for p, n in results if p == "bulk")
    critical = sum(n for p, n in results if p == "critical")
    assert bulk + critical == BURST
    assert bulk <= BURST // 2 <= critical
    assert os.path.exists(path)


# -- the web policy, every adapter (sync and async) -------------------------------

from test_web import FACES, Clock  # noqa: E402


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_web_policy_priority_of_the_request(face) -> None:
    clock = Clock()
    app = face("1/hour", burst=10, now=clock, priorities={"critical": 0, "bulk": 0.5},
               priority=lambda request: request.header("x-priority") or "critical")
    bulk = [app.request(headers={"X-Priority": "bulk"})[0] for _ in range(7)]
    assert bulk == [200] * 5 + [429] * 2  # bulk stops at half the burst
    status, headers, _ = app.request(headers={"X-Priority": "bulk"})
    assert status == 429 and headers["ratelimit"].endswith("r=0;t=18000")
    critical = [app.request()[0] for _ in range(6)]
    assert critical == [200] * 5 + [429]  # the reserve was critical's


def test_web_policy_priority_mistakes() -> None:
    classes = {"critical": 0, "bulk": 0.5}
    app = cellrate.wsgi.RateLimitMiddleware(lambda environ, start: [b""], "10/s",
                                            priorities=classes, priority="urgent")
    with pytest.raises(cellrate.InvalidArgument) as info:  # the class is the decision's to find
        app({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1"},
            lambda *args: None)
    assert info.value.param == "priority"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.web.Policy("10/s;100/minute", priorities=classes, priority="bulk")
    assert str(info.value) == STATUS["E_PRIORITY_SEVERAL"][1]
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.web.Policy("10/s", priorities=classes, priority=3)
    assert info.value.param == "priority"


def test_decorator_priority() -> None:
    @cellrate.limit("1/hour", burst=10, priorities={"critical": 0, "bulk": 0.5}, priority="bulk",
                    block=False)
    def bulk() -> int:
        return 1

    admitted = 0
    for _ in range(7):
        try:
            admitted += bulk()
        except cellrate.RateLimited as refused:
            assert 3599 < refused.retry_after <= 3600  # the class's, not the limit's
    assert admitted == 5
    lim = cellrate.Limiter(1000, burst=4, priorities={"critical": 0, "bulk": 0.5})

    @cellrate.limit(limiter=lim, priority="bulk", timeout=5)
    def waits() -> None:
        pass

    for _ in range(4):  # 2 at once, then one per ms: blocked calls retry on retry_after
        waits()
    assert lim.stats()["admitted"] == 4
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.limit(limiter=lim, priority=3)
    assert info.value.param == "priority"
    with pytest.raises(cellrate.InvalidArgument) as info:  # the class is the decision's to find
        cellrate.limit(limiter=lim, priority="urgent", block=False)(lambda: None)()
    assert info.value.param == "priority"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.limit("10/s;100/minute", priorities={"a": 0}, priority="a")
    assert info.value.param == "priority"
