/*
 * Instructions per decision of a calendar quota against a fixed window, to
 * count under callgrind (load-proof: no timing), docs/design.md §19:
 *
 *   valgrind --tool=callgrind calendar_decisions ALGORITHM 0
 *   valgrind --tool=callgrind calendar_decisions ALGORITHM 1000000
 *
 * (the difference over 10^6 is one cr_limiter_check). ALGORITHM: gcra,
 * fixed_window or calendar (1000000000/month of Europe/Berlin; the others
 * 1000000000 per 31 days); `now` advances 1 us a decision, inside one period.
 */
#include "cellrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s gcra|fixed_window|calendar DECISIONS\n", argv[0]);
        return 2;
    }
    const char *algorithm = argv[1];
    const long decisions = atol(argv[2]);
    const bool calendar = strcmp(algorithm, "calendar") == 0;
    const char *rate = calendar ? "1000000000/month" : "1000000000/2678400s";
    cr_limit_args args = {0};
    args.rate_text = rate;
    args.rate_text_len = strlen(rate);
    args.algorithm = algorithm;
    args.algorithm_len = strlen(algorithm);
    if (calendar && cr_zone_open("Europe/Berlin", 13, NULL, 0, &args.zone) != CR_OK)
        return 1;
    cr_limit limit;
    cr_limiter *limiter;
    if (cr_limit_init(&limit, &args) != CR_OK || cr_limiter_new(&limiter, &limit) != CR_OK)
        return 1;
    cr_decision decision;
    int64_t now = (int64_t)1700000000 * 1000000000;
    long admitted = 0;
    for (long i = 0; i < decisions; i++) {
        cr_limiter_check(limiter, now, 1, true, &decision);
        admitted += decision.allowed;
        now += 1000;
    }
    printf("%s: %ld of %ld admitted\n", algorithm, admitted, decisions);
    cr_limiter_free(limiter);
    return 0;
}
