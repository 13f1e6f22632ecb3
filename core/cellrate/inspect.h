/*
 * cellrate/inspect.h: what a region file holds, read without changing it
 * (docs/design/shared-regions.md, "Inspecting").
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_INSPECT_H
#define CELLRATE_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* What a region file holds, read by cr_inspect_region. */
typedef struct cr_region_info {
    uint32_t layout_version;
    const char *kind;      /* "limiter", "keyed" or "concurrency" */
    const char *algorithm; /* a rate limit's (cr_algorithm_name); NULL for concurrency */
    cr_limit limit;        /* a rate limit's current limit (its clock: the default) */
    int64_t capacity;      /* the keys a keyed table is sized for; 0 for one key */
    int64_t max_in_flight; /* concurrency: its limit (0 for a rate limit) */
    int64_t lease_ns;      /* concurrency: its lease (0: none) */
    uint64_t live_keys;    /* keys holding a slot (keyed) or units (keyed concurrency) */
    uint64_t generation;   /* changes of its limit so far (0: the first) */
    uint64_t size;         /* bytes of the file */
    bool this_boot;        /* false: made before the last reboot (reset on next opening) */
    /* cr_limit_describe's text, or "cellrate.Concurrency(limit=.., ...)" */
    char description[CR_LIMIT_DESCRIPTION_MAX];
    cr_stats stats;             /* a rate limit's counters */
    cr_gauge_stats gauge_stats; /* a concurrency limit's (peak_tracked: its setting) */
} cr_region_info;

/* Reads the region at `path` without changing it: opened read-only, never
 * created, truncated, locked or written. A path that is not a region is
 * refused with the status an opening would give: CR_E_SHARED_MISSING (no
 * file), CR_E_SHARED_DANGLING, CR_E_SHARED_FOREIGN (not a region, or not a
 * regular file), CR_E_SHARED_SHORT, CR_E_SHARED_VERSION (another layout:
 * nothing past the version is read), CR_E_SHARED_CORRUPT; CR_E_SHARED_ACCESS
 * or CR_E_SHARED_IO (errno set) when it cannot be read. */
cr_status cr_inspect_region(const char *path, cr_region_info *out);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_INSPECT_H */
