"""Turns the raw results of one `make bench` run into bench/results/.

    python report.py RAW_DIR OUT_DIR --reps N

Reads every *.jsonl under RAW_DIR (one JSON object per line, written by the
harnesses), and writes OUT_DIR/results.md (the table: scenario, ns/op, ratio
to its reference, target, met?), OUT_DIR/chart.png, OUT_DIR/machine.txt and
OUT_DIR/performance.md (the headline ratios), which it also writes into the
documentation's Performance page (docs/performance.md) between its markers;
prints the table. Every ratio compares two numbers of the same run. The README
is never written: it links the Performance page.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


def load(raw_dir: str) -> Dict[str, dict]:
    results: Dict[str, dict] = {}
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    record = json.loads(line)
                    # each run's ns per call, in the order of the rounds
                    # (nginx: each rep's worker CPU time per request)
                    record["rep_ns"] = record.get("runs_ns_per_op") or record.get("rep_ns")
                    if record["rep_ns"] and "group" not in record and record["id"].startswith(
                            "nginx."):
                        record["group"] = "nginx"  # every scenario back to back in each rep
                    results[record["id"]] = record
    return results


# ---------------------------------------------------------------------------
# The rows of the table.
#
# kind "abs":     a measurement shown for what it is (ratio column empty)
# kind "x_ref":   ratio = ns(id) / ns(ref): how many times the reference's time
# kind "faster":  ratio = ns(ref) / ns(id): how many times the reference's
#                 time this scenario is faster (throughput ratio)
# kind "bytes":   bytes per tracked key
# A target is (operator, value) on the ratio (or bytes); None is informative.


class Row:
    def __init__(self, label: str, sid: str, kind: str = "abs", ref: Optional[str] = None,
                 ref_label: str = "", target: Optional[tuple] = None, chart: str = ""):
        self.label, self.sid, self.kind, self.ref = label, sid, kind, ref
        self.ref_label, self.target, self.chart = ref_label, target, chart


def c_rows() -> List[Row]:
    gov_q = "rust.governor.direct.quanta"
    gov_m = "rust.governor.direct.monotonic"
    aero = "rust.aerorate.direct"
    rows = [
        Row("floor: clock_gettime(CLOCK_MONOTONIC)", "c.floor.clock", chart="floor"),
        Row("floor: rdtscp + atomic load (a turn-away, clock='monotonic')", "c.floor.rdtscp_load",
            chart="floor"),
        Row("floor: rdtscp + load + compare-and-swap (an admission, clock='monotonic')",
            "c.floor.rdtscp_cas", chart="floor"),
        Row("floor: rdtsc + atomic load (a turn-away, default clock)", "c.floor.rdtsc_load",
            chart="floor"),
        Row("floor: rdtsc + load + compare-and-swap (an admission, default clock)",
            "c.floor.rdtsc_cas", chart="floor"),
        Row("cellrate Limiter, allow path, clock='monotonic'", "c.cellrate.limiter.allow", "x_ref",
            "c.floor.rdtscp_cas", "rdtscp + load + CAS floor", ("<=", 1.25), chart="cellrate"),
        Row("cellrate Limiter, deny path, clock='monotonic'", "c.cellrate.limiter.deny", "x_ref",
            "c.floor.rdtscp_load", "rdtscp + load floor", ("<=", 1.25), chart="cellrate"),
        Row("cellrate Limiter, allow path (default clock: fast)", "c.cellrate.limiter.allow_fast_clock",
            "x_ref", "c.floor.fast_clock", "cr_fast_clock_ns()", chart="cellrate"),
        Row("cellrate Limiter, deny path (default clock: fast)", "c.cellrate.limiter.deny_fast_clock",
            "x_ref", "c.floor.fast_clock", "cr_fast_clock_ns()", chart="cellrate"),
        Row("cellrate Limiter, allow path (default clock: fast), vs its floor",
            "c.cellrate.limiter.allow_fast_clock", "x_ref", "c.floor.rdtsc_cas",
            "rdtsc + load + CAS floor", ("<=", 1.1), chart="cellrate"),
        Row("cellrate Limiter, deny path (default clock: fast), vs its floor",
            "c.cellrate.limiter.deny_fast_clock", "x_ref", "c.floor.rdtsc_load",
            "rdtsc + load floor", ("<=", 1.1)),
        Row("cellrate Limiter, allow path in a priority class (\"bulk\", reserve 0.2; default "
            "clock)", "c.cellrate.limiter.allow_priority", "x_ref",
            "c.cellrate.limiter.allow_fast_clock", "plain allow, same clock", ("<=", 1.03)),
        Row("cellrate Limiter check() (full decision), allow path, clock='monotonic'",
            "c.cellrate.limiter.check.allow",
            "x_ref", "c.floor.rdtscp_cas", "rdtscp + load + CAS floor", chart="cellrate"),
        Row("cellrate Limiter check() (full decision), deny path, clock='monotonic'",
            "c.cellrate.limiter.check.deny",
            "x_ref", "c.floor.rdtscp_load", "rdtscp + load floor", chart="cellrate"),
        Row("context: clock_gettime + atomic load", "c.floor.clock_load"),
        Row("context: clock_gettime + load + compare-and-swap", "c.floor.clock_cas"),
        Row("governor direct, allow (default clock: quanta TSC)", f"{gov_q}.allow", chart="peer"),
        Row("governor direct, deny (default clock: quanta TSC)", f"{gov_q}.deny", chart="peer"),
        Row("governor direct, allow (MonotonicClock)", f"{gov_m}.allow", chart="peer"),
        Row("governor direct, deny (MonotonicClock)", f"{gov_m}.deny", chart="peer"),
        Row("aerorate direct, allow (default clock: Instant)", f"{aero}.allow", chart="peer"),
        Row("aerorate direct, deny (default clock: Instant)", f"{aero}.deny", chart="peer"),
        Row("cellrate Limiter allow, clock='monotonic', vs governor direct allow (default clock)",
            "c.cellrate.limiter.allow", "x_ref", f"{gov_q}.allow", "governor direct allow",),
        Row("cellrate Limiter deny, clock='monotonic', vs governor direct deny (default clock)",
            "c.cellrate.limiter.deny", "x_ref", f"{gov_q}.deny", "governor direct deny",),
        Row("cellrate Limiter allow, clock='monotonic', vs aerorate direct allow (default clock)",
            "c.cellrate.limiter.allow", "x_ref", f"{aero}.allow", "aerorate direct allow",),
        Row("cellrate Limiter deny, clock='monotonic', vs aerorate direct deny (default clock)",
            "c.cellrate.limiter.deny", "x_ref", f"{aero}.deny", "aerorate direct deny",),
        Row("cellrate Limiter allow (default clock: fast), vs governor direct allow (default clock)",
            "c.cellrate.limiter.allow_fast_clock", "x_ref", f"{gov_q}.allow",
            "governor direct allow", ("<=", 1.0)),
        Row("cellrate Limiter deny (default clock: fast), vs governor direct deny (default clock)",
            "c.cellrate.limiter.deny_fast_clock", "x_ref", f"{gov_q}.deny",
            "governor direct deny", ("<=", 1.0)),
        Row("cellrate Limiter allow (default clock: fast), vs aerorate direct allow (default clock)",
            "c.cellrate.limiter.allow_fast_clock", "x_ref", f"{aero}.allow",
            "aerorate direct allow", ("<=", 1.0)),
        Row("cellrate Limiter deny (default clock: fast), vs aerorate direct deny (default clock)",
            "c.cellrate.limiter.deny_fast_clock", "x_ref", f"{aero}.deny",
            "aerorate direct deny", ("<=", 1.0)),
        Row("cellrate Limiter allow, clock='monotonic', vs governor direct allow (MonotonicClock)",
            "c.cellrate.limiter.allow", "x_ref", f"{gov_m}.allow", "governor allow, same clock"),
        Row("cellrate Limiter deny, clock='monotonic', vs governor direct deny (MonotonicClock)",
            "c.cellrate.limiter.deny", "x_ref", f"{gov_m}.deny", "governor deny, same clock"),
        # where the time goes: the clock
        Row("clock: rdtsc (raw TSC, unscaled)", "c.floor.rdtsc"),
        Row("clock: rdtscp", "c.floor.rdtscp"),
        Row("clock: CLOCK_MONOTONIC_COARSE (tick resolution)", "c.floor.clock_coarse"),
        Row("clock: cr_clock_ns() (the core's clock call)", "c.floor.cr_clock_ns"),
        Row("clock: cr_fast_clock_ns() (the core's fast clock, clock='fast')",
            "c.floor.fast_clock", chart="floor"),
        Row("clock: Rust Instant::now()", "rust.floor.instant_now"),
        Row("clock: quanta (governor's default clock)", "rust.floor.quanta_now"),
        Row("cellrate Limiter allow, `now` passed in (no clock read)",
            "c.cellrate.limiter.allow_given_now"),
        Row("cellrate Limiter deny, `now` passed in (no clock read)",
            "c.cellrate.limiter.deny_given_now"),
    ]
    rows += [
        Row("floor: a keyed allow's work done the cheapest way (same table, keys, hash, "
            "clock='monotonic' read, one 16-byte CAS)", "c.floor.keyed_slot", chart="floor"),
        Row("floor: the same with the default clock (fast)", "c.floor.keyed_slot_fast_clock"),
    ]
    for shape, name in (("int", "integer keys"), ("str", "short string keys")):
        mono = ", clock='monotonic'," if shape == "int" else ""
        rows += [
            Row(f"cellrate KeyedLimiter, 1M {name}, allow{mono[:-1]}", f"c.cellrate.keyed.{shape}",
                "x_ref",
                "c.floor.keyed_slot", "keyed slot floor, same clock",
                ("<=", 1.05) if shape == "int" else None, chart="cellrate"),
            Row(f"governor keyed (dashmap, quanta), 1M {name}",
                f"rust.governor.keyed.quanta.{shape}", chart="peer"),
            Row(f"governor keyed (dashmap, MonotonicClock), 1M {name}",
                f"rust.governor.keyed.monotonic.{shape}", chart="peer"),
            Row(f"aerorate keyed, 1M {name}", f"rust.aerorate.keyed.{shape}", chart="peer"),
            Row(f"cellrate KeyedLimiter{mono} vs governor keyed (default clock), {name}",
                f"c.cellrate.keyed.{shape}", "faster", f"rust.governor.keyed.quanta.{shape}",
                "governor keyed throughput"),
            Row(f"cellrate KeyedLimiter{mono} vs aerorate keyed, {name}",
                f"c.cellrate.keyed.{shape}", "faster", f"rust.aerorate.keyed.{shape}",
                "aerorate keyed throughput"),
        ]
        if shape == "int":
            fast = "c.cellrate.keyed.int_fast_clock"
            rows += [
                Row(f"cellrate KeyedLimiter, 1M {name}, allow (default clock: fast)", fast, "x_ref",
                    "c.floor.keyed_slot_fast_clock", "keyed slot floor, same clock", ("<=", 1.05),
                    chart="cellrate"),
                Row(f"cellrate KeyedLimiter (default clock: fast), vs governor keyed (default clock), {name}",
                    fast, "faster", "rust.governor.keyed.quanta.int", "governor keyed throughput"),
                Row(f"cellrate KeyedLimiter (default clock: fast), vs aerorate keyed, {name}", fast,
                    "faster", "rust.aerorate.keyed.int", "aerorate keyed throughput"),
            ]
            rows += [
                Row(f"cellrate KeyedLimiter with plans, 1M {name}, allow, {keys} (default clock)",
                    f"c.cellrate.keyed.plans.{plans}", "x_ref", fast,
                    "keyed allow without plans, same clock", ("<=", 1.05))
                for plans, keys in (("default", "every key on \"default\""),
                                    ("half", "half the keys on another plan"),
                                    ("pro", "every key on another plan"))
            ]
            rows += [
                Row(f"cellrate KeyedLimiter, 1M {name}, allow in a priority class (\"bulk\", "
                    "reserve 0.2; default clock)", "c.cellrate.keyed.priority", "x_ref", fast,
                    "keyed allow without classes, same clock", ("<=", 1.03)),
            ]
    rows += [
        Row("control: 1 thread of clock reads (nothing shared)", "c.floor.threads.clock.1t"),
        Row("control: 2 threads of clock reads (nothing shared)", "c.floor.threads.clock.2t",
            "faster", "c.floor.threads.clock.1t", "1 thread"),
        Row("control: 1 thread of the keyed slot floor", "c.floor.threads.keyed_slot.1t"),
        Row("control: 2 threads of the keyed slot floor (own halves of the keys)",
            "c.floor.threads.keyed_slot.2t", "faster", "c.floor.threads.keyed_slot.1t", "1 thread"),
    ]
    rows += [
        Row("control (Rust harness): 1 thread of clock reads", "rust.floor.threads.instant_now.1t"),
        Row("control (Rust harness): 2 threads of clock reads", "rust.floor.threads.instant_now.2t",
            "faster", "rust.floor.threads.instant_now.1t", "1 thread"),
    ]
    for lib, prefix in (("cellrate", "c.cellrate"), ("governor", "rust.governor"),
                        ("aerorate", "rust.aerorate")):
        target = (">=", 1.7) if lib == "cellrate" else None
        rows += [
            Row(f"{lib}: 1 thread, one key", f"{prefix}.threads.one_key.1t"),
            Row(f"{lib}: 2 threads, one key (total throughput)", f"{prefix}.threads.one_key.2t",
                "faster", f"{prefix}.threads.one_key.1t", "1 thread"),
            Row(f"{lib}: 1 thread, 1M keys", f"{prefix}.threads.distinct.1t"),
            Row(f"{lib}: 2 threads, distinct keys (total throughput)",
                f"{prefix}.threads.distinct.2t", "faster", f"{prefix}.threads.distinct.1t",
                "1 thread", target),
        ]
    rows += [
        Row("cellrate shared KeyedLimiter (/dev/shm), 1 process, 1M keys",
            "c.cellrate.shared.distinct.1p", "x_ref", "c.cellrate.threads.distinct.1t",
            "in-process, 1 thread", ("<=", 1.5), chart="cellrate"),
        Row("cellrate shared KeyedLimiter (/dev/shm), 2 processes, distinct keys "
            "(total throughput)", "c.cellrate.shared.distinct.2p", "x_ref",
            "c.cellrate.threads.distinct.2t", "in-process, 2 threads", ("<=", 1.5)),
        Row("cellrate shared KeyedLimiter: 2 processes against 1 (total throughput)",
            "c.cellrate.shared.distinct.2p", "faster", "c.cellrate.shared.distinct.1p",
            "1 process"),
    ]
    return rows


def memory_rows() -> List[Row]:
    return [
        Row("cellrate KeyedLimiter (C)", "mem.cellrate.keyed", "bytes", target=("<=", 32)),
        Row("cellrate KeyedLimiter with plans (C), half the keys on another plan",
            "mem.cellrate.keyed.plans", "bytes", target=("<=", 32)),
        Row("cellrate KeyedLimiter (from Python)", "mem.cellrate", "bytes"),
        Row("governor keyed (dashmap)", "mem.governor.keyed", "bytes"),
        Row("throttled-py MemoryStore (GCRA)", "mem.throttled_gcra", "bytes"),
        Row("limits MemoryStorage (moving window)", "mem.limits_moving_window", "bytes"),
        Row("limits MemoryStorage (sliding window counter)", "mem.limits_sliding_window_counter",
            "bytes"),
    ]


PY_PEERS = [
    ("limits_fixed_window", "limits, fixed window"),
    ("limits_moving_window", "limits, moving window"),
    ("limits_sliding_window_counter", "limits, sliding window counter"),
    ("throttled_gcra", "throttled-py, GCRA"),
    ("throttled_token_bucket", "throttled-py, token bucket"),
    ("pyrate_limiter_in_memory", "pyrate-limiter, in-memory bucket"),
    ("token_bucket", "token-bucket"),
]
PY_SCENARIOS = [
    ("limiter.allow", "Limiter.allow()"),
    ("limiter.check", "Limiter.check()"),
    ("keyed.allow", "KeyedLimiter.allow(str), 100k keys"),
]
# cellrate with clock='monotonic' (the ordered read): (scenario, label, the peers' scenario it
# compares with)
PY_FAST_SCENARIOS = [
    ("limiter.allow_monotonic_clock", "Limiter(clock='monotonic').allow()", "limiter.allow"),
    ("keyed.allow_monotonic_clock", "KeyedLimiter(clock='monotonic').allow(str), 100k keys", "keyed.allow"),
]


def fastest_peer(results: Dict[str, dict], scenario: str, threads: int) -> Optional[str]:
    best = None
    for peer, _ in PY_PEERS:
        sid = f"py.{peer}.{scenario}.{threads}t"
        if sid in results and (best is None or results[sid]["ns_per_op"] < results[best]["ns_per_op"]):
            best = sid
    return best


def python_rows(results: Dict[str, dict]) -> List[Row]:
    rows: List[Row] = []
    for t in (1, 2):
        rows += [
            Row(f"floor: empty loop, {t} thread(s)", f"py.floor.empty_loop.{t}t"),
            Row(f"anchor to beat: time.monotonic_ns(), {t} thread(s)", f"py.floor.monotonic_ns.{t}t",
                chart="floor" if t == 1 else ""),
            Row(f"anchor to beat: dict[key] += 1, 100k keys, {t} thread(s)", f"py.floor.dict_incr.{t}t",
                chart="floor" if t == 1 else ""),
        ]
    for t in (1, 2):
        rows += [
            Row(f"cellrate Limiter.allow(), {t} thread(s)", f"py.cellrate.limiter.allow.{t}t",
                "x_ref", f"py.floor.monotonic_ns.{t}t", "time.monotonic_ns()",
                ("<=", 0.8) if t == 1 else None, chart="cellrate" if t == 1 else ""),
            Row(f"cellrate Limiter.check(), {t} thread(s)", f"py.cellrate.limiter.check.{t}t",
                "x_ref", f"py.floor.monotonic_ns.{t}t", "time.monotonic_ns()",
                chart="cellrate" if t == 1 else ""),
            Row(f"cellrate KeyedLimiter.allow(str), 100k keys, {t} thread(s)",
                f"py.cellrate.keyed.allow.{t}t", "x_ref", f"py.floor.dict_incr.{t}t",
                "dict[key] += 1", ("<=", 0.8) if t == 1 else None,
                chart="cellrate" if t == 1 else ""),
            Row(f"cellrate Limiter(clock='monotonic').allow(), {t} thread(s)",
                f"py.cellrate.limiter.allow_monotonic_clock.{t}t", "x_ref",
                f"py.floor.monotonic_ns.{t}t", "time.monotonic_ns()",
                ("<=", 0.8) if t == 1 else None, chart="cellrate" if t == 1 else ""),
            Row(f"cellrate KeyedLimiter(clock='monotonic').allow(str), 100k keys, {t} thread(s)",
                f"py.cellrate.keyed.allow_monotonic_clock.{t}t", "x_ref", f"py.floor.dict_incr.{t}t",
                "dict[key] += 1", ("<=", 0.8) if t == 1 else None,
                chart="cellrate" if t == 1 else ""),
        ]
    for t in (1, 2):
        for scenario, label in PY_SCENARIOS + [f[:2] for f in PY_FAST_SCENARIOS]:
            rows.append(Row(f"GIL released around the core call: {label}, {t} thread(s)",
                            f"py.cellrate_gil_released.{scenario}.{t}t", "x_ref",
                            f"py.cellrate.{scenario}.{t}t", "GIL held (the shipped build)"))
    for t in (1, 2):
        for scenario, label in PY_SCENARIOS:
            for peer, peer_label in PY_PEERS:
                sid = f"py.{peer}.{scenario}.{t}t"
                if sid in results:
                    rows.append(Row(f"{peer_label}: {label}, {t} thread(s)", sid,
                                    chart="peer" if t == 1 else ""))
    for t in (1, 2):
        for scenario, label in PY_SCENARIOS:
            best = fastest_peer(results, scenario, t)
            if best is None:
                continue
            rows.append(Row(f"cellrate vs fastest peer: {label}, {t} thread(s)",
                            f"py.cellrate.{scenario}.{t}t", "faster", best,
                            "fastest peer: " + best.split(".")[1]))
            for fast, fast_label, peers_scenario in PY_FAST_SCENARIOS:
                if peers_scenario == scenario:
                    rows.append(Row(f"cellrate vs fastest peer: {fast_label}, {t} thread(s)",
                                    f"py.cellrate.{fast}.{t}t", "faster", best,
                                    "fastest peer: " + best.split(".")[1]))
    return rows


DECORATORS = {
    "sync": [("cellrate", "cellrate @limit (blocking)"),
             ("cellrate_raise", "cellrate @limit(block=False)"),
             ("cellrate_keyed", "cellrate @limit(key=...)"),
             ("ratelimit", "ratelimit @sleep_and_retry @limits"),
             ("pyrate_limiter", "pyrate-limiter as_decorator()")],
    "async": [("cellrate", "cellrate @limit (awaits)"),
              ("cellrate_raise", "cellrate @limit(block=False)"),
              ("aiolimiter", "aiolimiter `async with`"),
              ("pyrate_limiter", "pyrate-limiter as_decorator()")],
}
DECORATOR_PEERS = {"sync": ["ratelimit", "pyrate_limiter"],
                   "async": ["aiolimiter", "pyrate_limiter"]}


def decorator_rows() -> List[Row]:
    """Each decorated call, its overhead over the bare call of the same run, and
    cellrate's overhead against each peer's."""
    rows: List[Row] = []
    for kind, label in (("sync", "function"), ("async", "async function")):
        rows.append(Row(f"bare call, {label}", f"py.decorator.bare.{kind}.1t"))
        for name, name_label in DECORATORS[kind]:
            rows.append(Row(f"{name_label}, {label}", f"py.decorator.{name}.{kind}.1t", "x_ref",
                            f"py.decorator.bare.{kind}.1t", "bare call"))
        for name, name_label in DECORATORS[kind]:
            rows.append(Row(f"overhead over the bare call: {name_label}, {label}",
                            f"py.decorator_overhead.{name}.{kind}.1t"))
        for peer in DECORATOR_PEERS[kind]:
            peer_label = dict(DECORATORS[kind])[peer]
            rows.append(Row(f"cellrate's overhead vs {peer_label}'s, {label}",
                            f"py.decorator_overhead.cellrate.{kind}.1t", "faster",
                            f"py.decorator_overhead.{peer}.{kind}.1t", f"{peer_label} overhead"))
    return rows


def share_rows() -> List[Row]:
    """cellrate.share (bench_share.py): a ShareLimiter decision against the in-process
    Limiter's (its local limiter, the demand counted in Python) and the RedisLimiter's
    round trip; a heartbeat with 4 and 64 members in the fleet's record."""
    limiter, share, redis_ = ("py.share.limiter.allow.1t", "py.share.share_limiter.allow.1t",
                              "py.share.redis_limiter.allow.1t")
    return [
        Row("Limiter.allow, in process", limiter),
        Row("ShareLimiter.allow vs Limiter.allow", share, "x_ref", limiter, "Limiter.allow",
            ("<=", 1.2)),
        Row("RedisLimiter.allow, loopback", redis_),
        Row("ShareLimiter.allow vs RedisLimiter.allow (throughput)", share, "faster", redis_,
            "RedisLimiter.allow", (">=", 100)),
        Row("heartbeat, 4 members (ns per member per second at interval=1 s)",
            "py.share.heartbeat.4m"),
        Row("heartbeat, 64 members (ns per member per second at interval=1 s)",
            "py.share.heartbeat.64m"),
    ]


