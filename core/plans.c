/* Plans, a limit per key (docs/design/plans.md): the plan table of a keyed
 * table, checked and sorted once. Pure: the table's decisions are keyed.c's. */
#include "cellrate/plans.h"
#include "priority.h"

#include <string.h>

static const char default_name[] = "default";

static int compare_names(const char *a, size_t a_len, const char *b, size_t b_len)
{
    const int order = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return order != 0 ? order : (a_len > b_len) - (a_len < b_len);
}

static bool is_default(const char *name, size_t len)
{
    return len == sizeof default_name - 1 && memcmp(name, default_name, len) == 0;
}

cr_status cr_plans_set(cr_plan_table *table, const cr_limit *default_limit,
                       const cr_plan_arg *plans, size_t count)
{
    if (!plans || count < 1 || count > CR_PLANS_MAX - 1)
        return CR_E_PLANS;
    const cr_plan_arg *sorted[CR_PLANS_MAX];
    for (size_t i = 0; i < count; i++) {
        const cr_plan_arg *arg = &plans[i];
        if (!arg->name || arg->name_len < 1 || arg->name_len >= CR_PLAN_NAME_MAX ||
            memchr(arg->name, '\0', arg->name_len) || is_default(arg->name, arg->name_len) ||
            !arg->limit)
            return CR_E_PLANS;
        /* insertion by name: at most 15 */
        size_t at = i;
        while (at > 0) {
            const int order = compare_names(arg->name, arg->name_len, sorted[at - 1]->name,
                                            sorted[at - 1]->name_len);
            if (order == 0)
                return CR_E_PLANS; /* a name twice */
            if (order > 0)
                break;
            sorted[at] = sorted[at - 1];
            at--;
        }
        sorted[at] = arg;
    }
    for (size_t i = 0; i < count; i++)
        if (plans[i].limit->algorithm != default_limit->algorithm)
            return CR_E_PLANS_ALGORITHM;
    memset(table, 0, sizeof *table);
    table->count = (int32_t)count + 1;
    memcpy(table->names[0], default_name, sizeof default_name);
    table->limits[0] = *default_limit;
    for (size_t i = 0; i < count; i++) {
        memcpy(table->names[i + 1], sorted[i]->name, sorted[i]->name_len);
        table->limits[i + 1] = *sorted[i]->limit;
        cr_priorities_keep(&table->limits[i + 1], default_limit);
        table->limits[i + 1].fast_clock = default_limit->fast_clock;
    }
    return CR_OK;
}

cr_status cr_plan_items(size_t count, bool keyed, bool named)
{
    if (named && count > 1)
        return CR_E_PLAN_SEVERAL;
    if (!keyed)
        return named ? CR_E_PLAN_KEYED : CR_E_PLANS_KEYED;
    return CR_OK;
}

cr_status cr_plan_find(const cr_plan_table *table, const char *name, size_t len, int32_t *index)
{
    if (name && is_default(name, len)) {
        *index = CR_PLAN_DEFAULT;
        return CR_OK;
    }
    /* a shared region's table grows while it is read: its count once */
    const int32_t count = table ? __atomic_load_n(&table->count, __ATOMIC_ACQUIRE) : 0;
    for (int32_t i = 1; name && i < count; i++)
        if (strlen(table->names[i]) == len && memcmp(table->names[i], name, len) == 0) {
            *index = i;
            return CR_OK;
        }
    return CR_E_PLAN;
}
