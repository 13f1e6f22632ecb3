/* Shared by the core's sources; not part of the public API. */
#ifndef CELLRATE_INTERNAL_H
#define CELLRATE_INTERNAL_H

#include "cellrate.h"
#include "decision.h"

#include <stdatomic.h>

/* Validates `cost` and `now_ns` (a time before the horizon of
 * docs/design.md §1, or CR_CLOCK). */
static inline cr_status cr_check_args(int64_t now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if ((now_ns < 0 && now_ns != CR_CLOCK) || now_ns >= CR_HORIZON_NS)
        return CR_E_NOW;
    return CR_OK;
}

/* The limit's clock now: monotonic, fast, or realtime (window algorithms). */
static inline int64_t cr_read_clock(const cr_limit *limit)
{
    int64_t now_ns = cr_is_window(limit) ? cr_realtime_ns()
                     : limit->fast_clock ? cr_fast_clock_ns()
                                         : cr_clock_ns();
    /* a realtime clock set before 1970 or past 2116: time stops, only stricter */
    if (now_ns < 0)
        return 0;
    return now_ns < CR_HORIZON_NS ? now_ns : CR_HORIZON_NS - 1;
}

/* `now_ns`, with CR_CLOCK read from the limit's clock. */
static inline int64_t cr_resolve_now(const cr_limit *limit, int64_t now_ns)
{
    return now_ns != CR_CLOCK ? now_ns : cr_read_clock(limit);
}

/* The full decision into `out`. */
static inline int64_t cr_decision_make(const cr_limit *limit, int64_t state, int64_t now_ns,
                                       int64_t cost, cr_decision *out)
{
    bool allowed;
    return cr_decision_core(limit, state, now_ns, cost, out, &allowed);
}

/* Whether `cost` would be admitted now, writing nothing (check_all's peek:
 * the allow() path, without remaining or times). */
cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);
cr_status cr_keyed_peek_allowed(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                int64_t cost, bool *allowed);

/* Whether a change to `b` would change nothing of `a` (its decisions, and the
 * rate and period it reports). */
static inline bool cr_limit_identical(const cr_limit *a, const cr_limit *b)
{
    return cr_limit_same(a, b) && a->rate == b->rate && a->period_s == b->period_s;
}

/* The state of a key with everything used at `now_ns` under `limit`: what a
 * keyed table carries a live key to when its limit is no longer known
 * (core/carry.c; docs/design.md §4). */
int64_t cr_full(const cr_limit *limit, int64_t now_ns);

/* A fresh 128-bit hash seed from the kernel's random source (core/seed.c). */
cr_status cr_random_seed(uint64_t seed[2]);

/* A stripe lock of the keyed table: one word, 0 when free, safe in a shared
 * region whatever its content (see lock.c). */
typedef _Atomic uint64_t cr_lock;

/* Takes `lock`, waiting for its holder; takes it over from a holder that has
 * died or from a damaged word. CR_E_SHARED_LOCK when a living holder keeps it
 * past cr_lock_timeout_ns: the wait is bounded. */
cr_status cr_lock_acquire(cr_lock *lock);
void cr_lock_release(cr_lock *lock);
/* This process's id (kept; forgotten in a fork child). */
uint32_t cr_own_pid(void);
/* Whether process `pid` runs (kill(pid, 0), and /proc for a zombie): the
 * liveness a lock's and a holding's holder is judged by. */
bool cr_process_alive(uint32_t pid);
/* The bound on a wait, in ns (1 s); tests shorten it. */
extern int64_t cr_lock_timeout_ns;

/* What a shared region must hold; cr_region_open fills in the limit's
 * fields and the offsets. */
typedef struct {
    uint32_t kind;       /* CR_REGION_LIMITER, CR_REGION_KEYED or CR_REGION_CONCURRENCY */
    uint32_t algorithm;  /* cr_algorithm */
    int64_t emission_ns; /* T; for a window algorithm the window; concurrency: the lease */
    int64_t burst;       /* concurrency: the limit */
    int64_t capacity;
    uint32_t nbuckets;
    uint32_t nstripes;
    size_t buckets_size;
    size_t stripes_offset;
    size_t buckets_offset;
    size_t total_size;
} cr_region_spec;

enum { CR_REGION_LIMITER = 1, CR_REGION_KEYED = 2, CR_REGION_CONCURRENCY = 3 };

/* A mapped region: pointers into the mapping. */
typedef struct {
    void *base;
    size_t size;
    uint64_t seed[2];
    cr_lock *stripes;
    void *buckets;
    _Atomic uint64_t *evictions;
    _Atomic int64_t *tat;
} cr_region;

/* Opens or creates the region at `path` for a store of `spec` and `limit`
 * (see cr_limiter_open); `limit` NULL for a store without a rate, which sets
 * spec's algorithm, emission_ns and burst itself. */
cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode);
void cr_region_close(cr_region *region);

#endif
