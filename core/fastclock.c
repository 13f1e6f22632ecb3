/*
 * The fast clock: CLOCK_MONOTONIC extrapolated from the CPU's time-stamp
 * counter, without the serialising instruction and the kernel's seqlock
 * that make clock_gettime cost ~30 ns on some machines.
 *
 * The counter is read without a fence (as quanta, governor's clock, does):
 * a thread's readings never go back, but the CPU may read the counter before
 * a load that precedes it completes, so a reading may be earlier than one
 * another thread made and published just before it: by up to a few
 * microseconds where a load crosses cores (5.8 us seen on a 2-vCPU guest).
 * An early time only makes a decision stricter.
 *
 * It is used only where the TSC is invariant (CPUID) and the kernel itself
 * keeps time with it (clocksource "tsc"): then the counter runs at one rate
 * on every core and every core reads the same value. Time is the line of
 * cr_fast_line (core/fastclock.h), shared by the threads of the process; the
 * reading itself is inlined into the stores (cr_fast_clock_now). When a
 * reading falls past the line's end (every WINDOW_NS), the line is
 * re-anchored here: the next starts at CLOCK_MONOTONIC, or at the old line's
 * end where that is later (so it never steps back), with a slope that brings
 * it onto CLOCK_MONOTONIC by the end of its window, as NTP slews a clock.
 *
 * A counter that jumps (a VM migrated to another host, a suspend that resets
 * it) is caught at that re-anchor, which a reading past the line's end or
 * before its start always triggers: the rate measured over the window
 * disagrees with the last one, or the counter ran back, or the line's end
 * ran more than 1 ms ahead of CLOCK_MONOTONIC. The line is then dropped and the time is
 * CLOCK_MONOTONIC until the rate is measured anew: no decision reads a line
 * that a jump carried far ahead or behind. Between two re-anchors a reading
 * is at most the line's end, two windows past its anchor.
 */
#include "fastclock.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#define WINDOW_NS 2000000 /* re-anchor every 2 ms */
#define RESYNC_NS 1000000 /* a line's end further ahead of CLOCK_MONOTONIC: a jump */
#define RATE_SHIFT 8      /* the rate changed by more than 1/256 over a window: a jump */

cr_fast_line cr_fast_clock_line;

enum { UNKNOWN, USABLE, UNUSABLE };
static _Atomic int usable = UNKNOWN;

#if HAVE_TSC
static bool tsc_is_trusted(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8)))
        return false; /* not invariant: the rate changes with power states */
    if (!__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 27)))
        return false; /* no rdtscp, the default clock's ordered read */
    char source[32] = {0};
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f)
        return false;
    bool tsc = fgets(source, sizeof source, f) && strcmp(source, "tsc\n") == 0;
    fclose(f);
    return tsc; /* the kernel checked that the cores agree, or it would not use it */
}
#else
static bool tsc_is_trusted(void) { return false; }
#endif

bool cr_fast_clock_is_tsc(void)
{
    int state = atomic_load_explicit(&usable, memory_order_relaxed);
    if (state == UNKNOWN) {
        state = tsc_is_trusted() ? USABLE : UNUSABLE;
        atomic_store_explicit(&usable, state, memory_order_relaxed);
    }
    return state == USABLE;
}

__extension__ typedef unsigned __int128 wide;

/* CLOCK_MONOTONIC and the TSC read together: of three tries, the one whose
 * clock read the fewest ticks bracketed, so a preempted try is not taken. */
static void read_pair(int64_t *real, uint64_t *tsc)
{
    uint64_t narrowest = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t before = cr_tsc_ordered();
        int64_t ns = cr_clock_ns();
        uint64_t after = cr_tsc_ordered();
        if (after - before < narrowest) {
            narrowest = after - before;
            *real = ns;
            *tsc = before + (after - before) / 2;
        }
    }
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC: a realtime read against the middle of
 * the two monotonic reads around it, the narrowest of three tries. */
static int64_t real_offset(void)
{
    int64_t offset = 0, narrowest = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        int64_t before = cr_clock_ns();
        int64_t real = cr_realtime_ns();
        int64_t after = cr_clock_ns();
        if (after - before < narrowest) {
            narrowest = after - before;
            offset = real - (before + (after - before) / 2);
        }
    }
    return offset;
}

/* Release stores: none is seen before the odd `seq` that precedes it, so a
 * reader that saw one sees `seq` changed on its second load. */
static void store_line(cr_fast_line *line, uint64_t tsc0, int64_t ns0, uint64_t mult, uint64_t span)
{
    atomic_store_explicit(&line->tsc0, tsc0, memory_order_release);
    atomic_store_explicit(&line->ns0, ns0, memory_order_release);
    atomic_store_explicit(&line->mult, mult, memory_order_release);
    atomic_store_explicit(&line->span, span, memory_order_release);
}

static void store_sample(cr_fast_line *line, int64_t real, uint64_t tsc, uint64_t rate)
{
    atomic_store_explicit(&line->sample_tsc, tsc, memory_order_relaxed);
    atomic_store_explicit(&line->sample_ns, real, memory_order_relaxed);
    atomic_store_explicit(&line->rate, rate, memory_order_relaxed);
}