def redis_batch_rows() -> List[Row]:
    """Redis batches (bench_redis_batch.py): asyncio admissions per connection, today
    against coalesced; 100 decisions in one check_many call against 100 check calls, and
    the ceiling of any batch of one key per decision (the commands alone)."""
    p = "py.redis_batch"
    rows = []
    for tasks in (1, 16, 256):
        rows.append(Row(f"asyncio allow, {tasks} tasks, coalesced vs today (ns of a connection "
                        "per admission)", f"{p}.async_{tasks}t.coalesced", "faster",
                        f"{p}.async_{tasks}t.today", "today, one call a decision",
                        (">=", 5) if tasks == 256 else None))
    rows += [
        Row("check_many, 100 keys in one call vs 100 check calls (ns per 100)",
            f"{p}.sync.check_many", "faster", f"{p}.sync.calls", "100 check calls",
            (">=", 20)),
        Row("the ceiling: 100 keys' GET and SET PX alone, one call vs 100 check calls",
            f"{p}.sync.ceiling", "faster", f"{p}.sync.calls", "100 check calls"),
        Row("check_many vs the ceiling (how far from it)", f"{p}.sync.check_many", "x_ref",
            f"{p}.sync.ceiling", "the ceiling"),
        Row("check_many_async, 100 keys in one call vs 100 awaited checks",
            f"{p}.async.check_many", "faster", f"{p}.async.calls", "100 awaited checks"),
    ]
    return rows


