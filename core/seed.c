/* Hash seeds: 128 bits from the kernel, for each keyed table (core/keyed.c)
 * and each shared region (core/region.c). */
#include "seed.h"

#include <errno.h>
#include <sys/random.h>

cr_status cr_random_seed(uint64_t seed[2])
{
    unsigned char *out = (unsigned char *)seed;
    size_t got = 0, want = 2 * sizeof seed[0];
    while (got < want) {
        ssize_t n = getrandom(out + got, want - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return CR_E_NOMEM; /* no entropy source: cannot make a safe table */
        }
        got += (size_t)n;
    }
    return CR_OK;
}
