/* Priorities inside one limit (docs/design/priorities.md): the class table
 * of a limit, checked and sorted once, and the reserve of each in ns. */
#include "priority.h"
#include "decide.h"

#include <math.h>
#include <string.h>

int64_t cr_priority_reserve_ns(int64_t tolerance_ns, double reserve)
{
    if (!(reserve > 0) || tolerance_ns <= 0)
        return 0;
    /* reserve = mantissa * 2^-shift exactly (reserve < 1: shift >= 53) */
    uint64_t bits;
    memcpy(&bits, &reserve, sizeof bits);
    const uint64_t biased = (bits >> 52) & 0x7ff, fraction = bits & ((UINT64_C(1) << 52) - 1);
    const uint64_t mantissa = biased ? fraction | (UINT64_C(1) << 52) : fraction;
    const int64_t shift = biased ? 1075 - (int64_t)biased : 1074;
    if (shift >= 128)
        return 0; /* below 2^-75 of a tolerance under 2^63: less than half a ns */
    /* mantissa * tau < 2^53 * 2^63: exact in 128 bits; + half, then the floor */
    const cr_u128 product = (cr_u128)mantissa * (uint64_t)tolerance_ns;
    const cr_u128 half = (cr_u128)1 << (shift - 1);
    return (int64_t)((product + half) >> shift);
}

static int compare_names(const char *a, size_t a_len, const char *b, size_t b_len)
{
    const int order = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return order != 0 ? order : (a_len > b_len) - (a_len < b_len);
}

cr_status cr_priorities_set(cr_limit *limit, const cr_priority_arg *classes, size_t count)
{
    if (!classes || count < 1 || count > CR_PRIORITIES_MAX)
        return CR_E_PRIORITIES;
    cr_priority_class sorted[CR_PRIORITIES_MAX];
    size_t lens[CR_PRIORITIES_MAX];
    bool spends_all = false;
    for (size_t i = 0; i < count; i++) {
        const cr_priority_arg *arg = &classes[i];
        if (!arg->name || arg->name_len < 1 || arg->name_len >= CR_PRIORITY_NAME_MAX ||
            memchr(arg->name, '\0', arg->name_len))
            return CR_E_PRIORITIES;
        if (!(arg->reserve >= 0 && arg->reserve < 1))
            return CR_E_PRIORITIES_RESERVE; /* NaN too */
        spends_all = spends_all || arg->reserve == 0;
        /* insertion by name: at most 8 */
        size_t at = i;
        while (at > 0) {
            const int order = compare_names(arg->name, arg->name_len, sorted[at - 1].name,
                                            lens[at - 1]);
            if (order == 0)
                return CR_E_PRIORITIES; /* a name twice */
            if (order > 0)
                break;
            sorted[at] = sorted[at - 1];
            lens[at] = lens[at - 1];
            at--;
        }
        memset(&sorted[at], 0, sizeof sorted[at]);
        memcpy(sorted[at].name, arg->name, arg->name_len);
        sorted[at].reserve = arg->reserve == 0 ? 0.0 : arg->reserve; /* -0.0 is 0 */
        lens[at] = arg->name_len;
    }
    if (!spends_all)
        return CR_E_PRIORITIES_DEFAULT;
    if (cr_is_window(limit))
        return CR_E_PRIORITIES_ALGORITHM;
    for (size_t i = 0; i < count; i++)
        sorted[i].reserve_ns = cr_priority_reserve_ns(limit->tolerance_ns, sorted[i].reserve);
    memset(limit->priorities, 0, sizeof limit->priorities);
    memcpy(limit->priorities, sorted, count * sizeof sorted[0]);
    limit->npriorities = (int32_t)count;
    return CR_OK;
}

void cr_priorities_keep(cr_limit *to, const cr_limit *from)
{
    memcpy(to->priorities, from->priorities, sizeof to->priorities);
    to->npriorities = from->npriorities;
    for (int32_t i = 0; i < to->npriorities; i++)
        to->priorities[i].reserve_ns = cr_priority_reserve_ns(to->tolerance_ns,
                                                              to->priorities[i].reserve);
}

uint64_t cr_priorities_fingerprint(const cr_limit *limit)
{
    if (limit->npriorities == 0)
        return 0;
    /* FNV-1a over count, then each name (NUL-padded) and its reserve's bits */
    uint64_t hash = UINT64_C(14695981039346656037);
    const unsigned char count = (unsigned char)limit->npriorities;
    hash = (hash ^ count) * UINT64_C(1099511628211);
    for (int32_t i = 0; i < limit->npriorities; i++) {
        unsigned char bytes[CR_PRIORITY_NAME_MAX + sizeof(double)];
        memcpy(bytes, limit->priorities[i].name, CR_PRIORITY_NAME_MAX);
        memcpy(bytes + CR_PRIORITY_NAME_MAX, &limit->priorities[i].reserve, sizeof(double));
        for (size_t b = 0; b < sizeof bytes; b++)
            hash = (hash ^ bytes[b]) * UINT64_C(1099511628211);
    }
    return hash ? hash : 1;
}

cr_status cr_priority_find(const cr_limit *limit, const char *name, size_t len, int32_t *index)
{
    if (limit->npriorities == 0)
        return CR_E_PRIORITY_NONE;
    for (int32_t i = 0; i < limit->npriorities; i++) {
        const cr_priority_class *class_of = &limit->priorities[i];
        if (len < CR_PRIORITY_NAME_MAX && class_of->name[len] == '\0' &&
            memcmp(class_of->name, name, len) == 0 && !memchr(name, '\0', len)) {
            *index = i;
            return CR_OK;
        }
    }
    return CR_E_PRIORITY;
}

cr_status cr_decide_priority(const cr_limit *limit, int32_t priority, int64_t state, int64_t now_ns,
                             int64_t cost, int64_t *new_state, cr_decision *out)
{
    cr_status status = cr_priority_check(limit, priority);
    if (status == CR_OK)
        status = cr_check_args(now_ns, cost);
    if (status != CR_OK || now_ns == CR_CLOCK)
        return status != CR_OK ? status : CR_E_NOW;
    bool allowed;
    *new_state = cr_priority_core(limit, state, now_ns, cost, priority, out, &allowed);
    return CR_OK;
}

cr_status cr_priority_items(size_t count)
{
    /* a composite refusal must spend nothing of any limit; a class's reserve
     * differs per limit, and check_all's peek-then-commit has no class */
    return count > 1 ? CR_E_PRIORITY_SEVERAL : CR_OK;
}