def web_rows() -> List[Row]:
    """Middleware overhead per request (bench_web.py): each variant's time
    minus the bare app's, round by round; the target is 1/10 of the peer's."""
    rows = [
        Row("bare Starlette app, one request (ASGI, called directly)", "py.web.asgi.bare", chart="floor"),
        Row("cellrate.asgi.RateLimitMiddleware: overhead per request",
            "py.web.asgi.cellrate.overhead", chart="cellrate"),
        Row("slowapi SlowAPIMiddleware: overhead per request", "py.web.asgi.slowapi.overhead", chart="peer"),
        Row("slowapi SlowAPIASGIMiddleware: overhead per request",
            "py.web.asgi.slowapi_asgi.overhead", chart="peer"),
        Row("cellrate ASGI overhead vs slowapi (SlowAPIASGIMiddleware)",
            "py.web.asgi.cellrate.overhead", "x_ref", "py.web.asgi.slowapi_asgi.overhead",
            "slowapi's overhead", ("<=", 0.1)),
        Row("cellrate ASGI overhead vs slowapi (SlowAPIMiddleware)",
            "py.web.asgi.cellrate.overhead", "x_ref", "py.web.asgi.slowapi.overhead",
            "slowapi's overhead", ("<=", 0.1)),
        Row("bare Flask app, one request (WSGI, called directly)", "py.web.wsgi.bare", chart="floor"),
        Row("cellrate.wsgi.RateLimitMiddleware: overhead per request",
            "py.web.wsgi.cellrate.overhead", chart="cellrate"),
        Row("flask-limiter: overhead per request", "py.web.wsgi.flask_limiter.overhead", chart="peer"),
        Row("cellrate WSGI overhead vs flask-limiter", "py.web.wsgi.cellrate.overhead", "x_ref",
            "py.web.wsgi.flask_limiter.overhead", "flask-limiter's overhead", ("<=", 0.1)),
    ]
    return rows


def adapter_rows() -> List[Row]:
    """bench_adapters.py: what the message limit and the interceptor add to a
    message or a call, against one decision plus a dict lookup."""
    floor = "py.adapters.floor"
    return [
        Row("floor: KeyedLimiter.allow(key) + dict.get", floor, chart="floor"),
        Row("WebSocket message, bare echo (ASGI, in process)", "py.adapters.ws.bare"),
        Row("MessageLimit per connection: overhead per message",
            "py.adapters.ws.per_connection.overhead", "x_ref", floor, "the floor"),
        Row("MessageLimit per connection and per key: overhead per message",
            "py.adapters.ws.per_connection_and_key.overhead", "x_ref", floor, "the floor"),
        Row("gRPC unary behaviour, bare (in process)", "py.adapters.grpc.bare"),
        Row("RateLimitInterceptor: overhead per call (in process)",
            "py.adapters.grpc.interceptor.overhead", "x_ref", floor, "the floor"),
        Row("gRPC unary call on loopback, bare server", "py.adapters.grpc_server.bare"),
        Row("RateLimitInterceptor: overhead per call on loopback",
            "py.adapters.grpc_server.interceptor.overhead", "x_ref",
            "py.adapters.grpc_server.bare", "the bare call"),
    ]


def lua_rows() -> List[Row]:
    rows: List[Row] = []
    for version, name in (("lua5.4", "Lua 5.4"), ("luajit", "LuaJIT")):
        p = f"lua.{version}"
        rows += [
            Row(f"{name}: empty loop", f"{p}.floor.empty_loop"),
            Row(f"{name}: trivial C function (no-op)", f"{p}.floor.c_noop", chart="floor"),
            Row(f"{name}: trivial C function + clock_gettime(CLOCK_MONOTONIC)",
                f"{p}.floor.c_clock", chart="floor"),
            Row(f"{name}: trivial C function + cellrate's default clock read (fast)",
                f"{p}.floor.c_fast_clock", chart="floor"),
            Row(f"{name}: trivial C function + the clock='monotonic' read",
                f"{p}.floor.c_monotonic_clock"),
            Row(f"{name}: trivial C method on a userdata + the default clock read "
                "(obj:fast_clock_ns())", f"{p}.floor.c_method_fast_clock", chart="floor"),
            Row(f"{name}: cellrate lim:allow()", f"{p}.cellrate.limiter.allow", "x_ref",
                f"{p}.floor.c_fast_clock", "C function + the same clock read", ("<=", 2.0),
                chart="cellrate"),
            Row(f"{name}: cellrate lim:allow() with clock='monotonic'",
                f"{p}.cellrate.limiter.allow_monotonic_clock", "x_ref",
                f"{p}.floor.c_monotonic_clock", "C function + the same clock read", ("<=", 2.0),
                chart="cellrate"),
            Row(f"{name}: cellrate lim:allow() vs the same call shape", f"{p}.cellrate.limiter.allow",
                "x_ref", f"{p}.floor.c_method_fast_clock", "C method + the same clock read"),
            Row(f"{name}: plain-Lua GCRA lim:allow()", f"{p}.plain_gcra.limiter.allow", "x_ref",
                f"{p}.floor.c_clock", "C function + clock_gettime", chart="peer"),
            Row(f"{name}: cellrate keyed:allow(key), 100k keys", f"{p}.cellrate.keyed.allow",
                "x_ref", f"{p}.floor.c_fast_clock", "C function + the same clock read",
                chart="cellrate"),
            Row(f"{name}: plain-Lua GCRA keyed:allow(key), 100k keys",
                f"{p}.plain_gcra.keyed.allow", "x_ref", f"{p}.floor.c_clock",
                "C function + clock_gettime", chart="peer"),
            Row(f"{name}: cellrate lim:allow() vs plain-Lua GCRA", f"{p}.cellrate.limiter.allow",
                "faster", f"{p}.plain_gcra.limiter.allow", "plain-Lua GCRA"),
            Row(f"{name}: cellrate keyed:allow() vs plain-Lua GCRA", f"{p}.cellrate.keyed.allow",
                "faster", f"{p}.plain_gcra.keyed.allow", "plain-Lua GCRA"),
        ]
    return rows


NGINX_SECTION = ("nginx: wrk on loopback, one worker's CPU time per request, median; "
                 "ratios: the median of each rep's ratio, every scenario run back to back in "
                 "each rep (bench/nginx/bench_nginx.py; raw/nginx.jsonl also has wrk's "
                 "requests/s)")


CONCURRENCY_SECTION = "Concurrency limits: acquire + release of one unit, a limit no thread fills"


