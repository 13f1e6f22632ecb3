/*
 * Many keys: a table of 16-byte slots {fingerprint, TAT} in 64-byte buckets.
 *
 * A key's fingerprint is its 64-bit keyed SipHash-1-3 (0 marks an empty
 * slot); the key may sit in either of two buckets chosen by the hash, so a
 * lookup reads at most two cache lines. Every change of a slot is one 16-byte
 * compare-and-swap of the pair, so a slot's key and its TAT never tear: an
 * update that raced with a reuse of the slot simply fails and looks again.
 *
 * Lookups and updates of a key that holds a slot take no lock. Giving a slot
 * to a key (which may reuse an expired slot or evict a live one) happens under
 * the locks of the key's two buckets, after looking again under them, so two
 * threads can never place the same key twice. Freeing a slot needs no lock:
 * it cannot create a duplicate.
 *
 * A live change (docs/design.md §4) converts each key lazily. The top 8 bits
 * of a slot's fingerprint word are the generation (mod 256) of the limit its
 * state was written under; a touch that meets an older tag carries the state
 * through every change since, at each change's instant, in the same CAS that
 * retags it. Each change also sweeps 1/112 of the table, so no slot is ever
 * 112 changes behind and a tag is never read as another generation's.
 *
 * Plans (docs/design/plans.md): the 4 bits below the tag hold the key's plan
 * (0: "default", the table's own limit), the fingerprint the 52 below them.
 * Each plan has its own chain of limits (its generations, its tags); a key
 * met under another plan is carried into the decision's plan in one CAS that
 * retags it.
 */
#include "penalty.h"
#include "keyed.h"
#include "carry.h"
#include "cellrate/plans.h"
#include "priority.h"
#include "fastclock.h"
#include "place.h"
#include "region.h"
#include "seed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOTS_PER_BUCKET 4
#define MAX_STRIPES 256

/* The fingerprint word: the generation tag above, the key's plan, the key's
 * 52-bit fingerprint below (never 0 in an occupied slot). */
#define TAG_SHIFT 56
#define TAG_MASK (~((UINT64_C(1) << TAG_SHIFT) - 1))
#define PLAN_SHIFT 52
#define PLAN_MASK (((UINT64_C(1) << TAG_SHIFT) - 1) & ~FP_MASK)
#define FP_MASK ((UINT64_C(1) << PLAN_SHIFT) - 1)
_Static_assert((FP_MASK & ~CR_FP_MASK) == 0, "the tag and the plan sit above the fingerprint");
_Static_assert((PLAN_MASK >> PLAN_SHIFT) + 1 == CR_PLANS_MAX, "a plan index fits its bits");
#define TAG_COUNT 256
/* The sweep visits every bucket within SWEEP_CHANGES changes; a state is
 * carried through up to MAX_BEHIND changes (< 256: tags never alias). */
#define SWEEP_CHANGES 112
#define MAX_BEHIND CR_KEYED_MAX_BEHIND

typedef cr_pair slot; /* {fingerprint word, state} */
typedef cr_pair slot_pair;

typedef struct {
    _Alignas(64) slot slots[SLOTS_PER_BUCKET];
} bucket;

_Static_assert(sizeof(slot) == 16, "a slot is 16 bytes");
_Static_assert(sizeof(bucket) == 64, "a bucket is one cache line");

typedef cr_generation keyed_limit;

struct cr_keyed {
    keyed_limit *_Atomic current; /* the limit decisions apply */
    /* The generation of the limit decisions must apply: the table's own, or
     * its shared region's; `current` follows it on the next decision. */
    const _Atomic uint64_t *generation;
    int64_t capacity;
    uint64_t seed[2];
    uint32_t nbuckets;
    uint32_t nstripes;
    bucket *buckets;
    cr_lock *stripes;
    _Atomic uint64_t *evictions;
    cr_region region;          /* base is NULL for a table of this process alone */
    pthread_mutex_t changing;  /* serializes live changes; decisions never take it */
    uint64_t own_sweep_cursor; /* the next bucket a change sweeps, under `changing` */
    uint64_t *sweep_cursor;    /* own_sweep_cursor, or the region's */
    const cr_limit *replaced;  /* the region's limit that opening replaced, or NULL */
    cr_counts counts;          /* this process's block, or the region's */
    cr_lines *_Atomic lines;   /* this process's waiters (cr_wait_step), made on first use */
    cr_plan_table *plans;      /* NULL: only "default" */
    /* each plan's latest limit but "default"'s (`current`), under `changing` */
    keyed_limit *_Atomic plan_current[CR_PLANS_MAX];
    /* in a shared region, each plan's generation word but "default"'s
     * (`generation`); NULL in a table of this process alone */
    const _Atomic uint64_t *plan_generation[CR_PLANS_MAX];
    cr_penalty_box *penalty; /* the penalty box, or NULL (set before the first decision) */
    _Alignas(64) _Atomic uint64_t own_evictions;
    _Atomic uint64_t own_generation;
};

/* Keys with waiters in line at once in one process: beyond, a key's waiters
 * wait without a line (each on its own retry_after). */
#define LINES_PER_TABLE 64

static uint64_t tag_of(uint64_t generation) { return (generation % TAG_COUNT) << TAG_SHIFT; }

static uint64_t plan_bits(int32_t plan) { return (uint64_t)plan << PLAN_SHIFT; }

static int32_t plan_of(uint64_t word) { return (int32_t)((word & PLAN_MASK) >> PLAN_SHIFT); }

static keyed_limit *current_limit(const cr_keyed *keyed)
{
    return atomic_load_explicit(&((cr_keyed *)keyed)->current, memory_order_acquire);
}

/* The latest limit of plan `plan` (an index the table has). */
static keyed_limit *plan_limit(const cr_keyed *keyed, int32_t plan)
{
    if (plan == CR_PLAN_DEFAULT)
        return current_limit(keyed);
    return atomic_load_explicit(&((cr_keyed *)keyed)->plan_current[plan], memory_order_acquire);
}

/* A region's table grows (names another process gave it): read once. */
static int32_t plan_count(const cr_keyed *keyed)
{
    return keyed->plans ? __atomic_load_n(&keyed->plans->count, __ATOMIC_ACQUIRE) : 1;
}

