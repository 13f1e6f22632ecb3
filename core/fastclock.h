/*
 * The clock of a limit, read inline by the stores (docs/design.md §2): the
 * fast clock's line (core/fastclock.c moves it), read unfenced ("fast") or
 * with the counter ordered ("monotonic"), and the realtime clock of the
 * window algorithms from the same line. Not part of the public API.
 */
#ifndef CELLRATE_FASTCLOCK_H
#define CELLRATE_FASTCLOCK_H

#include "cellrate/clock.h"
#include "decide.h"

#include <stdatomic.h>

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

/* The line's time on a window algorithm's clock into *ns: CLOCK_REALTIME
 * from the line read unfenced, as cr_fast_realtime_now reads it; false when
 * the line does not hold it, or the time is outside [0, horizon), which
 * cr_read_clock's slow path clamps. */
static inline bool cr_window_line_time(int64_t *ns)
{
    return cr_fast_line_at(&cr_fast_clock_line, cr_tsc(), true, ns) &&
           (uint64_t)*ns < (uint64_t)CR_HORIZON_NS;
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

#endif
