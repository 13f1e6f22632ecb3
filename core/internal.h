/* Shared by the core's sources; not part of the public API. */
#ifndef CELLRATE_INTERNAL_H
#define CELLRATE_INTERNAL_H

#include "cellrate.h"

/* Validates `cost` and resolves CR_CLOCK in `*now_ns` to a clock reading. */
static inline cr_status cr_check_args(int64_t *now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if (*now_ns == CR_CLOCK)
        *now_ns = cr_clock_ns();
    else if (*now_ns < 0)
        return CR_E_NOW;
    return CR_OK;
}

#endif
