"""Prometheus metrics of cellrate's limits (`pip install '.[prometheus]'`).

    import cellrate.prometheus
    cellrate.prometheus.register(limiter, name="api")

register() puts a limiter, a keyed limiter, a concurrency limit or a web
policy (or the middleware, dependency or decorator holding one) under `name`
in a prometheus_client registry (default: the global REGISTRY). Nothing is
counted here: each scrape reads the counters the core keeps (`stats()`), so a
limit in a shared region reports the totals of every process of the host.

Metrics (labels `limit`: the registered name; for a web policy also `policy`,
its name, and `route`, the pattern of `routes`, empty for the policy's
`limit`; never a client's key):

    cellrate_decisions_total{outcome}   requests decided: admitted, refused,
                                        would_refuse (dry run: refused had it
                                        been enforced, and let through)
    cellrate_units_total{outcome}       units of those requests: admitted, refused
    cellrate_unfittable_total           refusals of a cost above the burst
                                        (never fits; counted in refused too)
    cellrate_evictions_total            keys evicted from a full keyed table
    cellrate_acquires_total{outcome}    concurrency: acquired, refused
    cellrate_acquire_units_total{outcome}  their units
    cellrate_releases_total{how}        released, reclaimed (a lease expired)
    cellrate_in_flight                  units held now (gauge)
    cellrate_in_flight_peak             the most held at once since the
                                        counters were last reset (gauge; only
                                        for a limit made with peak=True)
    cellrate_concurrency_evictions_total  keys evicted from a full keyed table

docs/operations.md#prometheus has a scrape.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Iterator, Mapping, NamedTuple

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import cellrate
from cellrate._errors import invalid, invalid_type
from cellrate.web import Policy

__all__ = ["register", "unregister"]

LABELS = ("limit", "policy", "route")

# (metric, help, type, [(stats key, extra label value)], extra label); one table per kind
_Family = tuple[str, str, str, list[tuple[str, str]], str]
RATE: list[_Family] = [
    ("cellrate_decisions", "Requests decided by a rate limit, by outcome.", "counter",
     [("admitted", "admitted"), ("refused", "refused"), ("would_refuse", "would_refuse")],
     "outcome"),
    ("cellrate_units", "Units (cost) of the requests decided by a rate limit, by outcome "
     "(refunded: units given back after their admission).",
     "counter", [("units_admitted", "admitted"), ("units_refused", "refused"),
                 ("units_refunded", "refunded")], "outcome"),
    ("cellrate_unfittable", "Refusals of a cost above the burst, which never fits.", "counter",
     [("unfittable", "")], ""),
    ("cellrate_evictions", "Keys evicted from a full keyed table.", "counter",
     [("evicted", "")], ""),
]
CONCURRENCY: list[_Family] = [
    ("cellrate_acquires", "Acquires decided by a concurrency limit, by outcome.", "counter",
     [("acquired", "acquired"), ("refused", "refused")], "outcome"),
    ("cellrate_acquire_units", "Units (cost) of the acquires of a concurrency limit, by outcome.",
     "counter", [("units_acquired", "acquired"), ("units_refused", "refused")], "outcome"),
    ("cellrate_releases", "Holdings of a concurrency limit ended: released, or reclaimed when "
     "their lease expired.", "counter", [("released", "released"), ("reclaimed", "reclaimed")],
     "how"),
    ("cellrate_in_flight", "Units of a concurrency limit held now.", "gauge",
     [("in_flight", "")], ""),
    ("cellrate_in_flight_peak", "The most units of a concurrency limit held at once since its "
     "counters were reset.", "gauge", [("peak", "")], ""),
    ("cellrate_concurrency_evictions", "Keys evicted from a full keyed concurrency table.",
     "counter", [("evicted", "")], ""),
]


class _Source(NamedTuple):
    """One store read at scrape time, with its labels."""
    store: Any
    labels: tuple[str, str, str]
    concurrency: bool


def _sources(limiter: Any, name: str) -> list[_Source]:
    """The stores `limiter` stands for: itself, or a web policy's limits and
    concurrency (those that count: stores without stats() are left out)."""
    policy = limiter if isinstance(limiter, Policy) else getattr(limiter, "policy", None)
    if not isinstance(policy, Policy):
        if not callable(getattr(limiter, "stats", None)):
            raise invalid_type("limiter", "limiter must be a Limiter, KeyedLimiter, Concurrency "
                               f"or web policy (a store with stats()), not "
                               f"{type(limiter).__name__}")
        return [_Source(limiter, (name, "", ""), isinstance(limiter, cellrate.Concurrency))]
    policy_name = "default" if policy.name is None else policy.name
    sources = []
    groups = [("", policy.limits)] + [
        (pattern, limits) for pattern, (_, limits) in zip(policy.route_patterns, policy.routes)]
    for route, limits in groups:
        for index, one in enumerate(limits):
            if callable(getattr(one.store, "stats", None)):
                # "100/day;10/hour": the parts after the first as the regions name them
                part = f"{name}#{index}" if index else name
                sources.append(_Source(one.store, (part, policy_name, route), False))
    if callable(getattr(policy.concurrency, "stats", None)):
        sources.append(_Source(policy.concurrency, (name, policy_name, ""), True))
    return sources


class CellrateCollector(Collector):
    """The registered limits of one registry, read at each scrape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, list[_Source]] = {}

    def add(self, name: str, sources: list[_Source]) -> None:
        with self._lock:
            if name in self._entries:
                raise invalid("name", f"name: {name!r} is already registered in this registry; "
                                      "give each limit its own name")
            self._entries[name] = sources

    def remove(self, name: str) -> bool:
        with self._lock:
            return self._entries.pop(name, None) is not None

    def describe(self) -> list[Metric]:
        return []  # the families vary with what is registered: collect() at each scrape

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            sources = [source for entry in self._entries.values() for source in entry]
        read = [(source, source.store.stats()) for source in sources]
        for concurrency, table in ((False, RATE), (True, CONCURRENCY)):
            for metric, documentation, kind, samples, extra in table:
                labels = list(LABELS) + ([extra] if extra else [])
                family: CounterMetricFamily | GaugeMetricFamily = (
                    CounterMetricFamily(metric, documentation, labels=labels)
                    if kind == "counter" else GaugeMetricFamily(metric, documentation,
                                                                labels=labels))
                for source, stats in read:
                    if source.concurrency == concurrency:
                        _add(family, source.labels, stats, samples, extra)
                if family.samples:
                    yield family


