"""Requests counted by plan and by class (stats_by()), as Prometheus and
OpenTelemetry publish them: cellrate_plan_decisions_total{plan=...} and
cellrate_priority_decisions_total{priority=...}, counted exactly against what
the decisions answered, summing to cellrate_decisions_total; in process, and
in a shared region whose counts two processes made."""

import subprocess
import sys

import pytest

import cellrate

prometheus_client = pytest.importorskip("prometheus_client",
                                        reason="make test installs prometheus_client")
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

import cellrate.prometheus  # noqa: E402
from test_prometheus import sample, scraped  # noqa: E402

CLASSES = {"critical": 0, "normal": 0.2, "bulk": 0.5}


def plans_limiter(**options):
    return cellrate.KeyedLimiter("10/hour", plans={"pro": "40/hour", "free": "2/hour"},
                                 priorities=CLASSES, capacity=64, **options)


def decide(keyed, key, count, **named):
    """(admitted, refused) of `count` decisions of `key`, as they answered."""
    admitted = sum(keyed.allow(key, **named) for _ in range(count))
    return admitted, count - admitted


def test_stats_by_counts_each_request_once_in_its_plan_and_its_class():
    keyed = plans_limiter()
    assert decide(keyed, "a", 25, plan="pro") == (25, 0)
    assert decide(keyed, "b", 12, priority="bulk") == (5, 7)  # bulk keeps half of 10 back
    assert decide(keyed, "c", 4, plan="free", priority="critical") == (2, 2)
    assert not keyed.check("d", 11).allowed  # unfittable: a refusal of default's
    keyed.peek("e", plan="pro")  # a peek counts nothing
    by = keyed.stats_by()
    assert list(by["plan"]) == ["default", "free", "pro"]  # "default" first, then by name
    assert by["plan"] == {"default": {"admitted": 5, "refused": 8},
                          "free": {"admitted": 2, "refused": 2},
                          "pro": {"admitted": 25, "refused": 0}}
    assert by["priority"] == {"bulk": {"admitted": 5, "refused": 7},
                              # named, and no class: critical's, the class of reserve 0
                              "critical": {"admitted": 2 + 25, "refused": 2 + 1},
                              "normal": {"admitted": 0, "refused": 0}}
    stats = keyed.stats()
    for rows in by.values():
        assert sum(row["admitted"] for row in rows.values()) == stats["admitted"]
        assert sum(row["refused"] for row in rows.values()) == stats["refused"]
    keyed.reset_stats()
    assert keyed.stats_by()["plan"]["pro"] == {"admitted": 0, "refused": 0}


def test_a_store_without_plans_or_classes_has_no_rows():
    assert cellrate.KeyedLimiter("10/hour").stats_by() == {"plan": {}, "priority": {}}
    assert cellrate.Limiter("10/hour").stats_by() == {"plan": {}, "priority": {}}
    lim = cellrate.Limiter("10/hour", priorities=CLASSES)
    assert decide(lim, None, 0) == (0, 0)
    assert sum(lim.allow(priority="bulk") for _ in range(8)) == 5
    assert lim.stats_by() == {"plan": {}, "priority": {
        "bulk": {"admitted": 5, "refused": 3}, "critical": {"admitted": 0, "refused": 0},
        "normal": {"admitted": 0, "refused": 0}}}


