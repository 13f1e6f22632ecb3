/* HTTP header fields of a decision (draft-ietf-httpapi-ratelimit-headers-11):
 * the one formatter behind Decision.headers() and cellrate.headers(). */
#include "cellrate.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define SECOND_NS INT64_C(1000000000)

int64_t cr_limit_window_ns(const cr_limit *limit) { return limit->tolerance_ns; }

/* Whole seconds, rounded up: a client told "t=0" or "Retry-After: 0" while
 * a fraction of a second remains would retry too early. */
static int64_t ceil_seconds(int64_t ns) { return ns / SECOND_NS + (ns % SECOND_NS != 0); }

cr_status cr_duration_from_seconds(double seconds, int64_t *ns)
{
    if (seconds == INFINITY) {
        *ns = CR_NEVER;
        return CR_OK;
    }
    return cr_seconds_to_ns(seconds, ns) == CR_OK ? CR_OK : CR_E_HEADER_VALUE;
}

/* `name` as an RFC 8941 sf-string ("..." with '"' and '\' escaped), or false
 * when it is empty, too long or holds a byte outside printable ASCII. */
static bool quote_name(char *quoted, const char *name, size_t name_len)
{
    if (name == NULL || name_len == 0 || name_len > CR_HEADER_NAME_MAX)
        return false;
    size_t at = 0;
    quoted[at++] = '"';
    for (size_t i = 0; i < name_len; i++) {
        const unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c > 0x7e)
            return false;
        if (c == '"' || c == '\\')
            quoted[at++] = '\\';
        quoted[at++] = (char)c;
    }
    quoted[at++] = '"';
    quoted[at] = '\0';
    return true;
}

static void add_field(cr_headers *out, const char *name, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void add_field(cr_headers *out, const char *name, const char *format, ...)
{
    cr_header *field = &out->field[out->count++];
    field->name = name;
    va_list ap;
    va_start(ap, format);
    vsnprintf(field->value, sizeof field->value, format, ap); /* sized to fit: see the header */
    va_end(ap);
}

cr_status cr_headers_format(cr_headers *out, const cr_decision *decision, int64_t window_ns,
                            const char *name, size_t name_len, bool legacy)
{
    out->count = 0;
    char quoted[2 * CR_HEADER_NAME_MAX + 3];
    if (!quote_name(quoted, name, name_len))
        return CR_E_HEADER_NAME;
    if (decision->limit < 0 || decision->remaining < 0 || decision->retry_after_ns < 0 ||
        decision->reset_after_ns < 0 || window_ns < 0)
        return CR_E_HEADER_VALUE;

    const int64_t quota = decision->limit;
    const int64_t remaining = decision->remaining;
    const int64_t reset = ceil_seconds(decision->reset_after_ns);
    add_field(out, "RateLimit-Policy", "%s;q=%" PRId64 ";w=%" PRId64, quoted, quota,
              ceil_seconds(window_ns));
    add_field(out, "RateLimit", "%s;r=%" PRId64 ";t=%" PRId64, quoted, remaining, reset);
    if (!decision->allowed && decision->retry_after_ns != CR_NEVER) {
        const int64_t retry = ceil_seconds(decision->retry_after_ns);
        add_field(out, "Retry-After", "%" PRId64, retry > 0 ? retry : 1);
    }
    if (legacy) {
        add_field(out, "X-RateLimit-Limit", "%" PRId64, quota);
        add_field(out, "X-RateLimit-Remaining", "%" PRId64, remaining);
        add_field(out, "X-RateLimit-Reset", "%" PRId64, reset);
    }
    return CR_OK;
}