/* Whether plan `plan` of a shared region changed since `limit` (this
 * process's latest of it), or is a name this process has not read yet. */
static bool plan_behind(const cr_keyed *keyed, int32_t plan, const keyed_limit *limit)
{
    const _Atomic uint64_t *word = keyed->plan_generation[plan];
    return word &&
           (!limit || atomic_load_explicit(word, memory_order_acquire) != limit->generation);
}

/* Whether `plan` is an index of the table's plans. */
static bool plan_ok(const cr_keyed *keyed, int32_t plan)
{
    return plan >= 0 && plan < plan_count(keyed);
}

/* A key's place among `nbuckets` buckets of seed `seed`, its fingerprint
 * below the plan's bits. */
static cr_key_place seeded_place(const uint64_t seed[2], uint32_t nbuckets, const void *key,
                                 size_t key_len)
{
    cr_key_place place = cr_key_place_of(seed, nbuckets, key, key_len);
    place.fp &= FP_MASK;
    place.fp += place.fp == 0;
    return place;
}

static cr_key_place place_of(const cr_keyed *keyed, const void *key, size_t key_len)
{
    return seeded_place(keyed->seed, keyed->nbuckets, key, key_len);
}

#define make_pair cr_pair_make
#define slot_cas cr_pair_cas
#define load_fp cr_pair_word
#define load_tat cr_pair_state

/* The slot holding `fp`, with its TAT in *tat and its whole fingerprint word
 * (the generation tag too) in *word, or NULL. */
static slot *find_in(bucket *buckets, const cr_key_place *place, int64_t *tat, uint64_t *word)
{
    for (int b = 0; b < 2; b++) {
        bucket *bk = &buckets[place->bucket[b]];
        for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
            slot *s = &bk->slots[i];
            *word = load_fp(s);
            if ((*word & FP_MASK) != place->fp)
                continue;
            *tat = load_tat(s);
            if (load_fp(s) == *word)
                return s;
            i = -1; /* the slot changed hands under us: look at this bucket again */
        }
    }
    return NULL;
}

static slot *find(const cr_keyed *keyed, const cr_key_place *place, int64_t *tat, uint64_t *word)
{
    return find_in(keyed->buckets, place, tat, word);
}

/* ------------------------------------------------------------------------ */
/* Stripe locks: taken only to give a slot to a key.                         */

/*
 * Gives `place->fp` a slot holding `new_tat`, called with the key's stripes
 * locked and the key absent from both buckets. Takes an empty slot of the
 * emptier bucket (two choices keep buckets even); else the candidate with the
 * smallest TAT, which is free if that TAT has passed and otherwise the most
 * idle live key, evicted and counted.
 */
