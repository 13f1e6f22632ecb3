/*
 * cellrate: a GCRA rate limiter on integer nanoseconds.
 *
 * One 64-bit theoretical arrival time (TAT) per key; a decision is a pure
 * function of (limit, TAT, now, cost); the stores (cr_limiter, cr_keyed)
 * apply it with a compare-and-swap, and a turned-away request writes nothing.
 *
 * Include this header: it is the whole API, declared in the parts below (in
 * cellrate/, beside it; each part includes only <stdint.h>, <stddef.h>,
 * <stdbool.h> and the parts it needs). A new part is a file in cellrate/ and
 * a line here: `make symbols` checks the declarations of every part included
 * here against what the library exports, `make install` installs every part.
 *
 * Everything the parts declare is exported from libcellrate.so. Where the
 * core is compiled into a module (CR_EMBED: the CPython extension, the Lua
 * module), it stays hidden and the module exports only its entry point.
 */
#ifndef CELLRATE_H
#define CELLRATE_H

/* The version, written only here: every other place derives it. */
#define CR_VERSION_MAJOR 0
#define CR_VERSION_MINOR 1
#define CR_VERSION_PATCH 0
#define CR_VERSION_JOIN_(major, minor, patch) #major "." #minor "." #patch
#define CR_VERSION_EXPAND_(major, minor, patch) CR_VERSION_JOIN_(major, minor, patch)
#define CR_VERSION_STRING CR_VERSION_EXPAND_(CR_VERSION_MAJOR, CR_VERSION_MINOR, CR_VERSION_PATCH)

#include "cellrate/status.h"      /* cr_version, the units, status codes and their messages */
#include "cellrate/calendar.h"    /* time zones (TZif) and calendar periods: a quota's boundaries */
#include "cellrate/limit.h"       /* cr_limit: algorithms, validation, the rate grammar, seconds */
#include "cellrate/decision.h"    /* cr_decision and the pure decisions; a live change's carry */
#include "cellrate/clock.h"       /* the clocks (monotonic, realtime, fast) and the sleep */
#include "cellrate/stats.h"       /* the counters: cr_stats, cr_gauge_stats */
#include "cellrate/stores.h"      /* cr_limiter, cr_keyed, check_all, wait */
#include "cellrate/priority.h"    /* priority classes inside one limit */
#include "cellrate/plans.h"       /* plans: a limit per key of a keyed table */
#include "cellrate/penalty.h"     /* the penalty box: a ban after repeated refusals */
#include "cellrate/concurrency.h" /* cr_gauge: units held at once */
#include "cellrate/inspect.h"     /* a region file, read without changing it */
#include "cellrate/http.h"        /* the HTTP header fields of a decision */
#include "cellrate/metrics.h"     /* the one list of metrics the exporters publish */
#include "cellrate/options.h"     /* the options of every constructor of both faces, one table */
#include "cellrate/redis.h"       /* the Redis store's protocol: requests, replies, failures */
#include "cellrate/share.h"       /* a fleet share: a member's local limit, report, reply, steps */
#include "cellrate/follow.h"      /* a provider's response read and followed; its retries */
#include "cellrate/web.h" /* the web faces' rules: address keys, proxies, refusals, settlement */

#endif /* CELLRATE_H */
