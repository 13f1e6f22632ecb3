/* Shared by the core's sources; not part of the public API. */
#ifndef CELLRATE_INTERNAL_H
#define CELLRATE_INTERNAL_H

#include "cellrate.h"

#include <pthread.h>
#include <stdatomic.h>

/* Validates `cost` and `now_ns` (a time or CR_CLOCK). */
static inline cr_status cr_check_args(int64_t now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if (now_ns < 0 && now_ns != CR_CLOCK)
        return CR_E_NOW;
    return CR_OK;
}

/* `now_ns`, with CR_CLOCK read from the limit's clock. */
static inline int64_t cr_resolve_now(const cr_limit *limit, int64_t now_ns)
{
    if (now_ns != CR_CLOCK)
        return now_ns;
    return limit->fast_clock ? cr_fast_clock_ns() : cr_clock_ns();
}

/*
 * The decision of docs/design.md §1, pure and saturating, inlined into the stores.
 * Returns the TAT to store, equal to `tat` when nothing is to be written, and
 * says in *allowed whether the request is admitted. With `out` NULL (the
 * allow() path) that is all it works out: no division.
 */
static inline int64_t cr_decision_core(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                       int64_t cost, cr_decision *out, bool *allowed)
{
    const int64_t T = limit->emission_ns;
    const int64_t tau = limit->tolerance_ns;
    const int64_t base = tat > now_ns ? tat : now_ns;
    int64_t new_tat = tat, allow_at = 0;
    bool fits = true;

    if (cost == 0) {
        *allowed = true; /* a probe: always admitted, nothing to store */
    } else {
        int64_t increment, next;
        fits = !__builtin_mul_overflow(cost, T, &increment) && increment <= tau;
        *allowed = false;
        if (fits) { /* else: no wait would ever admit it */
            if (__builtin_add_overflow(base, increment, &next))
                next = INT64_MAX;
            allow_at = next - tau; /* both non-negative: cannot overflow */
            *allowed = now_ns >= allow_at;
            if (*allowed)
                new_tat = next;
        }
    }
    if (!out)
        return new_tat;

    out->allowed = *allowed;
    out->limit = limit->burst;
    if (*allowed && cost != 0) {
        out->remaining = (now_ns - allow_at) / T; /* 0 <= now - allow_at <= tau */
        out->retry_after_ns = 0;
        out->reset_after_ns = new_tat - now_ns;
        return new_tat;
    }
    /* The units that fit at `base`: room <= tau; below one unit the floor is
     * 0 or negative, as for every turned-away cost of 1, so no division. */
    const int64_t room = now_ns - (base - tau);
    out->remaining = room >= T ? room / T : 0;
    out->retry_after_ns = *allowed ? 0 : fits ? allow_at - now_ns : CR_NEVER;
    out->reset_after_ns = base - now_ns;
    return new_tat;
}

/* The full decision into `out`. */
static inline int64_t cr_decision_make(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                       int64_t cost, cr_decision *out)
{
    bool allowed;
    return cr_decision_core(limit, tat, now_ns, cost, out, &allowed);
}

/* A fresh 128-bit hash seed from the kernel's random source (core/seed.c). */
cr_status cr_random_seed(uint64_t seed[2]);

/* What a shared region must hold; cr_region_open fills in the limit's
 * fields and the offsets. */
typedef struct {
    uint32_t kind; /* CR_REGION_LIMITER or CR_REGION_KEYED */
    int64_t emission_ns;
    int64_t burst;
    int64_t capacity;
    uint32_t nbuckets;
    uint32_t nstripes;
    size_t buckets_size;
    size_t stripes_offset;
    size_t buckets_offset;
    size_t total_size;
} cr_region_spec;

enum { CR_REGION_LIMITER = 1, CR_REGION_KEYED = 2 };

/* A mapped region: pointers into the mapping. */
typedef struct {
    void *base;
    size_t size;
    uint64_t seed[2];
    pthread_mutex_t *stripes; /* robust, process-shared */
    void *buckets;
    _Atomic uint64_t *evictions;
    _Atomic int64_t *tat;
} cr_region;

/* Opens or creates the region at `path` for a store of `spec` and `limit`
 * (see cr_limiter_open). */
cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode);
void cr_region_close(cr_region *region);

#endif
