/* Shared by the core's sources; not part of the public API. */
#ifndef CELLRATE_INTERNAL_H
#define CELLRATE_INTERNAL_H

#include "cellrate.h"
#include "counters.h"
#include "decision.h"

#include <stdatomic.h>

/* Validates `cost` and `now_ns` (a time before the horizon of
 * docs/design.md §1, or CR_CLOCK). */
static inline cr_status cr_check_args(int64_t now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if ((now_ns < 0 && now_ns != CR_CLOCK) || now_ns >= CR_HORIZON_NS)
        return CR_E_NOW;
    return CR_OK;
}

/*
 * The fast clock's line (core/fastclock.c): ns = ns0 + (tsc - tsc0) * mult /
 * 2^32 for tsc0 <= tsc < tsc0 + span, under a seqlock (`seq` odd while the
 * line moves). One cache line: a reading touches no other. span * mult <
 * 2^64, so the product needs no 128 bits. span 0: no line (calibrating, after
 * a jump of the counter, or no trusted TSC), every reading takes the slow path.
 * `real_offset`: CLOCK_REALTIME - CLOCK_MONOTONIC when the line was anchored,
 * so that the window algorithms read the realtime clock from the line too.
 */
typedef struct {
    _Alignas(64) _Atomic uint64_t seq;
    _Atomic uint64_t tsc0;
    _Atomic int64_t ns0;
    _Atomic uint64_t mult; /* ns per tick, 32.32 fixed point */
    _Atomic uint64_t span; /* ticks from tsc0 that the line holds */
    _Atomic int64_t real_offset;
    /* read by the thread that moves the line alone: the counter's ns per tick
     * (32.32) over the last window, and the last pair read from both clocks */
    _Alignas(64) _Atomic uint64_t rate;
    _Atomic uint64_t sample_tsc;
    _Atomic int64_t sample_ns;
} cr_fast_line;

/* hidden: the stores reach it without a load from the GOT */
extern __attribute__((visibility("hidden"))) cr_fast_line cr_fast_clock_line;

/* The time on `line` at the counter's reading `tsc` into `ns`; false when the
 * line does not hold `tsc` (expired, not yet begun, moving or no line). The
 * checks are branches, off the chain from the counter to the time. */
__attribute__((always_inline)) static inline bool
cr_fast_line_at(const cr_fast_line *line, uint64_t tsc, bool realtime, int64_t *ns)
{
    /* acquire loads (plain loads on x86): the second load of `seq` is not
     * made before them (a fence would do it too, but ThreadSanitizer cannot
     * follow fences) */
    uint64_t seq = atomic_load_explicit(&line->seq, memory_order_acquire);
    uint64_t tsc0 = atomic_load_explicit(&line->tsc0, memory_order_acquire);
    int64_t ns0 = atomic_load_explicit(&line->ns0, memory_order_acquire);
    uint64_t mult = atomic_load_explicit(&line->mult, memory_order_acquire);
    uint64_t span = atomic_load_explicit(&line->span, memory_order_acquire);
    uint64_t ticks = tsc - tsc0; /* a counter behind tsc0 wraps past span */
    *ns = ns0 + (int64_t)((ticks * mult) >> 32);
    if (realtime)
        *ns += atomic_load_explicit(&line->real_offset, memory_order_acquire);
    /* an odd `seq` (moving) never equals its even self */
    return ticks < span &&
           atomic_load_explicit(&line->seq, memory_order_relaxed) == (seq & ~(uint64_t)1);
}

/* The monotonic time on `line` (cr_fast_line_at). */
static inline bool cr_fast_line_time(const cr_fast_line *line, uint64_t tsc, int64_t *ns)
{
    return cr_fast_line_at(line, tsc, false, ns);
}

/* The counter, unfenced (as quanta reads it); 0 where there is none. */
static inline uint64_t cr_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* The counter, read after every earlier instruction has run and every
 * earlier load is done (rdtscp): a time no earlier than one another thread
 * or process published and this one has seen. */
