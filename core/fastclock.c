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
 * on every core and every core reads the same value. Time is a line
 *     ns = ns0 + (tsc - tsc0) * mult / 2^32
 * shared by the threads of the process under a seqlock. Every WINDOW_NS the
 * line is re-anchored: it continues from where it is (so it never steps
 * back) with a slope that brings it onto CLOCK_MONOTONIC by the end of the
 * next window, as NTP slews a clock. It thus follows CLOCK_MONOTONIC to
 * within the jitter of a clock read, across processes too.
 */
#include "internal.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#define WINDOW_NS 2000000 /* re-anchor every 2 ms */
#define RESYNC_NS 1000000 /* further behind CLOCK_MONOTONIC than this: jump to it */

static _Alignas(64) struct { /* one cache line: a read touches no other */
    _Atomic uint64_t seq;    /* odd while the line is being moved */
    _Atomic uint64_t tsc0;
    _Atomic int64_t ns0;
    _Atomic uint64_t mult;  /* ns per tick, 32.32 fixed point; 0: not calibrated */
    _Atomic uint64_t until; /* the tick at which to re-anchor */
    /* the last pair read from both clocks, to measure the TSC's rate */
    _Atomic uint64_t sample_tsc;
    _Atomic int64_t sample_ns;
} line;

enum { UNKNOWN, USABLE, UNUSABLE };
static _Atomic int usable = UNKNOWN;

#if HAVE_TSC
static uint64_t read_tsc(void) { return __rdtsc(); }

static bool tsc_is_trusted(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8)))
        return false; /* not invariant: the rate changes with power states */
    char source[32] = {0};
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f)
        return false;
    bool tsc = fgets(source, sizeof source, f) && strcmp(source, "tsc\n") == 0;
    fclose(f);
    return tsc; /* the kernel checked that the cores agree, or it would not use it */
}
#else
static uint64_t read_tsc(void) { return 0; }
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

static int64_t on_line(uint64_t tsc, uint64_t tsc0, int64_t ns0, uint64_t mult)
{
    __extension__ unsigned __int128 scaled = (unsigned __int128)(tsc - tsc0) * mult;
    return ns0 + (int64_t)(scaled >> 32);
}

__extension__ typedef unsigned __int128 wide;

/*
 * Moves the line; called by the one thread that made `seq` odd. Returns the
 * time now on the line, or CLOCK_MONOTONIC itself while calibrating.
 */
/* CLOCK_MONOTONIC and the TSC read together: of three tries, the one whose
 * clock read the fewest ticks bracketed, so a preempted try is not taken. */
static void read_pair(int64_t *real, uint64_t *tsc)
{
    uint64_t narrowest = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t before = read_tsc();
        int64_t ns = cr_clock_ns();
        uint64_t after = read_tsc();
        if (after - before < narrowest) {
            narrowest = after - before;
            *real = ns;
            *tsc = before + (after - before) / 2;
        }
    }
}

static int64_t move_line(void)
{
    int64_t real = 0;
    uint64_t tsc = 0;
    read_pair(&real, &tsc);
    uint64_t sample_tsc = atomic_load_explicit(&line.sample_tsc, memory_order_relaxed);
    int64_t sample_ns = atomic_load_explicit(&line.sample_ns, memory_order_relaxed);

    if (sample_tsc == 0 || tsc <= sample_tsc) { /* the first call: start measuring */
        atomic_store_explicit(&line.sample_tsc, tsc, memory_order_relaxed);
        atomic_store_explicit(&line.sample_ns, real, memory_order_relaxed);
        atomic_store_explicit(&line.mult, 0, memory_order_relaxed);
        return real;
    }
    if (real - sample_ns < WINDOW_NS / 2)
        return real; /* too soon to measure the rate */

    /* The TSC's rate over the last window, measured on CLOCK_MONOTONIC. */
    uint64_t rate = (uint64_t)(((wide)(real - sample_ns) << 32) / (tsc - sample_tsc));
    if (rate == 0)
        return real;
    uint64_t window_ticks = (uint64_t)(((wide)WINDOW_NS << 32) / rate);

    /* Continue the line from where it is: never back. Only a line that has
     * fallen far behind CLOCK_MONOTONIC jumps forward to it; one ahead slows
     * down until CLOCK_MONOTONIC catches up. */
    int64_t at = real;
    uint64_t mult = atomic_load_explicit(&line.mult, memory_order_relaxed);
    if (mult != 0) {
        int64_t here = on_line(tsc, atomic_load_explicit(&line.tsc0, memory_order_relaxed),
                               atomic_load_explicit(&line.ns0, memory_order_relaxed), mult);
        if (here > real - RESYNC_NS)
            at = here;
    }
    /* Aim at CLOCK_MONOTONIC one window on, at between half and twice its pace. */
    int64_t gap = real + WINDOW_NS - at;
    gap = gap < WINDOW_NS / 2 ? WINDOW_NS / 2 : gap > 2 * WINDOW_NS ? 2 * WINDOW_NS : gap;

    atomic_store_explicit(&line.tsc0, tsc, memory_order_relaxed);
    atomic_store_explicit(&line.ns0, at, memory_order_relaxed);
    atomic_store_explicit(&line.mult, (uint64_t)(((wide)gap << 32) / window_ticks),
                          memory_order_relaxed);
    atomic_store_explicit(&line.until, tsc + window_ticks, memory_order_relaxed);
    atomic_store_explicit(&line.sample_tsc, tsc, memory_order_relaxed);
    atomic_store_explicit(&line.sample_ns, real, memory_order_relaxed);
    return at;
}

int64_t cr_fast_clock_ns(void)
{
    if (!cr_fast_clock_is_tsc())
        return cr_clock_ns();
    for (;;) {
        uint64_t seq = atomic_load_explicit(&line.seq, memory_order_acquire);
        if (seq & 1) {
            sched_yield(); /* another thread is moving the line: ~100 ns */
            continue;
        }
        uint64_t tsc0 = atomic_load_explicit(&line.tsc0, memory_order_relaxed);
        int64_t ns0 = atomic_load_explicit(&line.ns0, memory_order_relaxed);
        uint64_t mult = atomic_load_explicit(&line.mult, memory_order_relaxed);
        uint64_t until = atomic_load_explicit(&line.until, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&line.seq, memory_order_relaxed) != seq)
            continue;
        uint64_t tsc = read_tsc();
        if (tsc < tsc0)
            continue; /* the counter was read ahead of the line's loads: again */
        if (mult != 0 && tsc < until)
            return on_line(tsc, tsc0, ns0, mult);
        if (atomic_compare_exchange_strong_explicit(&line.seq, &seq, seq + 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            atomic_thread_fence(memory_order_release);
            int64_t now = move_line();
            atomic_store_explicit(&line.seq, seq + 2, memory_order_release);
            return now;
        }
    }
}
