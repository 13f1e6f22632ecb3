/*
 * Shared regions (docs/design.md §5; core/region.c): the file a limit's
 * state lives in for every process that opens it, its checks, and the
 * history of its limit. Not part of the public API.
 */
#ifndef CELLRATE_REGION_H
#define CELLRATE_REGION_H

#include "cellrate/stores.h"
#include "cellrate/plans.h"
#include "carry.h"
#include "counters.h"
#include "lock.h"
#include "pair.h"

/* The layout of a region file: a region of another is refused
 * (CR_E_SHARED_VERSION). 2: boot id outside the checksum; stripe locks are
 * cr_lock words. 4: the limit is a history of changes, not part of the
 * identity. 5: the counters (counters.h) follow the records. 7: the
 * priority classes' fingerprint in the identity. 8: a keyed slot's
 * fingerprint is 52 bits, a plan index above it. 9: the penalty box's
 * block (core/penalty.h) between the counters and the buckets. 10: a keyed
 * region holds its plan table (names, each plan's history) after the
 * records. 11: a calendar region's records name their zone and period (a
 * zone table after the records); its state is kept across a reboot. 12: a
 * rate region's counters count requests by plan and by class after the
 * block (cr_by_block). */
#define CR_REGION_VERSION 12

/* The time zones a calendar region names over its life (its records hold
 * an index into its table). */
#define CR_REGION_ZONES 16

/* What a shared region must hold; cr_region_open fills in the limit's
 * fields and the offsets. */
typedef struct {
    uint32_t kind;       /* CR_REGION_LIMITER, CR_REGION_KEYED or CR_REGION_CONCURRENCY */
    uint32_t algorithm;  /* cr_algorithm */
    uint32_t flags;      /* CR_REGION_PEAK */
    int64_t emission_ns; /* concurrency: the lease (0 for a rate limit: its limit is recorded) */
    int64_t burst;       /* concurrency: the limit */
    int64_t capacity;
    uint64_t priorities; /* the classes' fingerprint (cr_priorities_fingerprint), 0: none */
    uint32_t nbuckets;
    uint32_t nstripes;
    size_t buckets_size;
    size_t stripes_offset;
    size_t changes_offset;
    size_t zones_offset; /* a calendar region's zone table (0: none) */
    size_t counters_offset;
    size_t penalty_offset; /* the penalty box's block (a rate limit's; 0 size for concurrency) */
    size_t plans_offset;   /* a keyed region's plans (0: none) */
    size_t buckets_offset;
    size_t total_size;
} cr_region_spec;

enum { CR_REGION_LIMITER = 1, CR_REGION_KEYED = 2, CR_REGION_CONCURRENCY = 3 };
/* A flag of a region's identity: a concurrency region that tracks the peak
 * (every process keeps the counters' total, or the peak is wrong). */
enum { CR_REGION_PEAK = 1 };

/* A mapped region: pointers into the mapping. */
typedef struct {
    void *base;
    size_t size;
    uint64_t seed[2];
    cr_lock *stripes;
    void *buckets;
    size_t changes_offset;
    size_t plans_offset; /* a keyed region's plans (0: none) */
    size_t zones_offset; /* a calendar region's zone table (0: none) */
    _Atomic uint64_t *evictions;
    cr_pair *limiter_state;     /* a Limiter's {generation, state} */
    cr_counter_block *counters; /* the region's counters (CR_COUNTER_LANES lanes) */
    cr_by_block *by;            /* a rate region's counts by plan and class (else NULL) */
    void *penalty;              /* the penalty box's block; NULL in a concurrency region */
    int64_t sync_ns;            /* sync=: an msync at most this often (0: none) */
    _Atomic int64_t synced_at;  /* this process's last, on CLOCK_MONOTONIC_COARSE */
} cr_region;

/* The limit history a region keeps: a decision can carry a state written up
 * to this many changes ago. */
#define CR_REGION_RECORDS 256

/* Opens or creates the region at `path` for a store of `spec` and `limit`
 * (see cr_limiter_open); `limit` NULL for a store without a rate, which sets
 * spec's algorithm, emission_ns and burst itself. */
cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode);
void cr_region_close(cr_region *region);

/* sync= (docs/design/calendar.md): `seconds` between two msync(MS_SYNC) of
 * the region by this process, which decisions make (cr_region_tick) and
 * close makes last. CR_E_SYNC unless > 0 and finite; CR_E_SYNC_SHARED for a
 * store of one process (base NULL). Before the store is shared by threads. */
cr_status cr_region_set_sync(cr_region *region, double seconds);
/* The msync when one is due (out of line: cr_region_tick's slow side). */
void cr_region_sync_due(cr_region *region);
/* A committing decision's one look at sync=: a load and a branch. */
static inline void cr_region_tick(cr_region *region)
{
    if (__builtin_expect(region->sync_ns != 0, 0))
        cr_region_sync_due(region);
}