static void claim_slot(cr_keyed *keyed, const cr_key_place *place, uint64_t tag, int64_t now_ns,
                       int64_t new_tat)
{
    for (;;) {
        slot *empty = NULL, *oldest = NULL;
        slot_pair empty_seen = 0, oldest_seen = 0;
        int64_t oldest_tat = INT64_MAX;
        int most_empties = 0;
        for (int b = 0; b < 2; b++) {
            bucket *bk = &keyed->buckets[place->bucket[b]];
            int empties = 0;
            slot *first_empty = NULL;
            slot_pair first_empty_seen = 0;
            for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
                slot *s = &bk->slots[i];
                uint64_t fp = load_fp(s);
                int64_t tat = load_tat(s);
                if (fp == 0) {
                    if (empties++ == 0) {
                        first_empty = s;
                        first_empty_seen = make_pair(fp, tat);
                    }
                } else if (tat < oldest_tat || !oldest) {
                    oldest = s;
                    oldest_seen = make_pair(fp, tat);
                    oldest_tat = tat;
                }
            }
            if (empties > most_empties) {
                most_empties = empties;
                empty = first_empty;
                empty_seen = first_empty_seen;
            }
        }
        slot *victim = empty ? empty : oldest;
        if (!slot_cas(victim, empty ? empty_seen : oldest_seen,
                      make_pair(place->fp | tag, new_tat)))
            continue; /* the candidate changed: choose again */
        if (!empty && oldest_tat > now_ns)
            atomic_fetch_add_explicit(keyed->evictions, 1, memory_order_relaxed);
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Live change: carrying a slot to the current limit.                        */

/* The state under `current` of a state written under the limit tagged
 * `tag`: carried through each change since, at that change's instant (as if
 * the table had converted every key at once); `current` is the table's
 * latest (convert_slot checks), so the tag is behind it.
 * The sweep keeps every slot within SWEEP_CHANGES + the staleness of its last
 * writer; a state more than MAX_BEHIND behind (a decision that slept through
 * over 112 changes between reading `current` and its CAS) is taken as
 * everything used under `current`: never a fresh allowance. */
static int64_t carried_state(const cr_keyed *keyed, int32_t plan, const keyed_limit *current,
                             uint64_t tag, int64_t state, int64_t now_ns)
{
    const uint64_t behind = (current->generation - tag) % TAG_COUNT;
    if (behind >= MAX_BEHIND || behind > current->generation)
        return cr_full(&current->limit, now_ns);
    return cr_carry_since(keyed->region.base ? &keyed->region : NULL, plan, current,
                          current->generation - behind, state, now_ns);
}

/* Retags slot `s` (seen as {word, state}) to `current`, carrying its state.
 * Returns the limit the caller should decide under: `current`, or the table's
 * newer one when `current` turned out stale. */
static keyed_limit *convert_slot(cr_keyed *keyed, int32_t plan, keyed_limit *current, slot *s,
                                 uint64_t word, int64_t state, int64_t now_ns)
{
    keyed_limit *latest = plan_limit(keyed, plan);
    if (latest != current)
        return latest; /* a change since this call began: decide under it */
    const int64_t carried = carried_state(keyed, plan, current, word >> TAG_SHIFT, state, now_ns);
    slot_cas(s, make_pair(word, state),
             make_pair((word & ~TAG_MASK) | tag_of(current->generation), carried));
    return current; /* converted, or changed meanwhile: the caller looks again */
}

/* Converts every slot of plan `plan` in the next buckets that is behind
 * `current` (the change's share of the sweep). */
static void sweep(cr_keyed *keyed, int32_t plan, keyed_limit *current, int64_t now_ns)
{
    const uint32_t count = (keyed->nbuckets + SWEEP_CHANGES - 1) / SWEEP_CHANGES;
    const uint64_t tag = tag_of(current->generation);
    for (uint32_t n = 0; n < count; n++) {
        /* a region's cursor is the file's: any value must stay in the table */
        const uint64_t cursor = *keyed->sweep_cursor % keyed->nbuckets;
        bucket *bk = &keyed->buckets[cursor];
        *keyed->sweep_cursor = (cursor + 1) % keyed->nbuckets;
        for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
            slot *s = &bk->slots[i];
            for (;;) {
                const uint64_t word = load_fp(s);
                if (word == 0 || plan_of(word) != plan || (word & TAG_MASK) == tag)
                    break;
                const int64_t state = load_tat(s);
                if (load_fp(s) == word)
                    convert_slot(keyed, plan, current, s, word, state, now_ns);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */

/* Buckets for a capacity: 7/4 slots per key, so a table at capacity is 57%
 * full and a key rarely finds both of its buckets full of live keys. */
static uint32_t buckets_for(int64_t capacity)
{
    int64_t slots = capacity + (capacity * 3 + 3) / 4;
    int64_t buckets = (slots + SLOTS_PER_BUCKET - 1) / SLOTS_PER_BUCKET;
    return (uint32_t)(buckets < 2 ? 2 : buckets);
}

static size_t buckets_size(const cr_keyed *keyed)
{
    return (size_t)keyed->nbuckets * sizeof(bucket);
}

/* The table of this process alone. Anonymous pages are zero and cost
 * nothing until first touched. */
static cr_status map_private_table(cr_keyed *keyed)
{
    void *buckets = mmap(NULL, buckets_size(keyed), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    keyed->buckets = buckets == MAP_FAILED ? NULL : buckets;
#ifdef MADV_HUGEPAGE
    /* A lookup is a random access: huge pages spare it a TLB miss. */
    if (keyed->buckets)
        madvise(buckets, buckets_size(keyed), MADV_HUGEPAGE);
#endif
    keyed->stripes = calloc(keyed->nstripes, sizeof(cr_lock)); /* all free */
    if (!keyed->buckets || !keyed->stripes || cr_random_seed(keyed->seed) != CR_OK) {
        if (keyed->buckets)
            munmap(keyed->buckets, buckets_size(keyed));
        free(keyed->stripes);
        return CR_E_NOMEM;
    }
    return CR_OK;
}

/* Takes in the region's plans, under `changing` (or the opening's region
 * lock): each known plan's latest change, then the names other openers gave
 * the region since (docs/design/plans.md). */
static cr_status load_plans(cr_keyed *keyed)
{
    const int32_t known = plan_count(keyed);
    const int32_t count = cr_region_plan_count(&keyed->region);
    for (int32_t p = 1; p < count; p++) {
        keyed_limit *current = plan_limit(keyed, p);
        /* a name new here starts from the default's clock and classes */
        keyed_limit unknown = {.limit = current_limit(keyed)->limit, .generation = UINT64_MAX};
        keyed_limit *next = calloc(1, sizeof *next);
        if (!next)
            return CR_E_NOMEM;
        cr_status status = cr_region_adopt(&keyed->region, p, p < known ? current : &unknown, next);
        if (status != CR_OK || (p < known && next->generation == current->generation)) {
            free(next);
            if (status != CR_OK)
                return status;
            continue;
        }
        if (p >= known) {
            next->older = NULL;
            memcpy(keyed->plans->names[p], cr_region_plan_name(&keyed->region, p),
                   CR_PLAN_NAME_MAX - 1);
            keyed->plans->names[p][CR_PLAN_NAME_MAX - 1] = '\0';
        }
        keyed->plans->limits[p] = next->limit;
        atomic_store_explicit(&keyed->plan_current[p], next, memory_order_release);
    }
    if (count > known)
        __atomic_store_n(&keyed->plans->count, count, __ATOMIC_RELEASE);
    return CR_OK;
}

/* This process's chains of every plan but "default"'s. */
static void free_plans(cr_keyed *keyed)
{
    for (int32_t p = 1; p < CR_PLANS_MAX; p++) {
        const keyed_limit *limit = atomic_load_explicit(&keyed->plan_current[p],
                                                        memory_order_relaxed);
        while (limit) {
            const keyed_limit *older = limit->older;
            free((keyed_limit *)limit);
            limit = older;
        }
        atomic_store_explicit(&keyed->plan_current[p], NULL, memory_order_relaxed);
    }
    free(keyed->plans);
    keyed->plans = NULL;
}

/* The table in the shared region at `path`, following the region's limit
 * or changing it to this one (docs/design.md §4), and its plans to those
 * of `table` (NULL: none of its own). */
static cr_status map_shared_table(cr_keyed *keyed, const char *path, int64_t mode,
                                  cr_on_change on_change, int64_t now_ns,
                                  const cr_plan_table *table)
{
    cr_region_spec spec = {
        .kind = CR_REGION_KEYED,
        .capacity = keyed->capacity,
        .nbuckets = keyed->nbuckets,
        .nstripes = keyed->nstripes,
        .buckets_size = buckets_size(keyed),
    };
    keyed_limit *first = current_limit(keyed);
    cr_status status = cr_region_open(&keyed->region, &spec, &first->limit, path, mode);
    if (status != CR_OK)
        return status;
    /* the region's box: every process counts strikes there, under the region's penalty */
    status = cr_penalty_box_region(&keyed->penalty, keyed->region.penalty, keyed->capacity,
                                   keyed->region.seed);
    if (status != CR_OK) {
        cr_region_close(&keyed->region);
        return status;
    }
    memcpy(keyed->seed, keyed->region.seed, sizeof keyed->seed);
    keyed->buckets = keyed->region.buckets;
    keyed->stripes = keyed->region.stripes;
    keyed->evictions = keyed->region.evictions;
    keyed->generation = cr_region_generation_word(&keyed->region, CR_PLAN_DEFAULT);
    keyed->sweep_cursor = cr_region_sweep_cursor(&keyed->region);
    for (int32_t p = 1; p < CR_PLANS_MAX; p++)
        keyed->plan_generation[p] = cr_region_generation_word(&keyed->region, p);
    cr_lock *lock = cr_region_change_lock(&keyed->region);
    status = cr_lock_acquire(lock);
    if (status == CR_OK) {
        cr_limit *replaced = calloc(1, sizeof *replaced);
        bool changed = false;
        status = replaced ? cr_region_join(&keyed->region, &first->limit, on_change, now_ns, first,
                                           replaced, &changed)
                          : CR_E_NOMEM;
        uint32_t plans_changed = 0;
        if (status == CR_OK)
            status = cr_region_join_plans(&keyed->region, table, on_change, now_ns, &plans_changed);
        if (status == CR_OK)
            status = load_plans(keyed);
        if (status == CR_OK && changed) {
            sweep(keyed, CR_PLAN_DEFAULT, first, first->changed_at);
            keyed->replaced = replaced;
        } else {
            free(replaced);
        }
        for (int32_t p = 1; status == CR_OK && p < CR_PLANS_MAX; p++)
            if (plans_changed >> p & 1) {
                keyed_limit *latest = plan_limit(keyed, p);
                sweep(keyed, p, latest, latest->changed_at);
            }
        cr_lock_release(lock);
    }
    if (status != CR_OK) {
        cr_penalty_box_free(keyed->penalty);
        keyed->penalty = NULL;
        cr_region_close(&keyed->region);
    }
    return status;
}

/* cr_keyed_open; in a shared region, with the plans of `table` (NULL: none
 * of its own). */
static cr_status keyed_open(cr_keyed **out, const cr_limit *limit, const cr_plan_table *table,
                            int64_t capacity, const char *path, int64_t mode,
                            cr_on_change on_change)
{
    if (capacity < 1 || capacity > CR_KEYED_MAX_CAPACITY)
        return CR_E_CAPACITY;
    if (on_change != CR_CHANGE_APPLY && on_change != CR_CHANGE_REFUSE)
        return CR_E_ON_CHANGE;
    /* the counters of a table of this process after it, on its pages */
    const size_t own_size = (sizeof(cr_keyed) + CR_COUNTER_SPACING - 1) &
                            ~(size_t)(CR_COUNTER_SPACING - 1);
    cr_keyed *keyed = aligned_alloc(CR_COUNTER_SPACING,
                                    own_size + (path ? 0 : CR_COUNTER_BLOCK_SIZE(1)));
    keyed_limit *first = calloc(1, sizeof *first);
    if (!keyed || !first) {
        free(keyed);
        free(first);
        return CR_E_NOMEM;
    }
    memset(keyed, 0, own_size);
    first->limit = *limit;
    atomic_init(&keyed->current, first);
    pthread_mutex_init(&keyed->changing, NULL);
    keyed->capacity = capacity;
    keyed->nbuckets = buckets_for(capacity);
    keyed->nstripes = keyed->nbuckets < MAX_STRIPES ? keyed->nbuckets : MAX_STRIPES;
    keyed->evictions = &keyed->own_evictions;
    atomic_init(&keyed->own_evictions, 0);
    atomic_init(&keyed->own_generation, 0);
    atomic_init(&keyed->lines, NULL);
    keyed->generation = &keyed->own_generation;
    keyed->sweep_cursor = &keyed->own_sweep_cursor;
    cr_status status = CR_OK;
    if (path) { /* a region's table holds the region's plans: "default" at least */
        keyed->plans = calloc(1, sizeof *keyed->plans);
        if (keyed->plans) {
            keyed->plans->count = 1;
            memcpy(keyed->plans->names[CR_PLAN_DEFAULT], "default", sizeof "default");
            keyed->plans->limits[CR_PLAN_DEFAULT] = *limit;
        } else {
            status = CR_E_NOMEM;
        }
    }
    if (status == CR_OK && !path && limit->npriorities > 0 &&
        !cr_counters_by_new(&keyed->counts)) /* counted by class */
        status = CR_E_NOMEM;
    if (status == CR_OK)
        status = path ? map_shared_table(keyed, path, mode, on_change, cr_read_clock(limit), table)
                      : map_private_table(keyed);
    if (status == CR_OK && path) {
        cr_counters_join(&keyed->counts, keyed->region.counters, keyed->region.by,
                         CR_COUNTER_LANES);
    } else if (status == CR_OK) {
        cr_counters_place(&keyed->counts, (char *)keyed + own_size);
    }
    if (status != CR_OK) {
        cr_counters_leave(&keyed->counts); /* the counts by plan and class (no block yet) */
        free_plans(keyed);
        pthread_mutex_destroy(&keyed->changing);
        free(first);
        free(keyed);
        return status;
    }
    *out = keyed;
    return CR_OK;
}

cr_status cr_keyed_set_sync(cr_keyed *keyed, double seconds)
{
    return cr_region_set_sync(&keyed->region, seconds);
}

cr_status cr_keyed_open(cr_keyed **out, const cr_limit *limit, int64_t capacity, const char *path,
                        int64_t mode, cr_on_change on_change)
{
    return keyed_open(out, limit, NULL, capacity, path, mode, on_change);
}

cr_status cr_keyed_open_plans(cr_keyed **out, const cr_limit *limit, const cr_plan_table *table,
                              int64_t capacity, const char *path, int64_t mode,
                              cr_on_change on_change)
{
    if (!table)
        return cr_keyed_open(out, limit, capacity, path, mode, on_change);
    if (table->count < 1 || table->count > CR_PLANS_MAX)
        return CR_E_PLANS;
    if (path) /* the region holds the plans */
        return keyed_open(out, &table->limits[0], table, capacity, path, mode, on_change);
    cr_keyed *keyed;
    cr_status status = cr_keyed_open(&keyed, &table->limits[0], capacity, path, mode, on_change);
    if (status != CR_OK || table->count == 1) {
        if (status == CR_OK)
            *out = keyed;
        return status;
    }
    keyed->plans = malloc(sizeof *keyed->plans);
    bool made = keyed->plans != NULL && cr_counters_by_new(&keyed->counts); /* by plan */
    if (made)
        *keyed->plans = *table;
    for (int32_t p = 1; made && p < table->count; p++) {
        keyed_limit *first = calloc(1, sizeof *first);
        if (first) {
            first->limit = table->limits[p];
            first->limit.fast_clock = table->limits[0].fast_clock;
        }
        atomic_init(&keyed->plan_current[p], first);
        made = first != NULL;
    }
    if (!made) {
        cr_keyed_free(keyed);
        return CR_E_NOMEM;
    }
    *out = keyed;
    return CR_OK;
}

const cr_plan_table *cr_keyed_plans(const cr_keyed *keyed) { return keyed->plans; }

const cr_limit *cr_keyed_plan_limit(const cr_keyed *keyed, int32_t plan)
{
    if (!plan_ok(keyed, plan))
        return NULL;
    return &plan_limit(keyed, plan)->limit;
}

cr_status cr_keyed_new(cr_keyed **out, const cr_limit *limit, int64_t capacity)
{
    return cr_keyed_open(out, limit, capacity, NULL, 0, CR_CHANGE_APPLY);
}

void cr_keyed_free(cr_keyed *keyed)
{
    if (!keyed)
        return;
    cr_counters_leave(&keyed->counts);
    if (keyed->region.base) {
        cr_region_close(&keyed->region);
    } else {
        free(keyed->stripes);
        munmap(keyed->buckets, buckets_size(keyed));
    }
    const keyed_limit *limit = current_limit(keyed);
    while (limit) {
        const keyed_limit *older = limit->older;
        free((keyed_limit *)limit);
        limit = older;
    }
    free_plans(keyed);
    free((cr_limit *)keyed->replaced);
    cr_lines_free(atomic_load_explicit(&keyed->lines, memory_order_relaxed));
    cr_penalty_box_free(keyed->penalty);
    pthread_mutex_destroy(&keyed->changing);
    free(keyed);
}

cr_lines *cr_keyed_lines(cr_keyed *keyed, const void *key, size_t key_len, uint64_t *fingerprint,
                         bool make)
{
    cr_lines *lines = atomic_load_explicit(&keyed->lines, memory_order_acquire);
    *fingerprint = 0;
    if (!lines && !make)
        return NULL;
    *fingerprint = place_of(keyed, key, key_len).fp;
    if (lines)
        return lines;
    cr_lines *made = cr_lines_new(LINES_PER_TABLE);
    if (made && !atomic_compare_exchange_strong_explicit(
                    &keyed->lines, &lines, made, memory_order_acq_rel, memory_order_acquire)) {
        cr_lines_free(made); /* another thread made it first: `lines` is its */
        return lines;
    }
    return made;
}

const cr_limit *cr_keyed_limit(const cr_keyed *keyed) { return &current_limit(keyed)->limit; }

const cr_limit *cr_keyed_replaced(const cr_keyed *keyed) { return keyed->replaced; }

/* Makes the region's current generation this process's, under `changing`. */
static cr_status adopt(cr_keyed *keyed)
{
    keyed_limit *current = current_limit(keyed);
    keyed_limit *next = calloc(1, sizeof *next);
    if (!next)
        return CR_E_NOMEM;
    cr_status status = cr_region_adopt(&keyed->region, CR_PLAN_DEFAULT, current, next);
    if (status != CR_OK || next->generation == current->generation) {
        free(next);
        return status;
    }
    atomic_store_explicit(&keyed->current, next, memory_order_release);
    return CR_OK;
}

/* The limit decisions apply now: `current` once it has followed the
 * table's generation (changed by this process or, in a shared region, by
 * any). */
static cr_status follow(cr_keyed *keyed, keyed_limit **current)
{
    pthread_mutex_lock(&keyed->changing);
    cr_status status = CR_OK;
    if (keyed->region.base)
        status = adopt(keyed);
    pthread_mutex_unlock(&keyed->changing);
    *current = current_limit(keyed);
    return status;
}

/* Plan `plan`'s latest limit once this process has taken in the region's
 * plans (a change another process made, a name another opener gave). */
__attribute__((noinline, cold)) static cr_status follow_plans(cr_keyed *keyed, int32_t plan,
                                                              keyed_limit **current)
{
    pthread_mutex_lock(&keyed->changing);
    cr_status status = load_plans(keyed);
    pthread_mutex_unlock(&keyed->changing);
    *current = plan_limit(keyed, plan);
    if (status == CR_OK && !*current)
        status = CR_E_SHARED_CORRUPT; /* a slot names a plan the region lacks */
    return status;
}

cr_status cr_keyed_plan_find(cr_keyed *keyed, const char *name, size_t len, int32_t *index)
{
    cr_status status = cr_plan_find(keyed->plans, name, len, index);
    if (status == CR_E_PLAN && keyed->region.base &&
        cr_region_plan_count(&keyed->region) != plan_count(keyed)) {
        keyed_limit *ignored;
        if (follow_plans(keyed, CR_PLAN_DEFAULT, &ignored) == CR_OK)
            status = cr_plan_find(keyed->plans, name, len, index);
    }
    return status;
}

cr_status cr_keyed_reconfigure(cr_keyed *keyed, const cr_limit *limit, int64_t now_ns)
{
    cr_status status = cr_check_args(now_ns, 0);
    if (status != CR_OK)
        return status;
    pthread_mutex_lock(&keyed->changing);
    cr_lock *lock = cr_region_change_lock(&keyed->region);
    if (lock && (status = cr_lock_acquire(lock)) != CR_OK) {
        pthread_mutex_unlock(&keyed->changing);
        return status;
    }
    if (lock)
        status = adopt(keyed); /* changes start from the region's latest */
    keyed_limit *current = current_limit(keyed);
    if (status == CR_OK)
        status = cr_limit_reconfigurable(&current->limit, limit);
    if (status == CR_OK && lock)
        status = cr_region_room(&keyed->region, limit); /* a calendar's zone */
    cr_limit kept = *limit;
    cr_priorities_keep(&kept, &current->limit); /* the classes stay the table's */
    if (status != CR_OK || cr_limit_identical(&current->limit, &kept))
        goto done; /* the same limit: nothing changes */
    keyed_limit *next = calloc(1, sizeof *next);
    if (!next) {
        status = CR_E_NOMEM;
        goto done;
    }
    next->limit = *limit;
    cr_priorities_keep(&next->limit, &current->limit);
    next->limit.fast_clock = current->limit.fast_clock;
    next->changed_at = cr_resolve_now(&current->limit, now_ns);
    next->older = current;
    if (lock) {
        next->generation = cr_region_publish(&keyed->region, CR_PLAN_DEFAULT, &next->limit,
                                             next->changed_at);
    } else {
        next->generation = current->generation + 1;
        atomic_store_explicit(&keyed->own_generation, next->generation, memory_order_release);
    }
    atomic_store_explicit(&keyed->current, next, memory_order_release);
    sweep(keyed, CR_PLAN_DEFAULT, next, next->changed_at);
done:
    if (lock)
        cr_lock_release(lock);
    pthread_mutex_unlock(&keyed->changing);
    return status;
}

cr_status cr_keyed_reconfigure_plan(cr_keyed *keyed, int32_t plan, const cr_limit *limit,
                                    int64_t now_ns)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    if (plan == CR_PLAN_DEFAULT)
        return cr_keyed_reconfigure(keyed, limit, now_ns);
    cr_status status = cr_check_args(now_ns, 0);
    if (status != CR_OK)
        return status;
    pthread_mutex_lock(&keyed->changing);
    cr_lock *lock = cr_region_change_lock(&keyed->region);
    if (lock && (status = cr_lock_acquire(lock)) != CR_OK) {
        pthread_mutex_unlock(&keyed->changing);
        return status;
    }
    if (lock)
        status = load_plans(keyed); /* changes start from the region's latest */
    keyed_limit *current = plan_limit(keyed, plan);
    if (status == CR_OK)
        status = cr_limit_reconfigurable(&current->limit, limit);
    if (status == CR_OK && lock)
        status = cr_region_room(&keyed->region, limit); /* a calendar's zone */
    cr_limit kept = *limit;
    cr_priorities_keep(&kept, &current->limit); /* the classes stay the table's */
    kept.fast_clock = current->limit.fast_clock;
    if (status != CR_OK || cr_limit_identical(&current->limit, &kept))
        goto done; /* the same limit: nothing changes */
    keyed_limit *next = calloc(1, sizeof *next);
    if (!next) {
        status = CR_E_NOMEM;
        goto done;
    }
    next->limit = kept;
    next->changed_at = cr_resolve_now(&current->limit, now_ns);
    next->older = current;
    next->generation = lock
                           ? cr_region_publish(&keyed->region, plan, &next->limit, next->changed_at)
                           : current->generation + 1;
    keyed->plans->limits[plan] = next->limit;
    atomic_store_explicit(&keyed->plan_current[plan], next, memory_order_release);
    sweep(keyed, plan, next, next->changed_at);
done:
    if (lock)
        cr_lock_release(lock);
    pthread_mutex_unlock(&keyed->changing);
    return status;
}

/* A look (commit false) at a key last decided under another plan: rare, so
 * out of line (each inlined copy of cr_apply specialises the whole decision). */
__attribute__((noinline, cold)) static void apply_carried(const cr_limit *limit, int64_t state,
                                                          int64_t now_ns, cr_op *op,
                                                          cr_decision *out, bool *ok)
{
    (void)cr_apply(limit, state, now_ns, op, out, ok);
}

/* Applies `op` to `key` under plan `plan` (an index the table has); `out`
 * NULL decides admission alone (the allow() path). */
__attribute__((always_inline)) static inline cr_status
keyed_apply(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns, int32_t plan,
            cr_op *op, bool commit, cr_decision *out, bool *ok)
{
    cr_status status = cr_check_args(now_ns, op->cost);
    if (status != CR_OK)
        return status;
    if (commit)
        cr_region_tick(&keyed->region); /* sync=: a load and a branch */
    /* Start fetching the key's buckets, then read the clock while they come. */
    const cr_key_place place = place_of(keyed, key, key_len);
    __builtin_prefetch(&keyed->buckets[place.bucket[0]]);
    __builtin_prefetch(&keyed->buckets[place.bucket[1]]);
    keyed_limit *current = current_limit(keyed);
    if (__builtin_expect(atomic_load_explicit(keyed->generation, memory_order_acquire) !=
                             current->generation,
                         0)) {
        status = follow(keyed, &current); /* the limit changed: decide under the new one */
        if (status != CR_OK)
            return status;
    }
    if (__builtin_expect(plan != CR_PLAN_DEFAULT, 0)) {
        current = plan_limit(keyed, plan);
        if (plan_behind(keyed, plan, current)) {
            status = follow_plans(keyed, plan, &current); /* the region's plan changed */
            if (status != CR_OK)
                return status;
        }
    }
    now_ns = cr_resolve_now(&current->limit, now_ns); /* a change keeps the clock */
    for (;;) {
        int64_t state;
        uint64_t word;
        slot *s = find(keyed, &place, &state, &word);
        if (s) {
            if (__builtin_expect(
                    (word & ~FP_MASK) != (tag_of(current->generation) | plan_bits(plan)), 0)) {
                const int32_t theirs = plan_of(word);
                keyed_limit *their_limit = theirs == plan ? current : plan_limit(keyed, theirs);
                if (theirs != plan && plan_behind(keyed, theirs, their_limit)) {
                    /* a plan (or a name) of the region this process has not taken in */
                    status = follow_plans(keyed, theirs, &their_limit);
                    if (status != CR_OK)
                        return status;
                }
                if ((word & TAG_MASK) != tag_of(their_limit->generation)) {
                    /* written under another limit of its plan: carry it first */
                    if (theirs == CR_PLAN_DEFAULT &&
                        atomic_load_explicit(keyed->generation, memory_order_acquire) !=
                            their_limit->generation) {
                        status = follow(keyed, &their_limit); /* a newer limit wrote it */
                        if (status != CR_OK)
                            return status;
                    } else if (theirs != CR_PLAN_DEFAULT &&
                               plan_behind(keyed, theirs, their_limit)) {
                        status = follow_plans(keyed, theirs,
                                              &their_limit); /* a newer one wrote it */
                        if (status != CR_OK)
                            return status;
                    } else {
                        their_limit = convert_slot(keyed, theirs, their_limit, s, word, state,
                                                   now_ns);
                    }
                    if (theirs == plan)
                        current = their_limit;
                    continue;
                }
                /* last decided under another plan: what it used goes into this one */
                const int64_t carried = cr_carry(&their_limit->limit, &current->limit, state,
                                                 now_ns);
                if (!commit) {
                    apply_carried(&current->limit, carried, now_ns, op, out, ok);
                    cr_count_op(&keyed->counts, &current->limit, op, commit, *ok, plan);
                    return CR_OK;
                }
                slot_cas(s, make_pair(word, state),
                         make_pair((word & FP_MASK) | plan_bits(plan) | tag_of(current->generation),
                                   carried));
                continue; /* switched, or changed meanwhile: look again */
            }
            int64_t new_state = cr_apply(&current->limit, state, now_ns, op, out, ok);
            if (new_state == state || !commit ||
                slot_cas(s, make_pair(word, state), make_pair(word, new_state))) {
                cr_count_op(&keyed->counts, &current->limit, op, commit, *ok, plan);
                return CR_OK;
            }
            continue; /* lost a race on this slot: decide again from what is there */
        }
        /* Absent: the key is idle. Only an admission that commits needs a slot. */
        int64_t new_state = cr_apply(&current->limit, 0, now_ns, op, out, ok);
        if (new_state == 0 || !commit) {
            cr_count_op(&keyed->counts, &current->limit, op, commit, *ok, plan);
            return CR_OK;
        }
        uint32_t stripe[2];
        status = cr_lock_places(keyed->stripes, keyed->nstripes, &place, stripe);
        if (status != CR_OK)
            return status;
        bool placed = !find(keyed, &place, &state, &word);
        if (placed)
            claim_slot(keyed, &place, tag_of(current->generation) | plan_bits(plan), now_ns,
                       new_state);
        cr_unlock_places(keyed->stripes, stripe);
        if (placed) {
            cr_count_op(&keyed->counts, &current->limit, op, commit, *ok, plan);
            return CR_OK;
        }
        /* another thread placed the key meanwhile: decide against its slot */
    }
}

/* keyed_apply out of line, for the operations off the admission path (a
 * wait's reservation, a class's check or peek, refund, anchor, charge, take,
 * follow, a look, a ban).
 * The admission entry points inline keyed_apply, each copy specialised to its
 * operation; one shared copy for the rest keeps the core quick to build. */
__attribute__((noinline)) static cr_status keyed_apply_op(cr_keyed *keyed, const void *key,
                                                          size_t key_len, int64_t now_ns,
                                                          int32_t plan, cr_op *op, bool commit,
                                                          cr_decision *out, bool *ok)
{
    return keyed_apply(keyed, key, key_len, now_ns, plan, op, commit, out, ok);
}

/* A turn-away of `key` under a penalty (as limiter_penalize). */
__attribute__((noinline, cold)) static void keyed_penalize(cr_keyed *keyed, const void *key,
                                                           size_t key_len, int64_t now_ns,
                                                           int32_t plan, cr_decision *out)
{
    now_ns = cr_resolve_now(cr_keyed_limit(keyed), now_ns);
    bool started;
    const int64_t ban_end = cr_penalty_box_refused(keyed->penalty, key, key_len, now_ns, &started);
    if (ban_end == 0)
        return;
    if (started) {
        const cr_follow_args args = {NULL, 1.0, ban_end - now_ns};
        cr_op op = {CR_OP_FOLLOW, 0, cr_follow_word(&args), 0, 0, false};
        bool pulled;
        (void)keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, &pulled);
    }
    if (out)
        cr_penalty_decision(out, ban_end - now_ns);
}

cr_status cr_keyed_set_penalty(cr_keyed *keyed, const cr_penalty *penalty)
{
    if (keyed->region.base) /* the region's penalty: the newest wins */
        return cr_penalty_box_set(keyed->penalty, penalty);
    cr_penalty_box *box;
    cr_status status = cr_penalty_box_new(&box, penalty, keyed->capacity);
    if (status != CR_OK)
        return status;
    cr_penalty_box_free(keyed->penalty);
    keyed->penalty = box;
    return CR_OK;
}

uint64_t cr_keyed_bans(cr_keyed *keyed)
{
    return keyed->penalty ? cr_penalty_box_bans(keyed->penalty) : 0;
}

cr_status cr_keyed_check(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                         int64_t cost, bool commit, cr_decision *out)
{
    bool allowed;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    const cr_status status = keyed_apply(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, &op, commit,
                                         out, &allowed);
    if (__builtin_expect(status == CR_OK && !allowed, 0) && keyed->penalty && commit)
        keyed_penalize(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, out);
    return status;
}

cr_status cr_keyed_allow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                         int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    const cr_status status = keyed_apply(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, &op, true,
                                         NULL, allowed);
    if (__builtin_expect(status == CR_OK && !*allowed, 0) && keyed->penalty)
        keyed_penalize(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, NULL);
    return status;
}

cr_status cr_keyed_check_priority(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                  int64_t cost, int32_t priority, bool commit, cr_decision *out,
                                  bool *allowed)
{
    cr_status status = cr_priority_check(&current_limit(keyed)->limit, priority);
    if (status != CR_OK)
        return status; /* the classes never change: a live change keeps them */
    cr_op op = {CR_OP_PRIORITY, cost, priority, 0, 0, false};
    if (__builtin_expect(out == NULL && commit, 1)) /* allow(): inlined, as cr_keyed_allow's */
        return keyed_apply(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, &op, true, NULL, allowed);
    bool verdict = false;
    status = keyed_apply_op(keyed, key, key_len, now_ns, CR_PLAN_DEFAULT, &op, commit, out,
                            &verdict);
    if (allowed)
        *allowed = verdict;
    return status;
}

cr_status cr_keyed_check_plan(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                              int64_t cost, int32_t plan, int32_t priority, bool commit,
                              cr_decision *out, bool *allowed)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    if (priority >= 0) {
        cr_status status = cr_priority_check(cr_keyed_limit(keyed), priority);
        if (status != CR_OK)
            return status; /* every plan has the table's classes */
        op.kind = CR_OP_PRIORITY;
        op.max_wait_ns = priority;
    }
    bool verdict = false;
    cr_status status = keyed_apply(keyed, key, key_len, now_ns, plan, &op, commit, out, &verdict);
    if (__builtin_expect(status == CR_OK && !verdict, 0) && keyed->penalty && commit &&
        priority < 0) /* a class's refusal is no strike (as a plain store's) */
        keyed_penalize(keyed, key, key_len, now_ns, plan, out);
    if (allowed)
        *allowed = verdict;
    return status;
}

cr_status cr_keyed_peek_allowed(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                int32_t plan, int64_t cost, bool *allowed)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, false, NULL, allowed);
}

