/* Where a key lives in a two-choice table of buckets, and the stripe locks
 * that guard giving it a place: shared by the keyed tables of rate limits
 * (keyed.c) and of concurrency gauges (gauge.c). Not part of the public API. */
#ifndef CELLRATE_PLACE_H
#define CELLRATE_PLACE_H

#include "lock.h"
#include "siphash.h"

/* A key's fingerprint is the low 56 bits of its hash, never 0 (0 marks an
 * empty place); the bits above are the table's own (keyed.c: a generation
 * tag; gauge.c: a busy mark). */
#define CR_FP_MASK ((UINT64_C(1) << 56) - 1)

typedef struct {
    uint64_t fp;
    uint32_t bucket[2];
} cr_key_place;

/* Lemire's multiply-shift: a uniform index in [0, n) without a division. */
static inline uint32_t cr_reduce(uint32_t hash, uint32_t n)
{
    return (uint32_t)(((uint64_t)hash * n) >> 32);
}

/* The fingerprint and the two buckets of `key` among `nbuckets`. */
static inline cr_key_place cr_key_place_of(const uint64_t seed[2], uint32_t nbuckets,
                                           const void *key, size_t key_len)
{
    uint64_t hash = cr_siphash13(seed, key, key_len);
    cr_key_place place;
    place.fp = (hash & CR_FP_MASK) ? hash & CR_FP_MASK : 1;
    place.bucket[0] = cr_reduce((uint32_t)hash, nbuckets);
    place.bucket[1] = cr_reduce((uint32_t)(hash >> 32), nbuckets);
    if (place.bucket[1] == place.bucket[0] && nbuckets > 1)
        place.bucket[1] = (place.bucket[0] + 1) % nbuckets;
    return place;
}

/* Takes the stripe locks of both of the key's buckets (stripe = bucket mod
 * nstripes), in one global order: no deadlock. A lock taken over from a dead
 * holder is the caller's to repair (every change under it is a single CAS in
 * both tables, so there is nothing half-written to repair). */
static inline cr_status cr_lock_places(cr_lock *stripes, uint32_t nstripes,
                                       const cr_key_place *place, uint32_t stripe[2])
{
    stripe[0] = place->bucket[0] % nstripes;
    stripe[1] = place->bucket[1] % nstripes;
    if (stripe[0] > stripe[1]) {
        uint32_t first = stripe[1];
        stripe[1] = stripe[0];
        stripe[0] = first;
    }
    cr_status status = cr_lock_acquire(&stripes[stripe[0]]);
    if (status != CR_OK || stripe[1] == stripe[0])
        return status;
    status = cr_lock_acquire(&stripes[stripe[1]]);
    if (status != CR_OK)
        cr_lock_release(&stripes[stripe[0]]);
    return status;
}

static inline void cr_unlock_places(cr_lock *stripes, const uint32_t stripe[2])
{
    if (stripe[1] != stripe[0])
        cr_lock_release(&stripes[stripe[1]]);
    cr_lock_release(&stripes[stripe[0]]);
}

#endif