def concurrency_rows() -> List[Row]:
    floor, floor_2t = "c.floor.atomic_inc_dec", "c.floor.atomic_inc_dec.2t"
    return [
        Row("floor: atomic increment checked against the limit, then decrement", floor),
        Row("floor: a holder word taken and given back (two compare-and-swaps)",
            "c.floor.holder_cas_pair", "x_ref", floor, "atomic inc/dec floor"),
        Row("cellrate concurrency (C), in process", "c.cellrate.concurrency.acquire_release",
            "x_ref", floor, "atomic inc/dec floor", ("<=", 1.5)),
        Row("cellrate concurrency (C), in process, vs the holder-word floor",
            "c.cellrate.concurrency.acquire_release", "x_ref", "c.floor.holder_cas_pair",
            "holder-word floor"),
        Row("cellrate concurrency (C), shared region (/dev/shm)",
            "c.cellrate.concurrency.shared.acquire_release", "x_ref",
            "c.cellrate.concurrency.acquire_release", "in process", ("<=", 1.5)),
        Row("cellrate concurrency (C), keyed (one key of a table)",
            "c.cellrate.concurrency.keyed.acquire_release", "x_ref", floor,
            "atomic inc/dec floor"),
        Row("floor: atomic inc/dec, 2 threads on one counter", floor_2t),
        Row("cellrate concurrency (C), 2 threads on one gauge",
            "c.cellrate.concurrency.acquire_release.2t", "x_ref", floor_2t,
            "atomic inc/dec floor, 2 threads"),
        Row("cellrate concurrency (C), peak=true (one shared total), in process",
            "c.cellrate.concurrency.peak.acquire_release", "x_ref", floor, "atomic inc/dec floor"),
        Row("cellrate concurrency (C), peak=true, shared region",
            "c.cellrate.concurrency.peak.shared.acquire_release", "x_ref", floor,
            "atomic inc/dec floor"),
        Row("cellrate concurrency (C), peak=true, keyed",
            "c.cellrate.concurrency.peak.keyed.acquire_release", "x_ref", floor,
            "atomic inc/dec floor"),
        Row("cellrate concurrency (C), peak=true, 2 threads on one gauge",
            "c.cellrate.concurrency.peak.acquire_release.2t", "x_ref", floor_2t,
            "atomic inc/dec floor, 2 threads"),
        Row("threading.BoundedSemaphore acquire + release", "py.threading.bounded_semaphore."
            "acquire_release.1t"),
        Row("cellrate.Concurrency try_acquire + release", "py.cellrate.concurrency.acquire_release.1t",
            "x_ref", "py.threading.bounded_semaphore.acquire_release.1t",
            "threading.BoundedSemaphore", ("<=", 1.0)),
        Row("cellrate.Concurrency, shared region, try_acquire + release",
            "py.cellrate.concurrency.shared.acquire_release.1t", "x_ref",
            "py.cellrate.concurrency.acquire_release.1t", "in process", ("<=", 1.5)),
        Row("asyncio.Semaphore `async with`", "py.asyncio.semaphore.async_with.acquire_release.1t"),
        Row("cellrate.Concurrency `async with hold()`",
            "py.cellrate.concurrency.async_hold.acquire_release.1t", "x_ref",
            "py.asyncio.semaphore.async_with.acquire_release.1t", "asyncio.Semaphore",
            ("<=", 1.0)),
    ]


def nginx_rows() -> List[Row]:
    """ns per request: the nginx worker's CPU time per request; "faster" is
    the reference's over cellrate's, the ratio of requests per second one busy
    worker serves, taken rep by rep (evaluate: rep_ns)."""
    rows = [Row("nginx, no limiter (empty_gif)", "nginx.none.admit_all")]
    for kind, what in (("admit_all", "a limit that admits every request"),
                       ("refuse_most", "a limit that refuses all but the first")):
        rows += [
            Row(f"nginx limit_req, {what}", f"nginx.limit_req.{kind}"),
            Row(f"cellrate.nginx, {what}", f"nginx.cellrate.{kind}", "faster",
                f"nginx.limit_req.{kind}", "limit_req", (">=", 0.95)),
        ]
    # Floors: what a Lua limiter cannot avoid, and limit_req sending fields.
    rows += [
        Row("floor: access_by_lua_block with nothing to do", "nginx.lua_empty.admit_all",
            "faster", "nginx.limit_req.admit_all", "limit_req"),
        Row("floor: access_by_lua_block reading ngx.var.binary_remote_addr",
            "nginx.lua_key.admit_all", "faster", "nginx.limit_req.admit_all", "limit_req"),
        Row("cellrate.nginx, admits every request, against that floor",
            "nginx.cellrate.admit_all", "faster", "nginx.lua_key.admit_all",
            "Lua reading the key"),
    ]
    for kind, what in (("admit_all", "admits every request"),
                       ("refuse_most", "refuses all but the first")):
        rows.append(Row(f"floor: limit_req + add_header of fields of cellrate's size, {what}",
                        f"nginx.limit_req_fields.{kind}", "faster", f"nginx.limit_req.{kind}",
                        "limit_req"))
    rows += [
        Row("cellrate.nginx, admits every request, admitted_headers (fields on admissions too), "
            "against limit_req sending the same fields",
            "nginx.cellrate_admitted_headers.admit_all", "faster",
            "nginx.limit_req_fields.admit_all", "limit_req + add_header"),
        Row("floor: access_by_lua_block setting two constant fields of cellrate's size",
            "nginx.lua_fields.admit_all", "faster", "nginx.limit_req_fields.admit_all",
            "limit_req + add_header"),
    ]
    # Concurrency: a slow upstream (an ngx.sleep location behind proxy_pass,
    # served by the same worker), limit_conn against hold() and leave().
    rows += [
        Row("floor: proxied to the slow upstream, no limiter", "nginx.proxy.admit_all"),
        Row("nginx limit_conn, slow upstream, a limit never reached", "nginx.limit_conn.admit_all",
            "faster", "nginx.proxy.admit_all", "no limiter"),
        Row("floor: access_by_lua_block and log_by_lua_block reading ngx.ctx, slow upstream",
            "nginx.lua_phases.admit_all", "faster", "nginx.limit_conn.admit_all", "limit_conn"),
        Row("cellrate.nginx hold/leave against that floor, slow upstream",
            "nginx.cellrate_hold.admit_all", "faster", "nginx.lua_phases.admit_all",
            "Lua in both phases", (">=", 0.95)),
        # context: limit_conn runs no Lua; the floor above is what entering Lua
        # in two phases costs any Lua limiter
        Row("cellrate.nginx hold/leave vs nginx limit_conn, slow upstream",
            "nginx.cellrate_hold.admit_all", "faster", "nginx.limit_conn.admit_all", "limit_conn"),
    ]
    return rows


THROTTLED_SECTION = ("An outside anchor: throttled-py's published benchmark, in its own shape "
                     "(bench/python/bench_throttled.py)")
THROTTLED_ALGORITHMS = (("fixed_window", "fixed window", "fixed_window"),
                        ("sliding_window", "sliding window", "sliding_window"),
                        ("token_bucket", "token bucket", "token_bucket"),
                        ("leaking_bucket", "leaking bucket", "gcra"),
                        ("gcra", "GCRA", "gcra"))


def throttled_rows() -> List[Row]:
    """throttled-py's README table, reproduced: one key, per_sec(1000), 100,000 calls in a
    serial loop that times each call (their shape), the same calls in a bare loop, and
    through a local redis-server; cellrate in the same loops, its check()."""
    p = "py.throttled_shape"
    rows = [Row("baseline: table[key] = table.get(key, 0) + 1, their timed loop",
                f"{p}.memory.baseline")]
    for algo, label, ours in THROTTLED_ALGORITHMS:
        rows += [
            Row(f"throttled-py {label}, MemoryStore, their timed loop", f"{p}.memory.throttled.{algo}",
                "x_ref", f"{p}.memory.baseline", "their baseline"),
            Row(f"cellrate KeyedLimiter ({ours}) check(), their timed loop"
                + (" (the run beside their leaking bucket)" if algo != ours else ""),
                f"{p}.memory.cellrate.{algo}", "x_ref", f"{p}.memory.baseline", "their baseline"),
            Row(f"cellrate vs throttled-py, {label}, their timed loop", f"{p}.memory.cellrate.{algo}",
                "faster", f"{p}.memory.throttled.{algo}", f"throttled-py {label}"),
        ]
    rows.append(Row("baseline: the same dict update, a bare loop", f"{p}.bare.baseline"))
    for algo, label, _ours in THROTTLED_ALGORITHMS:
        rows += [
            Row(f"throttled-py {label}, MemoryStore, a bare loop", f"{p}.bare.throttled.{algo}",
                "x_ref", f"{p}.bare.baseline", "the dict update"),
            Row(f"cellrate vs throttled-py, {label}, a bare loop", f"{p}.bare.cellrate.{algo}",
                "faster", f"{p}.bare.throttled.{algo}", f"throttled-py {label}"),
        ]
    rows.append(Row("baseline: INCRBY key 1 through Redis, their timed loop", f"{p}.redis.baseline"))
    for algo, label in (("gcra", "GCRA"), ("token_bucket", "token bucket")):
        rows += [
            Row(f"throttled-py {label}, RedisStore", f"{p}.redis.throttled.{algo}", "x_ref",
                f"{p}.redis.baseline", "INCRBY"),
            Row(f"cellrate RedisLimiter ({algo}), deny_cache=False (one round trip a call), vs "
                f"throttled-py", f"{p}.redis.cellrate.{algo}.no_deny_cache", "faster",
                f"{p}.redis.throttled.{algo}", f"throttled-py {label}"),
            Row(f"cellrate RedisLimiter ({algo}), deny cache on (the default), vs throttled-py",
                f"{p}.redis.cellrate.{algo}.deny_cache", "faster", f"{p}.redis.throttled.{algo}",
                f"throttled-py {label}"),
        ]
    return rows


def counters_rows() -> List[Row]:
    """The allow paths with counters against the same core built without them
    (-DCR_NO_COUNTERS, the benchmark's switch alone), in one binary, round-robin."""
    p = "c.counters"
    return [
        Row("C: Limiter allow(), with counters against without", f"{p}.limiter.allow.counted",
            "x_ref", f"{p}.limiter.allow.uncounted", "no counters, same call", ("<=", 1.03)),
        Row("C: KeyedLimiter allow(), 1 thread, with counters against without",
            f"{p}.keyed.int.1t.counted", "x_ref", f"{p}.keyed.int.1t.uncounted",
            "no counters, same call"),
        Row("C: KeyedLimiter allow(), 2 threads, distinct keys, with counters (total throughput)",
            f"{p}.keyed.int.2t.counted", "faster", f"{p}.keyed.int.1t.counted",
            "1 thread, with counters", (">=", 1.7)),
        Row("C: KeyedLimiter allow(), 2 threads, distinct keys, without counters",
            f"{p}.keyed.int.2t.uncounted", "faster", f"{p}.keyed.int.1t.uncounted",
            "1 thread, no counters"),
        Row("C: shared KeyedLimiter allow() (/dev/shm), with counters against without",
            f"{p}.shared.keyed.int.counted", "x_ref", f"{p}.shared.keyed.int.uncounted",
            "no counters, same call", ("<=", 1.05)),
    ]


