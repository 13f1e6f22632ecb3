/*
 * The penalty box (docs/design.md §15, docs/design/penalty.md): the pure
 * rule (cr_penalty_init, cr_penalty_refused) and the box a store of this
 * process keeps refused keys in. Strikes are a GCRA of `after` per
 * `within`; a ban is written into the key's own state by the store (as a
 * provider's wait is, core/decide.h cr_ban_core), so that a decision of a
 * limit with a penalty reads nothing more than a plain one until it refuses.
 */
#include "penalty.h"
#include "lock.h"
#include "seed.h"
#include "siphash.h"

#include "cellrate/limit.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
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

typedef struct region_box region_box;

struct cr_penalty_box {
    region_box *shared; /* a shared region's box (below), or NULL: this process's */
    pthread_mutex_t lock;
    cr_penalty penalty;
    uint64_t seed[2];
    int64_t capacity; /* the most keys held */
    size_t nslots;    /* a power of two, >= 2 * capacity (a region's: its slots) */
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
    if (box->shared) { /* the region's slots stay in the region */
        free(box);
        return;
    }
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

static int64_t region_refused(cr_penalty_box *box, const void *key, size_t key_len, int64_t now_ns,
                              bool *started);
static void region_release(cr_penalty_box *box, const void *key, size_t key_len);
static void region_clear(cr_penalty_box *box);
static uint64_t region_bans(const cr_penalty_box *box);

int64_t cr_penalty_box_refused(cr_penalty_box *box, const void *key, size_t key_len, int64_t now_ns,
                               bool *started)
{
    *started = false;
    if (box->shared)
        return region_refused(box, key, key_len, now_ns, started);
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
    if (box->shared) {
        region_release(box, key, key_len);
        return;
    }
    const uint64_t hash = cr_siphash13(box->seed, key, key_len);
    pthread_mutex_lock(&box->lock);
    box_slot *slot = find(box, hash, key, key_len);
    if (slot->key != NULL)
        memset(&slot->state, 0, sizeof slot->state); /* purged when room is needed */
    pthread_mutex_unlock(&box->lock);
}

void cr_penalty_box_clear(cr_penalty_box *box)
{
    if (box->shared) {
        region_clear(box);
        return;
    }
    pthread_mutex_lock(&box->lock);
    for (size_t i = 0; i < box->nslots; i++)
        if (box->slots[i].key != NULL)
            memset(&box->slots[i].state, 0, sizeof box->slots[i].state);
    pthread_mutex_unlock(&box->lock);
}

uint64_t cr_penalty_box_bans(cr_penalty_box *box)
{
    if (box->shared)
        return region_bans(box);
    pthread_mutex_lock(&box->lock);
    const uint64_t bans = box->bans;
    pthread_mutex_unlock(&box->lock);
    return bans;
}

/* ------------------------------------------------------------------------ */
/* The box in a shared region (docs/design/penalty.md, "In a shared         */
/* region"): a header line (the region's penalty, the lock, the bans) and   */
/* CR_PENALTY_SLOT-byte slots, each a key's hash, state and first bytes.    */
/* Every process of the region counts one key's refusals there, under one   */
/* cr_lock (a dead holder's is taken over); only a turn-away comes here.    */

/* A key is looked for in this many slots from its hash's (no chains: a
 * slot emptied is simply empty, and a killed writer leaves no broken
 * chain). */
#define REGION_WINDOW 8
#define REGION_KEY_BYTES 32

typedef struct {
    _Alignas(64) cr_lock lock;
    _Atomic int64_t after; /* the region's penalty; 0: none */
    _Atomic int64_t within_ns, strike_ns, ban_ns, max_ban_ns;
    _Atomic uint64_t bans; /* started so far, by every process */
    _Atomic uint64_t used; /* slots holding a key */
} region_head;

/* `tag`: the key's hash with bit 63 set (0: an empty slot), its low 6 bits
 * the level of the last ban. */
typedef struct {
    _Alignas(64) _Atomic uint64_t tag;
    _Atomic int64_t strikes;
    _Atomic int64_t ban_end;
    _Atomic uint32_t key_len; /* the key's whole length; its first bytes below */
    _Atomic uint32_t spare;
    _Atomic unsigned char key[REGION_KEY_BYTES];
} region_slot;

struct region_box {
    region_head head;
    region_slot slots[];
};

_Static_assert(sizeof(region_head) == 64, "the box's header is one line");
_Static_assert(sizeof(region_slot) == CR_PENALTY_SLOT, "a slot is one line");

#define LEVEL_BITS 63u

static uint64_t region_nslots(int64_t capacity)
{
    /* a quarter of the table's keys, at least a window's */
    const int64_t held = capacity / 4 + (capacity % 4 != 0);
    uint64_t n = REGION_WINDOW;
    while ((int64_t)n < held && n < (UINT64_C(1) << 40))
        n <<= 1;
    return n;
}

size_t cr_penalty_region_size(int64_t capacity)
{
    return sizeof(region_head) + region_nslots(capacity) * sizeof(region_slot);
}

int64_t cr_penalty_region_keys(int64_t capacity) { return (int64_t)region_nslots(capacity); }

static uint64_t region_tag(const cr_penalty_box *box, const void *key, size_t key_len)
{
    return (cr_siphash13(box->seed, key, key_len) | (UINT64_C(1) << 63)) & ~(uint64_t)LEVEL_BITS;
}

static bool region_penalty(region_box *shared, cr_penalty *penalty)
{
    penalty->after = atomic_load_explicit(&shared->head.after, memory_order_relaxed);
    penalty->within_ns = atomic_load_explicit(&shared->head.within_ns, memory_order_relaxed);
    penalty->strike_ns = atomic_load_explicit(&shared->head.strike_ns, memory_order_relaxed);
    penalty->ban_ns = atomic_load_explicit(&shared->head.ban_ns, memory_order_relaxed);
    penalty->max_ban_ns = atomic_load_explicit(&shared->head.max_ban_ns, memory_order_relaxed);
    /* a damaged header is no penalty: the limit still holds */
    return penalty->after >= 1 && penalty->after <= INT32_MAX && penalty->strike_ns >= 1 &&
           penalty->ban_ns >= 1 && penalty->max_ban_ns >= penalty->ban_ns &&
           penalty->max_ban_ns < CR_HORIZON_NS &&
           penalty->strike_ns <= CR_HORIZON_NS / penalty->after;
}

static void slot_state(region_slot *slot, cr_penalty_state *state)
{
    state->strikes = atomic_load_explicit(&slot->strikes, memory_order_relaxed);
    state->ban_end = atomic_load_explicit(&slot->ban_end, memory_order_relaxed);
    state->level = (int64_t)(atomic_load_explicit(&slot->tag, memory_order_relaxed) & LEVEL_BITS);
}

static void slot_empty(region_slot *slot)
{
    atomic_store_explicit(&slot->tag, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->strikes, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->ban_end, 0, memory_order_relaxed);
}

/* The key's slot in its window, or NULL. */
static region_slot *region_find(cr_penalty_box *box, uint64_t tag)
{
    for (uint64_t i = 0; i < REGION_WINDOW; i++) {
        region_slot *slot = &box->shared->slots[((tag >> 6) + i) & (box->nslots - 1)];
        if ((atomic_load_explicit(&slot->tag, memory_order_relaxed) & ~(uint64_t)LEVEL_BITS) == tag)
            return slot;
    }
    return NULL;
}

/* A slot of the key's window for a new key: an empty one, else one whose
 * state no longer matters; NULL when all hold live keys. */
static region_slot *region_room(cr_penalty_box *box, uint64_t tag, const cr_penalty *penalty,
                                int64_t now_ns)
{
    region_slot *idle = NULL;
    for (uint64_t i = 0; i < REGION_WINDOW; i++) {
        region_slot *slot = &box->shared->slots[((tag >> 6) + i) & (box->nslots - 1)];
        if (atomic_load_explicit(&slot->tag, memory_order_relaxed) == 0)
            return slot;
        cr_penalty_state state;
        slot_state(slot, &state);
        if (idle == NULL && !cr_penalty_state_live(penalty, &state, now_ns))
            idle = slot;
    }
    return idle;
}

/* The first bytes of the key, for an inspection's listing. */
static void slot_key(region_slot *slot, const void *key, size_t key_len)
{
    const unsigned char *bytes = key;
    const size_t kept = key_len < REGION_KEY_BYTES ? key_len : REGION_KEY_BYTES;
    for (size_t i = 0; i < kept; i++)
        atomic_store_explicit(&slot->key[i], bytes[i], memory_order_relaxed);
    atomic_store_explicit(&slot->key_len, key_len > UINT32_MAX ? UINT32_MAX : (uint32_t)key_len,
                          memory_order_relaxed);
}

static int64_t region_refused(cr_penalty_box *box, const void *key, size_t key_len, int64_t now_ns,
                              bool *started)
{
    region_box *shared = box->shared;
    if (atomic_load_explicit(&shared->head.after, memory_order_relaxed) == 0)
        return 0; /* the region has no penalty */
    if (cr_lock_acquire(&shared->head.lock) != CR_OK)
        return 0; /* a living holder past the bound: fails open, the limit holds */
    int64_t ban_end = 0;
    cr_penalty penalty;
    if (region_penalty(shared, &penalty)) {
        const uint64_t tag = region_tag(box, key, key_len);
        region_slot *slot = region_find(box, tag);
        if (slot == NULL) {
            slot = region_room(box, tag, &penalty, now_ns);
            if (slot != NULL) {
                if (atomic_load_explicit(&slot->tag, memory_order_relaxed) == 0)
                    atomic_fetch_add_explicit(&shared->head.used, 1, memory_order_relaxed);
                slot_empty(slot);
                slot_key(slot, key, key_len);
                atomic_store_explicit(&slot->tag, tag, memory_order_relaxed);
            }
        }
        if (slot != NULL) {
            cr_penalty_state state;
            slot_state(slot, &state);
            ban_end = cr_penalty_refused(&penalty, &state, now_ns, started);
            atomic_store_explicit(&slot->strikes, state.strikes, memory_order_relaxed);
            atomic_store_explicit(&slot->ban_end, state.ban_end, memory_order_relaxed);
            atomic_store_explicit(&slot->tag, tag | (uint64_t)state.level, memory_order_relaxed);
            if (*started)
                atomic_fetch_add_explicit(&shared->head.bans, 1, memory_order_relaxed);
        }
    }
    cr_lock_release(&shared->head.lock);
    return ban_end;
}

static void region_release(cr_penalty_box *box, const void *key, size_t key_len)
{
    region_box *shared = box->shared;
    if (cr_lock_acquire(&shared->head.lock) != CR_OK)
        return;
    region_slot *slot = region_find(box, region_tag(box, key, key_len));
    if (slot != NULL) {
        slot_empty(slot);
        atomic_fetch_sub_explicit(&shared->head.used, 1, memory_order_relaxed);
    }
    cr_lock_release(&shared->head.lock);
}

static void region_clear(cr_penalty_box *box)
{
    region_box *shared = box->shared;
    if (cr_lock_acquire(&shared->head.lock) != CR_OK)
        return;
    for (size_t i = 0; i < box->nslots; i++)
        slot_empty(&shared->slots[i]);
    atomic_store_explicit(&shared->head.used, 0, memory_order_relaxed);
    cr_lock_release(&shared->head.lock);
}

static uint64_t region_bans(const cr_penalty_box *box)
{
    return atomic_load_explicit(&box->shared->head.bans, memory_order_relaxed);
}

cr_status cr_penalty_box_region(cr_penalty_box **out, void *block, int64_t capacity,
                                const uint64_t seed[2])
{
    cr_penalty_box *box = calloc(1, sizeof *box);
    if (box == NULL)
        return CR_E_NOMEM;
    box->shared = block;
    box->nslots = region_nslots(capacity);
    box->capacity = (int64_t)box->nslots;
    box->seed[0] = seed[0] ^ UINT64_C(0x70656e616c747921); /* apart from the table's hash */
    box->seed[1] = seed[1];
    *out = box;
    return CR_OK;
}

cr_status cr_penalty_box_set(cr_penalty_box *box, const cr_penalty *penalty)
{
    region_box *shared = box->shared;
    cr_status status = cr_lock_acquire(&shared->head.lock);
    if (status != CR_OK)
        return status;
    atomic_store_explicit(&shared->head.within_ns, penalty->within_ns, memory_order_relaxed);
    atomic_store_explicit(&shared->head.strike_ns, penalty->strike_ns, memory_order_relaxed);
    atomic_store_explicit(&shared->head.ban_ns, penalty->ban_ns, memory_order_relaxed);
    atomic_store_explicit(&shared->head.max_ban_ns, penalty->max_ban_ns, memory_order_relaxed);
    atomic_store_explicit(&shared->head.after, penalty->after, memory_order_release);
    cr_lock_release(&shared->head.lock);
    return CR_OK;
}

bool cr_penalty_box_shared(const cr_penalty_box *box) { return box->shared != NULL; }

void cr_penalty_region_reset(void *block, int64_t capacity)
{
    region_box *shared = block;
    atomic_store_explicit(&shared->head.lock, 0, memory_order_relaxed);
    atomic_store_explicit(&shared->head.bans, 0, memory_order_relaxed);
    atomic_store_explicit(&shared->head.used, 0, memory_order_relaxed);
    const uint64_t nslots = region_nslots(capacity);
    for (uint64_t i = 0; i < nslots; i++)
        slot_empty(&shared->slots[i]);
}

size_t cr_penalty_region_list(const void *block, int64_t capacity, int64_t now_ns,
                              cr_penalty_entry *entries, size_t max_entries, bool *has_penalty,
                              cr_penalty *penalty, uint64_t *bans)
{
    region_box *shared = (region_box *)(uintptr_t)block; /* read only: relaxed loads */
    *has_penalty = region_penalty(shared, penalty);
    *bans = atomic_load_explicit(&shared->head.bans, memory_order_relaxed);
    const uint64_t nslots = region_nslots(capacity);
    size_t n = 0;
    for (uint64_t i = 0; i < nslots; i++) {
        region_slot *slot = &shared->slots[i];
        if (atomic_load_explicit(&slot->tag, memory_order_relaxed) == 0)
            continue;
        cr_penalty_state state;
        slot_state(slot, &state);
        if (state.ban_end <= now_ns)
            continue; /* in the box: banned now */
        if (n < max_entries) {
            cr_penalty_entry *entry = &entries[n];
            const uint32_t len = atomic_load_explicit(&slot->key_len, memory_order_relaxed);
            entry->key_len = len;
            entry->key_kept = len < REGION_KEY_BYTES ? len : REGION_KEY_BYTES;
            for (size_t k = 0; k < entry->key_kept; k++)
                entry->key[k] = atomic_load_explicit(&slot->key[k], memory_order_relaxed);
            entry->ban_end_ns = state.ban_end;
            entry->ban_left_ns = state.ban_end - now_ns;
            entry->level = state.level;
        }
        n++;
    }
    return n;
}

void cr_penalty_box_reset_bans(cr_penalty_box *box)
{
    if (box->shared) {
        atomic_store_explicit(&box->shared->head.bans, 0, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&box->lock);
    box->bans = 0;
    pthread_mutex_unlock(&box->lock);
}