cr_status cr_keyed_reserve(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                           int32_t plan, int64_t cost, int64_t max_wait_ns, bool *reserved,
                           int64_t *delay_ns)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    if (max_wait_ns < 0)
        return CR_E_TIMEOUT;
    cr_op op = {CR_OP_RESERVE, cost, max_wait_ns, 0, 0, false};
    cr_status status = keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, reserved);
    *delay_ns = op.delay_ns;
    return status;
}

cr_status cr_keyed_refund(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    bool done;
    cr_op op = {CR_OP_REFUND, cost, 0, 0, 0, false};
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, &done);
}

cr_status cr_keyed_anchor(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    bool done;
    cr_op op = {CR_OP_ANCHOR, cost, 0, 0, 0, false};
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, &done);
}

cr_status cr_keyed_charge(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost, cr_decision *out)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    bool fit;
    cr_op op = {CR_OP_CHARGE, cost, 0, 0, 0, false};
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, out, &fit);
}

cr_status cr_keyed_uncounted(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                             int32_t plan, cr_op_kind kind, int64_t cost, cr_decision *out)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    bool ok;
    cr_op op = {kind, cost, 0, 0, 0, true};
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, out, &ok);
}

cr_status cr_keyed_take(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                        int32_t plan, int64_t max_cost, int64_t *taken)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    bool took;
    if (max_cost < 0)
        return CR_E_MAX_COST;
    cr_op op = {CR_OP_TAKE, max_cost, 0, 0, 0, false};
    cr_status status = keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, &took);
    if (status == CR_OK)
        *taken = op.taken;
    return status;
}

