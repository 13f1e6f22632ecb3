/*
 * The penalty box (docs/design.md §15, docs/design/penalty.md): the pure
 * rule (cr_penalty_init, cr_penalty_refused) and the box a store of this
 * process keeps refused keys in. Strikes are a GCRA of `after` per
 * `within`; a ban is written into the key's own state by the store (as a
 * provider's wait is, core/decide.h cr_ban_core), so that a decision of a
 * limit with a penalty reads nothing more than a plain one until it refuses.
 */
#include "penalty.h"
#include "seed.h"
#include "siphash.h"

#include "cellrate/limit.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static bool seconds_ns(double seconds, int64_t *ns)
{
    return seconds > 0 && isfinite(seconds) && cr_seconds_to_ns(seconds, ns) == CR_OK && *ns >= 1;
}

cr_status cr_penalty_init(cr_penalty *penalty, const char *after, size_t after_len, double ban_s,
                          double max_ban_s, bool has_max_ban)
{
    double rate = 0, period_s = 0;
    int64_t within = 0, ban = 0, max_ban = 0;
    if (after == NULL || cr_parse_rate(after, after_len, &rate, &period_s) != CR_OK ||
        !(rate >= 1) || rate != floor(rate) || rate > 2147483647.0 ||
        !seconds_ns(period_s, &within))
        return CR_E_PENALTY_AFTER;
    if (!seconds_ns(ban_s, &ban))
        return CR_E_PENALTY_BAN;
    if (has_max_ban && (!seconds_ns(max_ban_s, &max_ban) || max_ban < ban))
        return CR_E_PENALTY_MAX_BAN;
    cr_penalty made;
    made.after = (int64_t)rate;
    made.within_ns = within;
    made.strike_ns = within / made.after + (within % made.after != 0);
    made.ban_ns = ban;
    made.max_ban_ns = has_max_ban ? max_ban : ban;
    *penalty = made;
    return CR_OK;
}

int64_t cr_penalty_refused(const cr_penalty *penalty, cr_penalty_state *state, int64_t now_ns,
                           bool *started)
{
    *started = false;
    if (now_ns < state->ban_end)
        return state->ban_end; /* a refusal during a ban counts nothing */
    const int64_t T = penalty->strike_ns;
    const int64_t tau = T * penalty->after; /* < within + after: no overflow */
    const int64_t base = state->strikes > now_ns ? state->strikes : now_ns;
    const int64_t next = base + T; /* base <= now + tau < 2^63 */
    if (next - now_ns <= tau - T) {
        state->strikes = next; /* room for one more strike: no ban yet */
        return 0;
    }
    const bool repeat = state->ban_end != 0 && now_ns < state->ban_end + penalty->max_ban_ns;
    const int64_t level = repeat ? (state->level < 62 ? state->level + 1 : 62) : 0;
    int64_t length = penalty->max_ban_ns;
    if (level < 62 && penalty->ban_ns <= (penalty->max_ban_ns >> level))
        length = penalty->ban_ns << level;
    state->strikes = 0; /* the ban pays for them */
    state->level = level;
    state->ban_end = now_ns + length; /* both below 2^62 */
    *started = true;
    return state->ban_end;
}

bool cr_penalty_state_live(const cr_penalty *penalty, const cr_penalty_state *state, int64_t now_ns)
{
    return state->strikes > now_ns ||
           (state->ban_end != 0 && state->ban_end + penalty->max_ban_ns > now_ns);
}

/* ------------------------------------------------------------------------ */
/* The box: open addressing under one mutex (only refusals come here).      */

typedef struct {
    uint64_t hash;
    char *key; /* NULL: an empty slot */
    size_t key_len;
    cr_penalty_state state;
} box_slot;

struct cr_penalty_box {
    pthread_mutex_t lock;
    cr_penalty penalty;
    uint64_t seed[2];
    int64_t capacity; /* the most keys held */
    size_t nslots;    /* a power of two, >= 2 * capacity */
    size_t used;
    uint64_t bans;
    box_slot *slots;
};

