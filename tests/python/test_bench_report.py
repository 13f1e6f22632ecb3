"""bench/report.py's judgement of a row against its floor, on records made up here:
no row may beat its floor outside its spread, whatever harness measured it."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "bench" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    return report


def record(sid, runs, group="g"):
    return {"id": sid, "ns_per_op": sorted(runs)[len(runs) // 2], "rep_ns": runs, "group": group}


def judged(report, row_runs, floor_runs, floor="lua.luajit.floor.c_fast_clock", target=("<=", 2.0)):
    report_row = report.Row("a row", "lua.luajit.cellrate.limiter.allow", "x_ref", floor,
                            "its floor", target)
    results = {"lua.luajit.cellrate.limiter.allow":
               record("lua.luajit.cellrate.limiter.allow", row_runs),
               floor: record(floor, floor_runs)}
    return report.evaluate(report_row, results)


def test_a_row_below_its_floor_in_every_round_is_flagged_in_any_harness():
    report = load_report()
    for floor in ("lua.luajit.floor.c_fast_clock", "c.floor.keyed_slot", "py.adapters.floor"):
        ev = judged(report, [43.0, 44.0, 42.0], [46.0, 47.0, 45.0], floor)
        assert ev["beats_floor"], floor
        assert "below its floor in every round" in ev["note"], floor


def test_a_row_below_its_floor_in_some_rounds_only_is_inside_the_noise():
    report = load_report()
    ev = judged(report, [43.0, 48.0, 42.0], [46.0, 47.0, 45.0])
    assert not ev["beats_floor"] and "below its floor" not in ev["note"]


def test_an_anchor_a_row_is_meant_to_beat_is_not_a_floor():
    """Python's time.monotonic_ns() and dict[key] += 1 are anchors: the targets ask
    cellrate's call to take less than they do."""
    report = load_report()
    ev = judged(report, [30.0, 31.0, 29.0], [56.0, 57.0, 55.0], "py.floor.monotonic_ns.1t",
                ("<=", 0.8))
    assert not ev["beats_floor"] and ev["note"] == ""


def test_the_summary_counts_the_rows_that_beat_their_floor():
    report = load_report()
    beaten = judged(report, [43.0, 44.0, 42.0], [46.0, 47.0, 45.0])
    kept = judged(report, [50.0, 51.0, 52.0], [46.0, 47.0, 45.0])
    text = report.summary_line([beaten, kept], [beaten, kept])
    assert "Rows below their floor in every round: 1 (a row)." in text


def test_the_run_time_is_read_from_the_steps_run_sh_records(tmp_path):
    """bench/run.sh writes each step's start to raw/steps.txt; the report states the
    run's wall time from the first step to the report, the installs and builds apart,
    and the longest steps (docs: how long make bench takes, measured this way)."""
    report = load_report()
    (tmp_path / "steps.txt").write_text(
        "1000 cellrate: core library and Lua modules\n"
        "1030 peers: Python virtualenv (x)\n"
        "1090 C level: floors, Limiter, KeyedLimiter (1M keys), threads, shared memory\n"
        "1390 Python level: floors\n"
        "1420 Python level: cellrate (GIL held)\n"
        "1450 nginx: wrk on loopback against no limiter, limit_req and cellrate.nginx\n"
        "2290 Report\n")
    assert report.run_time(str(tmp_path)) == (
        "21.5 min from the first step to the report (installs and builds 1.5 min, "
        "the scenarios 20.0 min); longest steps: nginx 14.0 min, C level 5.0 min, "
        "Python level 1.0 min")
    assert report.run_time(str(tmp_path / "absent")) == "unknown"


def test_the_plan_and_priority_rows_are_ratios_to_the_plain_rows_of_their_run():
    """The bounds of the rows: a keyed allow with plans within 5% of one without, a
    class's allow within 3% of a plain one, each taken round by round against the
    plain row of the same group (same process, same run)."""
    report = load_report()
    rows = {row.sid: row for row in report.c_rows()}
    keyed, single = "c.cellrate.keyed.int_fast_clock", "c.cellrate.limiter.allow_fast_clock"
    for sid, ref, group, bound in (
            ("c.cellrate.keyed.plans.default", keyed, "c.keyed", 1.05),
            ("c.cellrate.keyed.plans.half", keyed, "c.keyed", 1.05),
            ("c.cellrate.keyed.plans.pro", keyed, "c.keyed", 1.05),
            ("c.cellrate.keyed.priority", keyed, "c.keyed", 1.03),
            ("c.cellrate.limiter.allow_priority", single, "c.limiter", 1.03)):
        row = rows[sid]
        assert (row.kind, row.ref, row.target) == ("x_ref", ref, ("<=", bound)), sid
        results = {sid: record(sid, [102.0, 101.0, 120.0], group),
                   ref: record(ref, [100.0, 100.0, 100.0], group)}
        ev = report.evaluate(row, results)
        assert ev["paired"] and ev["ratio"] == 1.02 and ev["met"], sid
        assert ev["ratio_spread"] == (1.01, 1.2) and ev["noise"], sid


def test_bytes_per_key_with_plans_has_the_bound_of_a_table_without():
    report = load_report()
    rows = {row.sid: row for row in report.memory_rows()}
    row = rows["mem.cellrate.keyed.plans"]
    assert (row.kind, row.target) == ("bytes", ("<=", 32))
    ev = report.evaluate(row, {row.sid: {"id": row.sid, "bytes_per_key": 28.3}})
    assert ev["value"] == 28.3 and ev["met"]