def catalogue_rows() -> List[Row]:
    """Each algorithm's allow path against GCRA's in the same run (target: windows
    within 1.2x), check_all against as many separate calls, and the Python window
    rows against the `limits` strategies users migrate from."""
    rows: List[Row] = []
    windows = ("token_bucket", "fixed_window", "sliding_window")

    def target(name: str):
        return ("<=", 1.2) if "window" in name else None

    for name in windows:
        rows.append(Row(f"C: {name} allow path", f"c.catalogue.{name}.allow", "x_ref",
                        "c.catalogue.gcra.allow", "gcra, same call", target(name)))
        rows.append(Row(f"C: {name} allow path, given now (no clock read)",
                        f"c.catalogue.{name}.allow_given_now", "x_ref",
                        "c.catalogue.gcra.allow_given_now", "gcra, same call"))
    rows.append(Row("C: calendar allow path (a quota)", "c.catalogue.calendar.allow", "x_ref",
                    "c.catalogue.fixed_window.allow", "fixed_window, same call", ("<=", 1.2)))
    rows.append(Row("C: calendar allow path, against gcra", "c.catalogue.calendar.allow", "x_ref",
                    "c.catalogue.gcra.allow", "gcra, same call"))
    rows.append(Row("C: gcra allow path under a penalty", "c.catalogue.gcra_penalty.allow", "x_ref",
                    "c.catalogue.gcra.allow", "gcra, same call", ("<=", 1.03)))
    for n in (2, 3):
        rows.append(Row(f"C: check_all of {n} limits", f"c.check_all.{n}", "x_ref", f"c.separate.{n}",
                        f"{n} separate check calls"))
    for name in windows:
        rows.append(Row(f"Python: {name} Limiter.allow()", f"py.catalogue.{name}.limiter.allow.1t",
                        "x_ref", "py.catalogue.gcra.limiter.allow.1t", "gcra, same call",
                        target(name)))
        rows.append(Row(f"Python: {name} KeyedLimiter.allow(str), 100k keys",
                        f"py.catalogue.{name}.keyed.allow.1t", "x_ref",
                        "py.catalogue.gcra.keyed.allow.1t", "gcra, same call", target(name)))
    for n in (2, 3):
        rows.append(Row(f"Python: check_all of {n} limits", f"py.check_all.{n}.1t", "x_ref",
                        f"py.separate.{n}.1t", f"{n} separate check() calls"))
    for ours, peer, label in (("fixed_window", "limits_fixed_window", "limits, fixed window"),
                              ("sliding_window", "limits_sliding_window_counter",
                               "limits, sliding window counter")):
        rows.append(Row(f"Python: {ours} Limiter.allow() vs {label}",
                        f"py.catalogue.{ours}.limiter.allow.1t", "faster", f"py.{peer}.limiter.allow.1t",
                        label))
        rows.append(Row(f"Python: {ours} KeyedLimiter.allow(str) vs {label}",
                        f"py.catalogue.{ours}.keyed.allow.1t", "faster", f"py.{peer}.keyed.allow.1t",
                        label))
    for version, vname in (("lua5.4", "Lua 5.4"), ("luajit", "LuaJIT")):
        p = f"lua.{version}"
        for name in windows:
            rows.append(Row(f"{vname}: {name} lim:allow()", f"{p}.catalogue.{name}.allow", "x_ref",
                            f"{p}.catalogue.gcra.allow", "gcra, same call", target(name)))
        for n in (2, 3):
            rows.append(Row(f"{vname}: check_all of {n} limits", f"{p}.check_all.{n}", "x_ref",
                            f"{p}.separate.{n}", f"{n} separate check() calls"))
    return rows


# ---------------------------------------------------------------------------
# The short table of the Performance page (docs/performance.md): the headline
# ratios against the peers and the floors, from the same run as results.md.


def headline_rows(results: Dict[str, dict]) -> List[Row]:
    rows = [
        Row("C: Limiter allow", "c.cellrate.limiter.allow_fast_clock", "x_ref",
            "c.floor.rdtsc_cas", "floor: rdtsc + load + CAS"),
        Row("C: Limiter allow", "c.cellrate.limiter.allow_fast_clock", "x_ref",
            "rust.governor.direct.quanta.allow", "governor direct (its TSC clock)"),
        Row("C: Limiter allow", "c.cellrate.limiter.allow_fast_clock", "x_ref",
            "rust.aerorate.direct.allow", "aerorate direct"),
        Row("C: KeyedLimiter, 1M integer keys", "c.cellrate.keyed.int_fast_clock", "faster",
            "rust.governor.keyed.quanta.int", "governor keyed"),
        Row("C: KeyedLimiter, 1M integer keys", "c.cellrate.keyed.int_fast_clock", "faster",
            "rust.aerorate.keyed.int", "aerorate keyed"),
        Row("C: KeyedLimiter, 1M integer keys", "c.cellrate.keyed.int_fast_clock", "x_ref",
            "c.floor.keyed_slot_fast_clock", "floor: the same work done the cheapest way"),
        Row("C: KeyedLimiter, 2 threads, distinct keys", "c.cellrate.threads.distinct.2t",
            "faster", "c.cellrate.threads.distinct.1t", "1 thread"),
        Row("C: shared KeyedLimiter (/dev/shm), 1M keys", "c.cellrate.shared.distinct.1p",
            "x_ref", "c.cellrate.threads.distinct.1t", "the same table in-process"),
        Row("Python: Limiter.allow()", "py.cellrate.limiter.allow.1t", "x_ref",
            "py.floor.monotonic_ns.1t", "anchor to beat: time.monotonic_ns()"),
        Row("Python: KeyedLimiter.allow(str), 100k keys", "py.cellrate.keyed.allow.1t", "x_ref",
            "py.floor.dict_incr.1t", "anchor to beat: dict[key] += 1"),
    ]
    for scenario, label in (("limiter.allow", "Limiter.allow()"),
                            ("keyed.allow", "KeyedLimiter.allow(str), 100k keys")):
        best = fastest_peer(results, scenario, 1)
        if best:
            peer = dict(PY_PEERS).get(best.split(".")[1], best.split(".")[1])
            rows.append(Row(f"Python: {label}", f"py.cellrate.{scenario}.1t", "faster", best,
                            f"fastest Python peer ({peer})"))
    rows += [
        Row("Python: throttled-py's own benchmark (its timed loop, per_sec(1000), \"/ping\"), "
            "GCRA", "py.throttled_shape.memory.cellrate.gcra", "faster",
            "py.throttled_shape.memory.throttled.gcra", "throttled-py GCRA"),
        Row("Python: the same, token bucket (throttled-py's default)",
            "py.throttled_shape.memory.cellrate.token_bucket", "faster",
            "py.throttled_shape.memory.throttled.token_bucket", "throttled-py token bucket"),
        Row("Python: the same calls in a bare loop, GCRA", "py.throttled_shape.bare.cellrate.gcra",
            "faster", "py.throttled_shape.bare.throttled.gcra", "throttled-py GCRA"),
        Row("Redis: throttled-py's benchmark, GCRA, one round trip a call (deny_cache=False)",
            "py.throttled_shape.redis.cellrate.gcra.no_deny_cache", "faster",
            "py.throttled_shape.redis.throttled.gcra", "throttled-py GCRA, RedisStore"),
        Row("Redis: the same with the deny cache (the default)",
            "py.throttled_shape.redis.cellrate.gcra.deny_cache", "faster",
            "py.throttled_shape.redis.throttled.gcra", "throttled-py GCRA, RedisStore"),
        Row("Python: Limiter.allow(), GIL released (not shipped)",
            "py.cellrate_gil_released.limiter.allow.1t", "x_ref", "py.cellrate.limiter.allow.1t",
            "GIL held (shipped)"),
    ]
    for version, name in (("lua5.4", "Lua 5.4"), ("luajit", "LuaJIT")):
        rows.append(Row(f"{name}: lim:allow()", f"lua.{version}.cellrate.limiter.allow", "x_ref",
                        f"lua.{version}.floor.c_fast_clock",
                        "floor: C function + the same clock read"))
    rows.append(Row("Memory: KeyedLimiter, 1M keys", "mem.cellrate.keyed", "bytes"))
    return rows


def headline_table(evs: List[dict]) -> str:
    lines = ["| Measured | cellrate | Against | Ratio |", "|---|---|---|---|"]
    for ev in evs:
        row: Row = ev["row"]
        if row.kind == "bytes":
            value = "—" if ev["value"] is None else f"{ev['value']:.1f} B/key"
            against, ratio = "", ""
        else:
            value = "—" if ev["value"] is None else f"{fmt_ns(ev['value'])} ns"
            against = row.ref_label
            if ev.get("ref_ns"):
                against += f", {fmt_ns(ev['ref_ns'])} ns"
            if ev["ratio"] is None:
                ratio = "—"
            elif row.kind == "x_ref":
                ratio = f"{ev['ratio']:.2f}x the time"
            else:
                ratio = f"{ev['ratio']:.2f}x the throughput"
            if ev["ratio"] is not None and ev["ratio_spread"]:
                low, high = ev["ratio_spread"]
                ratio += f" ({low:.2f}–{high:.2f}{'' if ev['paired'] else ', unpaired'})"
        label = row.label + (f" ({ev['note']})" if ev["note"] else "")
        lines.append(f"| {label} | {value} | {against} | {ratio} |")
    return "\n".join(lines)


PAGE_BEGIN = "<!-- performance table: written by bench/report.py -->"
PAGE_END = "<!-- end of performance table -->"