static inline uint64_t cr_tsc_ordered(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned int core;
    return __builtin_ia32_rdtscp(&core);
#else
    return 0;
#endif
}

/* The line's time when it does not hold the counter: moves the line, or
 * reads CLOCK_MONOTONIC (core/fastclock.c). `ordered`: read the counter as
 * cr_tsc_ordered does. */
__attribute__((cold)) int64_t cr_fast_clock_slow(bool ordered);

/* cr_fast_clock_ns, inlined into the stores' entry points: one cache line
 * read, the counter, one multiply. */
static inline int64_t cr_fast_clock_now(void)
{
    int64_t now_ns;
    if (__builtin_expect(cr_fast_line_time(&cr_fast_clock_line, cr_tsc(), &now_ns), 1))
        return now_ns;
    return cr_fast_clock_slow(false);
}

/* The "monotonic" clock: the same line read with the counter ordered, so that every thread and process sees one timeline, as with
 * clock_gettime; clock_gettime itself where the TSC is not trusted. */
static inline int64_t cr_monotonic_now(void)
{
    int64_t now_ns;
    if (__builtin_expect(cr_fast_line_time(&cr_fast_clock_line, cr_tsc_ordered(), &now_ns), 1))
        return now_ns;
    return cr_fast_clock_slow(true);
}

/* Re-anchors `line` on the pair (`real` from CLOCK_MONOTONIC, `tsc` from the
 * counter, read together) and returns the time now; the caller made `seq`
 * odd. A counter that jumped (ran back, or ahead of CLOCK_MONOTONIC) drops
 * the line: the time is `real` until the rate is measured again. */
int64_t cr_fast_line_move(cr_fast_line *line, int64_t real, uint64_t tsc);

/* The line's time on the clock of a gcra or token_bucket limit (fast, or
 * the default's ordered reading) into *ns; false when the line does not
 * hold it and the slow path must read it. An entry point that reads the
 * clock by this alone calls nothing on its common path: it keeps no
 * registers. */
static inline bool cr_steady_line_time(const cr_limit *limit, int64_t *ns)
{
    return cr_fast_line_time(&cr_fast_clock_line, limit->fast_clock ? cr_tsc() : cr_tsc_ordered(),
                             ns);
}

/* CLOCK_REALTIME from the line read unfenced, as cr_fast_clock_now reads
 * CLOCK_MONOTONIC: the offset between the two as the line's anchor found it,
 * so a step of the realtime clock shows from the next anchor on (2 ms, two
 * at most); clock_gettime itself where the TSC is not trusted. */
__attribute__((cold)) int64_t cr_fast_realtime_slow(void);
static inline int64_t cr_fast_realtime_now(void)
{
    int64_t now_ns;
    if (__builtin_expect(cr_fast_line_at(&cr_fast_clock_line, cr_tsc(), true, &now_ns), 1))
        return now_ns;
    return cr_fast_realtime_slow();
}

/* The limit's clock now: monotonic, fast, or realtime (window algorithms).
 * The first two are within a few ms of CLOCK_MONOTONIC at worst (a jump of
 * the counter), so below the horizon. */
static inline int64_t cr_read_clock(const cr_limit *limit)
{
    if (!cr_is_window(limit))
        return limit->fast_clock ? cr_fast_clock_now() : cr_monotonic_now();
    int64_t now_ns = cr_fast_realtime_now();
    /* a realtime clock set before 1970 or past 2116: time stops, only stricter */
    if (now_ns < 0)
        return 0;
    return now_ns < CR_HORIZON_NS ? now_ns : CR_HORIZON_NS - 1;
}

/* `now_ns`, with CR_CLOCK read from the limit's clock. */
static inline int64_t cr_resolve_now(const cr_limit *limit, int64_t now_ns)
{
    return now_ns != CR_CLOCK ? now_ns : cr_read_clock(limit);
}

