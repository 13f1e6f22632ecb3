/* Hash seeds (core/seed.c). Not part of the public API. */
#ifndef CELLRATE_SEED_H
#define CELLRATE_SEED_H

#include "cellrate/status.h"

/* A fresh 128-bit hash seed from the kernel's random source. */
cr_status cr_random_seed(uint64_t seed[2]);

#endif