cr_status cr_keyed_follow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, const cr_signal *signal, int64_t pending, double share,
                          bool *pulled)
{
    if (!plan_ok(keyed, plan))
        return CR_E_PLAN;
    cr_status status = cr_follow_check(pending, share);
    if (status != CR_OK)
        return status;
    const cr_follow_args args = {signal, share, 0};
    cr_op op = {CR_OP_FOLLOW, pending, cr_follow_word(&args), 0, 0, false};
    *pulled = false;
    return keyed_apply_op(keyed, key, key_len, now_ns, plan, &op, true, NULL, pulled);
}

void cr_keyed_reset(cr_keyed *keyed, const void *key, size_t key_len)
{
    if (keyed->penalty)
        cr_penalty_box_release(keyed->penalty, key, key_len);
    const cr_key_place place = place_of(keyed, key, key_len);
    int64_t tat;
    uint64_t word;
    slot *s;
    while ((s = find(keyed, &place, &tat, &word))) {
        if (slot_cas(s, make_pair(word, tat), make_pair(0, 0)))
            return;
    }
}

void cr_keyed_clear(cr_keyed *keyed)
{
    if (keyed->penalty)
        cr_penalty_box_clear(keyed->penalty);
    for (uint32_t b = 0; b < keyed->nbuckets; b++)
        for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
            slot *s = &keyed->buckets[b].slots[i];
            uint64_t word;
            while ((word = load_fp(s)) != 0 &&
                   !slot_cas(s, make_pair(word, load_tat(s)), make_pair(0, 0)))
                ;
        }
}

