/*
 * Two words changed together by one 16-byte compare-and-swap: a keyed
 * table's slot {fingerprint, state}, a shared Limiter's {generation, state},
 * a concurrency gauge's cell {holder, acquired_ns}. Not part of the public
 * API.
 */
#ifndef CELLRATE_PAIR_H
#define CELLRATE_PAIR_H

#include <stdbool.h>
#include <stdint.h>

__extension__ typedef unsigned __int128 cr_pair;
typedef union {
    cr_pair pair;
    struct {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        int64_t state;
        uint64_t word;
#else
        uint64_t word;
        int64_t state;
#endif
    } half;
} cr_pair_halves;

static inline cr_pair cr_pair_make(uint64_t word, int64_t state)
{
    cr_pair_halves h;
    h.half.word = word;
    h.half.state = state;
    return h.pair;
}

static inline bool cr_pair_cas(cr_pair *target, cr_pair expected, cr_pair desired)
{
#if defined(__x86_64__) && defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
    /* GCC inlines cmpxchg16b for __sync (with -mcx16) but not for __atomic. */
    return __sync_bool_compare_and_swap(target, expected, desired);
#else
    return __atomic_compare_exchange_n(target, &expected, desired, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
#endif
}

/* Each half read alone: the pair may be torn by a concurrent change; a
 * compare-and-swap against it then fails, and readers that do not write
 * check the word again after the state. */
static inline uint64_t cr_pair_word(const cr_pair *p)
{
    return __atomic_load_n(&((const cr_pair_halves *)p)->half.word, __ATOMIC_ACQUIRE);
}

static inline int64_t cr_pair_state(const cr_pair *p)
{
    return __atomic_load_n(&((const cr_pair_halves *)p)->half.state, __ATOMIC_ACQUIRE);
}

#endif
