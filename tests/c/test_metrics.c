/*
 * The metrics table (cr_metrics): row by row what tests/vectors/metrics.txt
 * (the reference list) says, and each sample's offset that of the stats
 * field it names, so that a C exporter reading the struct and a face reading
 * stats() by name publish the same counter.
 */
#include "cellrate.h"
#include "check.h"

#include <stdlib.h>

/* The offset of the cr_stats (rate) or cr_gauge_stats field `name`; -1 for none. */
static long field_offset(const char *stats, const char *name)
{
#define RATE_FIELD_(field)         \
    if (strcmp(name, #field) == 0) \
        return (long)offsetof(cr_stats, field);
#define GAUGE_FIELD_(field)        \
    if (strcmp(name, #field) == 0) \
        return (long)offsetof(cr_gauge_stats, field);
    if (strcmp(stats, "rate") == 0) {
        CR_STATS_LIST(RATE_FIELD_)
    } else if (strcmp(stats, "concurrency") == 0) {
        CR_GAUGE_STATS_LIST(GAUGE_FIELD_)
    } else if (strcmp(stats, "plan") == 0 || strcmp(stats, "priority") == 0) {
        if (strcmp(name, "admitted") == 0)
            return (long)offsetof(cr_stats_row, admitted);
        if (strcmp(name, "refused") == 0)
            return (long)offsetof(cr_stats_row, refused);
    }
#undef RATE_FIELD_
#undef GAUGE_FIELD_
    return -1;
}

static const char *dash(const char *text) { return text ? text : "-"; }

static void test_table_is_the_vectors(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    FILE *file = fopen(path, "r");
    if (!CHECK(file != NULL, "cannot open %s", path))
        return;
    size_t count = 0;
    const cr_metric *metrics = cr_metrics(&count);
    const cr_metric *metric = NULL;
    size_t index = 0, labels = 0, samples = 0;
    bool by_seen = false; /* the metric's by line (a plan or priority metric's) */
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        char a[128], b[128], c[128], d[128], e[128], f[128], g[128], h[128];
        if (strncmp(line, "metric ", 7) == 0) {
            if (metric) {
                CHECK_EQ_I64(labels, metric->label_count, "labels of %s", metric->name);
                CHECK_EQ_I64(samples, metric->sample_count, "samples of %s", metric->name);
            }
            if (!CHECK(index < count, "metrics.txt:%d: more metrics than the table's %zu", lineno,
                       count))
                break;
            metric = &metrics[index++];
            labels = samples = 0;
            by_seen = false;
            const char *help = strstr(line, " |");
            CHECK(help != NULL && sscanf(line,
                                         "metric %127s %127s %127s %127s %127s %127s %127s "
                                         "%127s",
                                         a, b, c, d, e, f, g, h) == 8,
                  "metrics.txt:%d: unreadable", lineno);
            CHECK_EQ_STR(metric->name, a, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->prometheus_name, b, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->type, c, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->instrument, d, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->unit, e, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->stats, f, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(dash(metric->label.name), g, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(dash(metric->label.attribute), h, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(metric->help, help ? help + 2 : "", "metrics.txt:%d", lineno);
        } else if (strncmp(line, "by ", 3) == 0 && metric) {
            CHECK(sscanf(line, "by %127s %127s", a, b) == 2, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(dash(metric->by.name), a, "metrics.txt:%d", lineno);
            CHECK_EQ_STR(dash(metric->by.attribute), b, "metrics.txt:%d", lineno);
            by_seen = true;
        } else if (strncmp(line, "label ", 6) == 0 && metric) {
            CHECK(by_seen == (metric->by.name != NULL), "metrics.txt:%d: %s's by", lineno,
                  metric->name);
            CHECK(sscanf(line, "label %127s %127s", a, b) == 2, "metrics.txt:%d", lineno);
            if (CHECK(labels < metric->label_count, "metrics.txt:%d: label beyond %s's", lineno,
                      metric->name)) {
                CHECK_EQ_STR(metric->labels[labels].name, a, "metrics.txt:%d", lineno);
                CHECK_EQ_STR(metric->labels[labels].attribute, b, "metrics.txt:%d", lineno);
            }
            labels++;
        } else if (strncmp(line, "sample ", 7) == 0 && metric) {
            CHECK(sscanf(line, "sample %127s %127s", a, b) == 2, "metrics.txt:%d", lineno);
            if (CHECK(samples < metric->sample_count, "metrics.txt:%d: sample beyond %s's", lineno,
                      metric->name)) {
                const cr_metric_sample *sample = &metric->samples[samples];
                CHECK_EQ_STR(sample->field, a, "metrics.txt:%d", lineno);
                CHECK_EQ_STR(dash(sample->value), b, "metrics.txt:%d", lineno);
                CHECK_EQ_I64((long)sample->offset, field_offset(metric->stats, sample->field),
                             "metrics.txt:%d: the offset of %s", lineno, sample->field);
            }
            samples++;
        }
    }
    fclose(file);
    if (metric) {
        CHECK_EQ_I64(labels, metric->label_count, "labels of %s", metric->name);
        CHECK_EQ_I64(samples, metric->sample_count, "samples of %s", metric->name);
    }
    CHECK_EQ_I64(index, count, "every metric of the table is in metrics.txt");
}

/* A C exporter's reading: each sample's counter through its offset. */
static void test_offsets_read_the_counters(void)
{
    cr_stats rate;
    cr_gauge_stats gauge;
    memset(&rate, 0, sizeof rate);
    memset(&gauge, 0, sizeof gauge);
    rate.units_refused = 42;
    gauge.reclaimed = 7;
    size_t count = 0;
    const cr_metric *metrics = cr_metrics(&count);
    int found = 0;
    for (size_t i = 0; i < count; i++) {
        for (size_t s = 0; s < metrics[i].sample_count; s++) {
            const cr_metric_sample *sample = &metrics[i].samples[s];
            if (metrics[i].by.name != NULL) { /* a row's: both its fields, one each */
                cr_stats_row row = {"x", 5, 6};
                uint64_t value;
                memcpy(&value, (const char *)&row + sample->offset, sizeof value);
                CHECK_EQ_I64(value, strcmp(sample->field, "admitted") == 0 ? 5 : 6,
                             "%s of %s through its offset", sample->field, metrics[i].name);
                continue;
            }
            const bool is_rate = strcmp(metrics[i].stats, "rate") == 0;
            const char *base = is_rate ? (const char *)&rate : (const char *)&gauge;
            uint64_t value;
            memcpy(&value, base + sample->offset, sizeof value);
            if (strcmp(sample->field, is_rate ? "units_refused" : "reclaimed") == 0) {
                CHECK_EQ_I64(value, is_rate ? 42 : 7, "%s through its offset", sample->field);
                found++;
            } else {
                CHECK_EQ_I64(value, 0, "%s through its offset", sample->field);
            }
        }
    }
    CHECK_EQ_I64(found, 2, "units_refused and reclaimed are read by one sample each");
}

int main(int argc, char **argv)
{
    test_table_is_the_vectors(argc > 1 ? argv[1] : "tests/vectors");
    test_offsets_read_the_counters();
    return check_summary("test_metrics");
}
