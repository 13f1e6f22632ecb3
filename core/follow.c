/*
 * Following a provider (docs/design.md §18): what a response says of the
 * limit it met, and the state that says as much.
 *
 * The reading trusts nothing: a response may come from a broken or hostile
 * server. Every number is read by its field's own grammar, exactly (integers
 * in 64 bits, fractions to the nanosecond rounded up); a value that is not
 * one, is negative, lies in the past or does not fit 63 bits is no value; a
 * Structured Field (RFC 8941) that does not parse is ignored whole, as the
 * IETF draft says. What survives can only make a limiter stricter (cr_follow
 * takes the max), and no wait is longer than CR_FOLLOW_MAX_NS.
 */
#include "cellrate/clock.h"
#include "cellrate/follow.h"
#include "decide.h"

#include <string.h>

#define SECOND_NS INT64_C(1000000000)

/* A span of bytes of a field. */
typedef struct {
    const char *p;
    size_t n;
} text;

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static text trimmed(const char *p, size_t n)
{
    while (n > 0 && is_ows(p[0])) {
        p++;
        n--;
    }
    while (n > 0 && is_ows(p[n - 1]))
        n--;
    text t = {p, n};
    return t;
}

static bool starts_with(const cr_field *field, const char *lower)
{
    const size_t n = strlen(lower);
    if (field->name_len < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(field->name[i]) != lower[i])
            return false;
    return true;
}

static bool same_name(const cr_field *field, const char *lower)
{
    const size_t n = strlen(lower);
    if (field->name_len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(field->name[i]) != lower[i])
            return false;
    return true;
}

/* 1*DIGIT, at most INT64_MAX. */
static bool read_count(text t, int64_t *out)
{
    if (t.n == 0)
        return false;
    int64_t value = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (!is_digit(t.p[i]) || value > (INT64_MAX - (t.p[i] - '0')) / 10)
            return false;
        value = value * 10 + (t.p[i] - '0');
    }
    *out = value;
    return true;
}

/* The most fraction digits a decimal may have (more: no value). */
#define FRACTION_DIGITS_MAX 18

/* DIGITS ["." DIGITS] or "." DIGITS, at *p (advanced past it), times
 * `unit_ns`, rounded up to the ns; false when it is not one or the result
 * does not fit 63 bits. */
static bool read_decimal_ns(const char **p, const char *end, int64_t unit_ns, int64_t *ns)
{
    const char *s = *p;
    cr_u128 whole = 0, fraction = 0, scale = 1;
    size_t digits = 0, fraction_digits = 0;
    while (s < end && is_digit(*s)) {
        whole = whole * 10 + (unsigned)(*s++ - '0');
        if (whole > (cr_u128)INT64_MAX)
            return false;
        digits++;
    }
    if (s < end && *s == '.') {
        s++;
        while (s < end && is_digit(*s)) {
            if (++fraction_digits > FRACTION_DIGITS_MAX)
                return false;
            fraction = fraction * 10 + (unsigned)(*s++ - '0');
            scale *= 10;
        }
        if (fraction_digits == 0 && digits == 0)
            return false;
    }
    if (digits == 0 && fraction_digits == 0)
        return false;
    const cr_u128 total = whole * (uint64_t)unit_ns +
                          (fraction * (uint64_t)unit_ns + scale - 1) / scale;
    if (total > (cr_u128)INT64_MAX)
        return false;
    *ns = (int64_t)total;
    *p = s;
    return true;
}

/* A whole field that is one decimal number of `unit_ns`. */
static bool read_decimal_field(text t, int64_t unit_ns, int64_t *ns)
{
    const char *p = t.p;
    return read_decimal_ns(&p, t.p + t.n, unit_ns, ns) && p == t.p + t.n;
}

/* The units of a Go duration; µs in both spellings (U+00B5, U+03BC). */
static const struct {
    const char *name;
    int64_t ns;
} duration_units[] = {
    {"ns", 1},       {"us", 1000},     {"\xc2\xb5s", 1000},   {"\xce\xbcs", 1000},
    {"ms", 1000000}, {"s", SECOND_NS}, {"m", 60 * SECOND_NS}, {"h", 3600 * SECOND_NS},
};

/* A Go duration ("6m0s", "1.5s", "20ms", "1h2m3s", "0"): one or more
 * decimals, each followed by its unit; or a bare decimal, in seconds. */
