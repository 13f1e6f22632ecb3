/* The clock reads of the library: CLOCK_MONOTONIC, which every process of a
 * machine shares, so shared-memory stores agree on "now"; and CLOCK_REALTIME
 * for the window algorithms, whose windows are aligned to the Unix epoch. */
#include "cellrate/clock.h"

#include <time.h>

int64_t cr_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cr_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
