/*
 * cellrate/http.h: the HTTP header fields of a decision
 * (draft-ietf-httpapi-ratelimit-headers-11).
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_HTTP_H
#define CELLRATE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decision.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The time in which a limit restores `limit` (= burst) units, the `w` of
 * RateLimit-Policy: its tolerance_ns (GCRA and token_bucket: tau = burst * T;
 * the window algorithms: the window). */
int64_t cr_limit_window_ns(const cr_limit *limit);

#define CR_HEADER_NAME_MAX 64            /* bytes of a policy name */
#define CR_HEADER_DEFAULT_NAME "default" /* the policy name of a NULL name */
#define CR_HEADERS_MAX 6                 /* fields cr_headers_format may fill */
#define CR_HEADER_VALUE_MAX 192          /* bytes of a value, with its NUL */

typedef struct cr_header {
    const char *name;                /* a static string, e.g. "RateLimit-Policy" */
    char value[CR_HEADER_VALUE_MAX]; /* NUL-terminated */
    size_t value_len;                /* bytes of value before its NUL */
} cr_header;

typedef struct cr_headers {
    int count; /* fields filled, in the order listed at cr_headers_format */
    cr_header field[CR_HEADERS_MAX];
} cr_headers;

/*
 * The response fields of `decision`, for a limit whose window is `window_ns`
 * (cr_limit_window_ns), under the policy name `name` (1 to CR_HEADER_NAME_MAX
 * bytes of printable ASCII; '"' and '\\' are escaped as RFC 8941 strings;
 * NULL, whatever `name_len`, is CR_HEADER_DEFAULT_NAME):
 *
 *   RateLimit-Policy: "<name>";q=<limit>;w=<ceil(window s)>
 *   RateLimit:        "<name>";r=<remaining>;t=<ceil(reset_after s)>
 *   Retry-After:      <ceil(retry_after s), at least 1>   only when refused and
 *                     retry_after_ns is not CR_NEVER (an unfittable cost)
 * and with `legacy`: X-RateLimit-Limit (q), X-RateLimit-Remaining (r),
 * X-RateLimit-Reset (t). Every rounding is up, in integer nanoseconds.
 * CR_E_HEADER_NAME / CR_E_HEADER_VALUE (a negative field); `out` is then
 * left with count 0. Pure; thread-safe.
 */
cr_status cr_headers_format(cr_headers *out, const cr_decision *decision, int64_t window_ns,
                            const char *name, size_t name_len, bool legacy);

/* CR_OK when cr_headers_format takes `name` as a policy name (NULL: the
 * default), else CR_E_HEADER_NAME: for a caller that checks the name before deciding, so that
 * a bad one spends nothing. Pure; thread-safe. */
cr_status cr_headers_check_name(const char *name, size_t name_len);

/* A face's seconds (a Decision's retry_after or reset_after, a window) to
 * nanoseconds for cr_headers_format: the inverse of cr_ns_to_seconds, so
 * +infinity becomes CR_NEVER. CR_E_HEADER_VALUE unless >= 0 and, when
 * finite, below 2^63 ns. */
cr_status cr_duration_from_seconds(double seconds, int64_t *ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_HTTP_H */