/* Drops the line and starts measuring the rate from (real, tsc). */
static int64_t restart(cr_fast_line *line, int64_t real, uint64_t tsc)
{
    store_line(line, 0, 0, 0, 0);
    store_sample(line, real, tsc, 0);
    return real;
}

int64_t cr_fast_line_move(cr_fast_line *line, int64_t real, uint64_t tsc)
{
    uint64_t tsc0 = atomic_load_explicit(&line->tsc0, memory_order_relaxed);
    int64_t ns0 = atomic_load_explicit(&line->ns0, memory_order_relaxed);
    uint64_t mult = atomic_load_explicit(&line->mult, memory_order_relaxed);
    uint64_t span = atomic_load_explicit(&line->span, memory_order_relaxed);
    if (tsc - tsc0 < span)
        return ns0 + (int64_t)(((tsc - tsc0) * mult) >> 32); /* moved meanwhile */
    uint64_t sample_tsc = atomic_load_explicit(&line->sample_tsc, memory_order_relaxed);
    int64_t sample_ns = atomic_load_explicit(&line->sample_ns, memory_order_relaxed);
    uint64_t last_rate = atomic_load_explicit(&line->rate, memory_order_relaxed);

    if (sample_tsc == 0 || tsc <= sample_tsc || real < sample_ns)
        return restart(line, real, tsc); /* the first call, or the counter ran back */
    if (real - sample_ns < WINDOW_NS / 2) {
        if (span == 0)
            return real;                 /* too soon to measure the rate */
        return restart(line, real, tsc); /* a line's length of ticks in half its time */
    }

    /* The TSC's rate over the last window, measured on CLOCK_MONOTONIC. */
    uint64_t rate = (uint64_t)(((wide)(uint64_t)(real - sample_ns) << 32) / (tsc - sample_tsc));
    if (rate == 0)
        return restart(line, real, tsc);
    uint64_t drift = rate > last_rate ? rate - last_rate : last_rate - rate;
    if (last_rate != 0 && drift > last_rate >> RATE_SHIFT)
        return restart(line, real, tsc); /* the counter jumped within the window */
    uint64_t window_ticks = (uint64_t)(((wide)WINDOW_NS << 32) / rate);
    if (window_ticks == 0)
        return restart(line, real, tsc);

    /* Start the next line at CLOCK_MONOTONIC, or at the old line's end (the
     * latest time it can have given) where that is later: never back, and
     * never a slope extrapolated past the end (a re-anchor made late, by a
     * thread preempted or by no reading for a while, would carry a slope
     * that was not 1 that far). An end far ahead of CLOCK_MONOTONIC (the
     * counter ran ahead) drops the line. */
    int64_t at = real;
    if (span != 0) {
        int64_t end = ns0 + (int64_t)((span * mult) >> 32);
        if (end > real + RESYNC_NS)
            return restart(line, real, tsc);
        if (end > real)
            at = end;
    }
    /* Aim at CLOCK_MONOTONIC one window on, at between half and twice its pace
     * (so span * mult <= 2 * WINDOW_NS * 2^32 < 2^64). */
    int64_t gap = real + WINDOW_NS - at;
    gap = gap < WINDOW_NS / 2 ? WINDOW_NS / 2 : gap > 2 * WINDOW_NS ? 2 * WINDOW_NS : gap;
    store_line(line, tsc, at, (uint64_t)(((wide)gap << 32) / window_ticks), window_ticks);
    store_sample(line, real, tsc, rate);
    return at;
}

int64_t cr_fast_clock_slow(bool ordered)
{
    if (!cr_fast_clock_is_tsc())
        return cr_clock_ns();
    cr_fast_line *line = &cr_fast_clock_line;
    for (;;) {
        int64_t now_ns;
        if (cr_fast_line_time(line, ordered ? cr_tsc_ordered() : cr_tsc(), &now_ns))
            return now_ns; /* a reading that met a move: again */
        uint64_t seq = atomic_load_explicit(&line->seq, memory_order_acquire);
        if (seq & 1) {
            sched_yield(); /* another thread is moving the line: ~100 ns */
            continue;
        }
        if (atomic_compare_exchange_strong_explicit(&line->seq, &seq, seq + 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            int64_t real = 0;
            uint64_t tsc = 0;
            read_pair(&real, &tsc);
            now_ns = cr_fast_line_move(line, real, tsc);
            atomic_store_explicit(&line->real_offset, real_offset(), memory_order_release);
            atomic_store_explicit(&line->seq, seq + 2, memory_order_release);
            return now_ns;
        }
    }
}

int64_t cr_fast_realtime_slow(void)
{
    int64_t now_ns;
    if (cr_fast_clock_is_tsc()) {
        cr_fast_clock_slow(false); /* moves the line (its anchor reads the offset) */
        if (cr_fast_line_at(&cr_fast_clock_line, cr_tsc(), true, &now_ns))
            return now_ns;
    }
    return cr_realtime_ns(); /* no line (calibrating, a jump, no trusted TSC) */
}

int64_t cr_fast_clock_ns(void) { return cr_fast_clock_now(); }
