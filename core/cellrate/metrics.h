/*
 * cellrate/metrics.h: the one list of metrics every exporter publishes
 * (docs/design.md §17): Prometheus in Python and in the nginx helper,
 * OpenTelemetry; each reads its counters from cellrate/stats.h's structs.
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_METRICS_H
#define CELLRATE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* A label as Prometheus names it and the attribute it is in OpenTelemetry. */
typedef struct cr_metric_label {
    const char *name;      /* "limit" */
    const char *attribute; /* "cellrate.limit.name" */
} cr_metric_label;

/* One series of a metric: the counter it reads and the value of the
 * metric's own label. */
typedef struct cr_metric_sample {
    const char *field; /* a field of cr_stats, cr_gauge_stats or cr_stats_row, as stats() and
                          stats_by() name it */
    size_t offset;     /* offsetof that field in its struct */
    const char *value; /* the value of the metric's `label`; NULL when it has none */
} cr_metric_sample;

#define CR_METRIC_SAMPLES_MAX 3

typedef struct cr_metric {
    const char *name;            /* OpenTelemetry: "cellrate.decisions" */
    const char *prometheus_name; /* "cellrate_decisions_total": `name` with '_' for '.', and
                                    "_total" after a counter's, as OpenTelemetry's own
                                    Prometheus exporter writes it */
    const char *help;            /* one sentence: Prometheus HELP, OpenTelemetry description */
    const char *type;            /* Prometheus: "counter" or "gauge" */
    const char *instrument;      /* OpenTelemetry: "counter", "updowncounter" or "gauge" */
    const char *unit;            /* UCUM, as OpenTelemetry takes it: "{request}" */
    const char *stats;           /* what it reads: "rate" (cr_stats), "concurrency"
                                    (cr_gauge_stats), or "plan" / "priority" (the rows of
                                    cr_stats_by: a rate limit's plans, its classes) */
    /* the labels every series may carry; an exporter writes those it has a
     * value for (a web policy's limits all; the nginx helper's "limit") */
    const cr_metric_label *labels;
    size_t label_count;
    cr_metric_label label; /* the label that tells the samples apart; name NULL: one sample */
    size_t sample_count;
    cr_metric_sample samples[CR_METRIC_SAMPLES_MAX];
    /* "plan" and "priority" metrics: the label whose value is a row's name
     * (a series for each plan, each class); name NULL for the others */
    cr_metric_label by;
} cr_metric;

/* The metrics, in the order the exporters publish them; *count set to their
 * number. A static table: never freed, the same for every call; thread-safe.
 * A sample whose counter a limit does not keep (peak without
 * peak_tracked) is left out by the exporters. */
const cr_metric *cr_metrics(size_t *count);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_METRICS_H */
