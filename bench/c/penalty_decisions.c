/*
 * Instructions per admitted decision with and without a penalty, to count
 * under callgrind (load-proof: no timing), docs/design/penalty.md:
 *
 *   valgrind --tool=callgrind penalty_decisions ENTRY PENALTY 0
 *   valgrind --tool=callgrind penalty_decisions ENTRY PENALTY 100000
 *
 * (the difference over 10^5 is one decision). ENTRY: check, allow, kcheck or
 * kallow (cr_limiter_check, cr_limiter_allow, cr_keyed_check, cr_keyed_allow);
 * PENALTY: 0 or 1 ("5/minute", ban 10 s, max_ban 60 s). Every decision is
 * admitted: the path a penalty must not slow. With a 4th argument PATH, the
 * stores are shared regions (PATH.l and PATH.k, made afresh).
 */
#include "cellrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s check|allow|kcheck|kallow 0|1 DECISIONS [PATH]\n", argv[0]);
        return 2;
    }
    const char *entry = argv[1];
    const bool with_penalty = atoi(argv[2]) != 0;
    const long decisions = atol(argv[3]);
    cr_limit_args args = {0};
    args.rate = 1e9;
    args.burst = 1000000;
    args.has_burst = true;
    cr_limit limit;
    cr_limiter *limiter;
    cr_keyed *keyed;
    char limiter_path[4096] = "", keyed_path[4096] = "";
    if (argc == 5) {
        snprintf(limiter_path, sizeof limiter_path, "%s.l", argv[4]);
        snprintf(keyed_path, sizeof keyed_path, "%s.k", argv[4]);
        unlink(limiter_path);
        unlink(keyed_path);
    }
    if (cr_limit_init(&limit, &args) != CR_OK ||
        cr_limiter_open(&limiter, &limit, argc == 5 ? limiter_path : NULL, 0600, CR_CHANGE_APPLY) !=
            CR_OK ||
        cr_keyed_open(&keyed, &limit, 1024, argc == 5 ? keyed_path : NULL, 0600, CR_CHANGE_APPLY) !=
            CR_OK)
        return 1;
    cr_penalty penalty;
    if (with_penalty && (cr_penalty_init(&penalty, "5/minute", 8, 10.0, 60.0, true) != CR_OK ||
                         cr_limiter_set_penalty(limiter, &penalty) != CR_OK ||
                         cr_keyed_set_penalty(keyed, &penalty) != CR_OK))
        return 1;
    cr_decision d;
    bool allowed = false;
    long admitted = 0;
    int64_t now = 1000000000;
    for (long i = 0; i < decisions; i++, now += 1000) {
        if (strcmp(entry, "check") == 0) {
            cr_limiter_check(limiter, now, 1, true, &d);
            allowed = d.allowed;
        } else if (strcmp(entry, "allow") == 0) {
            cr_limiter_allow(limiter, now, 1, &allowed);
        } else if (strcmp(entry, "kcheck") == 0) {
            cr_keyed_check(keyed, "user:42", 7, now, 1, true, &d);
            allowed = d.allowed;
        } else {
            cr_keyed_allow(keyed, "user:42", 7, now, 1, &allowed);
        }
        admitted += allowed;
    }
    printf("%s penalty=%d: %ld of %ld admitted\n", entry, with_penalty, admitted, decisions);
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);
    if (argc == 5) {
        unlink(limiter_path);
        unlink(keyed_path);
    }
    return 0;
}
