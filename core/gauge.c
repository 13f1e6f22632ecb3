/*
 * Concurrency gauges: units held at once, per key (docs/design.md §15).
 *
 * A gauge is `limit` cells of 16 bytes, one per unit: {holder, acquired_ns},
 * all zero when free. A holding of cost n is n cells carrying the same
 * holder word (the process id, and a sequence number of that process), so
 * the gauge is the count of cells held, and every change is a single
 * compare-and-swap of one cell (of its holder word alone without a lease):
 * taking a free cell, freeing one's own, or reclaiming one whose holder
 * process is dead or whose lease has run out.
 * No count can drift from the holdings, none can go below zero, and a
 * process killed at any instant leaves only cells that name it. A take that
 * finds fewer free cells than it needs gives back what it took (a unit
 * taken and given back counts as none taken).
 *
 * A keyed table is buckets of gauges placed as cr_keyed places slots
 * (place.h: two choices, stripe locks to give a key a place). Each gauge
 * has a head word: the fingerprint of its key (0: never used). A key whose
 * cells are all free is absent: its gauge is given to another key under the
 * stripe locks, after marking the head busy and finding every cell free. A
 * lock-free taker reads the head again after its takes and gives them back
 * if it changed; with every access sequentially consistent, either the
 * taker sees the mark, or the marker sees the taker's cells. A mark left by
 * a marker that died is cleared by the next taker of the lock.
 */
#include "gauge.h"
#include "cellrate/clock.h"
#include "place.h"
#include "region.h"
#include "seed.h"

#include <inttypes.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GAUGES_PER_BUCKET 4
#define MAX_STRIPES 256
/* A head being given to another key (set only under the stripe locks, so a
 * lock taker that finds it knows its setter died). */
#define BUSY (UINT64_C(1) << 63)
/* Holder processes whose liveness one reclaim pass remembers. */
#define LIVENESS_MEMO 16

typedef union {
    cr_pair pair;
    struct {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        int64_t acquired_ns;
        uint64_t holder;
#else
        uint64_t holder;
        int64_t acquired_ns;
#endif
    } half;
} cell;

_Static_assert(sizeof(cell) == 16, "a cell is 16 bytes");

struct cr_gauge {
    int64_t limit;
    int64_t capacity; /* 0: one gauge */
    int64_t lease_ns; /* 0: none */
    bool peak;        /* keeps the counters' total of units held (cr_counters_hold) */
    uint64_t seed[2];
    uint32_t nbuckets;
    uint32_t ngauges;
    uint32_t nstripes;
    size_t stride; /* bytes of a gauge: its head (16) and its cells */
    char *gauges;
    cr_lock *stripes;
    cr_region region; /* base is NULL for gauges of this process alone */
    cr_counts counts; /* this process's block, or the region's */
};

/* Sequence numbers of this process's holdings, handed to each thread in
 * blocks so that threads share no counter on the hot path. One thread-local
 * record; in the C library of the initial-exec model, an offset from the
 * thread pointer: with the default model of -fPIC the compiler sees a call
 * to __tls_get_addr (even where the linker takes it away) and keeps the
 * acquire's arguments in saved registers, stores before its
 * compare-and-swap. The modules (CR_EMBED), loaded by dlopen, keep the
 * default model. */
#define SEQUENCE_BLOCK 4096
#ifdef CR_EMBED
#define SEQUENCE_TLS _Thread_local
#else
#define SEQUENCE_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#endif
static _Atomic uint32_t holding_sequence;
static SEQUENCE_TLS struct {
    uint32_t next, end;
} thread_sequence;

/* A sequence number for a new holding; never 0. */
static uint32_t next_sequence(void)
{
    if (thread_sequence.next == thread_sequence.end) {
        thread_sequence.next = atomic_fetch_add_explicit(&holding_sequence, SEQUENCE_BLOCK,
                                                         memory_order_relaxed);
        thread_sequence.end = thread_sequence.next + SEQUENCE_BLOCK;
    }
    uint32_t sequence = ++thread_sequence.next;
    return sequence != 0 ? sequence : 1;
}

