/* SipHash-1-3 (Aumasson and Bernstein): a keyed hash that an attacker who
 * does not know the key cannot flood. Internal to the core. */
#ifndef CELLRATE_SIPHASH_H
#define CELLRATE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t cr_sip_rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline uint64_t cr_sip_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The round and the tail laid out as in SipHash's reference code. */
/* clang-format off */
#define CR_SIPROUND                                                            \
    do {                                                                       \
        v0 += v1; v1 = cr_sip_rotl(v1, 13); v1 ^= v0; v0 = cr_sip_rotl(v0, 32); \
        v2 += v3; v3 = cr_sip_rotl(v3, 16); v3 ^= v2;                          \
        v0 += v3; v3 = cr_sip_rotl(v3, 21); v3 ^= v0;                          \
        v2 += v1; v1 = cr_sip_rotl(v1, 17); v1 ^= v2; v2 = cr_sip_rotl(v2, 32); \
    } while (0)
/* clang-format on */

static inline uint64_t cr_siphash13(const uint64_t key[2], const void *data, size_t len)
{
    const unsigned char *in = data;
    uint64_t v0 = key[0] ^ 0x736f6d6570736575ULL;
    uint64_t v1 = key[1] ^ 0x646f72616e646f6dULL;
    uint64_t v2 = key[0] ^ 0x6c7967656e657261ULL;
    uint64_t v3 = key[1] ^ 0x7465646279746573ULL;
    const unsigned char *end = in + (len - len % 8);

    for (; in != end; in += 8) {
        uint64_t m = cr_sip_le64(in);
        v3 ^= m;
        CR_SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    /* clang-format off */
    switch (len % 8) {
    case 7: last |= (uint64_t)in[6] << 48; /* fall through */
    case 6: last |= (uint64_t)in[5] << 40; /* fall through */
    case 5: last |= (uint64_t)in[4] << 32; /* fall through */
    case 4: last |= (uint64_t)in[3] << 24; /* fall through */
    case 3: last |= (uint64_t)in[2] << 16; /* fall through */
    case 2: last |= (uint64_t)in[1] << 8;  /* fall through */
    case 1: last |= (uint64_t)in[0];       /* fall through */
    default: break;
    }
    /* clang-format on */
    v3 ^= last;
    CR_SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    CR_SIPROUND;
    CR_SIPROUND;
    CR_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#undef CR_SIPROUND

#endif
