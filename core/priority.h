/* Priority classes (core/priority.c) as the stores keep them: what a live
 * change keeps and what a shared region checks. Not part of the public API. */
#ifndef CELLRATE_PRIORITY_INTERNAL_H
#define CELLRATE_PRIORITY_INTERNAL_H

#include "cellrate/priority.h"

/* `to` takes the classes of `from`, their reserves in ns of `to`'s
 * tolerance: a live change keeps a limit's classes. */
void cr_priorities_keep(cr_limit *to, const cr_limit *from);

/* A digest of the classes (names and reserves' bits, in their sorted
 * order); 0 for none. A shared region records it: every opener must give
 * the same classes (CR_E_SHARED_PRIORITIES). */
uint64_t cr_priorities_fingerprint(const cr_limit *limit);

/* CR_OK when `priority` indexes one of the limit's classes. */
static inline cr_status cr_priority_check(const cr_limit *limit, int32_t priority)
{
    if (limit->npriorities == 0)
        return CR_E_PRIORITY_NONE;
    return priority >= 0 && priority < limit->npriorities ? CR_OK : CR_E_PRIORITY;
}

#endif