static _Atomic uint64_t *head_of(const cr_gauge *gauge, uint32_t index)
{
    return (_Atomic uint64_t *)(gauge->gauges + (size_t)index * gauge->stride);
}

static cell *cells_of(const cr_gauge *gauge, uint32_t index)
{
    return (cell *)(gauge->gauges + (size_t)index * gauge->stride + sizeof(cell));
}

static cr_pair make_pair(uint64_t holder, int64_t acquired_ns)
{
    cell c;
    c.half.holder = holder;
    c.half.acquired_ns = acquired_ns;
    return c.pair;
}

/* Changes cell `c` from {holder, acquired_ns} to {new_holder, new_acquired}.
 * Without a lease every cell's acquired_ns stays 0 (in every process: the
 * lease is part of a region's identity), so the holder word alone changes:
 * a 64-bit compare-and-swap, cheaper than the pair's 16 bytes. */
static bool cell_cas(const cr_gauge *gauge, cell *c, uint64_t holder, int64_t acquired_ns,
                     uint64_t new_holder, int64_t new_acquired)
{
    if (gauge->lease_ns == 0)
        return __atomic_compare_exchange_n(&c->half.holder, &holder, new_holder, false,
                                           __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cr_pair_cas(&c->pair, make_pair(holder, acquired_ns),
                       make_pair(new_holder, new_acquired));
}

static uint64_t load_holder(const cell *c)
{
    return __atomic_load_n(&c->half.holder, __ATOMIC_SEQ_CST);
}

static int64_t load_acquired(const cell *c)
{
    return __atomic_load_n(&c->half.acquired_ns, __ATOMIC_SEQ_CST);
}

/* Frees the cells of `holding` (those of its span carrying its pair); the count. */
__attribute__((noinline)) static int64_t free_span(cr_gauge *gauge, const cr_holding *holding)
{
    cell *cells = cells_of(gauge, holding->entry);
    const uint64_t limit = (uint64_t)gauge->limit;
    const uint64_t span = holding->span < limit ? holding->span : limit;
    int64_t freed = 0;
    uint64_t at = holding->first < limit ? holding->first : 0;
    for (uint64_t i = 0; i < span; i++, at = at + 1 < limit ? at + 1 : 0) {
        cell *c = &cells[at];
        if (load_holder(c) == holding->holder &&
            cell_cas(gauge, c, holding->holder, holding->acquired_ns, 0, 0))
            freed++;
    }
    return freed;
}

/* As free_span; a span of one cell, the common release, inline and with
 * nothing stored before its compare-and-swap, and no load of the cell
 * before it either (a plain load of the line just before a lock-prefixed
 * instruction on it costs as much as the instruction again on the Xeon of
 * the benchmarks: the swap fails alone when the cell is not ours). */
static inline int64_t free_cells(cr_gauge *gauge, const cr_holding *holding)
{
    if (holding->span != 1 || holding->first >= (uint64_t)gauge->limit)
        return free_span(gauge, holding);
    cell *c = &cells_of(gauge, holding->entry)[holding->first];
    return cell_cas(gauge, c, holding->holder, holding->acquired_ns, 0, 0);
}

/* Whether a holding is dead: its lease ran out, or (in a region) its process
 * is gone. `memo` remembers the processes asked about in this pass. */
typedef struct {
    uint32_t pid[LIVENESS_MEMO];
    bool alive[LIVENESS_MEMO];
    int count;
} liveness_memo;

static bool holding_dead(const cr_gauge *gauge, uint64_t holder, int64_t acquired_ns,
                         int64_t now_ns, liveness_memo *memo)
{
    if (gauge->lease_ns > 0 && now_ns - acquired_ns >= gauge->lease_ns)
        return true;
    const uint32_t pid = (uint32_t)(holder >> 32);
    if (!gauge->region.base || pid == cr_own_pid())
        return false; /* a process's own holdings die with it */
    for (int i = 0; i < memo->count; i++)
        if (memo->pid[i] == pid)
            return !memo->alive[i];
    const bool alive = cr_process_alive(pid);
    if (memo->count < LIVENESS_MEMO) {
        memo->pid[memo->count] = pid;
        memo->alive[memo->count++] = alive;
    }
    return !alive;
}

/* Frees the cells of gauge `index` whose holder is dead; the count. */
static int64_t reclaim(cr_gauge *gauge, uint32_t index)
{
    if (!gauge->region.base && gauge->lease_ns == 0)
        return 0; /* nothing here can die before its holder lets go */
    const int64_t now_ns = cr_clock_ns();
    liveness_memo memo = {.count = 0};
    cell *cells = cells_of(gauge, index);
    int64_t reclaimed = 0;
    for (int64_t i = 0; i < gauge->limit; i++) {
        const uint64_t holder = load_holder(&cells[i]);
        if (holder == 0)
            continue;
        const int64_t acquired_ns = load_acquired(&cells[i]);
        if (load_holder(&cells[i]) != holder ||
            !holding_dead(gauge, holder, acquired_ns, now_ns, &memo))
            continue;
        if (gauge->peak) /* out of the total before the cell is free (cr_gauge_release) */
            cr_counters_hold(&gauge->counts, -1);
        if (cell_cas(gauge, &cells[i], holder, acquired_ns, 0, 0))
            reclaimed++;
        else if (gauge->peak)
            cr_counters_hold(&gauge->counts, 1); /* freed by another meanwhile */
    }
    if (reclaimed > 0)
        cr_count1(&gauge->counts, CR_N_RECLAIMED, (uint64_t)reclaimed);
    return reclaimed;
}

static int64_t held_cells(const cr_gauge *gauge, uint32_t index)
{
    const cell *cells = cells_of(gauge, index);
    int64_t held = 0;
    for (int64_t i = 0; i < gauge->limit; i++)
        held += load_holder(&cells[i]) != 0;
    return held;
}

typedef enum { TAKEN, REFUSED, MOVED } take_result;

/* The cell a holding tries first: its sequence number (its thread's block,
 * then one more per holding) spread over the cells by a multiply-shift, so
 * threads start apart and no division is on the path. */
static uint64_t start_of(uint64_t holder, uint64_t limit)
{
    return cr_reduce((uint32_t)holder * UINT32_C(0x9E3779B9), (uint32_t)limit);
}

/* Takes `holding->cost` free cells of gauge `index`, owned by `fp` (0: a
 * single gauge, whose head never changes), and sets the holding's entry
 * and span; reclaims dead holdings once when short. MOVED: the gauge went
 * to another key meanwhile (nothing kept). */
static take_result take(cr_gauge *gauge, uint32_t index, uint64_t fp, cr_holding *holding)
{
    cell *cells = cells_of(gauge, index);
    const uint64_t limit = (uint64_t)gauge->limit;
    const uint64_t start = start_of(holding->holder, limit);
    holding->entry = index;
    holding->first = (uint32_t)start;
    holding->span = 0;
    int64_t taken = 0;
    /* the common case: one unit, and its first cell is free */
    if (holding->cost == 1 && load_holder(&cells[start]) == 0 &&
        cell_cas(gauge, &cells[start], 0, 0, holding->holder, holding->acquired_ns)) {
        taken = 1;
        holding->span = 1;
    }
    for (int pass = 0; pass < 2 && taken < holding->cost; pass++) {
        if (pass == 1 && reclaim(gauge, index) == 0)
            break;
        uint64_t at = start;
        for (uint64_t i = 0; i < limit && taken < holding->cost;
             i++, at = at + 1 < limit ? at + 1 : 0) {
            cell *c = &cells[at];
            if (load_holder(c) == 0 &&
                cell_cas(gauge, c, 0, 0, holding->holder, holding->acquired_ns)) {
                taken++;
                if (i + 1 > holding->span)
                    holding->span = (uint32_t)(i + 1);
            }
        }
    }
    const bool moved = fp != 0 && atomic_load(head_of(gauge, index)) != fp;
    if (taken == holding->cost && !moved)
        return TAKEN;
    if (taken > 0)
        free_cells(gauge, holding);
    return moved ? MOVED : REFUSED;
}

/* The gauge of `place->fp` among its two buckets, or -1. */
static int64_t find(const cr_gauge *gauge, const cr_key_place *place)
{
    for (int b = 0; b < 2; b++)
        for (uint32_t i = 0; i < GAUGES_PER_BUCKET; i++) {
            uint32_t index = place->bucket[b] * GAUGES_PER_BUCKET + i;
            if (atomic_load(head_of(gauge, index)) == place->fp)
                return index;
        }
    return -1;
}

/* Clears the busy marks of the key's buckets: called with the stripe locks
 * held, so a mark found is a dead setter's, and its key keeps its gauge
 * (never two gauges for one key). */
static void clear_dead_marks(cr_gauge *gauge, const cr_key_place *place)
{
    for (int b = 0; b < 2; b++)
        for (uint32_t i = 0; i < GAUGES_PER_BUCKET; i++) {
            _Atomic uint64_t *head = head_of(gauge, place->bucket[b] * GAUGES_PER_BUCKET + i);
            uint64_t word = atomic_load(head);
            if (word & BUSY)
                atomic_compare_exchange_strong(head, &word, word & ~BUSY);
        }
}

/* Gives gauge `index` (head seen as `word`) to `fp` if it is unused or its
 * key is absent (every cell free once dead holdings are reclaimed). Called
 * with the stripe locks held, after clear_dead_marks. */
static bool give_gauge(cr_gauge *gauge, uint32_t index, uint64_t word, uint64_t fp)
{
    _Atomic uint64_t *head = head_of(gauge, index);
    if (word == 0)
        return atomic_compare_exchange_strong(head, &word, fp);
    const uint64_t owner = word;
    if (!atomic_compare_exchange_strong(head, &word, owner | BUSY))
        return false;
    reclaim(gauge, index);
    if (held_cells(gauge, index) == 0) {
        atomic_store(head, fp);
        return true;
    }
    atomic_store(head, owner); /* the key holds units: it stays */
    return false;
}

/* Places `place->fp` in one of its buckets (the stripe locks held): an
 * unused gauge first, else one whose key is absent. -1 when every gauge of
 * both buckets is held. */
static int64_t place_key(cr_gauge *gauge, const cr_key_place *place)
{
    for (int reuse = 0; reuse < 2; reuse++)
        for (int b = 0; b < 2; b++)
            for (uint32_t i = 0; i < GAUGES_PER_BUCKET; i++) {
                uint32_t index = place->bucket[b] * GAUGES_PER_BUCKET + i;
                uint64_t word = atomic_load(head_of(gauge, index));
                if ((word == 0) != (reuse == 0))
                    continue;
                if (give_gauge(gauge, index, word, place->fp))
                    return index;
            }
    return -1;
}

static cr_status check_key(const cr_gauge *gauge, const void *key)
{
    if (gauge->capacity == 0)
        return key ? CR_E_KEY_UNKEYED : CR_OK;
    return key ? CR_OK : CR_E_KEY;
}

/* The acquire of a unit count, uncounted: every case. */
__attribute__((noinline)) static cr_status acquire_general(cr_gauge *gauge, const void *key,
                                                           size_t key_len, int64_t cost,
                                                           bool *acquired, cr_holding *holding)
{
    *acquired = false;
    memset(holding, 0, sizeof *holding);
    cr_status status = check_key(gauge, key);
    if (status != CR_OK)
        return status;
    if (cost < 1)
        return CR_E_HOLD_COST;
    if (cost > gauge->limit)
        return CR_OK; /* can never fit */
    cr_holding mine = {
        .holder = (uint64_t)cr_own_pid() << 32 | next_sequence(),
        .acquired_ns = gauge->lease_ns > 0 ? cr_clock_ns() : 0,
        .cost = cost,
    };
    if (gauge->capacity == 0) {
        if (take(gauge, 0, 0, &mine) != TAKEN)
            return CR_OK;
        *acquired = true;
        *holding = mine;
        return CR_OK;
    }
    const cr_key_place place = cr_key_place_of(gauge->seed, gauge->nbuckets, key, key_len);
    for (;;) {
        int64_t index = find(gauge, &place);
        if (index < 0) {
            uint32_t stripe[2];
            status = cr_lock_places(gauge->stripes, gauge->nstripes, &place, stripe);
            if (status != CR_OK)
                return status;
            clear_dead_marks(gauge, &place);
            index = find(gauge, &place);
            if (index < 0)
                index = place_key(gauge, &place);
            cr_unlock_places(gauge->stripes, stripe);
            if (index < 0)
                return CR_OK; /* the table is full of keys holding units */
        }
        take_result result = take(gauge, (uint32_t)index, place.fp, &mine);
        if (result == MOVED)
            continue;
        if (result == TAKEN) {
            *acquired = true;
            *holding = mine;
        }
        return CR_OK;
    }
}

/* The common acquire: one unit of a single gauge without a lease, its
 * first cell free (take_one: false, nothing written, when it is held). A
 * lock-prefixed instruction waits for every earlier store to drain, so
 * nothing is stored before the compare-and-swap but the thread's sequence:
 * no saved register, no record on the stack, and the cell is not loaded
 * first (free_cells). Whatever else, the general path decides, with the
 * arguments this case implies. */
static inline bool take_one(cr_gauge *gauge, uint32_t pid, cr_holding *holding)
{
    const uint64_t holder = (uint64_t)pid << 32 | next_sequence();
    const uint64_t start = start_of(holder, (uint64_t)gauge->limit);
    cell *c = &cells_of(gauge, 0)[start];
    uint64_t free_word = 0; /* without a lease, the holder word alone (cell_cas) */
    if (!__atomic_compare_exchange_n(&c->half.holder, &free_word, holder, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return false;
    holding->holder = holder;
    holding->acquired_ns = 0;
    holding->cost = 1;
    holding->entry = 0;
    holding->first = (uint32_t)start;
    holding->span = 1;
    return true;
}

static inline cr_status acquire_one(cr_gauge *gauge, bool *acquired, cr_holding *holding)
{
    const uint32_t pid = atomic_load_explicit(&cr_own_pid_cache, memory_order_relaxed);
    if (pid == 0 || !take_one(gauge, pid, holding)) /* 0: asks cr_own_pid */
        return acquire_general(gauge, NULL, 0, 1, acquired, holding);
    *acquired = true;
    return CR_OK;
}

/* acquire_one where it applies, else acquire_general; uncounted. */
static inline cr_status acquire_units(cr_gauge *gauge, const void *key, size_t key_len,
                                      int64_t cost, bool *acquired, cr_holding *holding)
{
    if (__builtin_expect(cost == 1 && !key && gauge->capacity == 0 && gauge->lease_ns == 0, 1))
        return acquire_one(gauge, acquired, holding);
    return acquire_general(gauge, key, key_len, cost, acquired, holding);
}

cr_status cr_gauge_poll(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                        bool *acquired, cr_holding *holding)
{
    cr_status status = acquire_units(gauge, key, key_len, cost, acquired, holding);
    if (status == CR_OK && *acquired) {
        cr_count_verdict(&gauge->counts, true, cost, INT64_MAX);
        if (gauge->peak) /* the one total a peak needs: a locked add, shared */
            cr_counters_hold(&gauge->counts, cost);
    }
    return status;
}

void cr_gauge_count_refusal(cr_gauge *gauge, int64_t cost)
{
    /* no unfittable here: its field is `released` (counters.h) */
    cr_count_verdict(&gauge->counts, false, cost, INT64_MAX);
}

/* cr_gauge_acquire but its common case; counted. */
__attribute__((noinline)) static cr_status acquire_counted(cr_gauge *gauge, const void *key,
                                                           size_t key_len, int64_t cost,
                                                           bool *acquired, cr_holding *holding)
{
    cr_status status = cr_gauge_poll(gauge, key, key_len, cost, acquired, holding);
    if (status == CR_OK && !*acquired)
        cr_gauge_count_refusal(gauge, cost);
    return status;
}

/* The common acquire (acquire_one's case, without a peak) swaps and counts
 * with everything else a tail call: no register saved before the swap. */
cr_status cr_gauge_acquire(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                           bool *acquired, cr_holding *holding)
{
    const uint32_t pid = atomic_load_explicit(&cr_own_pid_cache, memory_order_relaxed);
    if (__builtin_expect(cost != 1 || key || gauge->capacity != 0 || gauge->lease_ns != 0 ||
                             gauge->peak || pid == 0,
                         0))
        return acquire_counted(gauge, key, key_len, cost, acquired, holding);
    if (!take_one(gauge, pid, holding))
        return acquire_counted(gauge, key, key_len, cost, acquired, holding);
    *acquired = true;
    return (cr_status)cr_count_admitted_tail(&gauge->counts, 1);
}

/* A release with the peak's total: the units leave the total before their
 * cells are free, and come back to it for cells found freed by another (a
 * reclaim, a release before). An acquire adds to it once its cells are
 * taken: so the total never exceeds the cells held at any instant, nor the
 * peak the limit (a release that freed its cells first could let a taker of
 * them add its units while the units it gave back were still counted). */
__attribute__((noinline)) static int64_t release_with_peak(cr_gauge *gauge,
                                                           const cr_holding *holding)
{
    const int64_t units = holding->cost < 0              ? 0
                          : holding->cost > gauge->limit ? gauge->limit
                                                         : holding->cost;
    cr_counters_hold(&gauge->counts, -units);
    const int64_t freed = free_cells(gauge, holding);
    if (freed != units)
        cr_counters_hold(&gauge->counts, units - freed);
    return freed;
}

/* Every release but the common one; counted. */
__attribute__((noinline)) static int64_t release_general(cr_gauge *gauge, const cr_holding *holding)
{
    const int64_t freed = gauge->peak ? release_with_peak(gauge, holding)
                                      : free_cells(gauge, holding);
    if (freed > 0)
        cr_count1(&gauge->counts, CR_N_RELEASED, (uint64_t)freed);
    return freed;
}

/* The common release (one cell, no lease, no peak) swaps its holder word
 * and counts it with nothing kept across a call: no register saved, nothing
 * stored before the swap (free_cells). */
int64_t cr_gauge_release(cr_gauge *gauge, const cr_holding *holding)
{
    if (holding->holder == 0 || holding->entry >= gauge->ngauges)
        return 0;
    if (__builtin_expect(gauge->peak || gauge->lease_ns != 0 || holding->span != 1 ||
                             holding->first >= (uint64_t)gauge->limit,
                         0))
        return release_general(gauge, holding);
    cell *c = &cells_of(gauge, holding->entry)[holding->first];
    uint64_t holder = holding->holder;
    if (!__atomic_compare_exchange_n(&c->half.holder, &holder, 0, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return 0;
    return cr_count1_tail(&gauge->counts, CR_N_RELEASED, 1);
}

cr_status cr_gauge_wait(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                        int64_t timeout_ns, bool *acquired, cr_holding *holding)
{
    if (timeout_ns < 0)
        return CR_E_TIMEOUT;
    const int64_t start = cr_clock_ns();
    int64_t pause_ns = 20000;
    for (;;) {
        cr_status status = cr_gauge_poll(gauge, key, key_len, cost, acquired, holding);
        if (status != CR_OK || *acquired)
            return status;
        const int64_t waited = cr_clock_ns() - start;
        if (cost > gauge->limit || (timeout_ns != CR_NEVER && waited >= timeout_ns)) {
            cr_gauge_count_refusal(gauge, cost); /* a wait is one verdict */
            return CR_OK;
        }
        const int64_t left = timeout_ns == CR_NEVER ? pause_ns : timeout_ns - waited;
        cr_sleep_ns(left < pause_ns ? left : pause_ns);
        if (pause_ns < 1000000)
            pause_ns *= 2;
    }
}

cr_status cr_gauge_in_flight(cr_gauge *gauge, const void *key, size_t key_len, int64_t *in_flight)
{
    *in_flight = 0;
    cr_status status = check_key(gauge, key);
    if (status != CR_OK)
        return status;
    int64_t index = 0;
    if (gauge->capacity != 0) {
        const cr_key_place place = cr_key_place_of(gauge->seed, gauge->nbuckets, key, key_len);
        index = find(gauge, &place);
        if (index < 0)
            return CR_OK;
    }
    reclaim(gauge, (uint32_t)index);
    *in_flight = held_cells(gauge, (uint32_t)index);
    return CR_OK;
}

void cr_gauge_count(const void *gauges, uint32_t nbuckets, int64_t limit, bool keyed,
                    uint64_t *keys, uint64_t *held)
{
    const cr_gauge view = {
        .limit = limit, .stride = sizeof(cell) * (size_t)(limit + 1), .gauges = (char *)gauges};
    *keys = 0;
    *held = 0;
    if (!keyed) {
        *held = (uint64_t)held_cells(&view, 0);
        return;
    }
    for (uint32_t index = 0; index < nbuckets * GAUGES_PER_BUCKET; index++) {
        if (atomic_load(head_of(&view, index)) == 0)
            continue; /* never given to a key: every cell free */
        const int64_t cells = held_cells(&view, index);
        *keys += cells > 0;
        *held += (uint64_t)cells;
    }
}

cr_status cr_gauge_check(int64_t limit, int64_t cost)
{
    if (limit < 1 || limit > CR_GAUGE_MAX_LIMIT)
        return CR_E_LIMIT;
    return cost < 1 ? CR_E_HOLD_COST : CR_OK;
}

cr_status cr_lease_from_seconds(double seconds, int64_t *ns)
{
    int64_t lease_ns;
    if (!(seconds > 0) || cr_seconds_to_ns(seconds, &lease_ns) != CR_OK || lease_ns < 1)
        return CR_E_LEASE;
    *ns = lease_ns;
    return CR_OK;
}

/* ------------------------------------------------------------------------ */

static size_t gauges_size(const cr_gauge *gauge) { return (size_t)gauge->ngauges * gauge->stride; }

static cr_status map_private(cr_gauge *gauge)
{
    void *gauges = mmap(NULL, gauges_size(gauge), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    gauge->gauges = gauges == MAP_FAILED ? NULL : gauges;
    gauge->stripes = calloc(gauge->nstripes, sizeof(cr_lock));
    if (!gauge->gauges || !gauge->stripes || cr_random_seed(gauge->seed) != CR_OK) {
        if (gauge->gauges)
            munmap(gauge->gauges, gauges_size(gauge));
        free(gauge->stripes);
        return CR_E_NOMEM;
    }
    return CR_OK;
}

static cr_status map_shared(cr_gauge *gauge, const char *path, int64_t mode)
{
    cr_region_spec spec = {
        .kind = CR_REGION_CONCURRENCY,
        .algorithm = 0,
        .flags = gauge->peak ? CR_REGION_PEAK : 0,
        .emission_ns = gauge->lease_ns,
        .burst = gauge->limit,
        .capacity = gauge->capacity,
        .nbuckets = gauge->nbuckets,
        .nstripes = gauge->nstripes,
        .buckets_size = gauges_size(gauge),
    };
    cr_status status = cr_region_open(&gauge->region, &spec, NULL, path, mode);
    if (status != CR_OK)
        return status;
    memcpy(gauge->seed, gauge->region.seed, sizeof gauge->seed);
    gauge->gauges = gauge->region.buckets;
    gauge->stripes = gauge->region.stripes;
    return CR_OK;
}

cr_status cr_gauge_open(cr_gauge **out, int64_t limit, bool keyed, int64_t capacity,
                        int64_t lease_ns, bool peak, const char *path, int64_t mode)
{
    if (cr_gauge_check(limit, 1) != CR_OK)
        return CR_E_LIMIT;
    if (keyed && (capacity < 1 || capacity > CR_KEYED_MAX_CAPACITY))
        return CR_E_CAPACITY;
    if (lease_ns < 0 || lease_ns >= CR_HORIZON_NS)
        return CR_E_LEASE;
    cr_gauge *gauge = calloc(1, sizeof *gauge);
    if (!gauge)
        return CR_E_NOMEM;
    gauge->limit = limit;
    gauge->capacity = keyed ? capacity : 0;
    gauge->lease_ns = lease_ns;
    gauge->peak = peak;
    gauge->stride = sizeof(cell) * (size_t)(limit + 1);
    int64_t buckets = 1;
    if (keyed) {
        /* 7/4 gauges per key, as cr_keyed's slots: a table at capacity is
         * 57% used, and a key rarely finds both of its buckets held */
        int64_t gauges = capacity + (capacity * 3 + 3) / 4;
        buckets = (gauges + GAUGES_PER_BUCKET - 1) / GAUGES_PER_BUCKET;
        buckets = buckets < 2 ? 2 : buckets;
    }
    const int64_t ngauges = keyed ? buckets * GAUGES_PER_BUCKET : 1;
    if (ngauges > UINT32_MAX || (uint64_t)ngauges > SIZE_MAX / 2 / gauge->stride) {
        free(gauge);
        return CR_E_NOMEM; /* more table than any machine maps */
    }
    gauge->nbuckets = (uint32_t)buckets;
    gauge->ngauges = (uint32_t)ngauges;
    gauge->nstripes = gauge->nbuckets < MAX_STRIPES ? gauge->nbuckets : MAX_STRIPES;
    cr_status status = path ? map_shared(gauge, path, mode) : map_private(gauge);
    if (status == CR_OK && path) {
        cr_counters_join(&gauge->counts, gauge->region.counters, NULL, CR_COUNTER_LANES);
    } else if (status == CR_OK && !cr_counters_new(&gauge->counts)) {
        free(gauge->stripes);
        munmap(gauge->gauges, gauges_size(gauge));
        status = CR_E_NOMEM;
    }
    if (status != CR_OK) {
        free(gauge);
        return status;
    }
    *out = gauge;
    return CR_OK;
}

void cr_gauge_free(cr_gauge *gauge)
{
    if (!gauge)
        return;
    cr_counters_leave(&gauge->counts);
    if (gauge->region.base) {
        cr_region_close(&gauge->region);
    } else {
        free(gauge->stripes);
        munmap(gauge->gauges, gauges_size(gauge));
    }
    free(gauge);
}

int64_t cr_gauge_limit(const cr_gauge *gauge) { return gauge->limit; }
int64_t cr_gauge_capacity(const cr_gauge *gauge) { return gauge->capacity; }
int64_t cr_gauge_lease_ns(const cr_gauge *gauge) { return gauge->lease_ns; }
bool cr_gauge_tracks_peak(const cr_gauge *gauge) { return gauge->peak; }

void cr_gauge_stats_read(const cr_gauge *gauge, cr_gauge_stats *out)
{
    uint64_t keys, held;
    cr_gauge_count(gauge->gauges, gauge->nbuckets, gauge->limit, gauge->capacity > 0, &keys, &held);
    cr_counters_gauge_stats(gauge->counts.block, gauge->counts.nlanes, held, gauge->peak, out);
}

cr_status cr_gauge_reset_stats(cr_gauge *gauge)
{
    return cr_counts_reset(&gauge->counts, cr_region_change_lock(&gauge->region), 0);
}

size_t cr_gauge_describe(char *buf, size_t size, int64_t limit, int64_t capacity, int64_t lease_ns,
                         bool peak)
{
    int len = snprintf(buf, size, "cellrate.Concurrency(limit=%" PRId64, limit);
    if (capacity > 0)
        len += snprintf(buf + len, size > (size_t)len ? size - (size_t)len : 0,
                        ", capacity=%" PRId64, capacity);
    if (lease_ns > 0)
        len += snprintf(buf + len, size > (size_t)len ? size - (size_t)len : 0, ", lease=%.17g",
                        cr_ns_to_seconds(lease_ns));
    if (peak)
        len += snprintf(buf + len, size > (size_t)len ? size - (size_t)len : 0, ", peak=True");
    len += snprintf(buf + len, size > (size_t)len ? size - (size_t)len : 0, ")");
    return (size_t)len;
}