def update_page(path: str, table: str) -> bool:
    """Puts `table` between the page's markers; False when they are absent."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return False
    start, end = text.find(PAGE_BEGIN), text.find(PAGE_END)
    if start < 0 or end < start:
        return False
    text = text[:start + len(PAGE_BEGIN)] + "\n" + table + "\n" + text[end:]
    with open(path, "w") as f:
        f.write(text)
    return True


# ---------------------------------------------------------------------------


# The references that rows are meant to beat (their targets are below 1x): the
# interpreter's own clock call and dict update in Python. Every other reference
# whose id names a floor is one: the least the row's work can cost.
ANCHORS = re.compile(r"^py\.floor\.(monotonic_ns|dict_incr)\.")


def is_floor(row: Row) -> bool:
    """Whether `row` is a time compared with its floor, which it may not beat
    outside its spread (docs/design/benchmarks.md)."""
    ref = row.ref or ""
    return (row.kind == "x_ref" and re.search(r"(^|\.)floor(\.|$)", ref) is not None
            and not ANCHORS.match(ref))


def paired(rec: dict, ref: dict) -> bool:
    """Whether run k of `rec` and run k of `ref` come from the same round of
    one group (the harness ran them side by side, interleaved)."""
    ours, theirs = rec.get("rep_ns"), ref.get("rep_ns")
    return bool(rec.get("group") and rec.get("group") == ref.get("group") and ours and theirs
                and len(ours) == len(theirs))


def evaluate(row: Row, results: Dict[str, dict]) -> dict:
    """A row's value (the median of its runs) with its runs' min and max, its
    ratio to the reference and the ratio's spread, and the verdict on its
    target (docs/design/benchmarks.md, "Noise"): a ratio between two cases of
    one group is taken run by run (each round's pair), the median of those
    ratios with their min and max; between two groups or harnesses, the ratio
    of the medians, its spread the extreme pairings (min over max, max over
    min). A target is met when the median ratio meets it; when the spread
    lies on both sides of the target the verdict is marked as inside the
    noise of the run."""
    rec = results.get(row.sid)
    out = {"row": row, "value": None, "ratio": None, "met": None, "note": "", "spread": None,
           "ratio_spread": None, "noise": False, "paired": False, "beats_floor": False}
    if rec is None:
        out["note"] = "not measured"
        return out
    out["refused"] = rec.get("refused")
    if row.kind == "bytes":
        out["value"] = rec.get("bytes_per_key")
    else:
        out["value"] = rec.get("ns_per_op")
        if rec.get("rep_ns"):
            out["spread"] = (min(rec["rep_ns"]), max(rec["rep_ns"]))
        if rec.get("expect") and rec.get("expect_met") is False:
            out["note"] = f"not every call was {rec['expect']}ed: path not as named"
        if rec.get("background_thread_errors"):
            out["note"] = (f"{rec['background_thread_errors']} exceptions in the peer's own "
                           "background thread during the timed runs")
    if row.kind in ("x_ref", "faster"):
        ref = results.get(row.ref or "")
        if ref is None or not ref.get("ns_per_op"):
            out["note"] = "reference not measured"
        elif out["value"]:
            a, b = out["value"], ref["ns_per_op"]

            def ratio(x: float, y: float) -> float:
                return x / y if row.kind == "x_ref" else y / x

            out["ratio"] = ratio(a, b)
            out["ref_ns"] = b
            ours, theirs = rec.get("rep_ns"), ref.get("rep_ns")
            if paired(rec, ref):
                per_rep = [ratio(x, y) for x, y in zip(ours, theirs) if x > 0 and y > 0]
                if per_rep:
                    out["ratio"] = statistics.median(per_rep)
                    out["ratio_spread"] = (min(per_rep), max(per_rep))
                    out["paired"] = True
            elif ours and theirs and min(ours) > 0 and min(theirs) > 0:
                ends = (ratio(min(ours), max(theirs)), ratio(max(ours), min(theirs)))
                out["ratio_spread"] = (min(ends), max(ends))
            highest = out["ratio_spread"][1] if out["ratio_spread"] else None
            if is_floor(row) and highest is not None and highest < 1.0:
                out["beats_floor"] = True
                out["note"] = ("below its floor in every round: the floor is not the least this "
                               "work can cost")
    measure = out["value"] if row.kind == "bytes" else out["ratio"]
    if row.target and measure is not None:
        op, bound = row.target

        def meets(value: float) -> bool:
            return value <= bound if op == "<=" else value >= bound

        out["met"] = meets(measure)
        if row.kind != "bytes" and out["ratio_spread"]:
            out["noise"] = meets(out["ratio_spread"][0]) != meets(out["ratio_spread"][1])
    return out


def fmt_ns(value: Optional[float]) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def fmt_spread(spread: Optional[tuple], fmt) -> str:
    return "" if spread is None else f"{fmt(spread[0])}–{fmt(spread[1])}"


def fmt_row(ev: dict) -> List[str]:
    row: Row = ev["row"]
    if row.kind == "bytes":
        value = "—" if ev["value"] is None else f"{ev['value']:.1f} B/key"
    else:
        value = fmt_ns(ev["value"])
    spread = fmt_spread(ev["spread"], fmt_ns)
    if row.kind in ("x_ref", "faster"):
        ref = f"{row.ref_label} ({fmt_ns(ev.get('ref_ns'))} ns)" if ev.get("ref_ns") else row.ref_label
        what = "its time" if row.kind == "x_ref" else "its throughput"
        ratio = "—" if ev["ratio"] is None else f"{ev['ratio']:.2f}x {what}"
        ratio_spread = fmt_spread(ev["ratio_spread"], lambda v: f"{v:.2f}")
        if ratio_spread:
            ratio_spread += "" if ev["paired"] else " (unpaired)"
    else:
        ref, ratio, ratio_spread = "", "", ""
    if row.target:
        op, bound = row.target
        unit = " B/key" if row.kind == "bytes" else "x"
        target = f"{'≤' if op == '<=' else '≥'} {bound:g}{unit}"
        met = {True: "yes", False: "**no**", None: "?"}[ev["met"]]
        if ev["noise"]:
            met += ", inside the noise"
    else:
        target, met = "", ""
    label = row.label
    if ev.get("refused") is not None and row.kind != "faster":
        label += f" ({100 * ev['refused']:.0f}% refused)"
    label += f" — {ev['note']}" if ev["note"] else ""
    return [label, value, spread, ref, ratio, ratio_spread, target, met]


def markdown_table(evs: List[dict], value_header: str = "ns/op") -> str:
    header = ["Scenario", value_header, "runs min–max", "Reference", "Ratio", "ratio min–max",
              "Target", "Met"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for ev in evs:
        lines.append("| " + " | ".join(fmt_row(ev)) + " |")
    return "\n".join(lines)


NOISE_RULE = (
    "How to read the spreads: `runs min–max` is the range of the timed runs of a row "
    "(the value is their median). A ratio between two scenarios run side by side in one "
    "group (each round runs every scenario of the group once; in C, single-threaded "
    "scenarios take turns in slices of a run) is taken round by round: the value is the "
    "median of the per-round ratios, `ratio min–max` their range. A ratio between two "
    "groups or harnesses is the ratio of the medians, and its range `(unpaired)` the "
    "extreme pairings of their runs. A target is met when the ratio meets it; "
    "\"inside the noise\" marks a verdict whose range lies on both sides of the target "
    "(some rounds met it, some did not). A row below its floor in every round is flagged: "
    "a floor that is beaten measures other work than the row.")


def command_line(args: List[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "not found"


def cpu_split(raw_dir: str) -> str:
    """Shares of busy, idle and stolen CPU time between the first and the last
    scenario, from /proc/stat (stolen: time the hypervisor ran others)."""
    try:
        with open(os.path.join(raw_dir, "cpu_start.txt")) as f:
            start = [int(v) for v in f.read().split()[1:]]
        with open(os.path.join(raw_dir, "cpu_end.txt")) as f:
            end = [int(v) for v in f.read().split()[1:]]
    except (OSError, ValueError):
        return "unknown"
    delta = [b - a for a, b in zip(start, end)]
    total = sum(delta[:8]) or 1  # user nice system idle iowait irq softirq steal
    idle = delta[3] + delta[4]
    steal = delta[7] if len(delta) > 7 else 0
    busy = total - idle - steal
    return (f"busy {100 * busy / total:.0f}%, idle {100 * idle / total:.0f}%, "
            f"stolen {100 * steal / total:.1f}% (all CPUs)")


def run_time(raw_dir: str) -> str:
    """The run's wall time from the starts of its steps (raw/steps.txt, written by
    bench/run.sh): from the first to the report's, the installs and builds (before
    the first scenario, "C level") apart, and the three longest kinds of step (the
    name up to its colon: "Python level", "nginx")."""
    try:
        with open(os.path.join(raw_dir, "steps.txt")) as f:
            steps = [(int(when), name) for when, name in
                     (line.rstrip("\n").split(" ", 1) for line in f if line.strip())]
    except (OSError, ValueError):
        return "unknown"
    if len(steps) < 2:
        return "unknown"
    first_scenario = next((when for when, name in steps if name.startswith("C level")),
                          steps[0][0])
    end = steps[-1][0]
    took: Dict[str, int] = {}  # a kind of step (its name up to ":") -> seconds
    for (when, name), after in zip(steps, steps[1:]):
        if when >= first_scenario:
            kind = name.split(":")[0]
            took[kind] = took.get(kind, 0) + after[0] - when
    longest = ", ".join(f"{kind} {secs / 60:.1f} min" for kind, secs
                        in sorted(took.items(), key=lambda k: -k[1])[:3])
    return (f"{(end - steps[0][0]) / 60:.1f} min from the first step to the report (installs "
            f"and builds {(first_scenario - steps[0][0]) / 60:.1f} min, the scenarios "
            f"{(end - first_scenario) / 60:.1f} min); longest steps: {longest}")


def machine_info(results: Dict[str, dict], reps: int, root: str, raw_dir: str) -> List[str]:
    model, flags = "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        m = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        model = m.group(1) if m else platform.processor()
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
        flags = m.group(1) if m else ""
    except OSError:
        pass

    def read(path: str) -> str:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return "unknown"

    tsc = [f for f in ("constant_tsc", "nonstop_tsc", "rdtscp", "tsc_known_freq") if f in flags.split()]
    hypervisor = "yes" if "hypervisor" in flags.split() else "no"
    versions = {}
    venv_python = sys.executable
    pip = subprocess.run([venv_python, "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True)
    try:
        for p in json.loads(pip.stdout):
            if p["name"].lower().replace("_", "-") in (
                    "limits", "throttled-py", "pyrate-limiter", "token-bucket", "matplotlib",
                    "cellrate"):
                versions[p["name"]] = p["version"]
    except ValueError:
        pass
    crates = {}
    lock = os.path.join(root, "bench", "rust", "Cargo.lock")
    if os.path.exists(lock):
        with open(lock) as f:
            for name, version in re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', f.read()):
                if name in ("governor", "aerorate", "quanta", "dashmap"):
                    crates[name] = version
    lua_versions = sorted({r.get("lua_version", "") for r in results.values() if r.get("lang") == "lua"})
    cellrate_version = results.get("c.info", {}).get("cellrate_version", "unknown")
    fast_is_tsc = results.get("c.info", {}).get("fast_clock_is_tsc")
    fast_clock = {True: "the TSC (cr_fast_clock_is_tsc: true)",
                  False: "CLOCK_MONOTONIC itself (cr_fast_clock_is_tsc: false)",
                  None: "unknown"}[fast_is_tsc]
    return [
        f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"cpu: {model}",
        f"cpus online: {os.cpu_count()}",
        f"virtualized: {hypervisor}",
        f"clock source: {read('/sys/devices/system/clocksource/clocksource0/current_clocksource')}"
        f" (available: {read('/sys/devices/system/clocksource/clocksource0/available_clocksource')})",
        f"tsc flags: {' '.join(tsc) or 'none'}",
        f"cellrate fast clock (clock='fast'): {fast_clock}",
        f"kernel: {platform.system()} {platform.release()} {platform.machine()}",
        f"transparent huge pages: {read('/sys/kernel/mm/transparent_hugepage/enabled')}",
        f"c compiler: {command_line(['cc', '--version'])}",
        f"rust: {command_line(['rustc', '--version'])}",
        f"python: {platform.python_implementation()} {platform.python_version()}",
        f"lua: {', '.join(lua_versions) or 'not run'}",
        f"cellrate: {cellrate_version}",
        "pypi peers: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),
        "crates: " + ", ".join(f"{k} {v}" for k, v in sorted(crates.items())),
        f"repetitions: median of {reps} timed runs per scenario, after one warm-up run;"
        " the scenarios of a group run round-robin",
        f"load average before the first scenario: {read(os.path.join(raw_dir, 'loadavg_start.txt'))}",
        f"load average at report time: {read('/proc/loadavg')}",
        f"cpu time during the scenarios: {cpu_split(raw_dir)}",
        f"run time: {run_time(raw_dir)}",
    ]


def clock_note(results: Dict[str, dict]) -> str:
    def ns(sid: str) -> Optional[float]:
        return results.get(sid, {}).get("ns_per_op")

    needed = ["c.cellrate.limiter.allow", "c.floor.clock", "rust.floor.quanta_now",
              "c.floor.rdtsc", "c.cellrate.limiter.allow_given_now",
              "rust.governor.direct.quanta.allow", "rust.governor.direct.monotonic.allow",
              "c.floor.fast_clock", "c.cellrate.limiter.allow_fast_clock",
              "c.cellrate.limiter.deny_fast_clock"]
    if any(ns(s) is None for s in needed):
        return ""
    allow, clock, quanta, rdtsc, given, gov_q, gov_m, fast, allow_fast, deny_fast = (
        ns(s) for s in needed)
    is_tsc = results.get("c.info", {}).get("fast_clock_is_tsc")
    here = {True: "here it reads the TSC", False: "here it calls clock_gettime",
            None: "whether it reads the TSC here is unknown"}[is_tsc]
    return (
        "Where the time of the C Limiter goes (same run): cellrate's clock='monotonic' reads "
        "CLOCK_MONOTONIC from a line on the TSC, re-anchored to it every 2 ms, with the counter "
        "read ordered (rdtscp), where the TSC is invariant and the kernel's clocksource, and "
        f"calls clock_gettime elsewhere ({here}); one clock_gettime costs {clock:.1f} ns. "
        f"cellrate's allow takes {allow:.1f} ns; the decision and the compare-and-swap with "
        f"`now` passed in {given:.1f} ns. governor's default clock (quanta: TSC read and "
        f"scaling) costs {quanta:.1f} ns, a raw rdtsc {rdtsc:.1f} ns; governor's direct allow "
        f"takes {gov_q:.1f} ns with quanta and {gov_m:.1f} ns with std's MonotonicClock. "
        "The default clock ('fast') reads the same line without a fence, as quanta does: "
        f"{fast:.1f} ns a read, and with it cellrate's allow takes {allow_fast:.1f} ns and "
        f"its deny {deny_fast:.1f} ns."
    )


def floor_notes(results: Dict[str, dict]) -> List[str]:
    """Where a target sits against a floor measured in the same run."""
    def ns(sid: str) -> Optional[float]:
        return results.get(sid, {}).get("ns_per_op")

    notes = []
    keyed, floor = ns("c.cellrate.keyed.int_fast_clock"), ns("c.floor.keyed_slot_fast_clock")
    gov, aero = ns("rust.governor.keyed.quanta.int"), ns("rust.aerorate.keyed.int")
    if keyed and floor:
        peers = (f"; governor keyed takes {gov:.0f} ns and aerorate {aero:.0f} ns, context only"
                 if gov and aero else "")
        notes.append(
            "Keyed, 1M keys: the target is 1.05x the same work done the cheapest way (a table "
            "of cellrate's size and slot layout holding the same keys, the same draws, the "
            "table's keyed hash, the limit's own clock read, one 16-byte compare-and-swap of "
            f"the key's slot), {floor:.0f} ns here with the default clock, so "
            f"{1.05 * floor:.0f} ns a call (cellrate: {keyed:.0f} ns){peers}.")
    for t in (1, 2):
        mono, allow = ns(f"py.floor.monotonic_ns.{t}t"), ns(f"py.cellrate.limiter.allow.{t}t")
        best = fastest_peer(results, "limiter.allow", t)
        if mono and allow:
            peer = (f"; the fastest pure-Python peer ({best.split('.')[1]}) takes "
                    f"{ns(best):.0f} ns" if best else "")
            notes.append(
                f"Python, {t} thread(s): the target is 0.8x one time.monotonic_ns() call in the "
                f"same loop, {mono:.0f} ns here, so {0.8 * mono:.0f} ns a Limiter.allow() "
                f"(cellrate: {allow:.0f} ns){peer}: the interpreter's own call is the floor.")
        dict_incr, keyed_py = ns(f"py.floor.dict_incr.{t}t"), ns(f"py.cellrate.keyed.allow.{t}t")
        if dict_incr and keyed_py:
            notes.append(
                f"Python, {t} thread(s): `dict[key] += 1` on the same string keys takes "
                f"{dict_incr:.0f} ns; cellrate's keyed allow {keyed_py:.0f} ns "
                f"({keyed_py / dict_incr:.2f}x).")
    for version, name in (("lua5.4", "Lua 5.4"), ("luajit", "LuaJIT")):
        allow, fn, method, gettime = (ns(f"lua.{version}.cellrate.limiter.allow"),
                                      ns(f"lua.{version}.floor.c_fast_clock"),
                                      ns(f"lua.{version}.floor.c_method_fast_clock"),
                                      ns(f"lua.{version}.floor.c_clock"))
        ordered = ns(f"lua.{version}.cellrate.limiter.allow_monotonic_clock")
        if allow and fn and method:
            with_fast = f" ({ordered:.0f} ns with clock='monotonic')" if ordered else ""
            with_gettime = f"; with clock_gettime instead, {gettime:.0f} ns" if gettime else ""
            notes.append(
                f"{name}: lim:allow() takes {allow:.0f} ns{with_fast}; a C function reading "
                f"cellrate's default clock as it does {fn:.0f} ns as a plain function and "
                f"{method:.0f} ns as a method of a userdata (the call shape of lim:allow())"
                f"{with_gettime}.")
    return notes


def chart(evs_by_section: Dict[str, List[dict]], mem_evs: List[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    colors = {"cellrate": "#1f77b4", "peer": "#ff7f0e", "floor": "#7f7f7f"}
    panels = [(name, [e for e in evs if e["row"].chart and e["value"] and e["value"] > 0])
              for name, evs in evs_by_section.items()]
    panels.append(("Memory: bytes per tracked key at 1M keys",
                   [e for e in mem_evs if e["value"]]))
    panels = [panel for panel in panels if panel[1]]  # a partial run leaves some empty
    heights = [max(2.0, 0.32 * len(p[1]) + 1.0) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights)),
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, evs) in zip(axes, panels):
        labels = [e["row"].label for e in evs]
        values = [e["value"] for e in evs]
        is_mem = title.startswith("Memory")
        bar_colors = ([colors["cellrate"] if "cellrate" in label else colors["peer"] for label in labels]
                      if is_mem else [colors.get(e["row"].chart, "#999999") for e in evs])
        ax.barh(range(len(values)), values, color=bar_colors)
        ax.set_yticks(range(len(values)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_xlabel("bytes per key (log scale)" if is_mem else "ns per call (log scale, lower is better)",
                      fontsize=8)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:,.1f}", va="center", fontsize=7)
        ax.grid(axis="x", which="both", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    fig.legend(handles, ["cellrate", "peer", "floor / reference"], loc="upper right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)


SCENARIOS_MEASURED = """\
- **Floors** run in the same binary or interpreter as what they bound, and
  are the cheapest version of the same work: the CPU's counter, read as the
  limit's clock reads it (`rdtsc` for the default, `rdtscp` for
  `clock="monotonic"`) and left unscaled, plus an atomic load and a compare
  (the least a turn-away needs) or a load and a compare-and-swap (the least an
  admission needs); the keyed table's, below; in Python `time.monotonic_ns()`
  and `dict[key] += 1`, run in cellrate's group; in Lua a no-op C function and
  a C function that reads the clock. `clock_gettime` with a load (and a
  compare-and-swap) are context rows.