/* The region's current generation: 0 at its creation, one more per change. */
uint64_t cr_region_generation(const cr_region *region);
/* Every function below that takes a `plan` reads or writes that plan's
 * history in a keyed region (docs/design/plans.md); CR_PLAN_DEFAULT (0) is the
 * region's own limit, the only one of a limiter's region. */

/* The limit of `generation` of `plan` and the instant it became current,
 * built for this process as `like` (its clock, its classes);
 * CR_E_SHARED_CORRUPT when the region no longer holds it (over
 * CR_REGION_RECORDS changes ago) or holds no limit this version writes. */
cr_status cr_region_limit(const cr_region *region, int32_t plan, uint64_t generation,
                          const cr_limit *like, cr_limit *out, int64_t *changed_at);
/* Whether the region can record `limit`: CR_E_SHARED_ZONES when it is a
 * calendar quota of a zone new to a region that names CR_REGION_ZONES
 * already; CR_E_TZ for a zone without a name (cr_zone_parse's). The caller
 * holds the change lock, and checks before cr_region_publish. */
cr_status cr_region_room(const cr_region *region, const cr_limit *limit);
/* Makes `limit` plan `plan`'s, as of `changed_at`; the caller holds the
 * change lock and had cr_region_room's yes. Returns the plan's new
 * generation. */
uint64_t cr_region_publish(cr_region *region, int32_t plan, const cr_limit *limit,
                           int64_t changed_at);
/* Serializes changes across the processes (NULL for a store of one process:
 * base NULL); the cursor of the keyed table's sweep (docs/design.md §4),
 * under it. */
cr_lock *cr_region_change_lock(cr_region *region);
uint64_t *cr_region_sweep_cursor(cr_region *region);
/* The word holding plan `plan`'s generation (cr_region_generation reads
 * the default's), for a store's hot path. */
const _Atomic uint64_t *cr_region_generation_word(const cr_region *region, int32_t plan);
/* `next` as plan `plan`'s current generation, following `current` (whose
 * clock it keeps); next->generation == current->generation when nothing
 * changed. */
cr_status cr_region_adopt(const cr_region *region, int32_t plan, const cr_generation *current,
                          cr_generation *next);
/* At opening, under the change lock: `current` becomes the region's limit
 * when it is `limit`'s, else `limit` replaces it (the region's in
 * *replaced, *changed set) or, with CR_CHANGE_REFUSE, the opening fails
 * with CR_E_SHARED_RATE / CR_E_SHARED_BURST. */
cr_status cr_region_join(cr_region *region, const cr_limit *limit, cr_on_change on_change,
                         int64_t now_ns, cr_generation *current, cr_limit *replaced, bool *changed);

/* The names a keyed region holds ("default" at index 0; a name stays while
 * the file lives): how many (1 for a region of another kind), and each. */
int32_t cr_region_plan_count(const cr_region *region);
const char *cr_region_plan_name(const cr_region *region, int32_t plan);
/* At opening, under the change lock, after cr_region_join: each plan of
 * `table` but "default" (cr_plans_set's; NULL: none) joins the region's by
 * name. A name new to the region takes the next index, its limit the
 * plan's first generation; a plan the region holds with another limit is
 * changed to the opener's (its bit in *changed) or, with CR_CHANGE_REFUSE,
 * refused as cr_region_join refuses. CR_E_SHARED_PLANS when the region
 * would hold over CR_PLANS_MAX names. A refused opening writes nothing. */
cr_status cr_region_join_plans(cr_region *region, const cr_plan_table *table,
                               cr_on_change on_change, int64_t now_ns, uint32_t *changed);

/* A state written under generation `since`, carried through every change
 * up to `current`, each at its instant (cr_carry). The limits come from the
 * chain of `current`, else from `region`'s history of `plan` (NULL for a store of one process);
 * a state whose history is gone is taken as everything used at `now_ns`
 * (cr_full): never a fresh allowance. */
int64_t cr_carry_since(const cr_region *region, int32_t plan, const cr_generation *current,
                       uint64_t since, int64_t state, int64_t now_ns);

/* Maps the region at `path` read-only for a look (cr_inspect_region): never
 * created, truncated, locked or written; its header checked as an opening
 * checks it, but against nothing an opener wants. `spec` is then what the
 * header says (kind, algorithm, flags, lease and limit of a concurrency
 * region, capacity, buckets) with the layout it implies, and *this_boot
 * whether it was made since the last boot. The statuses of
 * cr_inspect_region; cr_region_close unmaps it. */
cr_status cr_region_look(cr_region *region, cr_region_spec *spec, const char *path,
                         bool *this_boot);

#endif