size_t cr_keyed_count_slots(const void *buckets, uint32_t nbuckets)
{
    const bucket *table = buckets;
    size_t held = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        for (int i = 0; i < SLOTS_PER_BUCKET; i++)
            held += load_fp(&table[b].slots[i]) != 0;
    return held;
}

bool cr_keyed_look_key(const void *buckets, uint32_t nbuckets, const uint64_t seed[2],
                       const void *key, size_t key_len, int32_t *plan, uint64_t *tag,
                       int64_t *state)
{
    const cr_key_place place = seeded_place(seed, nbuckets, key, key_len);
    uint64_t word;
    if (!find_in((bucket *)buckets, &place, state, &word)) /* (find_in only reads) */
        return false;
    *plan = plan_of(word);
    *tag = word >> TAG_SHIFT;
    return true;
}

size_t cr_keyed_len(const cr_keyed *keyed)
{
    return cr_keyed_count_slots(keyed->buckets, keyed->nbuckets);
}

int64_t cr_keyed_capacity(const cr_keyed *keyed) { return keyed->capacity; }

size_t cr_keyed_memory(const cr_keyed *keyed)
{
    if (keyed->region.base)
        return sizeof *keyed + keyed->region.size;
    return sizeof *keyed + buckets_size(keyed) + keyed->nstripes * sizeof(cr_lock) +
           (keyed->plans ? sizeof *keyed->plans : 0);
}

