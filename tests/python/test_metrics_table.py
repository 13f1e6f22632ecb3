"""The metrics every exporter publishes: the Python face's metrics() is the
reference list, tests/vectors/metrics.txt, which the C tests and busted
(tests/lua/metrics_spec.lua) hold the core and the Lua face to; and the
exporters publish exactly its names (docs/design.md §17)."""

from __future__ import annotations

import cellrate
from conftest import REPO


def vector_metrics() -> list[dict]:
    """metrics.txt in the shape of the Python face's metrics()."""
    metrics: list[dict] = []
    for line in (REPO / "tests" / "vectors" / "metrics.txt").read_text("utf-8").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "metric":
            head, _, help_text = rest.partition(" |")
            name, prometheus_name, type_, instrument, unit, stats, label, attribute = head.split()
            metrics.append({
                "name": name, "prometheus_name": prometheus_name, "help": help_text,
                "type": type_, "instrument": instrument, "unit": unit, "stats": stats,
                "labels": (), "label": None if label == "-" else (label, attribute),
                "samples": (), "by": None})
        elif kind == "by":
            metrics[-1]["by"] = tuple(rest.split())
        elif kind == "label":
            metrics[-1]["labels"] += (tuple(rest.split()),)
        elif kind == "sample":
            field, value = rest.split()
            metrics[-1]["samples"] += ((field, None if value == "-" else value),)
    assert metrics, "cannot read metrics.txt"
    return metrics


def test_the_python_face_returns_the_vectors():
    assert cellrate._cellrate.metrics() == vector_metrics()


def test_each_sample_reads_a_counter_of_its_kind():
    rate = cellrate.KeyedLimiter(1).stats()
    concurrency = cellrate.Concurrency(1).stats()
    by = cellrate.KeyedLimiter(1, plans={"pro": 2}, priorities={"a": 0}).stats_by()
    for metric in cellrate._cellrate.metrics():
        if metric["by"] is not None:  # a row of stats_by() under the label's name
            stats = next(iter(by[metric["by"][0]].values()))
            assert metric["stats"] == metric["by"][0]
        else:
            stats = rate if metric["stats"] == "rate" else concurrency
        for field, _ in metric["samples"]:
            assert field in stats, (metric["name"], field)


def test_every_call_returns_a_fresh_list():
    first = cellrate._cellrate.metrics()
    first[0]["name"] = "changed"
    assert cellrate._cellrate.metrics()[0]["name"] == "cellrate.decisions"
