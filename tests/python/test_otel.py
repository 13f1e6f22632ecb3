"""cellrate.otel: the counters of registered limits as OpenTelemetry metrics,
read by the SDK's in-memory reader: the names, units, instruments and
attributes of tests/vectors/metrics.txt, and for every series the count that
cellrate.prometheus scrapes from the same limits."""

import pytest

import cellrate
import cellrate.web

pytest.importorskip("opentelemetry.sdk", reason="make test installs opentelemetry-sdk")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum  # noqa: E402

import cellrate.otel  # noqa: E402
from test_metrics_table import vector_metrics  # noqa: E402

VECTORS = {metric["name"]: metric for metric in vector_metrics()}


def provider_and_reader():
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def collected(reader):
    """{metric name: (metric, {frozenset of attributes: value})} of one collection."""
    found = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            if scope.scope.name != "cellrate":  # the SDK's own (some versions report some)
                continue
            for metric in scope.metrics:
                points = {frozenset(point.attributes.items()): point.value
                          for point in metric.data.data_points}
                found[metric.name] = (metric, points)
    return found


def value(found, name, **attributes):
    return found[name][1][frozenset(attributes.items())]


def test_a_limiter_and_a_keyed_limiter_counted_exactly():
    provider, reader = provider_and_reader()
    lim = cellrate.Limiter("5/hour")
    keyed = cellrate.KeyedLimiter("2/hour", capacity=8)
    cellrate.otel.register(lim, name="global", meter_provider=provider)
    cellrate.otel.register(keyed, name="per-user", meter_provider=provider)
    admitted = sum(lim.allow(now=1.0) for _ in range(9))
    assert not lim.check(3, now=1.0).allowed
    keyed_admitted = sum(keyed.allow(user, now=1.0) for user in "abcabcab")
    assert admitted == 5 and keyed_admitted == 6
    found = collected(reader)
    name, outcome = "cellrate.limit.name", "cellrate.decision.outcome"
    assert value(found, "cellrate.decisions", **{name: "global", outcome: "admitted"}) == 5
    assert value(found, "cellrate.decisions", **{name: "global", outcome: "refused"}) == 5
    assert value(found, "cellrate.units", **{name: "global", outcome: "refused"}) == 4 + 3
    assert value(found, "cellrate.decisions", **{name: "per-user", outcome: "admitted"}) == 6
    assert value(found, "cellrate.evictions", **{name: "per-user"}) == 0
    for metric_name in ("cellrate.decisions", "cellrate.units", "cellrate.evictions"):
        metric, _ = found[metric_name]
        assert metric.unit == VECTORS[metric_name]["unit"]
        assert metric.description == VECTORS[metric_name]["help"]
        assert isinstance(metric.data, Sum) and metric.data.is_monotonic
    # read at each collection
    lim.reset_stats()
    assert lim.allow(now=10_000.0)
    found = collected(reader)
    assert value(found, "cellrate.decisions", **{name: "global", outcome: "admitted"}) == 1


def test_a_concurrency_limit_in_flight_and_its_peak():
    provider, reader = provider_and_reader()
    with_peak, without = cellrate.Concurrency(2, peak=True), cellrate.Concurrency(2)
    cellrate.otel.register(with_peak, name="workers", meter_provider=provider)
    cellrate.otel.register(without, name="plain", meter_provider=provider)
    first, second, third = with_peak.try_acquire(), with_peak.try_acquire(), without.try_acquire()
    assert with_peak.try_acquire() is None
    first.release()
    found = collected(reader)
    name = "cellrate.limit.name"
    assert value(found, "cellrate.acquires",
                 **{name: "workers", "cellrate.acquire.outcome": "refused"}) == 1
    assert value(found, "cellrate.releases",
                 **{name: "workers", "cellrate.release.how": "released"}) == 1
    in_flight, points = found["cellrate.in_flight"]
    assert isinstance(in_flight.data, Sum) and not in_flight.data.is_monotonic  # up-down
    assert points == {frozenset({(name, "workers")}): 1, frozenset({(name, "plain")}): 1}
    peak, points = found["cellrate.in_flight_peak"]
    assert isinstance(peak.data, Gauge)
    assert points == {frozenset({(name, "workers")}): 2}  # no peak tracked: no series
    second.release()
    third.release()


def test_every_series_is_the_one_prometheus_scrapes():
    """A web policy with routes, a "a;b" limit and concurrency, decided a few
    times: each series, mapped by the list's names, has the same count in both."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from cellrate.prometheus import register as register_prometheus

    provider, reader = provider_and_reader()
    registry = prometheus_client.CollectorRegistry()
    policy = cellrate.web.Policy("3/hour", routes={"POST /login": "1/hour;5/day"}, name="site",
                                 concurrency=4)
    cellrate.otel.register(policy, name="web", meter_provider=provider)
    register_prometheus(policy, name="web", registry=registry)
    for method, path in [("GET", "/")] * 5 + [("POST", "/login")] * 3:
        request = cellrate.web.Request(policy, method, path, scope={"client": ("192.0.2.1", 1)})
        _, slot = policy.hold(request)
        policy.decide(policy.limits_for(request), request)
        if slot is not None:
            slot.release()
    prometheus = {}
    for family in text_string_to_metric_families(
            prometheus_client.generate_latest(registry).decode()):
        for sample in family.samples:
            prometheus[(sample.name, frozenset(sample.labels.items()))] = sample.value
    otel = collected(reader)
    compared = 0
    for metric in cellrate._cellrate.metrics():
        names = dict(metric["labels"])
        if metric["label"]:
            names[metric["label"][0]] = metric["label"][1]
        for attributes, count in otel.get(metric["name"], (None, {}))[1].items():
            labels = {label: "" for label in names}
            labels.update({label: dict(attributes)[attribute] for label, attribute in names.items()
                           if attribute in dict(attributes)})
            assert prometheus[(metric["prometheus_name"], frozenset(labels.items()))] == count
            compared += 1
    assert compared == len(prometheus) > 20


def test_mistakes_name_their_parameter():
    provider, _ = provider_and_reader()
    lim = cellrate.Limiter(1)
    cellrate.otel.register(lim, name="one", meter_provider=provider)
    with pytest.raises(cellrate.InvalidArgument, match="^name: 'one' is already registered") as e:
        cellrate.otel.register(cellrate.Limiter(2), name="one", meter_provider=provider)
    assert e.value.param == "name"
    cellrate.otel.register(lim, name="one", meter_provider=provider_and_reader()[0])
    for call, param in [(lambda: cellrate.otel.register(object(), name="two",
                                                        meter_provider=provider), "limiter"),
                        (lambda: cellrate.otel.register(lim, name=3, meter_provider=provider),
                         "name"),
                        (lambda: cellrate.otel.register(lim, name="x", meter_provider="global"),
                         "meter_provider")]:
        with pytest.raises(cellrate.InvalidArgumentType) as e:
            call()
        assert e.value.param == param
    cellrate.otel.unregister("one", meter_provider=provider)
    cellrate.otel.register(lim, name="one", meter_provider=provider)  # free again
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.otel.unregister("nothing", meter_provider=provider)
    assert e.value.param == "name"


def test_the_global_provider_by_default():
    from opentelemetry import metrics

    provider, reader = provider_and_reader()
    metrics.set_meter_provider(provider)
    cellrate.otel.register(cellrate.Limiter(1), name="global-default")
    assert "cellrate.decisions" in collected(reader)
