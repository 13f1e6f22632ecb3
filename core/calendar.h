/* What a calendar limit's decisions need of core/calendar.c (docs/design.md
 * §19): its cached period, and the one call that computes it again. */
#ifndef CELLRATE_CALENDAR_INTERNAL_H
#define CELLRATE_CALENDAR_INTERNAL_H

#include "cellrate/calendar.h"
#include "cellrate/limit.h"

/* cr_limit.calendar_cache: the period's start in seconds above these bits,
 * its length in seconds in them. */
#define CR_CALENDAR_LENGTH_BITS 30

/* The period holding now_ns, computed and written to the limit's cache. */
void cr_calendar_bounds(const cr_limit *limit, int64_t now_ns, int64_t *start_ns, int64_t *end_ns);

#endif
