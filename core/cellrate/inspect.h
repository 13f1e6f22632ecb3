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
#include "penalty.h"
#include "plans.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* A plan of a keyed region's table: its name and its limit now. */
typedef struct cr_region_plan {
    char name[CR_PLAN_NAME_MAX];
    cr_limit limit;
} cr_region_plan;

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
    bool has_penalty;           /* a rate limit's region holds a penalty ... (its bans: stats) */
    cr_penalty penalty;         /* ... this one */
    uint64_t banned;            /* keys banned now (cr_inspect_box lists them) */
    cr_stats stats;             /* a rate limit's counters */
    cr_gauge_stats gauge_stats; /* a concurrency limit's (peak_tracked: its setting) */
    int32_t plan_count;         /* a keyed region's plans, "default" included (else 1) */
    cr_region_plan plans[CR_PLANS_MAX]; /* in the region's order, "default" first */
} cr_region_info;

/* Reads the region at `path` without changing it: opened read-only, never
 * created, truncated, locked or written. A path that is not a region is
 * refused with the status an opening would give: CR_E_SHARED_MISSING (no
 * file), CR_E_SHARED_DANGLING, CR_E_SHARED_FOREIGN (not a region, or not a
 * regular file), CR_E_SHARED_SHORT, CR_E_SHARED_VERSION (another layout:
 * nothing past the version is read), CR_E_SHARED_CORRUPT; CR_E_SHARED_ACCESS
 * or CR_E_SHARED_IO (errno set) when it cannot be read. */
cr_status cr_inspect_region(const char *path, cr_region_info *out);

/* A key in a region's penalty box (banned now): its first bytes (a region
 * keeps 32), its length, the ban's end (the region's algorithm's clock:
 * CLOCK_REALTIME for the windows, else CLOCK_MONOTONIC) and its level (the
 * ban was ban << level, up to max_ban). */
#define CR_PENALTY_KEY_KEPT 32
typedef struct cr_penalty_entry {
    unsigned char key[CR_PENALTY_KEY_KEPT];
    size_t key_kept; /* bytes of key[] that hold the key: key_len, at most 32 */
    size_t key_len;
    int64_t ban_end_ns;
    int64_t ban_left_ns; /* the ban's end less the clock at the look */
    int64_t level;
} cr_penalty_entry;

/* The keys of the region at `path` banned now, as cr_inspect_region reads
 * it (the same statuses): up to `max_entries` into `entries`, *count set to
 * how many there are (more than max_entries: call again with room). A
 * concurrency region has none. */
cr_status cr_inspect_box(const char *path, cr_penalty_entry *entries, size_t max_entries,
                         size_t *count);

/* One key of a keyed region, as its next decision would find it. */
typedef struct cr_key_info {
    bool found;   /* the key holds a slot (else it is idle: nothing below) */
    int32_t plan; /* the region's index of the plan it was last decided under */
    char plan_name[CR_PLAN_NAME_MAX];
    cr_limit limit;         /* that plan's limit now */
    int64_t used;           /* units used now, carried to that limit (limit - remaining) */
    int64_t remaining;      /* units a decision under that plan would admit now */
    int64_t reset_after_ns; /* until the key is back to a full burst */
} cr_key_info;

/* Reads `key` of the keyed region at `path` without changing it, as
 * cr_inspect_region reads the region (the same statuses): the plan it was
 * last decided under, what it used carried through that plan's changes since
 * (as its next decision under that plan would carry it) and what remains.
 * CR_E_INSPECT_KEY for a region of another kind. */
cr_status cr_inspect_key(const char *path, const void *key, size_t key_len, cr_key_info *out);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_INSPECT_H */
