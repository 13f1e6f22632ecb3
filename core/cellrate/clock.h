/*
 * cellrate/clock.h: the clocks (monotonic, realtime, fast) and the sleep.
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_CLOCK_H
#define CELLRATE_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* CLOCK_MONOTONIC in nanoseconds (system-wide: the same in every process). */
int64_t cr_clock_ns(void);

/* CLOCK_REALTIME in nanoseconds since the Unix epoch: the clock of the window
 * algorithms, whose windows are aligned to the epoch. */
int64_t cr_realtime_ns(void);

/*
 * CLOCK_MONOTONIC extrapolated from the CPU's time-stamp counter: cheaper
 * than cr_clock_ns where clock_gettime is slow, never steps back in a thread,
 * and follows cr_clock_ns to within ~100 ns (it is re-anchored to it every
 * 2 ms). The counter is read without a fence: a reading may precede, by up
 * to a few microseconds, one another thread or process published just
 * before it (a decision on an earlier time is only stricter). The default
 * clock of a store ("fast"). Its "monotonic" clock reads the same line with
 * the counter ordered (rdtscp), which never does. Used only where the
 * TSC is invariant, has rdtscp and is the kernel's own clocksource
 * (cr_fast_clock_is_tsc); elsewhere it is cr_clock_ns. Thread-safe.
 */
int64_t cr_fast_clock_ns(void);
/* Whether cr_fast_clock_ns reads the time-stamp counter here. */
bool cr_fast_clock_is_tsc(void);

/* Blocks the calling thread for `ns` nanoseconds of CLOCK_MONOTONIC (resumed
 * after signals; returns at once for ns <= 0). The sleep of wait(): call it
 * without any lock held (Python: with the GIL released). */
void cr_sleep_ns(int64_t ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_CLOCK_H */
