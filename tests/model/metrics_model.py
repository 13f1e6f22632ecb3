"""Reference list of the metrics every exporter publishes (docs/design.md §17).

Written from the metric names Prometheus users already scrape and the
OpenTelemetry semantic conventions' naming rules, independently of
core/metrics.c: make_vectors.py writes it to tests/vectors/metrics.txt,
which the C tests, pytest and busted compare with what the core and both
faces' metrics() return.

OpenTelemetry names (docs/specs/semconv/general/naming): lower case, dotted
under the project's namespace, no `total`; a counter of discrete things is
plural with a `{thing}` unit. Attributes are namespaced too. The Prometheus
name is what OpenTelemetry's Prometheus exporter makes of the OpenTelemetry
one (dots to underscores, `_total` after a monotonic counter, a `{...}` unit
dropped), so a service exporting through either sees the same series; the
Prometheus label names are those the exporters already published.
"""

from __future__ import annotations

from dataclasses import dataclass

# The labels every series may carry: (Prometheus label, OpenTelemetry attribute).
LABELS = [
    ("limit", "cellrate.limit.name"),
    ("policy", "cellrate.policy.name"),
    ("route", "cellrate.route.pattern"),
]

# OpenTelemetry instrument -> Prometheus type (an up-down counter is a gauge there)
PROMETHEUS_TYPE = {"counter": "counter", "updowncounter": "gauge", "gauge": "gauge"}


@dataclass(frozen=True)
class Metric:
    name: str
    help: str
    instrument: str
    unit: str
    stats: str  # "rate": a rate limit's stats(); "concurrency": a concurrency limit's;
    #             "plan", "priority": the rows of a rate limit's stats_by() under that key
    label: tuple[str, str] | None  # (Prometheus label, attribute) telling samples apart
    samples: list[tuple[str, str | None]]  # (stats field, label value)
    # (Prometheus label, attribute) whose value is a row's name: a plan's, a class's
    by: tuple[str, str] | None = None

    @property
    def prometheus_name(self) -> str:
        base = self.name.replace(".", "_")
        return base + "_total" if self.instrument == "counter" else base

    @property
    def type(self) -> str:
        return PROMETHEUS_TYPE[self.instrument]


DECISION = ("outcome", "cellrate.decision.outcome")
ACQUIRE = ("outcome", "cellrate.acquire.outcome")

METRICS = [
    Metric("cellrate.decisions", "Requests decided by a rate limit, by outcome.", "counter",
           "{request}", "rate", DECISION,
           [("admitted", "admitted"), ("refused", "refused"), ("would_refuse", "would_refuse")]),
    Metric("cellrate.units", "Units (cost) of the requests decided by a rate limit, by outcome "
           "(refunded: units given back after their admission).",
           "counter", "{unit}", "rate", DECISION,
           [("units_admitted", "admitted"), ("units_refused", "refused"),
            ("units_refunded", "refunded")]),
    Metric("cellrate.unfittable", "Refusals of a cost above the burst, which never fits.",
           "counter", "{request}", "rate", None, [("unfittable", None)]),
    Metric("cellrate.evictions", "Keys evicted from a full keyed table.", "counter", "{key}",
           "rate", None, [("evicted", None)]),
    Metric("cellrate.acquires", "Acquires decided by a concurrency limit, by outcome.", "counter",
           "{acquire}", "concurrency", ACQUIRE, [("acquired", "acquired"), ("refused", "refused")]),
    Metric("cellrate.acquire_units",
           "Units (cost) of the acquires of a concurrency limit, by outcome.", "counter", "{unit}",
           "concurrency", ACQUIRE, [("units_acquired", "acquired"), ("units_refused", "refused")]),
    Metric("cellrate.releases", "Units of a concurrency limit given back: released by their "
           "holders, or reclaimed (a lease expired, a dead process).", "counter", "{unit}",
           "concurrency", ("how", "cellrate.release.how"),
           [("released", "released"), ("reclaimed", "reclaimed")]),
    Metric("cellrate.in_flight", "Units of a concurrency limit held now.", "updowncounter",
           "{unit}", "concurrency", None, [("in_flight", None)]),
    Metric("cellrate.in_flight_peak", "The most units of a concurrency limit held at once since "
           "its counters were reset.", "gauge", "{unit}", "concurrency", None, [("peak", None)]),
    Metric("cellrate.concurrency_evictions", "Keys evicted from a full keyed concurrency table.",
           "counter", "{key}", "concurrency", None, [("evicted", None)]),
    Metric("cellrate.bans", "Bans a penalty started: keys refused for a while after repeated "
           "refusals.", "counter", "{ban}", "rate", None, [("bans", None)]),
    # Plans and classes (docs/design/plans.md, priorities.md): DESIGN.md's names, plan= and
    # priority=, as labels; metrics of their own, so that a sum of cellrate_decisions_total
    # still counts each request once.
    Metric("cellrate.plan_decisions", "Requests decided by a rate limit with plans, by plan "
           "and outcome.", "counter", "{request}", "plan", DECISION,
           [("admitted", "admitted"), ("refused", "refused")], ("plan", "cellrate.plan.name")),
    Metric("cellrate.priority_decisions", "Requests decided by a rate limit with priority "
           "classes, by class and outcome.", "counter", "{request}", "priority", DECISION,
           [("admitted", "admitted"), ("refused", "refused")],
           ("priority", "cellrate.priority.name")),
]

# The Prometheus names published before the list was one: they never change.
PUBLISHED = [
    "cellrate_decisions_total", "cellrate_units_total", "cellrate_unfittable_total",
    "cellrate_evictions_total", "cellrate_acquires_total", "cellrate_acquire_units_total",
    "cellrate_releases_total", "cellrate_in_flight", "cellrate_in_flight_peak",
    "cellrate_concurrency_evictions_total", "cellrate_bans_total",
    "cellrate_plan_decisions_total", "cellrate_priority_decisions_total",
]
