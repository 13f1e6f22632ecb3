/*
 * Instructions per keyed decision at 1M keys with and without plans, to count
 * under callgrind (load-proof: no timing), docs/design/plans.md:
 *
 *   valgrind --tool=callgrind --instr-atstart=no plan_decisions MODE 200000
 *
 * (instrumented from the first measured decision on, where valgrind's header
 * is at hand: the count over 200000 is one decision; without it, run with 0
 * and with N decisions and take the difference). MODE: plain (a table without
 * plans, cr_keyed_check), default (a table with a plan, its keys on
 * "default", cr_keyed_check) or plan (the same table, its keys on the plan,
 * cr_keyed_check_plan). 2^20 keys are placed first (each decided once under
 * its mode's plan); then DECISIONS decisions walk them, each admitted.
 */
#include "cellrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#define KEYS (1L << 20)

static cr_status decide(cr_keyed *keyed, int32_t plan, long i, int64_t now, cr_decision *d)
{
    char key[16];
    const int len = snprintf(key, sizeof key, "u%07lx", i & (KEYS - 1));
    return plan < 0 ? cr_keyed_check(keyed, key, (size_t)len, now, 1, true, d)
                    : cr_keyed_check_plan(keyed, key, (size_t)len, now, 1, plan, -1, true, d, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s plain|default|plan DECISIONS\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    const long decisions = atol(argv[2]);
    cr_limit_args args = {0};
    args.rate = 1e9;
    args.burst = 1000000;
    args.has_burst = true;
    cr_limit limit, pro;
    if (cr_limit_init(&limit, &args) != CR_OK)
        return 1;
    args.rate = 2e9;
    if (cr_limit_init(&pro, &args) != CR_OK)
        return 1;
    cr_plan_table table;
    const cr_plan_arg plans[] = {{"pro", 3, &pro}};
    if (strcmp(mode, "plain") != 0 && cr_plans_set(&table, &limit, plans, 1) != CR_OK)
        return 1;
    cr_keyed *keyed;
    if (cr_keyed_open_plans(&keyed, &limit, strcmp(mode, "plain") == 0 ? NULL : &table, KEYS, NULL,
                            0, CR_CHANGE_APPLY) != CR_OK)
        return 1;
    const int32_t plan = strcmp(mode, "plan") == 0 ? 1 : -1;
    cr_decision d;
    int64_t now = 1000000000;
    for (long i = 0; i < KEYS; i++)
        if (decide(keyed, plan, i, now, &d) != CR_OK)
            return 1;
    long admitted = 0;
    CALLGRIND_START_INSTRUMENTATION;
    for (long i = 0; i < decisions; i++, now += 1000) {
        if (decide(keyed, plan, i, now, &d) != CR_OK)
            return 1;
        admitted += d.allowed;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    printf("%s: %ld of %ld admitted\n", mode, admitted, decisions);
    cr_keyed_free(keyed);
    return 0;
}