cr_status cr_penalty_box_new(cr_penalty_box **out, const cr_penalty *penalty, int64_t capacity)
{
    if (capacity < 1)
        capacity = 1;
    size_t nslots = 16;
    while ((int64_t)nslots < 2 * capacity && nslots < ((size_t)1 << 40))
        nslots <<= 1;
    cr_penalty_box *box = calloc(1, sizeof *box);
    if (box == NULL)
        return CR_E_NOMEM;
    box->slots = calloc(nslots, sizeof *box->slots);
    if (box->slots == NULL || pthread_mutex_init(&box->lock, NULL) != 0) {
        free(box->slots);
        free(box);
        return CR_E_NOMEM;
    }
    box->penalty = *penalty;
    box->capacity = capacity;
    box->nslots = nslots;
    if (cr_random_seed(box->seed) != CR_OK) {
        box->seed[0] = (uint64_t)(uintptr_t)box;
        box->seed[1] = (uint64_t)(uintptr_t)box->slots;
    }
    *out = box;
    return CR_OK;
}

void cr_penalty_box_free(cr_penalty_box *box)
{
    if (box == NULL)
        return;
    for (size_t i = 0; i < box->nslots; i++)
        free(box->slots[i].key);
    free(box->slots);
    pthread_mutex_destroy(&box->lock);
    free(box);
}

/* The key's slot, or the empty one where it would go. */
static box_slot *find(cr_penalty_box *box, uint64_t hash, const void *key, size_t key_len)
{
    const size_t mask = box->nslots - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        box_slot *slot = &box->slots[i];
        if (slot->key == NULL || (slot->hash == hash && slot->key_len == key_len &&
                                  memcmp(slot->key, key, key_len) == 0))
            return slot;
    }
}

/* Forgets every key whose state no longer matters: the table rebuilt in
 * place from a copy of the live slots. */
static void purge(cr_penalty_box *box, int64_t now_ns)
{
    size_t live = 0;
    for (size_t i = 0; i < box->nslots; i++) {
        box_slot *slot = &box->slots[i];
        if (slot->key == NULL)
            continue;
        if (cr_penalty_state_live(&box->penalty, &slot->state, now_ns))
            box->slots[live++] = *slot; /* live <= i: compacts to the front */
        else
            free(slot->key);
    }
    box_slot *kept = malloc((live ? live : 1) * sizeof *kept);
    if (kept != NULL)
        memcpy(kept, box->slots, live * sizeof *kept);
    memset(box->slots, 0, box->nslots * sizeof *box->slots);
    box->used = 0;
    for (size_t i = 0; kept != NULL && i < live; i++) {
        *find(box, kept[i].hash, kept[i].key, kept[i].key_len) = kept[i];
        box->used++;
    }
    if (kept == NULL) /* no room to rebuild: forget them all (fails open) */
        for (size_t i = 0; i < live; i++)
            free(box->slots[i].key);
    free(kept);
}

int64_t cr_penalty_box_refused(cr_penalty_box *box, const void *key, size_t key_len, int64_t now_ns,
                               bool *started)
{
    *started = false;
    const uint64_t hash = cr_siphash13(box->seed, key, key_len);
    int64_t ban_end = 0;
    pthread_mutex_lock(&box->lock);
    box_slot *slot = find(box, hash, key, key_len);
    if (slot->key == NULL && (int64_t)box->used >= box->capacity) {
        purge(box, now_ns);
        slot = find(box, hash, key, key_len);
    }
    if (slot->key == NULL && (int64_t)box->used < box->capacity) {
        char *copy = malloc(key_len ? key_len : 1);
        if (copy != NULL) {
            memcpy(copy, key, key_len);
            slot->hash = hash;
            slot->key = copy;
            slot->key_len = key_len;
            memset(&slot->state, 0, sizeof slot->state);
            box->used++;
        }
    }
    if (slot->key != NULL) {
        ban_end = cr_penalty_refused(&box->penalty, &slot->state, now_ns, started);
        box->bans += *started;
    }
    pthread_mutex_unlock(&box->lock);
    return ban_end;
}

void cr_penalty_box_release(cr_penalty_box *box, const void *key, size_t key_len)
{
    const uint64_t hash = cr_siphash13(box->seed, key, key_len);
    pthread_mutex_lock(&box->lock);
    box_slot *slot = find(box, hash, key, key_len);
    if (slot->key != NULL)
        memset(&slot->state, 0, sizeof slot->state); /* purged when room is needed */
    pthread_mutex_unlock(&box->lock);
}

uint64_t cr_penalty_box_bans(cr_penalty_box *box)
{
    pthread_mutex_lock(&box->lock);
    const uint64_t bans = box->bans;
    pthread_mutex_unlock(&box->lock);
    return bans;
}