/* Counts what `op` did (cellrate.h, cr_stats): called once per operation,
 * with the limit that decided it and *ok as cr_apply set it. Always inlined:
 * the kind of `op` folds away in each entry point, as it does in cr_apply
 * (an out-of-line call would take the op's address and compile every kind
 * into every entry point). */
CR_HOT void cr_count_op(const cr_counts *counts, const cr_limit *limit, const cr_op *op,
                        bool commit, bool ok)
{
    if (!commit)
        return; /* a peek */
    switch (op->kind) {
    case CR_OP_DECIDE:
        cr_count_verdict(counts, ok, op->cost, limit->burst);
        return;
    case CR_OP_RESERVE: /* a reservation not made is a wait's to count (cr_wait) */
        if (ok)
            cr_count_verdict(counts, true, op->cost, limit->burst);
        return;
    case CR_OP_CHARGE:
        cr_count_verdict(counts, true, op->cost, limit->burst);
        return;
    case CR_OP_TAKE:
        if (op->cost > 0)
            cr_count_verdict(counts, op->taken > 0, op->taken > 0 ? op->taken : op->cost,
                             INT64_MAX);
        return;
    case CR_OP_REFUND:
        cr_count1(counts, CR_N_UNITS_ADMITTED, (uint64_t)-op->cost);
        return;
    default:
        return;
    }
}

/* A refusal that a dry run let through: refused becomes would_refuse. */
static inline void cr_count_would_refuse(const cr_counts *counts, int64_t cost)
{
    cr_count2(counts, CR_N_REFUSED, (uint64_t)-1, CR_N_UNITS_REFUSED, 1 - (uint64_t)cost);
    cr_count1(counts, CR_N_WOULD_REFUSE, 1);
}

/* A composite's item that admitted, given back: counts as no decision. */
static inline void cr_count_given_back(const cr_counts *counts, int64_t cost)
{
    cr_count2(counts, CR_N_ADMITTED, (uint64_t)-1, CR_N_UNITS_ADMITTED, 1 - (uint64_t)cost);
}

/* Keys holding a slot in a keyed table's `nbuckets` buckets; the keys
 * holding units in a keyed gauge table's, and the units held in all of its
 * gauges (the one gauge's without `keyed`: no keys). Read-only: an
 * inspection's too. */
size_t cr_keyed_count_slots(const void *buckets, uint32_t nbuckets);
void cr_gauge_count(const void *gauges, uint32_t nbuckets, int64_t limit, bool keyed,
                    uint64_t *keys, uint64_t *held);

/* The counts of a rate limit's block (`evicted`: its table's word) and of a
 * concurrency limit's. */
void cr_counters_rate_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t evicted,
                            cr_stats *out);
/* `in_flight`: the units held, counted in the cells; `peak`: whether the
 * block's total is kept (else peak 0, not tracked). */
void cr_counters_gauge_stats(const cr_counter_block *block, uint32_t nlanes, uint64_t in_flight,
                             bool peak, cr_gauge_stats *out);
struct cr_region_s;
/* reset_stats of a store whose region is `region` (base NULL: none), under
 * the region's change lock: CR_E_SHARED_LOCK when it stays held. */
cr_status cr_counts_reset(const cr_counts *counts, struct cr_region_s *region, uint64_t evicted);

/* A process's waiters in line, per key (core/line.c; docs/design.md §9):
 * each key's tail, the instant from which its next waiter takes its turn,
 * changed by `apply` under the table's lock. A slot whose tail has passed is
 * free; cr_lines_apply is false (nothing done) when none is. */
typedef struct cr_lines cr_lines;
typedef int64_t (*cr_line_apply)(int64_t tail, void *context);
cr_lines *cr_lines_new(uint32_t count);
void cr_lines_free(cr_lines *lines);
bool cr_lines_apply(cr_lines *lines, uint64_t fingerprint, int64_t now_ns, cr_line_apply apply,
                    void *context);
/* The latest tail any line of the table has had (lock-free): no line holds
 * a waiter once it has passed. */
