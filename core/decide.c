/* The GCRA decision (docs/design.md §1): the exported face of cr_decision_make. */
#include "internal.h"

int64_t cr_decide(const cr_limit *limit, int64_t tat, int64_t now_ns, int64_t cost,
                  cr_decision *out)
{
    return cr_decision_make(limit, tat, now_ns, cost, out);
}