uint64_t cr_keyed_evictions(const cr_keyed *keyed)
{
    return atomic_load_explicit(keyed->evictions, memory_order_relaxed);
}

const cr_counts *cr_keyed_counts(const cr_keyed *keyed) { return &keyed->counts; }

void cr_keyed_stats(const cr_keyed *keyed, cr_stats *out)
{
    cr_counters_rate_stats(keyed->counts.block, keyed->counts.nlanes, cr_keyed_evictions(keyed),
                           out);
    out->bans = keyed->penalty ? cr_penalty_box_bans(keyed->penalty) : 0;
}

void cr_keyed_stats_by(cr_keyed *keyed, cr_stats_by *out)
{
    if (keyed->region.base && cr_region_plan_count(&keyed->region) != plan_count(keyed)) {
        keyed_limit *ignored; /* names given since: their counts are in the region */
        (void)follow_plans(keyed, CR_PLAN_DEFAULT, &ignored);
    }
    cr_counters_stats_by(&keyed->counts, keyed->plans, cr_keyed_limit(keyed), out);
}

cr_status cr_keyed_reset_stats(cr_keyed *keyed)
{
    if (keyed->penalty)
        cr_penalty_box_reset_bans(keyed->penalty);
    return cr_counts_reset(&keyed->counts, cr_region_change_lock(&keyed->region),
                           cr_keyed_evictions(keyed));
}

void cr_keyed_would_refuse(cr_keyed *keyed, int64_t cost, int32_t plan, int32_t priority)
{
    cr_count_would_refuse(&keyed->counts, cost, plan, priority);
}