- **Allow path**: a limit of 1e8 per second with a burst of 1e9, so every call
  is admitted; **deny path**: one per hour, drained before timing, so every
  call is turned away. Each harness checks that every call went the named way.
- **The two clocks**: the default, `"fast"`, whose `CR_CLOCK` decisions read
  `cr_fast_clock_ns()` (CLOCK_MONOTONIC extrapolated from the TSC where the
  TSC is invariant and the kernel's clocksource is tsc, else CLOCK_MONOTONIC
  itself; the machine info says which) without a fence, and
  `clock="monotonic"`, the same line with the counter ordered (rdtscp). In C
  the `c.cellrate.limiter.allow`/`deny` and `c.cellrate.keyed.int` rows are
  made with `clock="monotonic"` and their `_fast_clock` rows with the
  default; in Python and Lua the plain rows are the default and the
  `_monotonic_clock` rows the ordered read. The default's floors: `rdtsc` +
  load + compare-and-swap for an admission, `rdtsc` + load for a turn-away
  (target 1.1x); the ordered read's: `rdtscp` + load (+ compare-and-swap),
  1.25x.
- **Counters**: the Limiter's allow path, the keyed allow path on 1 and 2
  threads (distinct halves of 1M keys) and a shared region's keyed path, each
  with the counters and against the same core built with `-DCR_NO_COUNTERS`
  (the benchmark's switch alone), both linked into one binary (the second's
  symbols renamed `nc_cr_*`) and run side by side in every round; the ratios
  are the median of the rounds' ratios.
- **Keyed, 1M keys** (C and Rust): one limit per key, every key admitted once
  before timing, then calls on keys drawn uniformly at random (the same draws
  in both harnesses), with integer-like keys (8 bytes) and short string keys
  (`user:<n>`). The limit (one per hour, burst 1e6) keeps every key tracked.
  The floor beside it is the same work done the cheapest way: a table of
  cellrate's size and slot layout (64-byte buckets of four 16-byte slots, huge
  pages), holding the same keys placed by the same rule, the same draws, the
  key hashed by the table's keyed hash into its two buckets, both fetched, the
  limit's own clock read (the core's, inlined), the key's slot found and
  swapped with one 16-byte compare-and-swap; each cellrate row and its floor
  take turns slice by slice in every run.
