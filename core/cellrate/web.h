/*
 * cellrate/web.h: the rules of the web faces (the Python web policy and the
 * nginx helper; docs/design.md §10): the client's address as a key, the hops
 * of a proxy's header, the status of a refusal, the fields a dry run leaves
 * out, and what the count reported after a response settles.
 *
 * A part of cellrate.h (include <cellrate.h>). Every function is pure (no
 * I/O, no allocation, no clock) and thread-safe.
 */
#ifndef CELLRATE_WEB_H
#define CELLRATE_WEB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* ---- addresses ---------------------------------------------------------- */

/* An IP address: family 4 (bytes[0..3]), 6 (bytes[0..15], never an
 * IPv4-mapped one: that is its IPv4 address), or 0 for what is no address.
 * Bytes in network order. */
typedef struct cr_address {
    int family;
    uint8_t bytes[16];
} cr_address;

/* The key of every client that is no address (a missing peer, a Unix
 * socket, a hop that does not parse): one key for all of them. */
#define CR_ADDRESS_UNKNOWN "unknown"
/* Bytes of a key with its NUL: "ffff:...:ffff/128" is 43. */
#define CR_ADDRESS_KEY_MAX 48
/* The prefix lengths of the default key: an IPv4 address, an IPv6 /64. */
#define CR_IPV4_PREFIX_DEFAULT 32
#define CR_IPV6_PREFIX_DEFAULT 64
/* The widest prefix of each family's address, in bits (cr_ipv4_prefix_check,
 * cr_ipv6_prefix_check, and the options table's ipv4_prefix / ipv6_prefix). */
#define CR_IPV4_PREFIX_MAX 32
#define CR_IPV6_PREFIX_MAX 128
/* A refusal's HTTP status (cr_refusal_status_check, and the options table's
 * status): 400 to 599. */
#define CR_REFUSAL_STATUS_MIN 400
#define CR_REFUSAL_STATUS_MAX 599

/*
 * An address as text: IPv4 as four decimal octets (no leading zeros, as
 * Python's ipaddress), or IPv6 (RFC 4291 text, an IPv4 tail allowed) whose
 * zone ("%eth0", anything from the first '%') is dropped. An IPv4-mapped IPv6
 * address (::ffff:a.b.c.d) is its IPv4 address. True when `text` is one;
 * else false and family 0. `text` need not be NUL-terminated; a NUL in it is
 * no address.
 */
bool cr_address_parse(cr_address *out, const char *text, size_t len);

/*
 * One hop of X-Forwarded-For, or a Forwarded `for=` value: without the
 * whitespace around it (SP, HTAB), its quotes, and brackets or a port
 * ("[2001:db8::1]:4711", "192.0.2.1:80"); then as cr_address_parse.
 */
bool cr_address_parse_hop(cr_address *out, const char *hop, size_t len);

/* An address as 4 or 16 bytes in network order (nginx's
 * $binary_remote_addr); any other length is no address. */
bool cr_address_from_bytes(cr_address *out, const void *bytes, size_t len);

/* CR_OK when `prefix` is a prefix length of IPv4 (0 to 32; else
 * CR_E_IPV4_PREFIX) or of IPv6 (0 to 128; else CR_E_IPV6_PREFIX). */
cr_status cr_ipv4_prefix_check(int64_t prefix);
cr_status cr_ipv6_prefix_check(int64_t prefix);

/*
 * The key of `address` into `out` (CR_ADDRESS_KEY_MAX bytes, NUL-terminated;
 * returns its length): its network of `ipv4_prefix` or `ipv6_prefix` leading
 * bits in canonical text, the address alone at a full prefix ("192.0.2.1",
 * "2001:db8::1"), else "<network address>/<prefix>" ("192.0.2.0/24",
 * "2001:db8::/64"); IPv6 as RFC 5952 writes it (lower case, the first
 * longest run of two or more zero groups as "::", no dotted tail);
 * CR_ADDRESS_UNKNOWN for family 0. The prefixes must pass the checks above.
 */
size_t cr_address_key(char *out, const cr_address *address, int ipv4_prefix, int ipv6_prefix);

/* ---- trusted proxies ---------------------------------------------------- */

/* A network: `base` masked to its first `prefix` bits. */
typedef struct cr_network {
    cr_address base;
    int prefix;
} cr_network;

/*
 * A network as text, as Python's ipaddress.ip_network(text, strict=False)
 * reads it: an address, or "address/prefix" (decimal digits; IPv4 also a
 * netmask or hostmask such as 255.0.0.0); host bits are dropped; an IPv6
 * zone must be non-empty. An IPv4-mapped network (::ffff:10.0.0.0/104) is
 * the IPv4 network it maps. CR_E_TRUSTED_PROXIES for anything else.
 */
cr_status cr_network_parse(cr_network *out, const char *text, size_t len);

/* True when `address` is in one of the `count` networks (never for family 0). */
bool cr_network_contains(const cr_network *networks, size_t count, const cr_address *address);

/* The field a trusted proxy appends the client's address to. */
typedef enum cr_proxy_field {
    CR_X_FORWARDED_FOR = 0, /* hops separated by ',' */
    CR_FORWARDED = 1        /* RFC 7239: the `for=` values of its elements (',') and pairs (';') */
} cr_proxy_field;

/*
 * The client behind trusted proxies, from the value of `field` that a trusted
 * proxy passed on: its hops read from the right, the first that is not in
 * `trusted` (or is no address, which is then the client: family 0) is the
 * client; when every hop is trusted, the leftmost. False when the value
 * names no hop (empty, or a Forwarded field without `for=`): the peer is the
 * client then.
 */
bool cr_forwarded_client(cr_address *client, const char *value, size_t len, cr_proxy_field field,
                         const cr_network *trusted, size_t count);

/* ---- refusals ----------------------------------------------------------- */

/* CR_OK when `status` is a refusal's HTTP status, 400 to 599 (a 2xx or 3xx
 * "refusal" would admit what it refuses); else CR_E_STATUS. */
cr_status cr_refusal_status_check(int64_t status);

/*
 * The fields a dry run leaves out of a refusal's answer (it admits, and sends
 * the rest of the fields, which describe the quota): their names, `*count`
 * of them. Retry-After is a directive to wait (RFC 9110 §10.2.3), which a
 * client of a 200 must not be given.
 */
const char *const *cr_dry_run_removed(size_t *count);

/* ---- charge settlement -------------------------------------------------- */

/* A count of units as text: decimal digits, whitespace (SP, HTAB) around
 * them allowed; beyond INT64_MAX it saturates there. CR_E_CHARGE_COUNT for
 * anything else (empty, a sign, a fraction, an exponent, hex). */
cr_status cr_count_parse(const char *text, size_t len, int64_t *count);

typedef struct cr_settlement {
    int64_t total; /* what the request counts on the limit once settled */
    int64_t units; /* total - charged: > 0 to charge, < 0 to refund, 0 nothing */
    bool clipped;  /* the count was above max_cost, settled as max_cost */
} cr_settlement;

/*
 * Settles a request that counts `charged` units (>= 0) on a limit, by the
 * `count` it was reported to cost: the count, at most `max_cost` (< 0: none).
 * A count below 0 is no count: CR_E_CHARGE_COUNT, and `out` settles nothing
 * (total = charged, units 0): a bad figure never refunds what the request
 * was charged, and never charges more than max_cost.
 */
cr_status cr_settle(cr_settlement *out, int64_t charged, int64_t count, int64_t max_cost);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_WEB_H */