def _add(family: CounterMetricFamily | GaugeMetricFamily, labels: tuple[str, str, str],
         stats: Mapping[str, int | None], samples: list[tuple[str, str]], extra: str) -> None:
    for key, value in samples:
        count = stats.get(key)
        if count is not None:  # a peak that is not tracked: no sample
            family.add_metric(list(labels) + ([value] if extra else []), count)


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


def _checked_name(name: Any) -> str:
    if not isinstance(name, str):
        raise invalid_type("name", f"name must be a str, not {type(name).__name__}")
    if not name:
        raise invalid("name", "name must not be empty")
    return name


def register(limiter: Any, *, name: str, registry: CollectorRegistry | None = None) -> None:
    """Exports `limiter`'s counters under the label limit=`name`.

    limiter: a Limiter, KeyedLimiter or Concurrency (in process or shared=), or a
        cellrate.web.Policy or anything holding one as `.policy` (the ASGI and
        WSGI middleware, cellrate.fastapi.RateLimit, ...), whose limits are
        labelled by the policy's name and route pattern.
    name: the `limit` label; one name once per registry.
    registry: a prometheus_client CollectorRegistry; None: the global REGISTRY.
    """
    name = _checked_name(name)
    sources = _sources(limiter, name)
    _collector(registry).add(name, sources)


def unregister(name: str, *, registry: CollectorRegistry | None = None) -> None:
    """Stops exporting what was registered under `name`."""
    name = _checked_name(name)
    if not _collector(registry).remove(name):
        raise invalid("name", f"name: {name!r} is not registered in this registry")
