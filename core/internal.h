/* Shared by the core's sources; not part of the public API. */
#ifndef CELLRATE_INTERNAL_H
#define CELLRATE_INTERNAL_H

#include "cellrate.h"

#include <pthread.h>
#include <stdatomic.h>

/* Validates `cost` and resolves CR_CLOCK in `*now_ns` to a clock reading. */
static inline cr_status cr_check_args(int64_t *now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if (*now_ns == CR_CLOCK)
        *now_ns = cr_clock_ns();
    else if (*now_ns < 0)
        return CR_E_NOW;
    return CR_OK;
}

/* A fresh 128-bit hash seed from the kernel's random source. */
cr_status cr_random_seed(uint64_t seed[2]);

/* What a shared region must hold; cr_region_open fills in the offsets. */
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

cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const char *path, int64_t mode);
void cr_region_close(cr_region *region);

#endif
