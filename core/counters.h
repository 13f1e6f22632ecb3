/*
 * A store's counters (docs/design/stores.md, "Counters"): what it decided,
 * in cells that a thread owns alone, so that counting on the hot path is a
 * load and a store on a cache line no other thread writes (no locked
 * instruction, no line that moves between cores).
 *
 * A block is a baseline (what reset_stats set aside), an overflow cell (for
 * threads without a cell of their own: atomic adds), and `nlanes` lanes of
 * CR_COUNTER_SLOTS cells, one cell per thread slot. A store of one process
 * has one lane; a shared region has CR_COUNTER_LANES, one per opening
 * handle (its process id written in the lane's owner word), so that
 * threads of different processes never write one cell either. A reading
 * sums every cell and subtracts the baseline: exact once the writers are
 * done, and never more than the decisions made so far.
 *
 * CR_NO_COUNTERS (the benchmark's switch only) compiles the counting out.
 */
#ifndef CELLRATE_COUNTERS_H
#define CELLRATE_COUNTERS_H

#include "cellrate/plans.h"
#include "cellrate/stats.h"
#include "decide.h"
#include "lock.h"

#include <stdatomic.h>

/* Thread slots with a cell of their own; later threads share the overflow. */
#define CR_COUNTER_SLOTS 16
/* Lanes of a shared region: openings that count without a locked add. */
#define CR_COUNTER_LANES 8
/* Words of a cell: one cache line. */
#define CR_COUNTER_FIELDS 8
/* Bytes between two cells: two lines, as the adjacent-line prefetcher of
 * x86 fetches lines in 128-byte pairs (two threads writing the two lines of
 * one pair would pass it between their cores as if they shared a line). */
#define CR_COUNTER_SPACING 128

/* A rate limit's fields (cr_stats), and a concurrency limit's (cr_gauge_stats).
 * A units field of requests (CR_N_UNITS_ADMITTED, CR_N_UNITS_REFUSED) counts
 * the units beyond one a request (units - requests: -1 for a cost of 0), so
 * that a verdict of one unit, the common one, bumps one word: a reading adds
 * the requests back (cr_counters_read). A cell's word is a signed count; a
 * units field saturates at CR_COUNT_MAX instead of wrapping (cr_count_add),
 * as does every reading (a count past it reads as it). */
enum {
    CR_N_ADMITTED = 0,
    CR_N_REFUSED = 1,
    CR_N_UNITS_ADMITTED = 2,
    CR_N_UNITS_REFUSED = 3,
    CR_N_UNFITTABLE = 4,
    CR_N_WOULD_REFUSE = 5,
    CR_N_EVICTED = 6,        /* (a keyed table's word: read, never counted in a cell) */
    CR_N_UNITS_REFUNDED = 7, /* a plain count of units (no requests folded in) */
    CR_N_RELEASED = 4,       /* concurrency: the fields past the units differ */
    CR_N_RECLAIMED = 5
};

typedef struct {
    _Alignas(CR_COUNTER_SPACING) _Atomic uint64_t n[CR_COUNTER_FIELDS];
} cr_counter_cell;

typedef struct {
    cr_counter_cell cell[CR_COUNTER_SLOTS];
} cr_counter_lane;

typedef struct {
    _Alignas(CR_COUNTER_SPACING) _Atomic uint64_t seq; /* odd while reset_stats writes it */
    _Atomic uint64_t base[CR_COUNTER_FIELDS]; /* the readings (decoded) reset_stats set aside */
    _Alignas(64) _Atomic uint64_t owner[CR_COUNTER_LANES]; /* a lane's process id; 0: free */
    /* concurrency with a peak: units held now and the most held at once
     * (one line of their own: the one total a peak needs; a limit made
     * without peak never writes them, and counts in_flight in its cells) */
    _Alignas(64) _Atomic int64_t in_flight;
    _Atomic int64_t peak;
    cr_counter_cell overflow;
    cr_counter_lane lane[]; /* nlanes */
} cr_counter_block;