int64_t cr_lines_latest(const cr_lines *lines);

/* The line table of a store (with `make`, made on its first use; NULL: none,
 * or out of memory), and the fingerprint of its key there (a limiter's one
 * line: 1). */
cr_lines *cr_limiter_lines(cr_limiter *limiter, uint64_t *fingerprint, bool make);
cr_lines *cr_keyed_lines(cr_keyed *keyed, const void *key, size_t key_len, uint64_t *fingerprint,
                         bool make);

/* The counters of an item's store (cr_item: a limiter or a keyed table). */
const cr_counts *cr_limiter_counts(const cr_limiter *limiter);
const cr_counts *cr_keyed_counts(const cr_keyed *keyed);

/* The full decision into `out`. */
static inline int64_t cr_decision_make(const cr_limit *limit, int64_t state, int64_t now_ns,
                                       int64_t cost, cr_decision *out)
{
    bool allowed;
    return cr_decision_core(limit, state, now_ns, cost, out, &allowed);
}

/* Whether `cost` would be admitted now, writing nothing (check_all's peek:
 * the allow() path, without remaining or times). */
cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);
cr_status cr_keyed_peek_allowed(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                int64_t cost, bool *allowed);

/* Whether a change to `b` would change nothing of `a` (its decisions, and the
 * rate and period it reports). */
static inline bool cr_limit_identical(const cr_limit *a, const cr_limit *b)
{
    return cr_limit_same(a, b) && a->rate == b->rate && a->period_s == b->period_s;
}

/* The state of a key with everything used at `now_ns` under `limit`: what a
 * keyed table carries a live key to when its limit is no longer known
 * (core/carry.c; docs/design.md §4). */
int64_t cr_full(const cr_limit *limit, int64_t now_ns);

struct cr_region_s;

/* A limit a store has had: never changed once made, freed with the store.
 * Generations count changes: 0 for the first limit (of the store, or of the
 * shared region), one more per change. */
typedef struct cr_generation cr_generation;
struct cr_generation {
    cr_limit limit;
    uint64_t generation;
    int64_t changed_at;         /* the instant of the change that made it current */
    const cr_generation *older; /* the one this process knew before (NULL: none) */
};

/* A state written under generation `since`, carried through every change
 * up to `current`, each at its instant. The limits come from the chain of
 * `current`, else from `region` (NULL for a store of one process); a state
 * whose history is gone is taken as everything used at `now_ns`: never a
 * fresh allowance. */
int64_t cr_carry_since(const struct cr_region_s *region, const cr_generation *current,
                       uint64_t since, int64_t state, int64_t now_ns);

/* Two words changed together by one 16-byte compare-and-swap: a keyed
 * table's slot {fingerprint, state}, a shared Limiter's {generation, state}. */
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

/* A fresh 128-bit hash seed from the kernel's random source (core/seed.c). */
cr_status cr_random_seed(uint64_t seed[2]);

/* A stripe lock of the keyed table: one word, 0 when free, safe in a shared
 * region whatever its content (see lock.c). */
typedef _Atomic uint64_t cr_lock;

/* Takes `lock`, waiting for its holder; takes it over from a holder that has
 * died or from a damaged word. CR_E_SHARED_LOCK when a living holder keeps it
 * past cr_lock_timeout_ns: the wait is bounded. */
cr_status cr_lock_acquire(cr_lock *lock);
void cr_lock_release(cr_lock *lock);
/* This process's id (kept; forgotten in a fork child). */
uint32_t cr_own_pid(void);
/* cr_own_pid's kept id, for a path that must not call: 0 until cr_own_pid
 * first runs in the process (again in a fork child). */
extern __attribute__((visibility("hidden"))) _Atomic uint32_t cr_own_pid_cache;
/* Whether process `pid` runs (kill(pid, 0), and /proc for a zombie): the
 * liveness a lock's and a holding's holder is judged by. */