static bool read_duration(text t, int64_t *ns)
{
    if (read_decimal_field(t, SECOND_NS, ns))
        return true;
    const char *p = t.p, *end = t.p + t.n;
    int64_t total = 0;
    if (p == end)
        return false;
    while (p < end) {
        /* the number, then the longest unit name that follows it */
        const char *number = p;
        while (p < end && (is_digit(*p) || *p == '.'))
            p++;
        size_t best = 0;
        int64_t unit_ns = 0;
        for (size_t i = 0; i < sizeof duration_units / sizeof duration_units[0]; i++) {
            const size_t len = strlen(duration_units[i].name);
            if (len > best && (size_t)(end - p) >= len &&
                memcmp(p, duration_units[i].name, len) == 0) {
                best = len;
                unit_ns = duration_units[i].ns;
            }
        }
        if (best == 0)
            return false;
        const char *cursor = number;
        int64_t part;
        if (!read_decimal_ns(&cursor, p, unit_ns, &part) || cursor != p ||
            __builtin_add_overflow(total, part, &total))
            return false;
        p += best;
    }
    *ns = total;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Calendar times                                                            */

/* Days from 1970-01-01 to year-month-day (proleptic Gregorian; H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day)
{
    year -= month <= 2;
    const int64_t era = (year >= 0 ? year : year - 399) / 400;
    const int64_t yoe = year - era * 400;
    const int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t year, int64_t month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* Exactly `width` digits at *p. */
static bool read_fixed(const char **p, const char *end, int width, int64_t *out)
{
    if (end - *p < width)
        return false;
    int64_t value = 0;
    for (int i = 0; i < width; i++) {
        if (!is_digit((*p)[i]))
            return false;
        value = value * 10 + ((*p)[i] - '0');
    }
    *p += width;
    *out = value;
    return true;
}

static bool read_literal(const char **p, const char *end, const char *literal)
{
    const size_t n = strlen(literal);
    if ((size_t)(end - *p) < n || memcmp(*p, literal, n) != 0)
        return false;
    *p += n;
    return true;
}

/* One of `names` (3 letters each, as HTTP dates write them); its index. */
static bool read_name3(const char **p, const char *end, const char *const *names, int count,
                       int *index)
{
    for (int i = 0; i < count; i++)
        if (read_literal(p, end, names[i])) {
            *index = i;
            return true;
        }
    return false;
}

static const char *const month_names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const day_names[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const long_day_names[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                             "Friday", "Saturday", "Sunday"};

/* The Unix time in ns of a valid date and time of day (UTC); false beyond
 * 63 bits of ns or before 1970. */
static bool civil_ns(int64_t year, int64_t month, int64_t day, int64_t hour, int64_t minute,
                     int64_t second, int64_t *ns)
{
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 60)
        return false;
    const int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 +
                            second;
    if (seconds < 0 || seconds > INT64_MAX / SECOND_NS)
        return false;
    *ns = seconds * SECOND_NS;
    return true;
}

/* "HH:MM:SS" */
static bool read_clock(const char **p, const char *end, int64_t *hour, int64_t *minute,
                       int64_t *second)
{
    return read_fixed(p, end, 2, hour) && read_literal(p, end, ":") &&
           read_fixed(p, end, 2, minute) && read_literal(p, end, ":") &&
           read_fixed(p, end, 2, second);
}

/*
 * An HTTP-date (RFC 9110 §5.6.7) into Unix ns: IMF-fixdate ("Sun, 06 Nov
 * 1994 08:49:37 GMT"), rfc850-date ("Sunday, 06-Nov-94 08:49:37 GMT", its
 * two-digit year the latest not more than 50 years after `realtime_ns`'s
 * year) and asctime-date ("Sun Nov  6 08:49:37 1994").
 */
static bool read_http_date(text t, int64_t realtime_ns, int64_t *ns)
{
    const char *p = t.p, *end = t.p + t.n;
    int64_t year, day, hour, minute, second;
    int month, weekday;
    if (read_name3(&p, end, day_names, 7, &weekday) && read_literal(&p, end, ", ")) {
        if (!(read_fixed(&p, end, 2, &day) && read_literal(&p, end, " ") &&
              read_name3(&p, end, month_names, 12, &month) && read_literal(&p, end, " ") &&
              read_fixed(&p, end, 4, &year) && read_literal(&p, end, " ") &&
              read_clock(&p, end, &hour, &minute, &second) && read_literal(&p, end, " GMT")))
            return false;
    } else if (p = t.p, read_name3(&p, end, day_names, 7, &weekday) && read_literal(&p, end, " ")) {
        /* asctime: the day as two digits or a space and one digit */
        if (!read_name3(&p, end, month_names, 12, &month) || !read_literal(&p, end, " "))
            return false;
        if (p < end && *p == ' ') {
            p++;
            if (!read_fixed(&p, end, 1, &day))
                return false;
        } else if (!read_fixed(&p, end, 2, &day)) {
            return false;
        }
        if (!(read_literal(&p, end, " ") && read_clock(&p, end, &hour, &minute, &second) &&
              read_literal(&p, end, " ") && read_fixed(&p, end, 4, &year)))
            return false;
    } else {
        p = t.p;
        int index = -1;
        for (int i = 0; i < 7 && index < 0; i++)
            if (read_literal(&p, end, long_day_names[i]))
                index = i;
        int64_t short_year;
        if (index < 0 ||
            !(read_literal(&p, end, ", ") && read_fixed(&p, end, 2, &day) &&
              read_literal(&p, end, "-") && read_name3(&p, end, month_names, 12, &month) &&
              read_literal(&p, end, "-") && read_fixed(&p, end, 2, &short_year) &&
              read_literal(&p, end, " ") && read_clock(&p, end, &hour, &minute, &second) &&
              read_literal(&p, end, " GMT")))
            return false;
        /* the century: the latest year with these two digits that is not more
         * than 50 years after now */
        const int64_t this_year = 1970 + realtime_ns / SECOND_NS / 31556952;
        year = (this_year + 50) / 100 * 100 + short_year;
        if (year > this_year + 50)
            year -= 100;
    }
    return p == end && civil_ns(year, month + 1, day, hour, minute, second, ns);
}

/* An RFC 3339 date-time ("2025-08-21T12:40:59Z", "...59.5+02:00") into Unix
 * ns, a fraction of a second rounded up. */
static bool read_rfc3339(text t, int64_t *ns)
{
    const char *p = t.p, *end = t.p + t.n;
    int64_t year, month, day, hour, minute, second, fraction_ns = 0;
    if (!(read_fixed(&p, end, 4, &year) && read_literal(&p, end, "-") &&
          read_fixed(&p, end, 2, &month) && read_literal(&p, end, "-") &&
          read_fixed(&p, end, 2, &day)))
        return false;
    if (p == end || (*p != 'T' && *p != 't' && *p != ' '))
        return false;
    p++;
    if (!read_clock(&p, end, &hour, &minute, &second))
        return false;
    if (p < end && *p == '.') {
        const char *fraction = p;
        if (p + 1 == end || !is_digit(p[1]) ||
            !read_decimal_ns(&fraction, end, SECOND_NS, &fraction_ns))
            return false;
        p = fraction;
    }
    int64_t offset_s = 0;
    if (p < end && (*p == 'Z' || *p == 'z')) {
        p++;
    } else if (p < end && (*p == '+' || *p == '-')) {
        const int64_t sign = *p == '-' ? -1 : 1;
        int64_t offset_hour, offset_minute;
        p++;
        if (!(read_fixed(&p, end, 2, &offset_hour) && read_literal(&p, end, ":") &&
              read_fixed(&p, end, 2, &offset_minute)) ||
            offset_hour > 23 || offset_minute > 59)
            return false;
        offset_s = sign * (offset_hour * 3600 + offset_minute * 60);
    } else {
        return false;
    }
    int64_t local_ns;
    if (p != end || !civil_ns(year, month, day, hour, minute, second, &local_ns))
        return false;
    /* local - offset = UTC; the fraction is below a second: no overflow below 2^63 - 1 s */
    const int64_t utc_s = local_ns / SECOND_NS - offset_s;
    if (utc_s < 0 || utc_s > (INT64_MAX - fraction_ns) / SECOND_NS)
        return false;
    *ns = utc_s * SECOND_NS + fraction_ns;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Structured Fields (RFC 8941, with RFC 9651's dates and display strings):  */
/* enough to read a List and a Dictionary, their items' values and the      */
/* integer and string parameters that RateLimit and RateLimit-Policy use.   */

typedef struct {
    const char *p;
    const char *end;
} sf_cursor;

typedef enum {
    SF_INTEGER,
    SF_DECIMAL,
    SF_STRING,
    SF_TOKEN,
    SF_BYTES,
    SF_BOOLEAN,
    SF_DATE,
    SF_DISPLAY
} sf_type;

typedef struct {
    sf_type type;
    int64_t integer; /* SF_INTEGER, SF_DATE, SF_BOOLEAN */
    text raw;        /* SF_STRING: between the quotes, escapes as written (canonical) */
} sf_value;

/* The parameters RateLimit and RateLimit-Policy define: the last of each
 * key wins, as RFC 8941 says. */
typedef struct {
    bool has_r, has_t, has_qu;
    sf_value r, t, qu;
} sf_params;

static bool sf_at(const sf_cursor *c, char ch) { return c->p < c->end && *c->p == ch; }

static void sf_skip_sp(sf_cursor *c)
{
    while (sf_at(c, ' '))
        c->p++;
}

static void sf_skip_ows(sf_cursor *c)
{
    while (c->p < c->end && is_ows(*c->p))
        c->p++;
}

static bool sf_lcalpha(char ch) { return ch >= 'a' && ch <= 'z'; }

static bool sf_alpha(char ch) { return sf_lcalpha(ch) || (ch >= 'A' && ch <= 'Z'); }

static bool sf_tchar(char ch)
{
    return sf_alpha(ch) || is_digit(ch) || (ch != 0 && strchr("!#$%&'*+-.^_`|~:/", ch) != NULL);
}

/* sf-integer / sf-decimal (RFC 8941 §4.2.4) */
static bool sf_number(sf_cursor *c, sf_value *v)
{
    int64_t sign = 1, value = 0;
    int digits = 0;
    if (sf_at(c, '-')) {
        sign = -1;
        c->p++;
    }
    if (!(c->p < c->end && is_digit(*c->p)))
        return false;
    while (c->p < c->end && is_digit(*c->p)) {
        if (++digits > 15)
            return false;
        value = value * 10 + (*c->p++ - '0');
    }
    if (!sf_at(c, '.')) {
        v->type = SF_INTEGER;
        v->integer = sign * value;
        return true;
    }
    if (digits > 12)
        return false;
    c->p++;
    int fraction = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        if (++fraction > 3)
            return false;
        c->p++;
    }
    if (fraction == 0)
        return false;
    v->type = SF_DECIMAL;
    return true;
}

static bool sf_string(sf_cursor *c, sf_value *v)
{
    c->p++; /* the opening quote */
    const char *start = c->p;
    while (c->p < c->end) {
        const char ch = *c->p++;
        if (ch == '\\') {
            if (!(c->p < c->end && (*c->p == '"' || *c->p == '\\')))
                return false;
            c->p++;
        } else if (ch == '"') {
            v->type = SF_STRING;
            v->raw.p = start;
            v->raw.n = (size_t)(c->p - 1 - start);
            return true;
        } else if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e) {
            return false;
        }
    }
    return false;
}

static bool sf_bare_item(sf_cursor *c, sf_value *v)
{
    if (c->p >= c->end)
        return false;
    const char ch = *c->p;
    if (ch == '-' || is_digit(ch))
        return sf_number(c, v);
    if (ch == '"')
        return sf_string(c, v);
    if (ch == '*' || sf_alpha(ch)) {
        v->type = SF_TOKEN;
        v->raw.p = c->p;
        while (c->p < c->end && sf_tchar(*c->p))
            c->p++;
        v->raw.n = (size_t)(c->p - v->raw.p);
        return true;
    }
    if (ch == ':') { /* a byte sequence: base64 between colons */
        c->p++;
        while (c->p < c->end && *c->p != ':') {
            const char b = *c->p++;
            if (!(sf_alpha(b) || is_digit(b) || b == '+' || b == '/' || b == '='))
                return false;
        }
        if (!sf_at(c, ':'))
            return false;
        c->p++;
        v->type = SF_BYTES;
        return true;
    }
    if (ch == '?') {
        c->p++;
        if (!(sf_at(c, '0') || sf_at(c, '1')))
            return false;
        v->type = SF_BOOLEAN;
        v->integer = *c->p++ == '1';
        return true;
    }
    if (ch == '@') { /* RFC 9651 date */
        c->p++;
        if (!sf_number(c, v) || v->type != SF_INTEGER)
            return false;
        v->type = SF_DATE;
        return true;
    }
    if (ch == '%') { /* RFC 9651 display string: %"..." with %xx escapes */
        c->p++;
        if (!sf_at(c, '"'))
            return false;
        c->p++;
        while (c->p < c->end && *c->p != '"') {
            const char d = *c->p++;
            if (d == '%') {
                for (int i = 0; i < 2; i++, c->p++)
                    if (!(c->p < c->end && (is_digit(*c->p) || (*c->p >= 'a' && *c->p <= 'f'))))
                        return false;
            } else if ((unsigned char)d < 0x20 || (unsigned char)d > 0x7e) {
                return false;
            }
        }
        if (!sf_at(c, '"'))
            return false;
        c->p++;
        v->type = SF_DISPLAY;
        return true;
    }
    return false;
}

static bool sf_key(sf_cursor *c, text *key)
{
    if (!(c->p < c->end && (sf_lcalpha(*c->p) || *c->p == '*')))
        return false;
    key->p = c->p;
    while (c->p < c->end && (sf_lcalpha(*c->p) || is_digit(*c->p) || *c->p == '_' || *c->p == '-' ||
                             *c->p == '.' || *c->p == '*'))
        c->p++;
    key->n = (size_t)(c->p - key->p);
    return true;
}

static bool text_is(text t, const char *word)
{
    return t.n == strlen(word) && memcmp(t.p, word, t.n) == 0;
}

/* *( ";" *SP key [ "=" bare-item ] ), keeping r, t and qu (NULL: none). */
static bool sf_parameters(sf_cursor *c, sf_params *params)
{
    while (sf_at(c, ';')) {
        c->p++;
        sf_skip_sp(c);
        text key;
        if (!sf_key(c, &key))
            return false;
        sf_value value = {SF_BOOLEAN, 1, {"", 0}};
        if (sf_at(c, '=')) {
            c->p++;
            if (!sf_bare_item(c, &value))
                return false;
        }
        if (!params)
            continue;
        if (text_is(key, "r")) {
            params->has_r = true;
            params->r = value;
        } else if (text_is(key, "t")) {
            params->has_t = true;
            params->t = value;
        } else if (text_is(key, "qu")) {
            params->has_qu = true;
            params->qu = value;
        }
    }
    return true;
}

/* An item or an inner list, with its parameters; an inner list (which no
 * RateLimit field carries) has no value: *is_item false. */
static bool sf_member(sf_cursor *c, sf_value *value, sf_params *params, bool *is_item)
{
    memset(params, 0, sizeof *params);
    *is_item = !sf_at(c, '(');
    if (*is_item)
        return sf_bare_item(c, value) && sf_parameters(c, params);
    c->p++;
    for (;;) {
        sf_skip_sp(c);
        if (sf_at(c, ')')) {
            c->p++;
            return sf_parameters(c, NULL);
        }
        sf_value inner;
        if (!sf_bare_item(c, &inner) || !sf_parameters(c, NULL))
            return false;
        if (!(sf_at(c, ' ') || sf_at(c, ')')))
            return false;
    }
}

/* After a member: OWS, then the end, or "," OWS and another member. */
static bool sf_next(sf_cursor *c, bool *more)
{
    sf_skip_ows(c);
    if (c->p == c->end) {
        *more = false;
        return true;
    }
    if (!sf_at(c, ','))
        return false;
    c->p++;
    sf_skip_ows(c);
    *more = true;
    return c->p < c->end; /* a trailing comma fails the field */
}

/* A List's members, each given to `visit` (NULL: only parse it). */
typedef void (*sf_visit)(void *context, const sf_value *value, const sf_params *params);

static bool sf_list_walk(text field, sf_visit visit, void *context)
{
    sf_cursor c = {field.p, field.p + field.n};
    sf_skip_sp(&c);
    bool more = c.p < c.end;
    while (more) {
        sf_value value;
        sf_params params;
        bool is_item;
        if (!sf_member(&c, &value, &params, &is_item) || !sf_next(&c, &more))
            return false;
        if (visit && is_item)
            visit(context, &value, &params);
    }
    return true;
}

/* A List, visited only when the whole field parses (false: it does not). */
static bool sf_list(text field, sf_visit visit, void *context)
{
    return sf_list_walk(field, NULL, NULL) && (!visit || sf_list_walk(field, visit, context));
}

/* A Dictionary (draft 07's RateLimit: limit=100, remaining=50, reset=5):
 * the integer values of `remaining` and `reset`, when the field parses. */
static bool sf_dictionary(text field, bool *has_remaining, int64_t *remaining, bool *has_reset,
                          int64_t *reset)
{
    sf_cursor c = {field.p, field.p + field.n};
    *has_remaining = *has_reset = false;
    sf_skip_sp(&c);
    bool more = c.p < c.end;
    while (more) {
        text key;
        if (!sf_key(&c, &key))
            return false;
        sf_value value = {SF_BOOLEAN, 1, {"", 0}};
        sf_params params;
        bool is_item = true;
        if (sf_at(&c, '=')) {
            c.p++;
            if (!sf_member(&c, &value, &params, &is_item))
                return false;
        } else if (!sf_parameters(&c, NULL)) {
            return false;
        }
        if (!sf_next(&c, &more))
            return false;
        const bool count = is_item && value.type == SF_INTEGER && value.integer >= 0;
        if (text_is(key, "remaining")) { /* the last one wins */
            *has_remaining = count;
            *remaining = value.integer;
        } else if (text_is(key, "reset")) {
            *has_reset = count;
            *reset = value.integer;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reading a response                                                       */

typedef struct {
    cr_signal *out;
    const cr_field *fields;
    size_t count;
    cr_quota quota;
    int64_t realtime_ns; /* CR_CLOCK until first needed */
} reading;

static int64_t reading_now(reading *r)
{
    if (r->realtime_ns == CR_CLOCK)
        r->realtime_ns = cr_realtime_ns();
    return r->realtime_ns;
}

/* A wait until the Unix time `at_ns`: false when it is not after now. */
static bool wait_until(reading *r, int64_t at_ns, int64_t *within_ns)
{
    const int64_t now = reading_now(r);
    if (at_ns <= now)
        return false;
    *within_ns = at_ns - now;
    return true;
}

static void add_bound(cr_signal *signal, int64_t remaining, int64_t within_ns)
{
    if (within_ns > CR_FOLLOW_MAX_NS)
        within_ns = CR_FOLLOW_MAX_NS;
    if (signal->count < CR_BOUNDS_MAX) {
        signal->bound[signal->count].remaining = remaining;
        signal->bound[signal->count].within_ns = within_ns;
        signal->count++;
        return;
    }
    cr_bound *last = &signal->bound[CR_BOUNDS_MAX - 1];
    if (remaining < last->remaining)
        last->remaining = remaining;
    if (within_ns > last->within_ns)
        last->within_ns = within_ns;
}

/* A remaining and its reset, read from fields of one family: the fewest
 * remaining and the longest reset among the valid ones. */
typedef struct {
    bool has_remaining, has_reset;
    int64_t remaining, reset_ns;
} family;

static void family_remaining(family *f, int64_t remaining)
{
    if (!f->has_remaining || remaining < f->remaining)
        f->remaining = remaining;
    f->has_remaining = true;
}

static void family_reset(family *f, int64_t reset_ns)
{
    if (!f->has_reset || reset_ns > f->reset_ns)
        f->reset_ns = reset_ns;
    f->has_reset = true;
}

static void family_end(reading *r, const family *f, bool of_quota)
{
    if (f->has_remaining && of_quota)
        add_bound(r->out, f->remaining, f->has_reset ? f->reset_ns : 0);
}

/* x-ratelimit-reset: seconds, or a Unix time in seconds (from 10^9 on) or
 * in milliseconds (an integer from 10^12 on); else a duration ("1m30s"). */
static bool read_generic_reset(reading *r, text value, int64_t *within_ns)
{
    int64_t number;
    if (read_count(value, &number) && number >= INT64_C(1000000000000))
        return number <= INT64_MAX / 1000000 && wait_until(r, number * 1000000, within_ns);
    if (read_decimal_field(value, SECOND_NS, &number) && number >= INT64_C(1000000000) * SECOND_NS)
        return wait_until(r, number, within_ns);
    return read_duration(value, within_ns);
}

/* The quota unit of the RateLimit-Policy item named `name` (the last one of
 * that name): its qu, "requests" when it has none or no policy has the name. */
typedef struct {
    text name;
    sf_value unit;
} policy_lookup;

static void visit_policy(void *context, const sf_value *value, const sf_params *params)
{
    policy_lookup *lookup = context;
    if (value->type != SF_STRING || value->raw.n != lookup->name.n ||
        memcmp(value->raw.p, lookup->name.p, lookup->name.n) != 0)
        return;
    lookup->unit.type = SF_STRING;
    lookup->unit.raw.p = "requests";
    lookup->unit.raw.n = 8;
    if (params->has_qu)
        lookup->unit = params->qu;
}

static bool policy_quota(const reading *r, text name, cr_quota *quota)
{
    policy_lookup lookup = {name, {SF_STRING, 0, {"requests", 8}}};
    for (size_t i = 0; i < r->count; i++)
        if (same_name(&r->fields[i], "ratelimit-policy"))
            sf_list(trimmed(r->fields[i].value, r->fields[i].value_len), visit_policy, &lookup);
    if (lookup.unit.type != SF_STRING)
        return false;
    if (text_is(lookup.unit.raw, "requests"))
        *quota = CR_QUOTA_REQUESTS;
    else if (text_is(lookup.unit.raw, "tokens"))
        *quota = CR_QUOTA_TOKENS;
    else
        return false; /* content-bytes, concurrent-requests: no quota of ours */
    return true;
}

/* A service limit item of RateLimit (drafts 08 to 11): "policy";r=R;t=T. */
static void visit_service_limit(void *context, const sf_value *value, const sf_params *params)
{
    reading *r = context;
    if (value->type != SF_STRING || !params->has_r || params->r.type != SF_INTEGER ||
        params->r.integer < 0)
        return;
    int64_t within_ns = 0; /* no t, or one that is no count of seconds in 63 bits of ns */
    if (params->has_t && params->t.type == SF_INTEGER && params->t.integer >= 0 &&
        params->t.integer <= INT64_MAX / SECOND_NS)
        within_ns = params->t.integer * SECOND_NS;
    cr_quota quota;
    if (policy_quota(r, value->raw, &quota) && quota == r->quota)
        add_bound(r->out, params->r.integer, within_ns);
}

/* RateLimit: a List (drafts 08 to 11) or a Dictionary (draft 07). */
static void read_ratelimit_field(reading *r, text value)
{
    if (sf_list(value, NULL, NULL)) {
        sf_list(value, visit_service_limit, r);
        return;
    }
    bool has_remaining, has_reset;
    int64_t remaining = 0, reset = 0;
    if (!sf_dictionary(value, &has_remaining, &remaining, &has_reset, &reset) || !has_remaining)
        return;
    if (r->quota == CR_QUOTA_REQUESTS)
        add_bound(r->out, remaining,
                  has_reset && reset <= INT64_MAX / SECOND_NS ? reset * SECOND_NS : 0);
}

/* Retry-After: delay-seconds (a fraction allowed) or an HTTP-date. */
static bool read_retry_after(reading *r, text value, int64_t *within_ns)
{
    int64_t at_ns;
    if (read_decimal_field(value, SECOND_NS, within_ns))
        return true;
    if (value.n > 0 && !is_digit(value.p[0]) && read_http_date(value, reading_now(r), &at_ns))
        return wait_until(r, at_ns, within_ns);
    return false;
}

/* A field of the families read here (Retry-After, RateLimit*, x-ratelimit-*,
 * anthropic-ratelimit-*), whatever its value. */
static bool of_families(const cr_field *field)
{
    return same_name(field, "retry-after") || same_name(field, "retry-after-ms") ||
           starts_with(field, "ratelimit") || starts_with(field, "x-ratelimit-") ||
           starts_with(field, "anthropic-ratelimit-");
}

cr_status cr_signal_read(cr_signal *out, const cr_field *fields, size_t count, int64_t status,
                         cr_quota quota, int64_t realtime_ns)
{
    out->count = 0;
    if (status != 0 && (status < 100 || status > 599))
        return CR_E_STATUS_CODE;
    if (quota != CR_QUOTA_REQUESTS && quota != CR_QUOTA_TOKENS)
        return CR_E_QUOTA;
    if (count > 0 && !fields)
        return CR_E_HEADERS;
    if (realtime_ns != CR_CLOCK && (realtime_ns < 0 || realtime_ns >= CR_HORIZON_NS))
        return CR_E_NOW;
    reading r = {out, fields, count, quota, realtime_ns};
    const bool retry_applies = status == 0 || status == 429 || status == 503;
    bool carries = false; /* a field of these families, valid or not */
    family waits[2];      /* the longest wait of retry-after-ms [0], of Retry-After [1] */
    memset(waits, 0, sizeof waits);
    /* the families: [0] x-ratelimit-*-requests, [1] -tokens, [2] x-ratelimit-*,
     * [3] anthropic requests, [4] anthropic tokens, [5] RateLimit-* (drafts <= 06) */
    family families[6];
    memset(families, 0, sizeof families);
    static const struct {
        const char *remaining, *reset;
        cr_quota quota;
        enum { DURATION, GENERIC, RFC3339, SECONDS } reset_kind;
    } names[6] = {
        {"x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", CR_QUOTA_REQUESTS,
         DURATION},
        {"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", CR_QUOTA_TOKENS, DURATION},
        {"x-ratelimit-remaining", "x-ratelimit-reset", CR_QUOTA_REQUESTS, GENERIC},
        {"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
         CR_QUOTA_REQUESTS, RFC3339},
        {"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
         CR_QUOTA_TOKENS, RFC3339},
        {"ratelimit-remaining", "ratelimit-reset", CR_QUOTA_REQUESTS, SECONDS},
    };
    for (size_t i = 0; i < count; i++) {
        const cr_field *field = &fields[i];
        if ((!field->name && field->name_len) || (!field->value && field->value_len))
            return CR_E_HEADERS;
        const text value = trimmed(field->value ? field->value : "", field->value_len);
        int64_t number;
        carries = carries || of_families(field);
        const bool seconds = same_name(field, "retry-after");
        if (seconds || same_name(field, "retry-after-ms")) {
            const bool read = seconds ? read_retry_after(&r, value, &number)
                                      : read_decimal_field(value, 1000000, &number);
            if (read)
                family_reset(&waits[seconds], number);
            continue;
        }
        if (same_name(field, "ratelimit")) {
            read_ratelimit_field(&r, value);
            continue;
        }
        for (int f = 0; f < 6; f++) {
            if (same_name(field, names[f].remaining)) {
                if (read_count(value, &number))
                    family_remaining(&families[f], number);
            } else if (same_name(field, names[f].reset)) {
                bool read;
                switch (names[f].reset_kind) {
                case DURATION:
                    read = read_duration(value, &number);
                    break;
                case GENERIC:
                    read = read_generic_reset(&r, value, &number);
                    break;
                case RFC3339:
                    read = read_rfc3339(value, &number) && wait_until(&r, number, &number);
                    break;
                default:
                    read = read_count(value, &number) && number <= INT64_MAX / SECOND_NS;
                    number *= read ? SECOND_NS : 0;
                    break;
                }
                if (read)
                    family_reset(&families[f], number);
            }
        }
    }
    /* retry-after-ms is the same wait to the millisecond: it takes the place
     * of Retry-After (whole seconds) when both say one */
    const family *wait = waits[0].has_reset ? &waits[0] : &waits[1];
    if (retry_applies && wait->has_reset && wait->reset_ns > 0)
        add_bound(out, 0, wait->reset_ns);
    for (int f = 0; f < 6; f++)
        family_end(&r, &families[f], names[f].quota == quota);
    /* a 429 that carries none of these fields: nothing is left now */
    if (status == 429 && !carries && quota == CR_QUOTA_REQUESTS)
        add_bound(out, 0, 0);
    return CR_OK;
}

cr_status cr_parse_quota(const char *name, size_t len, cr_quota *out)
{
    if (!name) {
        *out = CR_QUOTA_REQUESTS;
        return CR_OK;
    }
    for (int quota = CR_QUOTA_REQUESTS; quota <= CR_QUOTA_TOKENS; quota++) {
        const char *word = cr_quota_name((cr_quota)quota);
        if (len == strlen(word) && memcmp(name, word, len) == 0) {
            *out = (cr_quota)quota;
            return CR_OK;
        }
    }
    return CR_E_QUOTA;
}

const char *cr_quota_name(cr_quota quota)
{
    switch (quota) {
    case CR_QUOTA_REQUESTS:
        return "requests";
    case CR_QUOTA_TOKENS:
        return "tokens";
    default:
        return "";
    }
}

/* ------------------------------------------------------------------------ */
/* The state a signal asks for                                               */

cr_status cr_follow_check(int64_t pending, double share)
{
    if (pending < 0)
        return CR_E_PENDING;
    if (!(share > 0.0 && share <= 1.0))
        return CR_E_SHARE;
    return CR_OK;
}

int64_t cr_follow(const cr_limit *limit, int64_t state, int64_t now_ns, const cr_signal *signal,
                  int64_t pending, double share)
{
    return cr_follow_core(limit, state, now_ns, signal, pending, share);
}

/* ------------------------------------------------------------------------ */
/* Retrying a refused request                                                */

cr_status cr_retry_check(int64_t retries, int64_t backoff_ns, int64_t max_backoff_ns)
{
    if (retries < 0)
        return CR_E_RETRIES;
    if (backoff_ns <= 0 || max_backoff_ns < backoff_ns)
        return CR_E_BACKOFF;
    return CR_OK;
}

bool cr_retry_wait(int64_t status, int64_t attempt, int64_t retries, int64_t backoff_ns,
                   int64_t max_backoff_ns, uint64_t random, int64_t *wait_ns)
{
    *wait_ns = 0;
    if ((status != 429 && status != 503) || attempt < 1 || attempt > retries ||
        cr_retry_check(retries, backoff_ns, max_backoff_ns) != CR_OK)
        return false;
    int64_t backoff = backoff_ns;
    for (int64_t i = 1; i < attempt && backoff < max_backoff_ns; i++)
        backoff = backoff > max_backoff_ns / 2 ? max_backoff_ns : backoff * 2;
    if (backoff > max_backoff_ns)
        backoff = max_backoff_ns;
    const int64_t fixed = backoff / 2;
    /* the spread: random * (backoff - fixed + 1) / 2^64, in [0, backoff - fixed] */
    const int64_t spread = (int64_t)(((cr_u128)random * (uint64_t)(backoff - fixed + 1)) >> 64);
    *wait_ns = fixed + spread;
    return true;
}
