/*
 * cellrate from C: one limit per key, decided at explicit times.
 *
 *   make core
 *   cc -std=c11 -Icore examples/c/quickstart.c build/libcellrate.a -lm -lpthread -latomic -o quickstart
 *
 * The C tests compile and run this file and compare its output with
 * examples/c/quickstart.out.
 */
#include <stdio.h>
#include <string.h>

#include "cellrate.h"

int main(void)
{
    /* 10 per second, 3 at once: T = 100 ms, tau = 300 ms. */
    const char *rate = "10/s";
    cr_limit_args args = {
        .rate_text = rate, .rate_text_len = strlen(rate), .burst = 3, .has_burst = true};
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &args);
    if (status != CR_OK) {
        fprintf(stderr, "%s: %s\n", cr_status_param(status), cr_strerror(status));
        return 1;
    }

    cr_keyed *keyed;
    status = cr_keyed_new(&keyed, &limit, CR_KEYED_DEFAULT_CAPACITY);
    if (status != CR_OK) {
        fprintf(stderr, "%s\n", cr_strerror(status));
        return 1;
    }

    /* Times in ns; pass CR_CLOCK instead to read CLOCK_MONOTONIC. */
    const int64_t ms = 1000000;
    const int64_t times[] = {0, 0, 0, 0, 100 * ms};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        cr_decision d;
        status = cr_keyed_check(keyed, "user:42", strlen("user:42"), times[i], 1, true, &d);
        if (status != CR_OK) {
            fprintf(stderr, "%s\n", cr_strerror(status));
            cr_keyed_free(keyed);
            return 1;
        }
        printf("t=%.1fs %s remaining=%lld retry_after=%.3fs\n", cr_ns_to_seconds(times[i]),
               d.allowed ? "allowed" : "refused", (long long)d.remaining,
               cr_ns_to_seconds(d.retry_after_ns));
    }
    cr_keyed_free(keyed);
    return 0;
}
