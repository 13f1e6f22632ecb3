/* A store's counters: thread slots, lanes, readings (counters.h). */
#include "counters.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread unsigned cr_counter_slot __attribute__((tls_model("initial-exec")));

/* The slots in use, one bit each; a thread gives its slot back as it ends. */
static _Atomic uint32_t slots_used;
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;

_Static_assert(CR_COUNTER_SLOTS <= 32, "the slots are bits of one word");

static void give_back_slot(void *value)
{
    const unsigned slot = (unsigned)(uintptr_t)value - 1u;
    /* release: the next owner of the slot sees every count made in it */
    atomic_fetch_and_explicit(&slots_used, ~(UINT32_C(1) << slot), memory_order_release);
}

static void make_slot_key(void)
{
    if (pthread_key_create(&slot_key, give_back_slot) != 0)
        slot_key = (pthread_key_t)-1;
}

/* Gives the calling thread a free slot, or marks it as having none. */
static void take_slot(void)
{
    pthread_once(&slot_key_once, make_slot_key);
    cr_counter_slot = CR_COUNTER_SLOTS + 1; /* none, unless one is free */
    if (slot_key == (pthread_key_t)-1)
        return;
    uint32_t used = atomic_load_explicit(&slots_used, memory_order_relaxed);
    for (;;) {
        const uint32_t free_bits = ~used & ((UINT32_C(1) << (CR_COUNTER_SLOTS - 1)) * 2 - 1);
        if (free_bits == 0)
            return;
        const unsigned slot = (unsigned)__builtin_ctz(free_bits);
        if (atomic_compare_exchange_weak_explicit(&slots_used, &used, used | UINT32_C(1) << slot,
                                                  memory_order_acquire, memory_order_relaxed)) {
            if (pthread_setspecific(slot_key, (void *)(uintptr_t)(slot + 1)) != 0) {
                give_back_slot((void *)(uintptr_t)(slot + 1));
                return;
            }
            cr_counter_slot = slot + 1;
            return;
        }
    }
}

