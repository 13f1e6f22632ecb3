/* Sleeping until a reserved instant: the one blocking call of the library,
 * used by the faces' wait() (docs/design.md §9). */
#include "cellrate/clock.h"

#include <errno.h>
#include <time.h>

void cr_sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    /* An absolute deadline on the limits' clock: a signal that interrupts the
     * sleep resumes it without drifting. */
    const int64_t now = cr_clock_ns();
    const int64_t deadline = ns > INT64_MAX - now ? INT64_MAX : now + ns;
    const struct timespec until = {.tv_sec = (time_t)(deadline / 1000000000),
                                   .tv_nsec = (long)(deadline % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}