- **Threads**: total throughput of 2 threads against 1 doing the same work, on
  one key (one shared limiter) and on distinct keys (the 1M-key table, each
  thread on its own half); threads pinned one per CPU. Two controls that share
  nothing (clock reads; random table reads) show what 2 threads can gain on
  the machine at all.
- **Shared memory**: the same 1M integer keys and draws in a KeyedLimiter
  shared through a file under `/dev/shm` (a fresh path, removed afterwards),
  from 1 process and from 2 forked processes (pinned one per CPU, each on its
  own half of the keys, total throughput from a common start to the last end),
  against the in-process table on 1 and 2 threads, in the same round-robin
  group.
- **Fleet shares** (bench_share.py): `ShareLimiter.allow()` of a fleet of one
  (its share is the whole limit, 1e9/s) against `Limiter.allow()` with the same
  limit and `RedisLimiter.allow()` through a local redis-server, round-robin in
  one thread; a heartbeat timed with 4 and with 64 members in the record (its
  ns is a member's cost per second at `interval=1`).
- **Redis batches** (bench_redis_batch.py, its own redis-server on loopback):
  `AsyncRedisLimiter.allow()` from 1, 16 and 256 tasks, one call a decision
  against `coalesce=True`, as the time of one connection per admission;
  `check_many` of 100 keys against 100 `check` calls (and the asyncio pair), each
  run timing them side by side; and the ceiling of any batch of one key per
  decision: one script call doing only each key's GET and SET with expiry and a
  five-field reply. Every limit admits every call.
- **Concurrency**: acquire + release of one unit of a limit of 64 that no
  thread fills: in C (in process, in a region under `/dev/shm`, one key of a
  keyed table, 2 threads on one gauge) against an atomic increment checked
  against the limit and a decrement, and against two compare-and-swaps of a
  holder word (the least a holding that names its holder needs); in Python
  `try_acquire()` + `release()` against `threading.BoundedSemaphore`, and
  `async with hold()` against `asyncio.Semaphore`. In nginx, requests proxied
  to a slow upstream (a server of the same worker that sleeps 1 ms): no
  limiter, `limit_conn` by client, and `cellrate.nginx.hold` in the access
  phase with `leave` in the log phase, both with a limit the 32 connections
  never reach.
- **Peers**: governor (direct and keyed over dashmap; its default quanta/TSC
  clock and std's MonotonicClock) and aerorate (direct and keyed) from
  crates.io; limits (moving window; sliding window counter), throttled-py (GCRA;
  token bucket), pyrate-limiter (in-memory bucket) and token-bucket from PyPI,
  all with their in-memory stores and limits that admit every call.
- **Python**: each call in a plain `for` loop (the loop is part of every
  number, floors included); 100k string keys for keyed calls. The GIL-released
  rows use a second build of the extension that releases the GIL around each
  core call (docs/design.md §6); the shipped build keeps it.
- **throttled-py's own benchmark** (bench_throttled.py), in its shape (its README's
  table, made by its tests/benchmarks/test_throttled.py; our code): one key,
  `"/ping"`, `per_sec(1000)` (burst 1000), 100,000 calls one after another, each
  wrapped as it is made in a function that times it with `perf_counter_ns` and
  appends the readings to lists, throughput = calls / (last end - first start);
  baselines `table[key] = table.get(key, 0) + 1` and `INCRBY key 1` timed the
  same way. Every algorithm both have (its leaking bucket against cellrate's
  gcra); cellrate calls `check("/ping", cost=1)`. The same calls again in a
  bare loop; through a local redis-server 10,000 calls a run, gcra and token
  bucket, cellrate with `deny_cache=False` (one round trip a call) and with its
  default deny cache. At 1000 per second most calls are refused, as in its
  README; a fresh limiter (and a flushed server) each run.
- **Decorators**: a one-argument function that returns its argument, bare and
  under each decorator (cellrate's `@limit` blocking, with `block=False` and
  keyed; ratelimit's `@sleep_and_retry @limits`; pyrate-limiter's
  `as_decorator()`; for async functions aiolimiter's `async with`), with limits
  that admit every call; the overhead is the decorated call's time minus the
  bare call's, both from the same run.
- **Lua**: `lim:allow()` and `keyed:allow(key)` (100k keys) on Lua 5.4 and
  LuaJIT, against a plain-Lua GCRA and the trivial C functions. The floor is a
  C function making the clock read cellrate makes (the core's inlined reader:
  the default clock, or `clock="monotonic"`'s ordered read), as a function and
  as a userdata's method; one reading `clock_gettime` sits beside it as
  context (the plain-Lua GCRA's clock).
- **Memory**: RSS growth per key after admitting 1M distinct short string keys,
  in a fresh process per store, the store made after the baseline reading.
- Each number is the median of the timed runs (after one warm-up run); the
  scenarios of a group run round-robin, so a slow phase of the machine falls on
  all of them alike. Ratios compare numbers from the same run.
"""


def summary_line(targets: List[dict], every_ev: List[dict]) -> str:
    """The count of targets met (and how many verdicts lie inside the noise), and
    the rows below their floor in every round, which no row may be."""
    met = sum(1 for ev in targets if ev["met"])
    noisy_met = sum(1 for ev in targets if ev["met"] and ev["noise"])
    noisy_missed = sum(1 for ev in targets if ev["met"] is False and ev["noise"])
    beaten = list(dict.fromkeys(ev["row"].label for ev in every_ev if ev["beats_floor"]))
    return (f"Targets met: {met} of {len(targets)} ({noisy_met} of them, and {noisy_missed} "
            "of those not met, inside the noise of the run). Rows below their floor in every "
            f"round: {len(beaten)}" + (f" ({'; '.join(beaten)})." if beaten else "."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--reps", type=int, required=True)
    args = parser.parse_args()

    results = load(args.raw_dir)
    root = os.path.dirname(HERE)
    sections = {
        "C level (C harness and Rust harness, same machine, same run)": c_rows(),
        "Python level": python_rows(results),
        "Web middleware (Python, in-process)": web_rows(),
        "WebSocket messages and gRPC calls (Python)": adapter_rows(),
        "Python decorators (1 thread, every call admitted)": decorator_rows(),
        "Fleet shares (cellrate.share, a local redis-server, 1 thread)": share_rows(),
        "Redis batches and coalescing (a local redis-server)": redis_batch_rows(),
        "Lua level": lua_rows(),
        "Algorithm catalogue and check_all": catalogue_rows(),
        CONCURRENCY_SECTION: concurrency_rows(),
        "Counters: the allow paths with and without them": counters_rows(),
        THROTTLED_SECTION: throttled_rows(),
    }
    evs_by_section = {name: [evaluate(r, results) for r in rows] for name, rows in sections.items()}
    mem_evs = [evaluate(r, results) for r in memory_rows()]
    nginx_evs = [evaluate(r, results) for r in nginx_rows()]
    machine = machine_info(results, args.reps, root, args.raw_dir)

    targets = [ev for evs in list(evs_by_section.values()) + [mem_evs, nginx_evs]
               for ev in evs if ev["row"].target]
    every_ev = [ev for evs in list(evs_by_section.values()) + [mem_evs, nginx_evs] for ev in evs]
    summary = summary_line(targets, every_ev)

    out: List[str] = ["# cellrate benchmark results", "",
                      "Generated by `make bench` (bench/run.sh); every ratio compares two numbers "
                      "measured in the same run.", "", "## Machine", "", "```text", *machine, "```",
                      "", "## Targets", ""]
    out.append(markdown_table(targets, "ns/op or B/key"))
    out += ["", summary, "", NOISE_RULE, ""]
    note = clock_note(results)
    if note:
        out += [note, ""]
    floors_said = floor_notes(results)
    out += [f"- {n}" for n in floors_said] + [""]
    for name, evs in evs_by_section.items():
        out += [f"## {name}", "", markdown_table(evs), ""]
    out += [f"## {NGINX_SECTION}", "", markdown_table(nginx_evs, "CPU ns/request"), ""]
    out += ["## Memory: bytes per tracked key at 1M keys (RSS delta / keys, fresh process per store)",
            "", markdown_table(mem_evs, "bytes/key"), "", "![chart](chart.png)", "",
            "## What each scenario measures", "", SCENARIOS_MEASURED]

    headline_evs = [evaluate(r, results) for r in headline_rows(results)]
    machine_line = f"{machine[1][len('cpu: '):]}, {machine[2][len('cpus online: '):]} CPUs"
    def performance(report_link: str) -> str:
        """The headline table and its provenance, `report_link` the path of results.md
        from the file it is written into."""
        return "\n".join([
            headline_table(headline_evs), "",
            f"Measured by `make bench` on {machine_line} ({machine[0][len('date: '):]}); every "
            "ratio compares two numbers from the same run, and in parentheses is its spread: "
            "the range of its rounds' ratios where the two ran side by side, else of their "
            "runs' extreme pairings (unpaired). The full report, with every peer, "
            "floor and target, the machine, its load and stolen CPU time, and what each scenario "
            f"measures: [bench/results/results.md]({report_link}).",
        ])
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write("\n".join(out))
    with open(os.path.join(args.out_dir, "performance.md"), "w") as f:
        f.write(performance("results.md") + "\n")
    page = os.path.join(root, "docs", "performance.md")
    if not update_page(page, performance(os.path.relpath(os.path.join(args.out_dir, "results.md"),
                                                        os.path.dirname(page)))):
        print("docs/performance.md has no performance markers: not updated", file=sys.stderr)
    with open(os.path.join(args.out_dir, "machine.txt"), "w") as f:
        f.write("\n".join(machine) + "\n")
    chart_titles = {
        "C level (C harness and Rust harness, same machine, same run)": "C and Rust: ns per call",
        "Python level": "Python, 1 thread: ns per call",
        "Web middleware (Python, in-process)": "Web middleware: ns per request",
        "Lua level": "Lua 5.4 and LuaJIT: ns per call",
    }
    chart({chart_titles[k]: v for k, v in evs_by_section.items() if k in chart_titles}, mem_evs,
          os.path.join(args.out_dir, "chart.png"))

    print("\n".join(machine))
    print()
    print(markdown_table(targets, "ns/op or B/key"))
    print()
    print(summary)
    if note:
        print(note)
    for n in floors_said:
        print(f"- {n}")
    print(f"Full table: {os.path.join(args.out_dir, 'results.md')}; chart: "
          f"{os.path.join(args.out_dir, 'chart.png')}")


if __name__ == "__main__":
    main()
