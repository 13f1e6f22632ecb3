/* HTTP header fields of a decision (draft-ietf-httpapi-ratelimit-headers-11):
 * the one formatter behind Decision.headers() and cellrate.headers(). */
#include "cellrate/http.h"

#include <math.h>
#include <string.h>

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

/* `name` (NULL: CR_HEADER_DEFAULT_NAME) as an RFC 8941 sf-string ("..." with
 * '"' and '\\' escaped), and its length; 0 when the name is empty, too long
 * or holds a byte outside printable ASCII. */
static size_t quote_name(char *quoted, const char *name, size_t name_len)
{
    if (name == NULL) {
        name = CR_HEADER_DEFAULT_NAME;
        name_len = sizeof CR_HEADER_DEFAULT_NAME - 1;
    }
    if (name_len == 0 || name_len > CR_HEADER_NAME_MAX)
        return 0;
    size_t at = 0;
    quoted[at++] = '"';
    for (size_t i = 0; i < name_len; i++) {
        const unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c > 0x7e)
            return 0;
        if (c == '"' || c == '\\')
            quoted[at++] = '\\';
        quoted[at++] = (char)c;
    }
    quoted[at++] = '"';
    return at;
}

/* The fields are built by copying and by decimal digits of non-negative
 * integers, not snprintf: this runs per response in the web faces, where a
 * snprintf costs more than the decision. Every value fits CR_HEADER_VALUE_MAX
 * (see the header). */
static char *put_text(char *at, const char *text, size_t len)
{
    memcpy(at, text, len);
    return at + len;
}

/* "00" to "99": two digits per division, written in place from the last. */
static const char digit_pairs[201] = "0001020304050607080910111213141516171819"
                                     "2021222324252627282930313233343536373839"
                                     "4041424344454647484950515253545556575859"
                                     "6061626364656667686970717273747576777879"
                                     "8081828384858687888990919293949596979899";

static char *put_int(char *at, int64_t value)
{
    uint64_t rest = (uint64_t)value;
    size_t digits = 1; /* at most 19: value is an int64_t >= 0 */
    for (uint64_t bound = 10; digits < 19 && rest >= bound; bound *= 10)
        digits++;
    char *last = at + digits;
    while (rest >= 100) {
        last -= 2;
        memcpy(last, &digit_pairs[2 * (rest % 100)], 2);
        rest /= 100;
    }
    if (rest >= 10)
        memcpy(last - 2, &digit_pairs[2 * rest], 2);
    else
        last[-1] = (char)('0' + rest);
    return at + digits;
}

static char *next_field(cr_headers *out, const char *name)
{
    cr_header *field = &out->field[out->count++];
    field->name = name;
    return field->value;
}

static void end_field(cr_headers *out, char *end)
{
    cr_header *field = &out->field[out->count - 1];
    *end = '\0';
    field->value_len = (size_t)(end - field->value);
}

/* "<quoted><first_key><first><second_key><second>", keys of three bytes
 * (";q="): the two sf-lists of the draft. */
static void add_list(cr_headers *out, const char *name, const char *quoted, size_t quoted_len,
                     const char *first_key, int64_t first, const char *second_key, int64_t second)
{
    char *at = put_text(next_field(out, name), quoted, quoted_len);
    at = put_text(at, first_key, 3);
    at = put_int(at, first);
    at = put_text(at, second_key, 3);
    end_field(out, put_int(at, second));
}

static void add_int(cr_headers *out, const char *name, int64_t value)
{
    end_field(out, put_int(next_field(out, name), value));
}

cr_status cr_headers_check_name(const char *name, size_t name_len)
{
    char quoted[2 * CR_HEADER_NAME_MAX + 3];
    return quote_name(quoted, name, name_len) == 0 ? CR_E_HEADER_NAME : CR_OK;
}

cr_status cr_headers_format(cr_headers *out, const cr_decision *decision, int64_t window_ns,
                            const char *name, size_t name_len, bool legacy)
{
    out->count = 0;
    char quoted[2 * CR_HEADER_NAME_MAX + 3];
    const size_t quoted_len = quote_name(quoted, name, name_len);
    if (quoted_len == 0)
        return CR_E_HEADER_NAME;
    if (decision->limit < 0 || decision->remaining < 0 || decision->retry_after_ns < 0 ||
        decision->reset_after_ns < 0 || window_ns < 0)
        return CR_E_HEADER_VALUE;

    const int64_t quota = decision->limit;
    const int64_t remaining = decision->remaining;
    const int64_t reset = ceil_seconds(decision->reset_after_ns);
    add_list(out, "RateLimit-Policy", quoted, quoted_len, ";q=", quota,
             ";w=", ceil_seconds(window_ns));
    add_list(out, "RateLimit", quoted, quoted_len, ";r=", remaining, ";t=", reset);
    if (!decision->allowed && decision->retry_after_ns != CR_NEVER) {
        const int64_t retry = ceil_seconds(decision->retry_after_ns);
        add_int(out, "Retry-After", retry > 0 ? retry : 1);
    }
    if (legacy) {
        add_int(out, "X-RateLimit-Limit", quota);
        add_int(out, "X-RateLimit-Remaining", remaining);
        add_int(out, "X-RateLimit-Reset", reset);
    }
    return CR_OK;
}
