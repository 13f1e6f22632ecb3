/* What the keyed table (core/keyed.c) offers the units above it: check_all's
 * peek and uncounted commits, and the count of a table's keys for an
 * inspection. Not part of the public API. */
#ifndef CELLRATE_KEYED_H
#define CELLRATE_KEYED_H

#include "cellrate/stores.h"
#include "counters.h"
#include "line.h"

/* As cr_limiter_uncounted (core/limiter.h), for `key`. */
cr_status cr_keyed_uncounted(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                             int32_t plan, cr_op_kind kind, int64_t cost, cr_decision *out);

/* As cr_limiter_peek_allowed, for `key`. */
cr_status cr_keyed_peek_allowed(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                int32_t plan, int64_t cost, bool *allowed);

/* The table's counters. */
const cr_counts *cr_keyed_counts(const cr_keyed *keyed);

/* The table's lines of waiters in this process (cr_wait_step; with `make`,
 * made on its first use; NULL: none, or out of memory), and the fingerprint
 * of `key` there. */
cr_lines *cr_keyed_lines(cr_keyed *keyed, const void *key, size_t key_len, uint64_t *fingerprint,
                         bool make);

/* Keys holding a slot in a keyed table's `nbuckets` buckets (cr_keyed_len's
 * count). Read-only: an inspection's too. */
size_t cr_keyed_count_slots(const void *buckets, uint32_t nbuckets);

/* Whether `key` holds a slot among a keyed table's `nbuckets` buckets of
 * seed `seed`: its plan's index, the generation tag (mod 256) of the plan's
 * limit its state was written under, and that state. Read-only: an
 * inspection's (cr_inspect_key). */
bool cr_keyed_look_key(const void *buckets, uint32_t nbuckets, const uint64_t seed[2],
                       const void *key, size_t key_len, int32_t *plan, uint64_t *tag,
                       int64_t *state);
/* Generations a slot's tag is taken to be behind at most (more: its state
 * is taken as everything used). */
#define CR_KEYED_MAX_BEHIND 224

#endif
