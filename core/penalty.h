/* The penalty box as a store keeps it (core/penalty.c): each refused key's
 * penalty state, in this process, touched only when a decision is a
 * turn-away. Not part of the public API. */
#ifndef CELLRATE_PENALTY_INTERNAL_H
#define CELLRATE_PENALTY_INTERNAL_H

#include "cellrate/inspect.h"
#include "cellrate/penalty.h"

typedef struct cr_penalty_box cr_penalty_box;

/* A box of at most `capacity` keys (>= 1) under `penalty`. CR_E_NOMEM. */
cr_status cr_penalty_box_new(cr_penalty_box **out, const cr_penalty *penalty, int64_t capacity);
void cr_penalty_box_free(cr_penalty_box *box);

/* cr_penalty_refused on the key's state (a key never refused: all zero).
 * A box full of live keys counts nothing for a new key (returns 0): the
 * penalty fails open, the limit itself still holds. */
int64_t cr_penalty_box_refused(cr_penalty_box *box, const void *key, size_t key_len, int64_t now_ns,
                               bool *started);

/* Forgets the key's state (a reset lets it out of the box). */
void cr_penalty_box_release(cr_penalty_box *box, const void *key, size_t key_len);

/* The bans started so far (a region's: by every process). */
uint64_t cr_penalty_box_bans(cr_penalty_box *box);

/* Counts the bans from 0 again (a reset of the counters). */
void cr_penalty_box_reset_bans(cr_penalty_box *box);

/* Forgets every key's state (cr_keyed_clear). */
void cr_penalty_box_clear(cr_penalty_box *box);

/* ---- The box in a shared region (docs/design/penalty.md) ---- */

/* The bytes of a slot, and the region's block for a table of `capacity`
 * keys: a header line and slots for a quarter of the keys (at least 8, a
 * power of two); core/region.c lays it out, all zero: no penalty. */
#define CR_PENALTY_SLOT 64
size_t cr_penalty_region_size(int64_t capacity);
/* The most keys the block holds. */
int64_t cr_penalty_region_keys(int64_t capacity);

/* A box of this process over a region's `block` (the region's seed): its
 * penalty is the region's, set by cr_penalty_box_set (the newest wins), and
 * a region without one counts nothing. A key is kept in one of 8 slots from
 * its hash's (an empty one, else one whose state no longer matters): a key
 * that finds none counts nothing (fails open). CR_E_NOMEM. */
cr_status cr_penalty_box_region(cr_penalty_box **out, void *block, int64_t capacity,
                                const uint64_t seed[2]);
/* Makes `penalty` the region's. CR_E_SHARED_LOCK (the box's lock held by a
 * living process past the bound). */
cr_status cr_penalty_box_set(cr_penalty_box *box, const cr_penalty *penalty);
/* Whether the box is a region's. */
bool cr_penalty_box_shared(const cr_penalty_box *box);
/* A reboot's reset of the block: keys, bans and the lock; the penalty kept. */
void cr_penalty_region_reset(void *block, int64_t capacity);
/* The keys banned at `now_ns` in a (read-only) block, up to `max_entries`
 * of them into `entries`; returns how many there are. *has_penalty and
 * *penalty: the region's; *bans, the bans it started. */
size_t cr_penalty_region_list(const void *block, int64_t capacity, int64_t now_ns,
                              cr_penalty_entry *entries, size_t max_entries, bool *has_penalty,
                              cr_penalty *penalty, uint64_t *bans);

#endif
