/* The metrics every exporter publishes (docs/design.md §17): one table, read
 * by cellrate.prometheus, cellrate.otel and cellrate.nginx through the
 * faces' metrics(), so that no exporter spells a name, a unit or a label of
 * its own. */
#include "cellrate/metrics.h"
#include "cellrate/stats.h"

#include <stddef.h>

static const cr_metric_label LABELS[] = {
    {"limit", "cellrate.limit.name"},    /* the name it was registered under */
    {"policy", "cellrate.policy.name"},  /* a web policy's name */
    {"route", "cellrate.route.pattern"}, /* a web policy's route, as given; "" for its limit */
};

#define COMMON LABELS, sizeof LABELS / sizeof LABELS[0]
#define RATE(field, value)                       \
    {                                            \
#field, offsetof(cr_stats, field), value \
    }
#define GAUGE(field, value)                            \
    {                                                  \
#field, offsetof(cr_gauge_stats, field), value \
    }
#define ROW(field, value)                            \
    {                                                \
#field, offsetof(cr_stats_row, field), value \
    }
#define NO_LABEL   \
    {              \
        NULL, NULL \
    }

static const cr_metric METRICS[] = {
    {"cellrate.decisions",
     "cellrate_decisions_total",
     "Requests decided by a rate limit, by outcome.",
     "counter",
     "counter",
     "{request}",
     "rate",
     COMMON,
     {"outcome", "cellrate.decision.outcome"},
     3,
     {RATE(admitted, "admitted"), RATE(refused, "refused"), RATE(would_refuse, "would_refuse")},
     NO_LABEL},
    {"cellrate.units",
     "cellrate_units_total",
     "Units (cost) of the requests decided by a rate limit, by outcome "
     "(refunded: units given back after their admission).",
     "counter",
     "counter",
     "{unit}",
     "rate",
     COMMON,
     {"outcome", "cellrate.decision.outcome"},
     3,
     {RATE(units_admitted, "admitted"), RATE(units_refused, "refused"),
      RATE(units_refunded, "refunded")},
     NO_LABEL},
    {"cellrate.unfittable",
     "cellrate_unfittable_total",
     "Refusals of a cost above the burst, which never fits.",
     "counter",
     "counter",
     "{request}",
     "rate",
     COMMON,
     NO_LABEL,
     1,
     {RATE(unfittable, NULL)},
     NO_LABEL},
    {"cellrate.evictions",
     "cellrate_evictions_total",
     "Keys evicted from a full keyed table.",
     "counter",
     "counter",
     "{key}",
     "rate",
     COMMON,
     NO_LABEL,
     1,
     {RATE(evicted, NULL)},
     NO_LABEL},
    {"cellrate.acquires",
     "cellrate_acquires_total",
     "Acquires decided by a concurrency limit, by outcome.",
     "counter",
     "counter",
     "{acquire}",
     "concurrency",
     COMMON,
     {"outcome", "cellrate.acquire.outcome"},
     2,
     {GAUGE(acquired, "acquired"), GAUGE(refused, "refused")},
     NO_LABEL},
    {"cellrate.acquire_units",
     "cellrate_acquire_units_total",
     "Units (cost) of the acquires of a concurrency limit, by outcome.",
     "counter",
     "counter",
     "{unit}",
     "concurrency",
     COMMON,
     {"outcome", "cellrate.acquire.outcome"},
     2,
     {GAUGE(units_acquired, "acquired"), GAUGE(units_refused, "refused")},
     NO_LABEL},
    {"cellrate.releases",
     "cellrate_releases_total",
     "Units of a concurrency limit given back: released by their holders, or reclaimed (a "
     "lease expired, a dead process).",
     "counter",
     "counter",
     "{unit}",
     "concurrency",
     COMMON,
     {"how", "cellrate.release.how"},
     2,
     {GAUGE(released, "released"), GAUGE(reclaimed, "reclaimed")},
     NO_LABEL},
    /* in flight adds up across limits: an up-down counter, a gauge to Prometheus */
    {"cellrate.in_flight",
     "cellrate_in_flight",
     "Units of a concurrency limit held now.",
     "gauge",
     "updowncounter",
     "{unit}",
     "concurrency",
     COMMON,
     NO_LABEL,
     1,
     {GAUGE(in_flight, NULL)},
     NO_LABEL},
    /* only for a limit made with peak (peak_tracked): no sample otherwise */
    {"cellrate.in_flight_peak",
     "cellrate_in_flight_peak",
     "The most units of a concurrency limit held at once since its counters were reset.",
     "gauge",
     "gauge",
     "{unit}",
     "concurrency",
     COMMON,
     NO_LABEL,
     1,
     {GAUGE(peak, NULL)},
     NO_LABEL},
    {"cellrate.concurrency_evictions",
     "cellrate_concurrency_evictions_total",
     "Keys evicted from a full keyed concurrency table.",
     "counter",
     "counter",
     "{key}",
     "concurrency",
     COMMON,
     NO_LABEL,
     1,
     {GAUGE(evicted, NULL)},
     NO_LABEL},
    /* a rate limit's, after the first ten (whose order is published) */
    {"cellrate.bans",
     "cellrate_bans_total",
     "Bans a penalty started: keys refused for a while after repeated refusals.",
     "counter",
     "counter",
     "{ban}",
     "rate",
     COMMON,
     NO_LABEL,
     1,
     {RATE(bans, NULL)},
     NO_LABEL},
    /* a keyed table's with plans: a series for each plan, summing to cellrate.decisions'
       admitted and refused (a metric of its own: a sum over cellrate.decisions counts once) */
    {"cellrate.plan_decisions",
     "cellrate_plan_decisions_total",
     "Requests decided by a rate limit with plans, by plan and outcome.",
     "counter",
     "counter",
     "{request}",
     "plan",
     COMMON,
     {"outcome", "cellrate.decision.outcome"},
     2,
     {ROW(admitted, "admitted"), ROW(refused, "refused")},
     {"plan", "cellrate.plan.name"}},
    /* a limit's with classes: a series for each class (no class: the first of reserve 0) */
    {"cellrate.priority_decisions",
     "cellrate_priority_decisions_total",
     "Requests decided by a rate limit with priority classes, by class and outcome.",
     "counter",
     "counter",
     "{request}",
     "priority",
     COMMON,
     {"outcome", "cellrate.decision.outcome"},
     2,
     {ROW(admitted, "admitted"), ROW(refused, "refused")},
     {"priority", "cellrate.priority.name"}},
};

const cr_metric *cr_metrics(size_t *count)
{
    *count = sizeof METRICS / sizeof METRICS[0];
    return METRICS;
}