bool cr_process_alive(uint32_t pid);
/* The bound on a wait, in ns (1 s); tests shorten it. */
extern int64_t cr_lock_timeout_ns;

/* What a shared region must hold; cr_region_open fills in the limit's
 * fields and the offsets. */
typedef struct {
    uint32_t kind;       /* CR_REGION_LIMITER, CR_REGION_KEYED or CR_REGION_CONCURRENCY */
    uint32_t algorithm;  /* cr_algorithm */
    uint32_t flags;      /* CR_REGION_PEAK */
    int64_t emission_ns; /* concurrency: the lease (0 for a rate limit: its limit is recorded) */
    int64_t burst;       /* concurrency: the limit */
    int64_t capacity;
    uint32_t nbuckets;
    uint32_t nstripes;
    size_t buckets_size;
    size_t stripes_offset;
    size_t changes_offset;
    size_t counters_offset;
    size_t buckets_offset;
    size_t total_size;
} cr_region_spec;

enum { CR_REGION_LIMITER = 1, CR_REGION_KEYED = 2, CR_REGION_CONCURRENCY = 3 };
/* A flag of a region's identity: a concurrency region that tracks the peak
 * (every process keeps the counters' total, or the peak is wrong). */
enum { CR_REGION_PEAK = 1 };

/* A mapped region: pointers into the mapping. */
typedef struct cr_region_s {
    void *base;
    size_t size;
    uint64_t seed[2];
    cr_lock *stripes;
    void *buckets;
    size_t changes_offset;
    _Atomic uint64_t *evictions;
    cr_pair *limiter_state;     /* a Limiter's {generation, state} */
    cr_counter_block *counters; /* the region's counters (CR_COUNTER_LANES lanes) */
} cr_region;

/* The limit history a region keeps: a decision can carry a state written up
 * to this many changes ago. */
#define CR_REGION_RECORDS 256

/* Opens or creates the region at `path` for a store of `spec` and `limit`
 * (see cr_limiter_open); `limit` NULL for a store without a rate, which sets
 * spec's algorithm, emission_ns and burst itself. */
cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode);
void cr_region_close(cr_region *region);

/* The region's current generation: 0 at its creation, one more per change. */
uint64_t cr_region_generation(const cr_region *region);
/* The limit of `generation` and the instant it became current, built for
 * this process as `like` (its clock); CR_E_SHARED_CORRUPT when the region no
 * longer holds it (over CR_REGION_RECORDS changes ago) or holds no limit
 * this version writes. */
cr_status cr_region_limit(const cr_region *region, uint64_t generation, const cr_limit *like,
                          cr_limit *out, int64_t *changed_at);
/* Makes `limit` the region's, as of `changed_at`; the caller holds the
 * change lock. Returns the new generation. */
uint64_t cr_region_publish(cr_region *region, const cr_limit *limit, int64_t changed_at);
/* Serializes changes across the processes; the cursor of the keyed table's
 * sweep (docs/design.md §4), under it. */
cr_lock *cr_region_change_lock(cr_region *region);
uint64_t *cr_region_sweep_cursor(cr_region *region);
/* The word cr_region_generation reads, for a store's hot path. */
const _Atomic uint64_t *cr_region_generation_word(const cr_region *region);
/* `next` as the region's current generation, following `current` (whose
 * clock it keeps); next->generation == current->generation when nothing
 * changed. */
cr_status cr_region_adopt(const cr_region *region, const cr_generation *current,
                          cr_generation *next);
/* At opening, under the change lock: `current` becomes the region's limit
 * when it is `limit`'s, else `limit` replaces it (the region's in
 * *replaced, *changed set) or, with CR_CHANGE_REFUSE, the opening fails
 * with CR_E_SHARED_RATE / CR_E_SHARED_BURST. */
cr_status cr_region_join(cr_region *region, const cr_limit *limit, cr_on_change on_change,
                         int64_t now_ns, cr_generation *current, cr_limit *replaced, bool *changed);

#endif
