/* The one clock read of the library: CLOCK_MONOTONIC, which every process of
 * a machine shares, so shared-memory stores agree on "now". */
#include "cellrate.h"

#include <time.h>

int64_t cr_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
