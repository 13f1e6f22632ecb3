"""Shared helpers for the Python suite.

The suite tests the installed package: `make test-py` installs each
interpreter's wheel outside the tree, `make py` installs into .venv; or an
in-place build put first on the path with PYTHONPATH=python (but for
cellrate.redis and cellrate.share: their scripts, redis/ in the tree, are
package data that only a build puts in the package).
"""

import asyncio
import math
import multiprocessing
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time

import pytest

import cellrate

# grpcio's fork support restarts its poller in a forked child, which meets the
# descriptors a subprocess closes before exec and aborts it (grpc/grpc#43055):
# a `make` run by test_packaging after test_grpc died so. The suite's forks
# never use gRPC in the child, so it goes without (before any test imports grpc).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent

NS_PER_S = 1_000_000_000


def ns(seconds: float) -> int:
    """A time in seconds as the nearest whole nanosecond, for exact comparison."""
    return round(seconds * NS_PER_S)


def core_status(name: str) -> tuple[str, str]:
    """The parameter and message of a status of the core's table
    (tests/vectors/status.txt): the words every face must use."""
    for line in (REPO / "tests" / "vectors" / "status.txt").read_text("utf-8").splitlines():
        head, _, message = line.partition(" |")
        if head.split(" ")[2:3] == [name]:
            return head.split(" ")[4], message
    raise LookupError(f"no status {name} in tests/vectors/status.txt")


@pytest.fixture
def never_sleeps(monkeypatch):
    """Makes any sleep of the waits (cellrate._wait: time.sleep, asyncio.sleep)
    fail the test: a call that must refuse at once is seen not to sleep,
    however slowly a busy machine runs it, where a stopwatch could not tell a
    sleep from a pause. asyncio.sleep(0), a turn of the loop, stays allowed."""
    import types

    from cellrate import _wait

    def forbidden(seconds):
        raise AssertionError(f"slept {seconds} s where it must refuse at once")

    real_asyncio_sleep = asyncio.sleep

    async def forbidden_async(seconds, *args, **kwargs):
        if seconds > 0:
            forbidden(seconds)
        return await real_asyncio_sleep(seconds, *args, **kwargs)

    monkeypatch.setattr(_wait, "time", types.SimpleNamespace(monotonic=time.monotonic,
                                                             sleep=forbidden))
    monkeypatch.setattr(asyncio, "sleep", forbidden_async)


async def ticks_during(awaitable):
    """What `awaitable` gives and how many times another task ran meanwhile,
    sleeping 10 ms between ticks: a wait that blocked the loop lets it tick
    once at most."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    try:
        result = await awaitable
    finally:
        stop.set()
        await task
    return result, ticks


class Recording:
    """A Limiter (or KeyedLimiter) whose reservations note, in the order they
    were made, the thread that made each, its delay, and the key's TAT right
    after it (monotonic s: a probe's reset_after at 0; with burst 1 and cost
    1 the reserved unit comes due one T before it); a lock makes the
    reservation and the notes one step. The waits of the compiled type run on
    it as on the limiter: _wait.limiter_wait(recording)."""

    def __init__(self, limiter):
        self.limiter = limiter
        self.lock = threading.Lock()
        self.reserved = []
        self.delays = []
        self.tats = []

    def reserve(self, *args, **kwargs):  # (*key, cost, ...)
        with self.lock:
            delay = self.limiter.reserve(*args, **kwargs)
            self.tats.append(self.limiter.peek(*args[:-1], 0, now=0.0).reset_after)
            self.reserved.append(threading.current_thread())
            self.delays.append(delay)
            return delay

    def __getattr__(self, name):
        return getattr(self.limiter, name)


class Books:
    """One deciding thread's (or process's) books of a GCRA key, for a floor on
    what several of them admitted on a real clock whatever the schedule (as
    tests/c/books.h for the C tests, which says why): each decision of cost 1
    bracketed by two readings of the clock the limit decides on; TAT is then
    at least `before` + T after an admission, + tau - T after a refusal, and
    the key may have lain idle only where no decider ruled it out."""

    def __init__(self, since: float, emission: float, tolerance: float):
        self.since, self.emission, self.tolerance = since, emission, tolerance
        self.first_after = self.last_after = self.busy_until = None
        self.idle = []  # [from, to] spans, sorted and disjoint

    def record(self, before: float, after: float, allowed: bool) -> None:
        if self.first_after is None:
            self.first_after = after
            self.add_idle(self.since, after)
        elif after > self.busy_until:
            self.add_idle(self.busy_until, after)
        self.last_after = after
        busy = before + (self.emission if allowed else self.tolerance - self.emission)
        self.busy_until = busy if self.busy_until is None else max(self.busy_until, busy)

    def add_idle(self, start: float, end: float) -> None:
        if self.idle and start <= self.idle[-1][1]:
            self.idle[-1][1] = end
        else:
            self.idle.append([start, end])


def books_fewest(books: list, slack: float) -> int:
    """The fewest units the deciders of `books` admitted on their key, `slack`
    (seconds) allowed for the clock the decisions read against the brackets'."""
    deciders = [b for b in books if b.first_after is not None]
    if not deciders:
        return 0
    first = min(b.first_after for b in deciders)
    last = max(b.last_after for b in deciders)
    tat = max(b.busy_until for b in deciders)
    edges = []
    for b in deciders:
        if last > b.busy_until:
            b.add_idle(b.busy_until, last)  # after its last decision
        edges += [(start, 1) for start, _ in b.idle] + [(end, -1) for _, end in b.idle]
    edges.sort()
    idle, open_spans = 0.0, 0
    for (at, step), (following, _) in zip(edges, edges[1:]):
        open_spans += step  # the spans open between this edge and the next
        if open_spans == len(deciders):  # from the first decision on
            idle += max(0.0, following - max(at, first))
    emission = deciders[0].emission
    return math.ceil((tat - first - idle - slack) / emission)


def rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def rss_growth(step, warm: int, count: int, rounds: int = 3) -> int:
    """The least RSS growth over `rounds` runs of `count` calls of `step(i)`, after `warm`.

    A leak grows the RSS in every round; another thread's passing allocation (a pool or a
    server an earlier test left to wind down) grows it in one at most.
    """
    for i in range(warm):
        step(i)
    least = None
    for _ in range(rounds):
        before = rss_bytes()
        for i in range(count):
            step(i)
        grown = rss_bytes() - before
        least = grown if least is None else min(least, grown)
    return least


def reap(pid: int, timeout: float = 120.0) -> int:
    """os.waitpid(pid, 0)'s status, waiting at most `timeout` s: a forked child that has
    not ended by then (a fork from a process with threads can leave a lock held in the
    child) is killed, and the test fails rather than hangs."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child {pid} had not ended after {timeout} s")
        time.sleep(0.005)


def run_forked(target, arg_sets) -> list:
    """target(*args, queue) in a forked process for each args of `arg_sets`: what
    they put on the queue (one value each, in the order they came), once every
    process has exited 0."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=tuple(args) + (queue,)) for args in arg_sets]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return results


@pytest.fixture
def region_dir():
    """A fresh folder on tmpfs, where regions normally live, removed afterwards."""
    folder = pathlib.Path(tempfile.mkdtemp(
        prefix="cellrate-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def gil_enabled() -> bool:
    """Whether the GIL is on (always, before free-threaded CPython 3.13)."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else is_enabled()


def pytest_report_header(config):
    return (f"cellrate {cellrate.__version__} from {pathlib.Path(cellrate.__file__).parent}"
            f", GIL {'on' if gil_enabled() else 'off'}")


# The modules whose subject is a server the tests start (Redis, Sentinel,
# Cluster; uvicorn and gunicorn workers; the fake provider the outbound clients
# call; the fleet share's members): make test-py runs them on the first and the
# last interpreter it tests, and on the free-threaded one; the interpreters
# between set CELLRATE_SERVERS_ON_ENDS=1 (tools/wheels/run.sh), where the
# extension, the faces and the adapters are still tested in process.
SERVER_MODULES = frozenset({
    "test_redis", "test_redis_batch", "test_redis_calendar", "test_redis_concurrency",
    "test_redis_failover", "test_redis_fallback", "test_redis_penalty", "test_redis_plans",
    "test_redis_priorities", "test_redis_wipe", "test_share", "test_valkey", "test_web_servers",
    "test_priority_servers", "test_quota_servers", "test_plans_servers", "test_outbound"})


# The modules (and module::test) whose subject is not the extension without
# the GIL (its threads, the shared regions, the stores' thread safety) but what
# no interpreter changes: the docs' blocks, the package's files and extras, the
# command line, the examples' scripts, the benchmark's report, and the
# single-threaded differentials against the reference model (Hypothesis: the
# core's arithmetic, the same C on every build). Every interpreter of make
# test-py runs them; make test-ft (tests/freethreaded/run.sh) sets
# CELLRATE_FREE_THREADED=1 and leaves them there, as it leaves the reference
# model (tests/model) and test_typing.py. Every test that counts admissions
# under threads or processes runs there.
NOT_FREE_THREADED = frozenset({
    "test_docs", "test_packaging", "test_extras", "test_cli", "test_examples",
    "test_bench_report", "test_property", "test_catalogue::test_against_model",
    "test_catalogue::test_limits_against_model"})


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "on_ends(why): a long test whose subject does not depend on the "
        "interpreter (the core's shared regions under processes, say): skipped where "
        "CELLRATE_SERVERS_ON_ENDS=1 (the interpreters between the first and the last of "
        "make test-py), as SERVER_MODULES; `why` says what its subject is")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CELLRATE_FREE_THREADED"):
        not_here = pytest.mark.skip(reason="its subject does not depend on the GIL: run on "
                                    "every interpreter of make test-py (CELLRATE_FREE_THREADED)")
        for item in items:
            module = item.module.__name__ if item.module is not None else ""
            if module in NOT_FREE_THREADED or \
                    f"{module}::{getattr(item, 'originalname', item.name)}" in NOT_FREE_THREADED:
                item.add_marker(not_here)
    if not os.environ.get("CELLRATE_SERVERS_ON_ENDS"):
        return
    skip = pytest.mark.skip(reason="a server's test: run on the first and last interpreter "
                            "(CELLRATE_SERVERS_ON_ENDS)")
    for item in items:
        on_ends = item.get_closest_marker("on_ends")
        if on_ends is not None:
            item.add_marker(pytest.mark.skip(
                reason=f"{on_ends.args[0]}: run on the first and last interpreter and the "
                "free-threaded one (CELLRATE_SERVERS_ON_ENDS)"))
        elif item.module is not None and item.module.__name__ in SERVER_MODULES:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """`make test-ft` (CELLRATE_REQUIRE_NO_GIL=1): the GIL stayed off throughout."""
    if os.environ.get("CELLRATE_REQUIRE_NO_GIL") == "1" and gil_enabled():
        print("\nFAILED: the GIL was on by the end of the free-threaded run", file=sys.stderr)
        session.exitstatus = 1


@pytest.fixture(scope="module")
def server():
    """A Redis server of the module's own on loopback (redis_servers.py), for its tests
    that take `client`; a module with servers of other kinds defines its own."""
    from redis_servers import redis_server
    with redis_server() as srv:
        yield srv


@pytest.fixture
def client(server):
    """A redis-py client of `server`, emptied, the server marked in service (an empty
    Redis is a wiped one to on_wipe="refuse": test_redis_wipe.py)."""
    from redis_servers import in_service
    from test_redis import client_for
    c = client_for(server.port)
    c.flushall()
    in_service(c)
    yield c
    c.close()


@pytest.fixture(params=["Limiter", "KeyedLimiter"])
def one_key(request):
    """A factory for a single-key view of either limiter type.

    The returned function builds a limiter and returns an object whose
    allow/check/peek/reset take no key: for KeyedLimiter they use one fixed
    key, so the same scenario runs through both types.
    """

    def make(*args, **kwargs):
        if request.param == "Limiter":
            return cellrate.Limiter(*args, **kwargs)
        return SingleKey(cellrate.KeyedLimiter(*args, **kwargs), b"the-key")

    make.kind = request.param
    return make


class SingleKey:
    """One key of a KeyedLimiter, shaped like a Limiter."""

    def __init__(self, keyed, key):
        self.keyed = keyed
        self.key = key

    def allow(self, cost=1, *, now=None):
        return self.keyed.allow(self.key, cost, now=now)

    def check(self, cost=1, *, now=None):
        return self.keyed.check(self.key, cost, now=now)

    def peek(self, cost=1, *, now=None):
        return self.keyed.peek(self.key, cost, now=now)

    def reset(self):
        self.keyed.reset(self.key)

    def __getattr__(self, name):
        return getattr(self.keyed, name)
