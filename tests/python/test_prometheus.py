"""cellrate.prometheus: the counters of registered limits, read at each scrape
and parsed back with prometheus_client's own parser; and a real app's
/metrics (uvicorn, two workers on one shared= directory) scraped over HTTP,
its counts against the 200s and 429s this test counted itself."""

import http.client
import os
import subprocess
import sys
import time

import pytest

import cellrate

prometheus_client = pytest.importorskip("prometheus_client",
                                        reason="make test installs prometheus_client")
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

import cellrate.prometheus  # noqa: E402
from conftest import HERE  # noqa: E402


def scraped(text):
    """{(sample name, frozenset of non-empty labels): value} of an exposition."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if v != "")
            samples[(sample.name, labels)] = sample.value
    return samples


def families(text):
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def sample(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def test_import_cellrate_does_not_import_prometheus_client():
    out = subprocess.run([sys.executable, "-c", "import sys, cellrate, cellrate.web; "
                          "print('prometheus_client' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_limiter_and_a_keyed_limiter_counted_exactly():
    registry = CollectorRegistry()
    lim = cellrate.Limiter("5/hour")
    keyed = cellrate.KeyedLimiter("2/hour", capacity=8)
    cellrate.prometheus.register(lim, name="global", registry=registry)
    cellrate.prometheus.register(keyed, name="per-user", registry=registry)
    admitted = sum(lim.allow(now=1.0) for _ in range(9))
    units = [lim.check(3, now=1.0).allowed]  # 3 units refused: the burst is spent
    keyed_admitted = sum(keyed.allow(user, now=1.0) for user in "abcabcab")
    keyed.refund("a", 5, now=1.0)  # the two units "a" holds come back: counted up, never down
    text = generate_latest(registry).decode()
    samples = scraped(text)
    assert families(text)["cellrate_decisions"] == "counter"
    assert families(text)["cellrate_units"] == "counter"
    assert admitted == 5 and units == [False] and keyed_admitted == 6
    assert sample(samples, "cellrate_decisions_total", limit="global", outcome="admitted") == 5
    assert sample(samples, "cellrate_decisions_total", limit="global", outcome="refused") == 5
    assert sample(samples, "cellrate_units_total", limit="global", outcome="admitted") == 5
    assert sample(samples, "cellrate_units_total", limit="global", outcome="refused") == 4 + 3
    assert sample(samples, "cellrate_decisions_total", limit="per-user", outcome="admitted") == 6
    assert sample(samples, "cellrate_decisions_total", limit="per-user", outcome="refused") == 2
    assert sample(samples, "cellrate_units_total", limit="per-user", outcome="admitted") == 6
    assert sample(samples, "cellrate_units_total", limit="per-user", outcome="refunded") == 2
    assert sample(samples, "cellrate_evictions_total", limit="per-user") == 0
    # read at each scrape: the next one sees what was decided since
    lim.reset_stats()
    assert lim.allow(now=10_000.0)
    samples = scraped(generate_latest(registry).decode())
    assert sample(samples, "cellrate_decisions_total", limit="global", outcome="admitted") == 1
    assert sample(samples, "cellrate_decisions_total", limit="global", outcome="refused") == 0


def test_a_concurrency_limit_in_flight_and_its_peak():
    registry = CollectorRegistry()
    conc = cellrate.Concurrency(2, peak=True)
    cellrate.prometheus.register(conc, name="workers", registry=registry)
    first, second = conc.try_acquire(), conc.try_acquire()
    assert conc.try_acquire() is None
    first.release()
    text = generate_latest(registry).decode()
    samples = scraped(text)
    assert families(text)["cellrate_in_flight"] == "gauge"
    assert families(text)["cellrate_in_flight_peak"] == "gauge"
    assert sample(samples, "cellrate_acquires_total", limit="workers", outcome="acquired") == 2
    assert sample(samples, "cellrate_acquires_total", limit="workers", outcome="refused") == 1
    assert sample(samples, "cellrate_releases_total", limit="workers", how="released") == 1
    assert sample(samples, "cellrate_in_flight", limit="workers") == 1
    assert sample(samples, "cellrate_in_flight_peak", limit="workers") == 2
    second.release()


def test_a_concurrency_limit_without_a_peak_exports_none():
    registry = CollectorRegistry()
    conc = cellrate.Concurrency(2)
    cellrate.prometheus.register(conc, name="workers", registry=registry)
    slot = conc.try_acquire()
    text = generate_latest(registry).decode()
    assert sample(scraped(text), "cellrate_in_flight", limit="workers") == 1
    assert "cellrate_in_flight_peak" not in text
    slot.release()


def test_a_policy_is_labelled_by_its_name_and_route_never_by_key():
    registry = CollectorRegistry()
    policy = cellrate.web.Policy("3/hour", routes={"POST /login": "1/hour;5/day"}, name="site")
    cellrate.prometheus.register(policy, name="web", registry=registry)
    samples = scraped(generate_latest(registry).decode())
    series = {labels for name, labels in samples if name == "cellrate_decisions_total"}
    assert {dict(labels).get("route", "") for labels in series} == {"", "POST /login"}
    assert {dict(labels)["limit"] for labels in series} == {"web", "web#1"}
    assert {dict(labels)["policy"] for labels in series} == {"site"}


def test_mistakes_name_their_parameter():
    registry = CollectorRegistry()
    lim = cellrate.Limiter(1)
    cellrate.prometheus.register(lim, name="one", registry=registry)
    with pytest.raises(cellrate.InvalidArgument, match="^name: 'one' is already registered") as e:
        cellrate.prometheus.register(cellrate.Limiter(2), name="one", registry=registry)
    assert e.value.param == "name"
    # another registry is another namespace
    cellrate.prometheus.register(lim, name="one", registry=CollectorRegistry())
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.prometheus.register(object(), name="two", registry=registry)
    assert e.value.param == "limiter"
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.prometheus.register(lim, name=3, registry=registry)
    assert e.value.param == "name"
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.prometheus.register(lim, name="three", registry="global")
    assert e.value.param == "registry"
    cellrate.prometheus.unregister("one", registry=registry)
    cellrate.prometheus.register(lim, name="one", registry=registry)  # free again
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.prometheus.unregister("nothing", registry=registry)
    assert e.value.param == "name"


# -- a real app's /metrics over HTTP ------------------------------------------------


def scrape(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/metrics/")
        response = connection.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        connection.close()


def send(port, method, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_a_real_app_scraped_over_http(tmp_path):
    pytest.importorskip("starlette", reason="make test installs starlette")
    pytest.importorskip("uvicorn", reason="make test installs uvicorn")
    from test_web_servers import free_port, server_env, stop, wait_until_listening

    region = tmp_path / "regions"
    port = free_port()
    log = tmp_path / "server.log"
    env = server_env(CELLRATE_REGION=str(region))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "metrics_app:app", "--host", "127.0.0.1",
             "--port", str(port), "--workers", "2", "--no-access-log"],
            cwd=str(HERE), env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_until_listening(port, proc, log)
        statuses = {"/": [], "/login": []}
        for _ in range(8):
            statuses["/"].append(send(port, "GET", "/"))
        for _ in range(4):
            statuses["/login"].append(send(port, "POST", "/login"))
        time.sleep(0.1)
        # each scrape is answered by one worker, and each reads the shared regions
        texts = [scrape(port) for _ in range(4)]
    finally:
        stop(proc)
    assert statuses["/"].count(200) == 5 and statuses["/"].count(429) == 3, statuses
    assert statuses["/login"].count(200) == 2 and statuses["/login"].count(429) == 2, statuses
    for text in texts:
        assert families(text)["cellrate_decisions"] == "counter"
        samples = scraped(text)
        for route, counted in (("/", statuses["/"]), ("POST /login", statuses["/login"])):
            labels = {"limit": "web", "policy": "site", "route": route}
            assert sample(samples, "cellrate_decisions_total", outcome="admitted",
                          **labels) == counted.count(200), (route, text)
            assert sample(samples, "cellrate_decisions_total", outcome="refused",
                          **labels) == counted.count(429), (route, text)
            assert sample(samples, "cellrate_units_total", outcome="refused",
                          **labels) == counted.count(429)
        # the dry run refused nothing, and counted what it would have refused
        total = len(statuses["/"]) + len(statuses["/login"])
        labels = {"limit": "rollout", "policy": "rollout"}
        assert sample(samples, "cellrate_decisions_total", outcome="admitted", **labels) == 3
        assert sample(samples, "cellrate_decisions_total", outcome="would_refuse",
                      **labels) == total - 3
        assert sample(samples, "cellrate_decisions_total", outcome="refused", **labels) == 0
        # no client key in any label
        assert "127.0.0.1" not in text
    assert os.path.isdir(region)