_Static_assert(sizeof(cr_counter_cell) == CR_COUNTER_SPACING, "a cell is a pair of lines");
_Static_assert(offsetof(cr_counter_block, overflow) == 256, "the cells follow four lines");

/* Bytes of a block of `nlanes` lanes. */
#define CR_COUNTER_BLOCK_SIZE(nlanes) \
    (sizeof(cr_counter_block) + (size_t)(nlanes) * sizeof(cr_counter_lane))

/* Requests by plan and by class (docs/design/stores.md, "Counters"): a pair
 * of words (admitted, refused) for each plan but "default" and for each
 * class, in cells laid out as the block's (one per thread slot of each
 * lane, and an overflow). Only a decision under a plan or in a class writes
 * here: "default"'s requests are the block's less every other plan's, and
 * those of no class the block's less every class's, so that a plain
 * decision counts exactly as before. A store of this process has them only
 * with plans or classes; a rate region always. */
#define CR_BY_FIELDS (2 * (CR_PLANS_MAX + CR_PRIORITIES_MAX))

typedef struct {
    _Alignas(CR_COUNTER_SPACING) _Atomic uint64_t n[CR_BY_FIELDS];
} cr_by_cell;

typedef struct {
    _Alignas(CR_COUNTER_SPACING) _Atomic uint64_t base[CR_BY_FIELDS]; /* what a reset set aside */
    cr_by_cell overflow;
    cr_by_cell cell[]; /* nlanes * CR_COUNTER_SLOTS, lane by lane as the block's */
} cr_by_block;

_Static_assert(sizeof(cr_by_cell) % CR_COUNTER_SPACING == 0, "a cell is whole pairs of lines");

/* Bytes of the counts by plan and class of `nlanes` lanes. */
#define CR_BY_BLOCK_SIZE(nlanes) \
    (sizeof(cr_by_block) + (size_t)(nlanes)*CR_COUNTER_SLOTS * sizeof(cr_by_cell))

/* The word of plan `plan` (1 to CR_PLANS_MAX - 1) or of class `priority`. */
static inline unsigned cr_by_plan_word(int32_t plan, bool admitted)
{
    return 2u * (unsigned)plan + !admitted;
}
static inline unsigned cr_by_class_word(int32_t priority, bool admitted)
{
    return 2u * (CR_PLANS_MAX + (unsigned)priority) + !admitted;
}

/* A store's view of its block: its own lane (NULL: the overflow alone), and
 * the process that owns the lane (0 for a block of this process alone). */
typedef struct {
    cr_counter_block *block;
    cr_counter_lane *lane;
    uint32_t pid;
    uint32_t nlanes;
    bool placed;         /* the block lies in its store's own allocation (not freed here) */
    cr_by_block *by;     /* requests by plan and class (NULL: none kept) */
    cr_by_cell *by_lane; /* the cells of `lane` in `by` (NULL: none, or no lane) */
    bool by_own;         /* `by` is this process's (freed with the block) */
} cr_counts;

/* The calling thread's slot + 1 (0: none yet; past CR_COUNTER_SLOTS: none
 * to be had). Initial-exec: read without a call, also in a loaded module. */
extern __thread unsigned cr_counter_slot
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* Adds to the overflow cell (atomically), after giving the thread a slot
 * when it has none yet: the rare path of cr_count2. */
__attribute__((cold)) void cr_count2_slow(const cr_counts *counts, unsigned fa, uint64_t na,
                                          unsigned fb, uint64_t nb);

