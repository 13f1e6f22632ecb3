/* What the concurrency gauges (core/gauge.c) offer the units above them.
 * Not part of the public API. */
#ifndef CELLRATE_GAUGE_H
#define CELLRATE_GAUGE_H

#include "cellrate/concurrency.h"

/* The keys holding units in a keyed gauge table's `nbuckets` buckets, and
 * the units held in all of its gauges (the one gauge's without `keyed`: no
 * keys). Read-only: an inspection's too. */
void cr_gauge_count(const void *gauges, uint32_t nbuckets, int64_t limit, bool keyed,
                    uint64_t *keys, uint64_t *held);

#endif
