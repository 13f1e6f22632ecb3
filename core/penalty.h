/* The penalty box as a store keeps it (core/penalty.c): each refused key's
 * penalty state, in this process, touched only when a decision is a
 * turn-away. Not part of the public API. */
#ifndef CELLRATE_PENALTY_INTERNAL_H
#define CELLRATE_PENALTY_INTERNAL_H

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

/* The bans started so far. */
uint64_t cr_penalty_box_bans(cr_penalty_box *box);

#endif