__attribute__((always_inline)) static inline void cr_count_bump(_Atomic uint64_t *word, uint64_t n)
{
    atomic_store_explicit(word, atomic_load_explicit(word, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* `word` + `n` as signed counts, saturating at CR_COUNT_MAX (a units field:
 * one figure as large as 2^62 must not wrap it). n is negative only to take
 * back a unit of a request's encoding or a dry run's refusal: never past the
 * bottom. */
__attribute__((always_inline)) static inline uint64_t cr_count_add(uint64_t word, uint64_t n)
{
    int64_t sum;
    if (__builtin_add_overflow((int64_t)word, (int64_t)n, &sum))
        return (uint64_t)((int64_t)n > 0 ? INT64_MAX : INT64_MIN);
    return (uint64_t)sum;
}

/* cr_count_bump of a units field, saturating. */
__attribute__((always_inline)) static inline void cr_count_bump_units(_Atomic uint64_t *word,
                                                                      uint64_t n)
{
    atomic_store_explicit(word, cr_count_add(atomic_load_explicit(word, memory_order_relaxed), n),
                          memory_order_relaxed);
}

/* The calling thread's own cell of `counts`, or NULL: no slot yet (or none
 * to be had), or a lane of another process (a fork child's handle). */
__attribute__((always_inline)) static inline cr_counter_cell *cr_own_cell(const cr_counts *counts)
{
    const unsigned slot = cr_counter_slot - 1u; /* 0 wraps past the slots */
    if (__builtin_expect(
            slot < CR_COUNTER_SLOTS && counts->lane != NULL &&
                (counts->pid == 0 ||
                 counts->pid == atomic_load_explicit(&cr_own_pid_cache, memory_order_relaxed)),
            1))
        return &counts->lane->cell[slot];
    return NULL;
}

/* Adds `na` to field `fa` and `nb` to the units field `fb` (saturating) in
 * the thread's own cell. */
__attribute__((always_inline)) static inline void cr_count2(const cr_counts *counts, unsigned fa,
                                                            uint64_t na, unsigned fb, uint64_t nb)
{
#ifndef CR_NO_COUNTERS
    cr_counter_cell *cell = cr_own_cell(counts);
    if (__builtin_expect(cell != NULL, 1)) {
        cr_count_bump(&cell->n[fa], na);
        if (nb != 0) /* a verdict of one unit; a field counted alone */
            cr_count_bump_units(&cell->n[fb], nb);
        return;
    }
    cr_count2_slow(counts, fa, na, fb, nb);
#else
    (void)counts, (void)fa, (void)na, (void)fb, (void)nb;
#endif
}

/* Adds `n` to field `f` in the thread's own cell: cr_count2 with one field. */
__attribute__((always_inline)) static inline void cr_count1(const cr_counts *counts, unsigned f,
                                                            uint64_t n)
{
#ifndef CR_NO_COUNTERS
    cr_counter_cell *cell = cr_own_cell(counts);
    if (__builtin_expect(cell != NULL, 1)) {
        cr_count_bump(&cell->n[f], n);
        return;
    }
    cr_count2_slow(counts, f, n, f, 0);
#else
    (void)counts, (void)f, (void)n;
#endif
}

/* Adds `n` units to the units field `f` alone, saturating (a rare path). */
static inline void cr_count_units(const cr_counts *counts, unsigned f, int64_t n)
{
    if (n != 0)
        cr_count2(counts, f, 0, f, (uint64_t)n);
}

/* cr_count1 returning `n`, its slow path a tail call (cr_count1_slow): for
 * an entry point's last step, which then keeps no register across a call. */
__attribute__((cold)) int64_t cr_count1_slow(const cr_counts *counts, unsigned f, int64_t n);
__attribute__((always_inline)) static inline int64_t cr_count1_tail(const cr_counts *counts,
                                                                    unsigned f, int64_t n)
{
#ifndef CR_NO_COUNTERS
    cr_counter_cell *cell = cr_own_cell(counts);
    if (__builtin_expect(cell != NULL, 1)) {
        cr_count_bump(&cell->n[f], (uint64_t)n);
        return n;
    }
    return cr_count1_slow(counts, f, n);
#else
    (void)counts, (void)f;
    return n;
#endif
}

/* A verdict of `cost` units: admitted, or refused (unfittable when the cost
 * exceeds what the limit ever admits at once). */
__attribute__((always_inline)) static inline void
cr_count_verdict(const cr_counts *counts, bool admitted, int64_t cost, int64_t most)
{
    if (__builtin_expect(admitted, 1)) {
        cr_count2(counts, CR_N_ADMITTED, 1, CR_N_UNITS_ADMITTED, (uint64_t)cost - 1);
        return;
    }
    cr_count2(counts, CR_N_REFUSED, 1, CR_N_UNITS_REFUSED, (uint64_t)cost - 1);
    if (cost > most)
        cr_count1(counts, CR_N_UNFITTABLE, 1);
}

/* One admission of `cost` units into the thread's own `cell` (the units
 * field counts the units beyond one: one word for a cost of 1). */
__attribute__((always_inline)) static inline void cr_count_admission(cr_counter_cell *cell,
                                                                     int64_t cost)
{
    cr_count_bump(&cell->n[CR_N_ADMITTED], 1);
    if (cost != 1)
        cr_count_bump_units(&cell->n[CR_N_UNITS_ADMITTED], (uint64_t)cost - 1);
}

/* cr_count_verdict and the class's count (`priority` -1: none), returning
 * CR_OK (0): out of line. */
__attribute__((cold)) int cr_count_verdict_slow(const cr_counts *counts, bool admitted,
                                                int64_t cost, int64_t most, int32_t priority);

/* cr_count_verdict (and, for a decision in the class `priority`, the class's
 * count; -1, a constant: none) as the last step of an entry point of a
 * store of this process alone (its one lane always there, and its `by` when
 * its limit has classes: `return cr_count_own_tail(..)`): the common
 * admission inline, the class's word in the same slot of `by` (a plain
 * increment, as the cell's), everything else a tail call, so that the entry
 * point calls nothing on its common path and keeps no registers. */
static inline int cr_count_own_tail(const cr_counts *counts, bool admitted, int64_t cost,
                                    int64_t most, int32_t priority)
{
#ifndef CR_NO_COUNTERS
    const unsigned slot = cr_counter_slot - 1u;
    if (__builtin_expect(admitted && slot < CR_COUNTER_SLOTS, 1)) {
        cr_count_admission(&counts->lane->cell[slot], cost);
        if (priority >= 0)
            cr_count_bump(&counts->by_lane[slot].n[cr_by_class_word(priority, true)], 1);
        return 0;
    }
    return cr_count_verdict_slow(counts, admitted, cost, most, priority);
#else
    (void)counts, (void)admitted, (void)cost, (void)most, (void)priority;
    return 0;
#endif
}

/* cr_count_own_tail for an admission of a store of this process or of a
 * region (its lane checked as cr_count2 checks it). */
static inline int cr_count_admitted_tail(const cr_counts *counts, int64_t cost)
{
#ifndef CR_NO_COUNTERS
    cr_counter_cell *cell = cr_own_cell(counts);
    if (__builtin_expect(cell != NULL, 1)) {
        cr_count_admission(cell, cost);
        return 0;
    }
    return cr_count_verdict_slow(counts, true, cost, INT64_MAX, -1);
#else
    (void)counts, (void)cost;
    return 0;
#endif
}

/* Adds `n` to word `f` of the counts by plan and class, in the thread's own
 * cell (the overflow's, atomically, when it has none). A store that counts
 * under a plan or a class has them. */
__attribute__((cold)) void cr_count_by_slow(const cr_counts *counts, unsigned f, uint64_t n);
__attribute__((always_inline)) static inline void cr_count_by(const cr_counts *counts, unsigned f,
                                                              uint64_t n)
{
#ifndef CR_NO_COUNTERS
    const unsigned slot = cr_counter_slot - 1u; /* the cell of the block's, in `by` */
    if (__builtin_expect(
            slot < CR_COUNTER_SLOTS && counts->by_lane != NULL &&
                (counts->pid == 0 ||
                 counts->pid == atomic_load_explicit(&cr_own_pid_cache, memory_order_relaxed)),
            1)) {
        cr_count_bump(&counts->by_lane[slot].n[f], n);
        return;
    }
    cr_count_by_slow(counts, f, n);
#else
    (void)counts, (void)f, (void)n;
#endif
}

/* A verdict's request by its plan (CR_PLAN_DEFAULT: nothing here) and its
 * class (-1: none); `n` 1, or -1 to take one back. Constants fold it away. */
__attribute__((always_inline)) static inline void cr_count_by_verdict(const cr_counts *counts,
                                                                      int32_t plan,
                                                                      int32_t priority,
                                                                      bool admitted, uint64_t n)
{
    if (__builtin_expect(plan != CR_PLAN_DEFAULT, 0))
        cr_count_by(counts, cr_by_plan_word(plan, admitted), n);
    if (__builtin_expect(priority >= 0, 0))
        cr_count_by(counts, cr_by_class_word(priority, admitted), n);
}

/* cr_count_verdict and cr_count_by_verdict as one, for a decision under a
 * plan or in a class: an admission counted in the thread's own cell, its
 * plan's and class's in the same slot of `by` (which a store counting under
 * a plan or a class has), the slot found once. */
__attribute__((always_inline)) static inline void cr_count_verdict_by(const cr_counts *counts,
                                                                      bool admitted, int64_t cost,
                                                                      int64_t most, int32_t plan,
                                                                      int32_t priority)
{
#ifndef CR_NO_COUNTERS
    cr_counter_cell *cell = cr_own_cell(counts);
    if (__builtin_expect(admitted && cell != NULL && counts->by_lane != NULL, 1)) {
        cr_by_cell *by = &counts->by_lane[cr_counter_slot - 1u]; /* the cell's slot */
        cr_count_admission(cell, cost);
        if (plan != CR_PLAN_DEFAULT)
            cr_count_bump(&by->n[cr_by_plan_word(plan, true)], 1);
        if (priority >= 0)
            cr_count_bump(&by->n[cr_by_class_word(priority, true)], 1);
        return;
    }
#endif
    cr_count_verdict(counts, admitted, cost, most);
    cr_count_by_verdict(counts, plan, priority, admitted, 1);
}

/* The class of a decision `op` (its index), or -1: none. */
static inline int32_t cr_op_priority(const cr_op *op)
{
    return op->kind == CR_OP_PRIORITY ? (int32_t)op->max_wait_ns : -1;
}

/* Counts what `op` did (cellrate/stats.h, cr_stats): called once per operation,
 * with the limit that decided it, the plan it went under and *ok as cr_apply
 * set it. Always inlined:
 * the kind of `op` folds away in each entry point, as it does in cr_apply
 * (an out-of-line call would take the op's address and compile every kind
 * into every entry point). */
CR_HOT void cr_count_op(const cr_counts *counts, const cr_limit *limit, const cr_op *op,
                        bool commit, bool ok, int32_t plan)
{
    if (!commit || op->uncounted)
        return; /* a peek; a commit its caller counts (check_all) */
    switch (op->kind) {
    case CR_OP_DECIDE:
    case CR_OP_PRIORITY:
        if (plan == CR_PLAN_DEFAULT && op->kind == CR_OP_DECIDE)
            cr_count_verdict(counts, ok, op->cost, limit->burst); /* as without plans */
        else
            cr_count_verdict_by(counts, ok, op->cost, limit->burst, plan, cr_op_priority(op));
        return;
    case CR_OP_RESERVE: /* a reservation not made is a wait's to count (cr_wait) */
        if (ok) {
            cr_count_verdict(counts, true, op->cost, limit->burst);
            cr_count_by_verdict(counts, plan, -1, true, 1);
        }
        return;
    case CR_OP_CHARGE: /* what it committed: the cost, or less when clipped */
        cr_count_verdict(counts, true, op->taken, limit->burst);
        cr_count_by_verdict(counts, plan, -1, true, 1);
        return;
    case CR_OP_TAKE:
        if (op->cost > 0) {
            cr_count_verdict(counts, op->taken > 0, op->taken > 0 ? op->taken : op->cost,
                             INT64_MAX);
            cr_count_by_verdict(counts, plan, -1, op->taken > 0, 1);
        }
        return;
    case CR_OP_REFUND: /* what it gave back; units_admitted never falls */
        cr_count_units(counts, CR_N_UNITS_REFUNDED, op->taken);
        return;
    default:
        return;
    }
}

/* A refusal that a dry run let through: refused becomes would_refuse (also
 * in its plan's and class's counts). */
static inline void cr_count_would_refuse(const cr_counts *counts, int64_t cost, int32_t plan,
                                         int32_t priority)
{
    cr_count2(counts, CR_N_REFUSED, (uint64_t)-1, CR_N_UNITS_REFUSED, 1 - (uint64_t)cost);
    cr_count1(counts, CR_N_WOULD_REFUSE, 1);
    cr_count_by_verdict(counts, plan, priority, false, (uint64_t)-1);
}

/* A block of this process alone (zeroed, one lane); NULL when out of memory. */
cr_counter_block *cr_counters_new(cr_counts *counts);
/* The same in `memory` (CR_COUNTER_BLOCK_SIZE(1) bytes, aligned to
 * CR_COUNTER_SPACING) of the store's own allocation: on the pages its
 * decisions read anyway, so that counting costs no TLB entry more. */
void cr_counters_place(cr_counts *counts, void *memory);
/* Binds `counts` to a region's block (and its counts by plan and class, `by`;
 * NULL: none): claims a free lane (or one of a dead process), else counts in
 * the overflow. */
void cr_counters_join(cr_counts *counts, cr_counter_block *block, cr_by_block *by, uint32_t nlanes);
/* Gives the lane back (a region's), or frees the block (this process's). */
void cr_counters_leave(cr_counts *counts);
/* Gives a store of this process counts by plan and class (zeroed): false
 * when out of memory. */
bool cr_counters_by_new(cr_counts *counts);
/* The counts since the last reset into out[CR_COUNTER_FIELDS], decoded (the
 * units fields hold units, requests added back), each in [0, CR_COUNT_MAX]:
 * a count at CR_COUNT_MAX reads as it, reset or not; `evicted` (a keyed
 * table's word kept elsewhere) takes the place of CR_N_EVICTED. */
void cr_counters_read(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                      uint64_t out[CR_COUNTER_FIELDS]);
/* Sets the baseline to the counts now (a region's caller holds its change
 * lock: resets of other processes). */
void cr_counters_reset(cr_counter_block *block, cr_by_block *by, uint32_t nlanes, uint64_t evicted);
/* reset_stats of a store: cr_counters_reset under `lock` (a region's change
 * lock; NULL for a store of this process alone): CR_E_SHARED_LOCK when it
 * stays held. */
cr_status cr_counts_reset(const cr_counts *counts, cr_lock *lock, uint64_t evicted);
/* The counts of a rate limit's block (`evicted`: its table's word) and of a
 * concurrency limit's: `in_flight`, the units held, counted in the cells;
 * `peak`, whether the block's total is kept (else peak 0, not tracked). */
void cr_counters_rate_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                            cr_stats *out);
void cr_counters_gauge_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t in_flight,
                             bool peak, cr_gauge_stats *out);
/* The requests by plan and by class of `counts` since the last reset, each
 * in [0, CR_COUNT_MAX]: plans[p] (admitted, refused) for p >= 1 as counted,
 * plans[0] the block's less theirs; classes[c] as counted, rest[] the
 * block's less every class's (the requests of no class). All zero (rest the
 * block's) without counts by plan and class. */
void cr_counters_by_read(const cr_counts *counts, uint64_t plans[CR_PLANS_MAX][2],
                         uint64_t classes[CR_PRIORITIES_MAX][2], uint64_t rest[2]);
/* cr_stats_by of `counts`: the plans of `plans` (NULL or "default" alone:
 * none), the classes of `limit`. */
void cr_counters_stats_by(const cr_counts *counts, const cr_plan_table *plans,
                          const cr_limit *limit, cr_stats_by *out);
/* Concurrency with a peak: `delta` units now held more (or fewer) in the
 * block's total; raises the peak. Locked instructions on one shared line. */
void cr_counters_hold(const cr_counts *counts, int64_t delta);

#endif