def test_a_dry_run_moves_the_refusal_of_its_plan_and_class():
    import cellrate.wsgi

    registry = CollectorRegistry()
    app = cellrate.wsgi.RateLimitMiddleware(
        lambda environ, start: (start("200 OK", []), [b"ok"])[1], "10/hour",
        plans={"free": "4/hour"}, priorities=CLASSES, plan="free", priority="bulk",
        dry_run=True)
    cellrate.prometheus.register(app, name="web", registry=registry)
    statuses = []
    for _ in range(5):
        app({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1"},
            lambda status, headers, exc_info=None: statuses.append(status))
    assert statuses == ["200 OK"] * 5  # a dry run refuses nothing
    samples = scraped(generate_latest(registry).decode())
    labels = {"limit": "web", "policy": "default"}
    # bulk spends half of free's 4: 2, and 3 would-be refusals counted as such, not refused
    assert sample(samples, "cellrate_decisions_total", outcome="would_refuse", **labels) == 3
    for family, label in (("cellrate_plan_decisions_total", {"plan": "free"}),
                          ("cellrate_priority_decisions_total", {"priority": "bulk"})):
        assert sample(samples, family, outcome="admitted", **labels, **label) == 2
        assert sample(samples, family, outcome="refused", **labels, **label) == 0
    assert sample(samples, "cellrate_plan_decisions_total", outcome="refused", plan="default",
                  **labels) == 0


def test_prometheus_publishes_plans_and_classes_exactly():
    registry = CollectorRegistry()
    keyed = plans_limiter()
    plain = cellrate.KeyedLimiter("10/hour")
    cellrate.prometheus.register(keyed, name="api", registry=registry)
    cellrate.prometheus.register(plain, name="plain", registry=registry)
    n, m = 17, 9
    assert decide(keyed, "a", n, plan="pro") == (n, 0)
    assert decide(keyed, "b", 5 + m, priority="bulk") == (5, m)
    assert decide(plain, "a", 3) == (3, 0)
    text = generate_latest(registry).decode()
    samples = scraped(text)
    plan = "cellrate_plan_decisions_total"
    assert sample(samples, plan, limit="api", plan="pro", outcome="admitted") == n
    assert sample(samples, plan, limit="api", plan="pro", outcome="refused") == 0
    assert sample(samples, plan, limit="api", plan="default", outcome="refused") == m
    assert sample(samples, plan, limit="api", plan="free", outcome="admitted") == 0
    priority = "cellrate_priority_decisions_total"
    assert sample(samples, priority, limit="api", priority="bulk", outcome="refused") == m
    assert sample(samples, priority, limit="api", priority="bulk", outcome="admitted") == 5
    assert sample(samples, priority, limit="api", priority="critical", outcome="admitted") == n
    # the plain table has no such series; each family sums to cellrate_decisions_total
    assert 'limit="plain",plan=' not in text and 'limit="plain",priority=' not in text
    for family in (plan, priority):
        for outcome in ("admitted", "refused"):
            total = sum(value for (name, labels), value in samples.items()
                        if name == family and ("outcome", outcome) in labels)
            assert total == sample(samples, "cellrate_decisions_total", limit="api",
                                   outcome=outcome)


def test_opentelemetry_names_the_plan_and_the_class():
    pytest.importorskip("opentelemetry.sdk", reason="make test installs opentelemetry-sdk")
    import cellrate.otel
    from test_otel import collected, provider_and_reader, value

    provider, reader = provider_and_reader()
    keyed = plans_limiter()
    cellrate.otel.register(keyed, name="api", meter_provider=provider)
    assert decide(keyed, "a", 6, plan="pro") == (6, 0)
    assert decide(keyed, "b", 8, priority="bulk") == (5, 3)
    found = collected(reader)
    limit, outcome = "cellrate.limit.name", "cellrate.decision.outcome"
    assert value(found, "cellrate.plan_decisions", **{
        limit: "api", "cellrate.plan.name": "pro", outcome: "admitted"}) == 6
    assert value(found, "cellrate.plan_decisions", **{
        limit: "api", "cellrate.plan.name": "default", outcome: "refused"}) == 3
    assert value(found, "cellrate.priority_decisions", **{
        limit: "api", "cellrate.priority.name": "bulk", outcome: "refused"}) == 3
    assert value(found, "cellrate.priority_decisions", **{
        limit: "api", "cellrate.priority.name": "critical", outcome: "admitted"}) == 6


CHILD = """
import cellrate, sys
keyed = cellrate.KeyedLimiter("10/hour", plans={"pro": "40/hour", "free": "2/hour"},
                              priorities={"critical": 0, "normal": 0.2, "bulk": 0.5},
                              capacity=64, shared=sys.argv[1])
pro = sum(keyed.allow("p" + sys.argv[2], plan="pro") for _ in range(30))
bulk = sum(keyed.allow("b" + sys.argv[2], priority="bulk") for _ in range(9))
print(pro, 30 - pro, bulk, 9 - bulk)
"""


def test_a_shared_region_counts_every_process(tmp_path):
    path = str(tmp_path / "api.region")
    outs = [subprocess.run([sys.executable, "-c", CHILD, path, str(i)], check=True,
                           capture_output=True, text=True, timeout=120).stdout.split()
            for i in range(2)]
    counts = [[int(word) for word in out] for out in outs]
    assert counts == [[30, 0, 5, 4]] * 2
    registry = CollectorRegistry()
    keyed = plans_limiter(shared=path)
    cellrate.prometheus.register(keyed, name="api", registry=registry)
    samples = scraped(generate_latest(registry).decode())
    plan, priority = "cellrate_plan_decisions_total", "cellrate_priority_decisions_total"
    assert sample(samples, plan, limit="api", plan="pro", outcome="admitted") == 60
    assert sample(samples, plan, limit="api", plan="default", outcome="admitted") == 10
    assert sample(samples, plan, limit="api", plan="default", outcome="refused") == 8
    assert sample(samples, priority, limit="api", priority="bulk", outcome="refused") == 8
    assert sample(samples, priority, limit="api", priority="critical", outcome="admitted") == 60
