"""What every metrics exporter of cellrate shares (cellrate.prometheus,
cellrate.otel): the core's list of metrics (docs/design.md §17), the stores
a registered object stands for with their labels, and the series each
reading gives. No exporter library is imported here."""

from __future__ import annotations

import threading
from typing import Any, Iterator, NamedTuple

import cellrate
from cellrate._cellrate import metrics
from cellrate._errors import invalid, invalid_type
from cellrate.web import Policy

# The metrics, their names, units, labels and help texts, as the core lists them
METRICS = metrics()


class Source(NamedTuple):
    """One store read at each collection, with the values of its labels."""
    store: Any
    labels: dict[str, str]  # by label name (limit, policy, route): those it has
    concurrency: bool


def sources(limiter: Any, name: str) -> list[Source]:
    """The stores `limiter` stands for: itself, or a web policy's limits and
    concurrency (those that count: stores without stats() are left out)."""
    policy = limiter if isinstance(limiter, Policy) else getattr(limiter, "policy", None)
    if not isinstance(policy, Policy):
        if not callable(getattr(limiter, "stats", None)):
            raise invalid_type("limiter", "limiter must be a Limiter, KeyedLimiter, Concurrency "
                               f"or web policy (a store with stats()), not "
                               f"{type(limiter).__name__}")
        return [Source(limiter, {"limit": name}, isinstance(limiter, cellrate.Concurrency))]
    policy_name = "default" if policy.name is None else policy.name
    found = []
    groups = [("", policy.limits)] + [
        (pattern, limits) for pattern, (_, limits) in zip(policy.route_patterns, policy.routes)]
    for route, limits in groups:
        for index, one in enumerate(limits):
            if callable(getattr(one.store, "stats", None)):
                # "100/day;10/hour": the parts after the first as the regions name them
                part = f"{name}#{index}" if index else name
                found.append(Source(one.store, {"limit": part, "policy": policy_name,
                                                "route": route}, False))
    if callable(getattr(policy.concurrency, "stats", None)):
        found.append(Source(policy.concurrency, {"limit": name, "policy": policy_name,
                                                 "route": ""}, True))
    return found


def checked_name(name: Any) -> str:
    if not isinstance(name, str):
        raise invalid_type("name", f"name must be a str, not {type(name).__name__}")
    if not name:
        raise invalid("name", "name must not be empty")
    return name


class Registered:
    """The limits registered with one exporter (a registry, a meter), by name."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._lock = threading.Lock()
        self._entries: dict[str, list[Source]] = {}

    def add(self, name: str, found: list[Source]) -> None:
        with self._lock:
            if name in self._entries:
                raise invalid("name", f"name: {name!r} is already registered in this "
                                      f"{self._where}; give each limit its own name")
            self._entries[name] = found

    def remove(self, name: str) -> None:
        with self._lock:
            if self._entries.pop(name, None) is None:
                raise invalid("name", f"name: {name!r} is not registered in this {self._where}")

    def read(self, concurrency: bool | None = None) -> list[Reading]:
        """Each registered store (of one kind, unless None) with its stats()
        now, and a rate limit's stats_by()."""
        with self._lock:
            found = [source for entry in self._entries.values() for source in entry
                     if concurrency is None or source.concurrency == concurrency]
        return [Reading(source, source.store.stats(),
                        {} if source.concurrency else source.store.stats_by())
                for source in found]


class Reading(NamedTuple):
    """A store's counters at one collection."""
    source: Source
    stats: dict[str, Any]
    by: dict[str, dict[str, dict[str, int]]]  # stats_by(): rows by label name, then by name


class Series(NamedTuple):
    """One series of a metric: its store, the value of the metric's `by`
    label (a plan's or a class's name; None without), of its own label, and
    its count."""
    source: Source
    by: str | None
    value: str | None
    count: int


def series(metric: dict[str, Any], read: list[Reading]) -> Iterator[Series]:
    """Every series of `metric` in `read`: a counter a store does not keep (a
    peak that is not tracked; plans or classes it has not) has none."""
    by = metric["by"]
    concurrency = metric["stats"] == "concurrency"
    for source, stats, rows_by in read:
        if source.concurrency != concurrency:
            continue
        if by is not None:  # a row for each plan or class: its label is stats_by()'s key
            for name, row in rows_by.get(by[0], {}).items():
                for field, value in metric["samples"]:
                    yield Series(source, name, value, row[field])
            continue
        for field, value in metric["samples"]:
            count = stats.get(field)
            if count is not None:
                yield Series(source, None, value, count)
