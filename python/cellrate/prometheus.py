"""Prometheus metrics of cellrate's limits (`pip install '.[prometheus]'`).

    import cellrate.prometheus
    cellrate.prometheus.register(limiter, name="api")

register() puts a limiter, a keyed limiter, a concurrency limit or a web
policy (or the middleware, dependency or decorator holding one) under `name`
in a prometheus_client registry (default: the global REGISTRY). Nothing is
counted here: each scrape reads the counters the core keeps (`stats()`), so a
limit in a shared region reports the totals of every process of the host.

The metrics are the core's list (`cellrate._cellrate.metrics()`, the one
list that cellrate.otel and the nginx helper read too): cellrate_decisions_total
and cellrate_units_total by outcome, cellrate_unfittable_total,
cellrate_evictions_total, and for a concurrency limit cellrate_acquires_total,
cellrate_acquire_units_total, cellrate_releases_total, cellrate_in_flight, ...;
for a keyed limit with plans cellrate_plan_decisions_total by `plan`, for a
limit with classes cellrate_priority_decisions_total by `priority`.
Labels: `limit`, the registered name; for a web policy also `policy`, its
name, and `route`, the pattern of `routes`, empty for the policy's `limit`;
never a client's key.

docs/operations.md#prometheus has a scrape.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Iterator

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cellrate._errors import invalid_type
from cellrate._metrics import METRICS, Registered, checked_name, series, sources

__all__ = ["register", "unregister"]


class CellrateCollector(Collector):
    """The registered limits of one registry, read at each scrape."""

    def __init__(self) -> None:
        self.registered = Registered("registry")

    def describe(self) -> list[Metric]:
        return []  # the families vary with what is registered: collect() at each scrape

    def collect(self) -> Iterator[Metric]:
        read = self.registered.read()
        for metric in METRICS:
            names = [name for name, _ in metric["labels"]]
            by, label = metric["by"], metric["label"]
            family: CounterMetricFamily | GaugeMetricFamily = (
                CounterMetricFamily if metric["type"] == "counter" else GaugeMetricFamily)(
                    metric["prometheus_name"], metric["help"],
                    labels=names + ([by[0]] if by else []) + ([label[0]] if label else []))
            for one in series(metric, read):
                family.add_metric([one.source.labels.get(name, "") for name in names]
                                  + ([one.by or ""] if by else [])
                                  + ([one.value or ""] if label else []), one.count)
            if family.samples:
                yield family


_COLLECTORS: weakref.WeakKeyDictionary[CollectorRegistry, CellrateCollector] = (
    weakref.WeakKeyDictionary())
_COLLECTORS_LOCK = threading.Lock()


def _collector(registry: CollectorRegistry | None) -> CellrateCollector:
    if registry is None:
        registry = REGISTRY
    if not isinstance(registry, CollectorRegistry):
        raise invalid_type("registry", "registry must be a prometheus_client CollectorRegistry "
                                       f"(or None: the global REGISTRY), not "
                                       f"{type(registry).__name__}")
    with _COLLECTORS_LOCK:
        collector = _COLLECTORS.get(registry)
        if collector is None:
            collector = _COLLECTORS[registry] = CellrateCollector()
            registry.register(collector)
        return collector


def register(limiter: Any, *, name: str, registry: CollectorRegistry | None = None) -> None:
    """Exports `limiter`'s counters under the label limit=`name`.

    limiter: a Limiter, KeyedLimiter or Concurrency (in process or shared=), or a
        cellrate.web.Policy or anything holding one as `.policy` (the ASGI and
        WSGI middleware, cellrate.fastapi.RateLimit, ...), whose limits are
        labelled by the policy's name and route pattern.
    name: the `limit` label; one name once per registry.
    registry: a prometheus_client CollectorRegistry; None: the global REGISTRY.
    """
    name = checked_name(name)
    _collector(registry).registered.add(name, sources(limiter, name))


def unregister(name: str, *, registry: CollectorRegistry | None = None) -> None:
    """Stops exporting what was registered under `name`."""
    _collector(registry).registered.remove(checked_name(name))
