"""cellrate.nginx.metrics(): the Prometheus text of the registered limits, read
from their shared regions, so the answer of any one of 4 workers is the host's
total. The test counts every 200 and 429 itself, then scrapes /metrics until
several workers have answered, parsing each scrape with prometheus_client's
own parser."""

from __future__ import annotations

import concurrent.futures
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server import Nginx  # noqa: E402

parser = pytest.importorskip("prometheus_client.parser",
                             reason="make test installs prometheus_client")

CLIENTS = 6
REQUESTS = 16  # per client; limits.per_client admits a burst of 10 (nothing restored)
BURST = 10


def scraped(text: str) -> dict:
    samples = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_metrics_summed_over_four_workers():
    with Nginx(workers=4, listen_options="reuseport") as server:
        def client(index: int) -> list[tuple[int, str]]:
            replies = []
            for _ in range(REQUESTS):
                # a new connection each time: reuseport spreads them over the workers
                status, headers, _ = server.get("/limited",
                                                headers={"X-Real-IP": f"192.0.2.{index}"})
                replies.append((status, headers["X-Worker"]))
            return replies

        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            replies = [r for batch in pool.map(client, range(1, CLIENTS + 1)) for r in batch]
        for _ in range(5):
            assert server.get("/in_flight?sleep=0")[0] == 200
            # Its log phase releases the unit after the response: with
            # reuseport the next request may reach another worker first, and
            # overlap it. Sequential means after the release.
            assert server.until_held(0) == 0
        scrapes = []
        answered_by = set()
        for _ in range(200):
            status, headers, body = server.get("/metrics")
            assert status == 200 and headers["Content-Type"].startswith("text/plain")
            scrapes.append(body.decode())
            answered_by.add(headers["X-Worker"])
            if len(answered_by) == 4:
                break
    statuses = [status for status, _ in replies]
    deciders = {worker for _, worker in replies}
    assert statuses.count(200) == CLIENTS * BURST
    assert statuses.count(429) == CLIENTS * (REQUESTS - BURST)
    assert len(deciders) >= 2, deciders  # the decisions were spread over workers
    assert len(answered_by) >= 2, answered_by
    for text in scrapes:
        samples = scraped(text)
        types = {f.name: f.type for f in parser.text_string_to_metric_families(text)}
        assert types["cellrate_decisions"] == "counter" and types["cellrate_in_flight"] == "gauge"
        assert value(samples, "cellrate_decisions_total", limit="per_client",
                     outcome="admitted") == statuses.count(200)
        assert value(samples, "cellrate_decisions_total", limit="per_client",
                     outcome="refused") == statuses.count(429)
        assert value(samples, "cellrate_units_total", limit="per_client",
                     outcome="refused") == statuses.count(429)
        assert value(samples, "cellrate_decisions_total", limit="route", outcome="admitted") == 0
        assert value(samples, "cellrate_acquires_total", limit="in_flight",
                     outcome="acquired") == 5
        assert value(samples, "cellrate_releases_total", limit="in_flight", how="released") == 5
        assert value(samples, "cellrate_in_flight", limit="in_flight") == 0
        assert value(samples, "cellrate_in_flight_peak", limit="in_flight") == 1
        assert value(samples, "cellrate_in_flight", limit="untracked") == 0
        assert ("cellrate_in_flight_peak", frozenset({("limit", "untracked")})) not in samples
        assert "192.0.2." not in text  # no client key in any label
        assert value(samples, "cellrate_decisions_total", limit='waiting "slow"\\ \n',
                     outcome="admitted") == 0  # escaped, and read back


def test_register_refuses_what_no_scrape_could_sum():
    with Nginx(workers=1) as server:
        _, _, body = server.get("/bad_registrations")
    lines = body.decode().splitlines()
    assert len(lines) == 5 and "accepted" not in lines, lines
    assert "limit: 'in_process' is not in a shared region" in lines[0]
    assert "name: 'per_client' is already registered" in lines[1]
    assert lines[2].startswith("name must be a non-empty string")
    assert lines[3].startswith("name must be a non-empty string")
    assert lines[4].startswith("limit must be a cellrate limiter")