void cr_count2_slow(const cr_counts *counts, unsigned fa, uint64_t na, unsigned fb, uint64_t nb)
{
    if (cr_counter_slot == 0) {
        take_slot();
        if (cr_counter_slot <= CR_COUNTER_SLOTS && counts->lane != NULL &&
            (counts->pid == 0 || counts->pid == cr_own_pid())) {
            cr_count2(counts, fa, na, fb, nb);
            return;
        }
    }
    cr_counter_cell *cell = &counts->block->overflow;
    atomic_fetch_add_explicit(&cell->n[fa], na, memory_order_relaxed);
    uint64_t word = atomic_load_explicit(&cell->n[fb], memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&cell->n[fb], &word, cr_count_add(word, nb),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

int64_t cr_count1_slow(const cr_counts *counts, unsigned f, int64_t n)
{
    cr_count1(counts, f, (uint64_t)n);
    return n;
}

int cr_count_verdict_slow(const cr_counts *counts, bool admitted, int64_t cost, int64_t most,
                          int32_t priority)
{
    cr_count_verdict(counts, admitted, cost, most);
    cr_count_by_verdict(counts, CR_PLAN_DEFAULT, priority, admitted, 1);
    return 0;
}

void cr_counters_place(cr_counts *counts, void *memory)
{
    cr_counter_block *block = memory;
    memset(block, 0, CR_COUNTER_BLOCK_SIZE(1));
    counts->block = block;
    counts->lane = &block->lane[0];
    counts->pid = 0;
    counts->nlanes = 1;
    counts->placed = true;
}

bool cr_counters_by_new(cr_counts *counts)
{
    if (counts->by)
        return true;
    cr_by_block *by = aligned_alloc(CR_COUNTER_SPACING, CR_BY_BLOCK_SIZE(1));
    if (!by)
        return false;
    memset(by, 0, CR_BY_BLOCK_SIZE(1));
    counts->by = by;
    counts->by_lane = &by->cell[0]; /* the one lane's */
    counts->by_own = true;
    return true;
}

void cr_count_by_slow(const cr_counts *counts, unsigned f, uint64_t n)
{
    if (counts->by) /* no cell of the thread's own: the overflow's, atomically */
        atomic_fetch_add_explicit(&counts->by->overflow.n[f], n, memory_order_relaxed);
}

cr_counter_block *cr_counters_new(cr_counts *counts)
{
    cr_counter_block *block = aligned_alloc(CR_COUNTER_SPACING, CR_COUNTER_BLOCK_SIZE(1));
    if (!block)
        return NULL;
    cr_counters_place(counts, block);
    counts->placed = false;
    return block;
}

void cr_counters_join(cr_counts *counts, cr_counter_block *block, cr_by_block *by, uint32_t nlanes)
{
    const uint32_t pid = cr_own_pid();
    counts->block = block;
    counts->by = by;
    counts->by_own = false;
    counts->lane = NULL;
    counts->pid = pid;
    counts->nlanes = nlanes;
    /* a free lane first, else one whose process is gone (its counts stay) */
    for (int pass = 0; pass < 2 && !counts->lane; pass++)
        for (uint32_t i = 0; i < nlanes && !counts->lane; i++) {
            uint64_t owner = atomic_load(&block->owner[i]);
            if ((pass == 0) != (owner == 0) || (pass == 1 && cr_process_alive((uint32_t)owner)))
                continue;
            if (atomic_compare_exchange_strong(&block->owner[i], &owner, pid))
                counts->lane = &block->lane[i];
        }
    counts->by_lane = by && counts->lane
                          ? &by->cell[(size_t)(counts->lane - block->lane) * CR_COUNTER_SLOTS]
                          : NULL;
}

void cr_counters_leave(cr_counts *counts)
{
    if (counts->by_own)
        free(counts->by);
    counts->by = NULL;
    counts->by_lane = NULL;
    counts->by_own = false;
    if (!counts->block)
        return;
    if (counts->pid == 0) {
        if (!counts->placed)
            free(counts->block);
    } else if (counts->lane && counts->pid == cr_own_pid()) {
        uint64_t owner = counts->pid;
        atomic_compare_exchange_strong(&counts->block->owner[counts->lane - counts->block->lane],
                                       &owner, 0);
    }
    counts->block = NULL;
    counts->lane = NULL;
}

/* The decoded counts of every cell (the units fields with their requests
 * added back), each clamped to [0, CR_COUNT_MAX]: a cell's words are signed
 * counts, summed exactly in 128 bits, so a count past the top reads as the
 * top, never wrapped. */
static void sum_cells(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                      uint64_t out[CR_COUNTER_FIELDS])
{
    __extension__ __int128 sum[CR_COUNTER_FIELDS];
    const cr_counter_cell *cells[1 + (size_t)CR_COUNTER_LANES * CR_COUNTER_SLOTS];
    size_t ncells = 0;
    cells[ncells++] = &block->overflow;
    for (uint32_t l = 0; l < nlanes && l < CR_COUNTER_LANES; l++)
        for (int c = 0; c < CR_COUNTER_SLOTS; c++)
            cells[ncells++] = &block->lane[l].cell[c];
    for (int f = 0; f < CR_COUNTER_FIELDS; f++) {
        sum[f] = 0;
        for (size_t c = 0; c < ncells; c++)
            sum[f] += (int64_t)atomic_load_explicit(&cells[c]->n[f], memory_order_relaxed);
    }
    sum[CR_N_UNITS_ADMITTED] += sum[CR_N_ADMITTED];
    sum[CR_N_UNITS_REFUSED] += sum[CR_N_REFUSED];
    if (evicted != UINT64_MAX)
        sum[CR_N_EVICTED] = evicted;
    for (int f = 0; f < CR_COUNTER_FIELDS; f++)
        out[f] = sum[f] < 0 ? 0 : sum[f] > CR_COUNT_MAX ? (uint64_t)CR_COUNT_MAX : (uint64_t)sum[f];
}

void cr_counters_read(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                      uint64_t out[CR_COUNTER_FIELDS])
{
    cr_counter_block *b = (cr_counter_block *)block; /* the baseline is read, not written */
    /* A reset killed midway (a process of a region) leaves the word odd until
     * the next reset: past a few tries the reading is taken as it is. */
    for (int tries = 0;; tries++) {
        const uint64_t seq = atomic_load_explicit(&b->seq, memory_order_acquire);
        sum_cells(block, nlanes, evicted, out);
        uint64_t base[CR_COUNTER_FIELDS];
        for (int f = 0; f < CR_COUNTER_FIELDS; f++)
            base[f] = atomic_load_explicit(&b->base[f], memory_order_acquire);
        if (tries < 64 && ((seq & 1) || atomic_load_explicit(&b->seq, memory_order_acquire) != seq))
            continue;
        /* saturated stays saturated (the cells cannot go back); else what
         * was counted since the reset, never below 0 */
        for (int f = 0; f < CR_COUNTER_FIELDS; f++)
            if (out[f] != (uint64_t)CR_COUNT_MAX)
                out[f] = out[f] > base[f] ? out[f] - base[f] : 0;
        return;
    }
}

/* The summed words of every cell of `by`, each clamped to [0, CR_COUNT_MAX]
 * (a word is a signed count: a dry run takes a refusal back). */
static void sum_by_cells(const cr_by_block *by, uint32_t nlanes, uint64_t out[CR_BY_FIELDS])
{
    const size_t ncells = (size_t)(nlanes < CR_COUNTER_LANES ? nlanes : CR_COUNTER_LANES) *
                          CR_COUNTER_SLOTS;
    for (int f = 0; f < CR_BY_FIELDS; f++) {
        __extension__ __int128 sum = (int64_t)atomic_load_explicit(&by->overflow.n[f],
                                                                   memory_order_relaxed);
        for (size_t c = 0; c < ncells; c++)
            sum += (int64_t)atomic_load_explicit(&by->cell[c].n[f], memory_order_relaxed);
        out[f] = sum < 0 ? 0 : sum > CR_COUNT_MAX ? (uint64_t)CR_COUNT_MAX : (uint64_t)sum;
    }
}

static uint64_t less(uint64_t a, uint64_t b)
{
    return a == (uint64_t)CR_COUNT_MAX ? a : a > b ? a - b : 0;
}

void cr_counters_by_read(const cr_counts *counts, uint64_t plans[CR_PLANS_MAX][2],
                         uint64_t classes[CR_PRIORITIES_MAX][2], uint64_t rest[2])
{
    uint64_t by[CR_BY_FIELDS] = {0};
    if (counts->by) {
        /* read before the block's totals, which count each request first:
         * no plan's count is then ahead of the totals it is taken from */
        cr_by_block *b = counts->by; /* the baseline is read, not written */
        for (int tries = 0;; tries++) {
            const uint64_t seq = atomic_load_explicit(&counts->block->seq, memory_order_acquire);
            sum_by_cells(b, counts->nlanes, by);
            uint64_t base[CR_BY_FIELDS];
            for (int f = 0; f < CR_BY_FIELDS; f++)
                base[f] = atomic_load_explicit(&b->base[f], memory_order_acquire);
            if (tries < 64 && ((seq & 1) || atomic_load_explicit(&counts->block->seq,
                                                                 memory_order_acquire) != seq))
                continue;
            for (int f = 0; f < CR_BY_FIELDS; f++)
                by[f] = less(by[f], base[f]);
            break;
        }
    }
    uint64_t n[CR_COUNTER_FIELDS];
    cr_counters_read(counts->block, counts->nlanes, 0, n);
    const uint64_t total[2] = {n[CR_N_ADMITTED], n[CR_N_REFUSED]};
    for (int o = 0; o < 2; o++) {
        uint64_t plans_rest = total[o], classes_rest = total[o];
        for (int p = 1; p < CR_PLANS_MAX; p++) {
            plans[p][o] = by[cr_by_plan_word(p, o == 0)];
            plans_rest = less(plans_rest, plans[p][o]);
        }
        plans[0][o] = plans_rest;
        for (int c = 0; c < CR_PRIORITIES_MAX; c++) {
            classes[c][o] = by[cr_by_class_word(c, o == 0)];
            classes_rest = less(classes_rest, classes[c][o]);
        }
        rest[o] = classes_rest;
    }
}

/* Serializes the resets of this process (a region's callers also hold its
 * change lock, for the other processes). */
static pthread_mutex_t resetting = PTHREAD_MUTEX_INITIALIZER;

void cr_counters_reset(cr_counter_block *block, cr_by_block *by, uint32_t nlanes, uint64_t evicted)
{
    pthread_mutex_lock(&resetting);
    uint64_t by_now[CR_BY_FIELDS];
    if (by)
        sum_by_cells(by, nlanes, by_now);
    uint64_t now[CR_COUNTER_FIELDS];
    sum_cells(block, nlanes, evicted, now);
    const uint64_t seq = atomic_load_explicit(&block->seq, memory_order_relaxed);
    atomic_store_explicit(&block->seq, seq | 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (int f = 0; f < CR_COUNTER_FIELDS; f++)
        atomic_store_explicit(&block->base[f], now[f], memory_order_release);
    for (int f = 0; by && f < CR_BY_FIELDS; f++)
        atomic_store_explicit(&by->base[f], by_now[f], memory_order_release);
    const int64_t held = atomic_load(&block->in_flight); /* a peak's total (else 0) */
    atomic_store_explicit(&block->peak, held > 0 ? held : 0, memory_order_relaxed);
    atomic_store_explicit(&block->seq, (seq | 1) + 1, memory_order_release);
    pthread_mutex_unlock(&resetting);
}

void cr_counters_rate_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                            cr_stats *out)
{
    uint64_t n[CR_COUNTER_FIELDS];
    cr_counters_read(block, nlanes, evicted, n);
    *out = (cr_stats){
        .admitted = n[CR_N_ADMITTED],
        .refused = n[CR_N_REFUSED],
        .units_admitted = n[CR_N_UNITS_ADMITTED],
        .units_refused = n[CR_N_UNITS_REFUSED],
        .units_refunded = n[CR_N_UNITS_REFUNDED],
        .unfittable = n[CR_N_UNFITTABLE],
        .would_refuse = n[CR_N_WOULD_REFUSE],
        .evicted = n[CR_N_EVICTED],
    };
}

void cr_counters_gauge_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t in_flight,
                             bool peak, cr_gauge_stats *out)
{
    uint64_t n[CR_COUNTER_FIELDS];
    cr_counters_read(block, nlanes, 0, n);
    cr_counter_block *b = (cr_counter_block *)block; /* read, not written */
    *out = (cr_gauge_stats){
        .acquired = n[CR_N_ADMITTED],
        .refused = n[CR_N_REFUSED],
        .units_acquired = n[CR_N_UNITS_ADMITTED],
        .units_refused = n[CR_N_UNITS_REFUSED],
        .released = n[CR_N_RELEASED],
        .reclaimed = n[CR_N_RECLAIMED],
        .in_flight = in_flight,
        .peak = peak ? (uint64_t)atomic_load_explicit(&b->peak, memory_order_relaxed) : 0,
        .evicted = 0,
        .peak_tracked = peak,
    };
}

cr_status cr_counts_reset(const cr_counts *counts, cr_lock *lock, uint64_t evicted)
{
    cr_status status = lock ? cr_lock_acquire(lock) : CR_OK;
    if (status != CR_OK)
        return status;
    cr_counters_reset(counts->block, counts->by, counts->nlanes, evicted);
    if (lock)
        cr_lock_release(lock);
    return CR_OK;
}

void cr_counters_hold(const cr_counts *counts, int64_t delta)
{
    cr_counter_block *block = counts->block;
    const int64_t held = atomic_fetch_add_explicit(&block->in_flight, delta, memory_order_relaxed) +
                         delta;
    int64_t peak = atomic_load_explicit(&block->peak, memory_order_relaxed);
    while (held > peak &&
           !atomic_compare_exchange_weak_explicit(&block->peak, &peak, held, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

_Static_assert(sizeof(((cr_stats_by *)0)->plans) / sizeof(cr_stats_row) == CR_PLANS_MAX,
               "a row for each plan");
_Static_assert(sizeof(((cr_stats_by *)0)->priorities) / sizeof(cr_stats_row) == CR_PRIORITIES_MAX,
               "a row for each class");
_Static_assert(CR_PLAN_NAME_MAX <= sizeof(((cr_stats_row *)0)->name) &&
                   CR_PRIORITY_NAME_MAX <= sizeof(((cr_stats_row *)0)->name),
               "a row holds a name");

static void stats_row(cr_stats_row *row, const char *name, const uint64_t counts[2])
{
    snprintf(row->name, sizeof row->name, "%s", name);
    row->admitted = counts[0];
    row->refused = counts[1];
}

void cr_counters_stats_by(const cr_counts *counts, const cr_plan_table *plans,
                          const cr_limit *limit, cr_stats_by *out)
{
    uint64_t by_plan[CR_PLANS_MAX][2], by_class[CR_PRIORITIES_MAX][2], rest[2];
    cr_counters_by_read(counts, by_plan, by_class, rest);
    memset(out, 0, sizeof *out);
    const int32_t nplans = plans && plans->count > 1 ? plans->count : 0;
    for (int32_t p = 0; p < nplans; p++)
        stats_row(&out->plans[out->nplans++], plans->names[p], by_plan[p]);
    bool rest_counted = false;
    for (int32_t c = 0; c < limit->npriorities; c++) {
        const cr_priority_class *class = &limit->priorities[c];
        cr_stats_row *row = &out->priorities[out->npriorities++];
        stats_row(row, class->name, by_class[c]);
        if (class->reserve == 0 && !rest_counted) { /* what a decision of no class spends */
            row->admitted = cr_count_add(row->admitted, rest[0]);
            row->refused = cr_count_add(row->refused, rest[1]);
            rest_counted = true;
        }
    }
}
