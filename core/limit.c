/* Limits: validation, defaults and the rate-string grammar; their
 * descriptions; seconds and nanoseconds. */
#include "cellrate/limit.h"
#include "cellrate/priority.h"
#include "cellrate/stores.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 2^63 as a double: the first value a double-to-int64 conversion cannot hold. */
#define TWO_POW_63 9223372036854775808.0

__extension__ typedef unsigned __int128 wide;

/* Nearest integer, halves away from zero, for finite 0 <= x < 2^63. */
static int64_t round_half_away(double x)
{
    double whole = floor(x);
    return (int64_t)whole + (x - whole >= 0.5 ? 1 : 0);
}

cr_status cr_seconds_to_ns(double seconds, int64_t *ns)
{
    /* Exact: seconds = mantissa * 2^-shift, so ns = mantissa * 1e9 / 2^shift
     * in 128-bit integers, rounded once (ties away from zero). */
    if (!(seconds >= 0) || !(seconds < 1e10)) /* 1e10 s > 2^62 ns; also NaN, inf */
        return CR_E_NOW;
    int exponent;
    uint64_t mantissa = (uint64_t)ldexp(frexp(seconds, &exponent), 53);
    int shift = 53 - exponent; /* >= 19: seconds < 2^34 */
    uint64_t whole = 0;
    if (mantissa != 0 && shift <= 84) { /* beyond, the product < 2^83 rounds to 0 */
        wide product = (wide)mantissa * 1000000000u;
        whole = (uint64_t)(product >> shift);
        wide rest = product - ((wide)whole << shift);
        whole += rest >= ((wide)1 << (shift - 1));
    }
    if (whole >= (uint64_t)CR_HORIZON_NS)
        return CR_E_NOW;
    *ns = (int64_t)whole;
    return CR_OK;
}

cr_status cr_wait_from_seconds(double seconds, cr_status invalid, int64_t *ns)
{
    if (!(seconds >= 0)) /* also NaN */
        return invalid;
    if (cr_seconds_to_ns(seconds, ns) != CR_OK) /* +inf, or beyond the horizon */
        *ns = CR_NEVER;
    return CR_OK;
}

double cr_ns_to_seconds(int64_t ns)
{
    if (ns == CR_NEVER)
        return INFINITY;
    return (double)ns / 1e9;
}

/* ------------------------------------------------------------------------ */
/* Rate strings: NUMBER ("/" | "per") [NUMBER] UNIT, case-insensitive.       */

typedef struct {
    const char *at;
    const char *end;
} cursor;

static void skip_spaces(cursor *c)
{
    while (c->at < c->end && *c->at == ' ')
        c->at++;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static char lower(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch; }

/* Digits with an optional fraction; at most 15 significant digits and 22
 * decimals, so the mantissa and 10^k are exact doubles and one division
 * rounds correctly. Past MAX_DECIMALS the value is below the smallest double
 * (mantissa < 10^15), so the count stops there: it never overflows, however
 * long the text. */
#define MAX_DECIMALS 400
static bool parse_number(cursor *c, double *value)
{
    uint64_t mantissa = 0;
    int digits = 0, decimals = 0;
    bool seen_digit = false, seen_point = false;
    while (c->at < c->end) {
        char ch = *c->at;
        if (is_digit(ch)) {
            seen_digit = true;
            if (mantissa != 0 || ch != '0')
                digits++;
            if (digits > 15)
                return false;
            mantissa = mantissa * 10 + (uint64_t)(ch - '0');
            if (seen_point && decimals < MAX_DECIMALS)
                decimals++;
        } else if (ch == '.' && !seen_point) {
            seen_point = true;
        } else {
            break;
        }
        c->at++;
    }
    /* Powers of ten up to 1e22 are exact doubles. */
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (!seen_digit)
        return false;
    if (decimals <= 22) {
        *value = (double)mantissa / pow10[decimals];
    } else {
        /* 10^k is no longer exact; strtod rounds mantissa * 10^-k correctly. */
        char text[48];
        snprintf(text, sizeof text, "%" PRIu64 "e-%d", mantissa, decimals);
        *value = strtod(text, NULL);
    }
    return true;
}

/* Reads a run of letters and matches it against one of `names` (NULL-ended). */
static bool word_is(const char *word, size_t len, const char *const *names)
{
    for (; *names; names++) {
        if (strlen(*names) != len)
            continue;
        size_t i = 0;
        while (i < len && lower(word[i]) == (*names)[i])
            i++;
        if (i == len)
            return true;
    }
    return false;
}

static size_t letters(const cursor *c)
{
    size_t n = 0;
    while (c->at + n < c->end && lower(c->at[n]) >= 'a' && lower(c->at[n]) <= 'z')
        n++;
    return n;
}

static const char *const unit_ns[] = {"ns", "nanosecond", "nanoseconds", NULL};
static const char *const unit_us[] = {"us", "microsecond", "microseconds", NULL};
static const char *const unit_ms[] = {"ms", "millisecond", "milliseconds", NULL};
static const char *const unit_s[] = {"s", "sec", "secs", "second", "seconds", NULL};
static const char *const unit_m[] = {"m", "min", "mins", "minute", "minutes", NULL};
static const char *const unit_h[] = {"h", "hr", "hrs", "hour", "hours", NULL};
/* The words of a calendar period's unit, by cr_period_unit: a day's and a
 * week's are a rate's too (86400 s, 604800 s); a month's and a year's only a
 * calendar quota's (CR_E_RATE_CALENDAR in a rate). */
static const char *const quota_units[][8] = {
    {"d", "day", "days", NULL},
    {"w", "wk", "wks", "week", "weeks", NULL},
    {"mo", "mon", "month", "months", NULL},
    {"y", "yr", "yrs", "year", "years", NULL},
};

static const struct {
    const char *const *names;
    double seconds;
} units[] = {
    {unit_ns, 1e-9},
    {unit_us, 1e-6},
    {unit_ms, 1e-3},
    {unit_s, 1.0},
    {unit_m, 60.0},
    {unit_h, 3600.0},
    {quota_units[CR_PERIOD_DAY], 86400.0},
    {quota_units[CR_PERIOD_WEEK], 604800.0},
};

/* Whether a unit's word is a month's or a year's: a calendar quota's only. */
static bool calendar_only_unit(const char *word, size_t n)
{
    return word_is(word, n, quota_units[CR_PERIOD_MONTH]) ||
           word_is(word, n, quota_units[CR_PERIOD_YEAR]);
}

/* The head of a rate, "<number> /" or "<number> per": the number, and c past
 * the separator; a list ("100/day;10/hour") is a status of its own. */
static cr_status read_head(cursor *c, const char *text, size_t len, double *number)
{
    static const char *const per_word[] = {"per", NULL};
    /* "100/day;10/hour", as flask-limiter and slowapi write several limits:
     * here one string is one limit, and the words say what to do instead */
    if (len > 0 && memchr(text, ';', len) != NULL)
        return CR_E_RATE_SEVERAL;
    skip_spaces(c);
    if (!parse_number(c, number))
        return CR_E_RATE_SYNTAX;
    skip_spaces(c);
    if (c->at < c->end && *c->at == '/')
        c->at++;
    else if (letters(c) == 3 && word_is(c->at, 3, per_word))
        c->at += 3;
    else
        return CR_E_RATE_SYNTAX;
    return CR_OK;
}

cr_status cr_parse_rate(const char *text, size_t len, double *rate, double *period_s)
{
    cursor c = {text, text + len};
    double units_per = 0, count = 1;
    const cr_status head = read_head(&c, text, len, &units_per);
    if (head != CR_OK)
        return head;
    skip_spaces(&c);
    if (c.at < c.end && (is_digit(*c.at) || *c.at == '.')) {
        if (!parse_number(&c, &count))
            return CR_E_RATE_SYNTAX;
        skip_spaces(&c);
    }
    size_t n = letters(&c);
    const char *word = c.at;
    c.at += n;
    skip_spaces(&c);
    if (n == 0 || c.at != c.end)
        return CR_E_RATE_SYNTAX;
    if (calendar_only_unit(word, n))
        return CR_E_RATE_CALENDAR;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (word_is(word, n, units[i].names)) {
            *rate = units_per;
            *period_s = count * units[i].seconds;
            return CR_OK;
        }
    }
    return CR_E_RATE_SYNTAX;
}

/* [COUNT] UNIT to the end of the text: a calendar period. */
static cr_status read_period(cursor *c, cr_period *period)
{
    double count = 1;
    skip_spaces(c);
    if (c->at < c->end && (is_digit(*c->at) || *c->at == '.')) {
        if (!parse_number(c, &count))
            return CR_E_RATE_SYNTAX;
        skip_spaces(c);
    }
    size_t n = letters(c);
    const char *word = c->at;
    c->at += n;
    skip_spaces(c);
    if (n == 0 || c->at != c->end)
        return CR_E_RATE_SYNTAX;
    int unit = -1;
    for (int i = 0; i < 4 && unit < 0; i++)
        if (word_is(word, n, quota_units[i]))
            unit = i;
    if (unit < 0 || count != floor(count) || !(count >= 1) || count > 100000)
        return CR_E_CALENDAR_PERIOD;
    const cr_period made = {(cr_period_unit)unit, (int32_t)count};
    if (!cr_period_valid(made))
        return CR_E_CALENDAR_PERIOD;
    *period = made;
    return CR_OK;
}

cr_status cr_parse_period(const char *text, size_t len, cr_period *period)
{
    cursor c = {text, text + len};
    const cr_status status = read_period(&c, period);
    return status == CR_E_RATE_SYNTAX ? CR_E_CALENDAR_PERIOD : status;
}

cr_status cr_parse_calendar_rate(const char *text, size_t len, int64_t *amount, cr_period *period)
{
    cursor c = {text, text + len};
    double amount_given = 0;
    const cr_status head = read_head(&c, text, len, &amount_given);
    if (head != CR_OK)
        return head;
    cr_period made;
    const cr_status status = read_period(&c, &made);
    if (status != CR_OK)
        return status;
    if (amount_given != floor(amount_given) || !(amount_given >= 1) ||
        !(amount_given <= (double)CR_CALENDAR_COUNT_MAX))
        return CR_E_CALENDAR_AMOUNT;
    *amount = (int64_t)amount_given;
    *period = made;
    return CR_OK;
}

/* Whether the part text[from, to) (spaces around it left out) ends in the
 * unit of a calendar quota: a month or a year, with `days` a day or a week. */
static bool calendar_part(const char *text, size_t from, size_t to, bool days)
{
    size_t n = 0;
    while (to - n > from && lower(text[to - n - 1]) >= 'a' && lower(text[to - n - 1]) <= 'z')
        n++;
    const char *word = text + to - n;
    if (calendar_only_unit(word, n))
        return true;
    return days && (word_is(word, n, quota_units[CR_PERIOD_DAY]) ||
                    word_is(word, n, quota_units[CR_PERIOD_WEEK]));
}

/* Several limits, "100/day;10/hour" or "100/minute;1000000/month": each part
 * a rate of cr_parse_rate's grammar or a calendar quota of
 * cr_parse_calendar_rate's, read where it stands (its spaces are the
 * grammar's). */
cr_status cr_parse_rates(const char *text, size_t len, bool zoned, cr_rate *rates, size_t *count)
{
    size_t parts = 1;
    for (size_t i = 0; i < len; i++)
        parts += text[i] == ';';
    *count = 0;
    if (parts > CR_RATES_MAX)
        return CR_E_RATE_TOO_MANY;
    size_t start = 0;
    for (size_t part = 0; part < parts; part++) {
        size_t end = start;
        while (end < len && text[end] != ';')
            end++;
        size_t from = start, to = end;
        while (from < to && text[from] == ' ')
            from++;
        while (to > from && text[to - 1] == ' ')
            to--;
        if (from == to && parts > 1) {
            *count = 0;
            return CR_E_RATE_EMPTY;
        }
        cr_rate made = {.start = from, .len = to - from};
        cr_status status;
        if (calendar_part(text, from, to, zoned)) {
            int64_t amount = 0;
            status = cr_parse_calendar_rate(text + start, end - start, &amount, &made.period);
            made.rate = (double)amount;
        } else {
            status = cr_parse_rate(text + start, end - start, &made.rate, &made.period_s);
        }
        if (status != CR_OK) {
            *count = 0;
            return status;
        }
        rates[part] = made;
        start = end + 1;
    }
    *count = parts;
    return CR_OK;
}

cr_status cr_rates_zoned(bool zoned, size_t calendars)
{
    return zoned && calendars == 0 ? CR_E_TZ_RATES : CR_OK;
}

/* ------------------------------------------------------------------------ */

/* The clocks' names: by cr_limit.fast_clock; window algorithms read realtime. */
static const char *const clock_names[2] = {"monotonic", "fast"};

const char *cr_clock_name(const cr_limit *limit)
{
    if (limit->algorithm >= CR_ALGORITHM_FIXED_WINDOW)
        return "realtime";
    return clock_names[limit->fast_clock];
}

/* The clock named by `name` (NULL: the default, "fast") for a GCRA limit. */
static cr_status parse_clock(const char *name, size_t len, bool *fast)
{
    *fast = true;
    if (!name)
        return CR_OK;
    for (int i = 0; i < 2; i++) {
        if (len == strlen(clock_names[i]) && memcmp(name, clock_names[i], len) == 0) {
            *fast = i == 1;
            return CR_OK;
        }
    }
    return CR_E_CLOCK;
}

static const char *const algorithm_names[] = {"gcra", "token_bucket", "fixed_window",
                                              "sliding_window", "calendar"};

const char *cr_algorithm_name(cr_algorithm algorithm)
{
    if ((unsigned)algorithm >= sizeof algorithm_names / sizeof algorithm_names[0])
        return "";
    return algorithm_names[algorithm];
}

cr_status cr_algorithm_from_name(const char *name, size_t len, cr_algorithm *algorithm)
{
    *algorithm = CR_ALGORITHM_GCRA;
    if (!name)
        return CR_OK;
    for (unsigned i = 0; i < sizeof algorithm_names / sizeof algorithm_names[0]; i++) {
        if (strlen(algorithm_names[i]) == len && memcmp(name, algorithm_names[i], len) == 0) {
            *algorithm = (cr_algorithm)i;
            return CR_OK;
        }
    }
    return CR_E_ALGORITHM;
}

bool cr_algorithm_takes_burst(cr_algorithm algorithm)
{
    return algorithm == CR_ALGORITHM_GCRA || algorithm == CR_ALGORITHM_TOKEN_BUCKET;
}

/* The longest window: the state's (k + 3) * P stays below 2^63 for any time
 * before the horizon (2^62 + 3 * 2^60 < 2^63). */
#define MAX_WINDOW_NS ((int64_t)1 << 60)

/* A window algorithm's limit: `rate` whole units per window of `period_s`
 * (docs/design.md §7). Ceilings: the state packs the count (fixed) or the two
 * counts (sliding) below the window in ns: rate <= P - 1, (rate + 1)^2 <= P. */
static cr_status window_limit(cr_limit *limit, const cr_limit_args *args, double rate,
                              double period_s)
{
    if (args->has_burst)
        return CR_E_BURST_WINDOW;
    if (args->clock && !(args->clock_len == 8 && memcmp(args->clock, "realtime", 8) == 0))
        return CR_E_CLOCK_WINDOW;
    if (rate != floor(rate))
        return CR_E_RATE_WHOLE;
    double window = period_s * 1e9;
    if (!(window < (double)MAX_WINDOW_NS))
        return CR_E_WINDOW_TOO_LONG;
    const bool fixed = limit->algorithm == CR_ALGORITHM_FIXED_WINDOW;
    const cr_status ceiling = fixed ? CR_E_RATE_FIXED_CEILING : CR_E_RATE_SLIDING_CEILING;
    if (!(rate < (double)MAX_WINDOW_NS))
        return ceiling;
    int64_t window_ns = round_half_away(window), amount = (int64_t)rate;
    if (fixed ? amount > window_ns - 1
              : amount >= ((int64_t)1 << 31) || (amount + 1) * (amount + 1) > window_ns)
        return ceiling;
    limit->tolerance_ns = window_ns;
    limit->burst = amount;
    limit->emission_ns = round_half_away((double)window_ns / (double)amount);
    limit->window_inverse = UINT64_MAX / (uint64_t)window_ns;
    limit->count_inverse = UINT64_MAX / ((uint64_t)amount + 1);
    limit->fast_clock = false;
    return CR_OK;
}

static const int64_t unit_longest_days[] = {1, 7, 31, 366};

/* A calendar quota (docs/design.md §19): a whole amount per period of a zone,
 * counted as a fixed window whose window is the period. */
static cr_status calendar_limit(cr_limit *limit, const cr_limit_args *args)
{
    int64_t amount;
    cr_period period;
    if (!args->rate_text)
        return args->rate > 0 ? CR_E_CALENDAR_PERIOD : CR_E_RATE;
    cr_status status = cr_parse_calendar_rate(args->rate_text, args->rate_text_len, &amount,
                                              &period);
    if (status != CR_OK)
        return status;
    if (args->has_period)
        return CR_E_PERIOD_WITH_TEXT;
    if (args->has_burst)
        return CR_E_BURST_WINDOW;
    if (args->clock && !(args->clock_len == 8 && memcmp(args->clock, "realtime", 8) == 0))
        return CR_E_CLOCK_WINDOW;
    if (args->has_max_cost && args->max_cost < 0)
        return CR_E_MAX_COST;
    if (args->has_max_debt && (args->max_debt < 0 || args->max_debt > CR_CALENDAR_COUNT_MAX))
        return CR_E_MAX_DEBT;
    if (args->has_max_cost && args->max_cost > amount)
        return CR_E_RATE_MAX_COST;
    const int64_t window_ns = period.count * unit_longest_days[period.unit] * 86400 * 1000000000;
    cr_limit made = {0};
    made.algorithm = CR_ALGORITHM_CALENDAR;
    made.rate = (double)amount;
    made.period_s = (double)(window_ns / 1000000000);
    made.burst = amount;
    made.tolerance_ns = window_ns;
    made.emission_ns = window_ns / amount > 0 ? window_ns / amount : 1;
    made.window_inverse = UINT64_MAX / (uint64_t)window_ns;
    made.count_inverse = UINT64_MAX / ((uint64_t)amount + 1);
    made.max_debt = args->has_max_debt ? args->max_debt : amount;
    made.zone = args->zone ? args->zone : cr_zone_utc();
    made.period = period;
    if (args->has_priorities &&
        (status = cr_priorities_set(&made, args->priorities, args->npriorities)) != CR_OK)
        return status; /* a window: CR_E_PRIORITIES_ALGORITHM once the classes are valid */
    *limit = made;
    return CR_OK;
}

cr_status cr_limit_init(cr_limit *limit, const cr_limit_args *args)
{
    double rate = args->rate, period_s = 1.0;
    cr_limit made = {0};

    cr_status status = cr_algorithm_from_name(args->algorithm, args->algorithm_len,
                                              &made.algorithm);
    if (status != CR_OK)
        return status;
    if (made.algorithm == CR_ALGORITHM_CALENDAR)
        return calendar_limit(limit, args);
    if (args->zone)
        return CR_E_TZ_ALONE;
    if (args->rate_text) {
        status = cr_parse_rate(args->rate_text, args->rate_text_len, &rate, &period_s);
        if (status == CR_E_RATE_CALENDAR) /* a month or a year: a calendar quota's (§19) */
            return CR_E_RATE_CALENDAR_ALGORITHM;
        if (status != CR_OK)
            return status;
    }
    if (!(rate > 0) || !isfinite(rate))
        return CR_E_RATE;
    if (args->has_period) {
        if (args->rate_text)
            return CR_E_PERIOD_WITH_TEXT;
        period_s = args->period_s;
    }
    if (!(period_s > 0) || !isfinite(period_s))
        return CR_E_PERIOD;
    made.rate = rate;
    made.period_s = period_s;
    if (args->has_max_cost && args->max_cost < 0)
        return CR_E_MAX_COST;
    if (args->has_max_debt && args->max_debt < 0)
        return CR_E_MAX_DEBT;
    if (!cr_algorithm_takes_burst(made.algorithm)) {
        status = window_limit(&made, args, rate, period_s);
        if (status == CR_OK && args->has_max_cost && args->max_cost > made.burst)
            return CR_E_RATE_MAX_COST;
        if (status == CR_OK && args->has_priorities)
            status = cr_priorities_set(&made, args->priorities, args->npriorities);
        if (status == CR_OK) {
            made.max_debt = args->has_max_debt ? args->max_debt : made.burst;
            *limit = made;
        }
        return status;
    }

    int64_t burst;
    bool burst_overflows = false;
    if (args->has_burst) {
        if (args->burst < 1)
            return CR_E_BURST;
        burst = args->burst;
    } else {
        double rounded_up = ceil(rate);
        burst_overflows = rounded_up >= TWO_POW_63;
        burst = burst_overflows ? INT64_MAX : (int64_t)rounded_up;
        if (burst < 1)
            burst = 1;
    }

    /* T and tau at most the horizon: then no time + tau reaches 2^63. */
    double interval = (period_s * 1e9) / rate;
    if (!(interval < TWO_POW_63))
        return CR_E_RATE_TOO_LOW;
    int64_t emission_ns = round_half_away(interval);
    if (emission_ns < 1)
        return CR_E_RATE_TOO_HIGH;
    if (emission_ns > CR_HORIZON_NS)
        return CR_E_RATE_TOO_LOW;

    int64_t tolerance_ns;
    if (burst_overflows || __builtin_mul_overflow(emission_ns, burst, &tolerance_ns) ||
        tolerance_ns > CR_HORIZON_NS)
        return CR_E_BURST_TOO_LARGE;

    status = parse_clock(args->clock, args->clock_len, &made.fast_clock);
    if (status != CR_OK)
        return status;
    /* tau = T * burst exactly: max_cost fits in tau exactly when it is at most the burst */
    if (args->has_max_cost && args->max_cost > burst)
        return CR_E_BURST_MAX_COST;

    made.emission_ns = emission_ns;
    made.tolerance_ns = tolerance_ns;
    made.burst = burst;
    /* The default debt: one burst more. A charge of any figure then leaves a
     * key refused for at most about 2 tau (a window: until it ends), never
     * for good (docs/design.md §9). */
    made.max_debt = args->has_max_debt ? args->max_debt : burst;
    if (args->has_priorities &&
        (status = cr_priorities_set(&made, args->priorities, args->npriorities)) != CR_OK)
        return status;
    *limit = made;
    return CR_OK;
}

/* ------------------------------------------------------------------------ */
/* Describing a limit                                                        */

/* The shortest text that reads back as `value`, integral values without ".0". */
static void put_number(char *buf, size_t size, double value)
{
    if (value > -0x1p53 && value < 0x1p53 && (double)(int64_t)value == value) {
        snprintf(buf, size, "%" PRId64, (int64_t)value);
        return;
    }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, size, "%.*g", precision, value);
        if (strtod(buf, NULL) == value)
            return;
    }
}

size_t cr_limit_describe(char *buf, size_t size, const char *type_name, const cr_limit *limit,
                         int64_t capacity)
{
    char rate[32], period[32], burst[32] = "", clock[32] = "", algorithm[40] = "";
    char keys[40] = "", debt[40] = "";
    put_number(rate, sizeof rate, limit->rate);
    put_number(period, sizeof period, limit->period_s);
    if (limit->algorithm < CR_ALGORITHM_FIXED_WINDOW) /* a window takes no burst */
        snprintf(burst, sizeof burst, ", burst=%" PRId64, limit->burst);
    if (limit->algorithm < CR_ALGORITHM_FIXED_WINDOW && !limit->fast_clock)
        snprintf(clock, sizeof clock, ", clock='%s'", cr_clock_name(limit));
    if (limit->algorithm != CR_ALGORITHM_GCRA)
        snprintf(algorithm, sizeof algorithm, ", algorithm='%s'",
                 cr_algorithm_name(limit->algorithm));
    if (limit->max_debt != limit->burst) /* not the default */
        snprintf(debt, sizeof debt, ", max_debt=%" PRId64, limit->max_debt);
    if (capacity >= 0)
        snprintf(keys, sizeof keys, ", capacity=%" PRId64, capacity);
    if (limit->algorithm == CR_ALGORITHM_CALENDAR) { /* "1000/month", the rate it reads back */
        char count[16] = "";
        if (limit->period.count > 1)
            snprintf(count, sizeof count, "%" PRId32, limit->period.count);
        const int len = snprintf(buf, size,
                                 "%s(rate='%" PRId64 "/%s%s', algorithm='calendar', "
                                 "tz='%s'%s%s)",
                                 type_name, limit->burst, count,
                                 cr_period_unit_name(limit->period.unit), cr_zone_name(limit->zone),
                                 debt, keys);
        return len < 0 ? 0 : (size_t)len;
    }
    const int len = snprintf(buf, size, "%s(rate=%s, period=%s%s%s%s%s%s)", type_name, rate, period,
                             burst, clock, algorithm, debt, keys);
    return len < 0 ? 0 : (size_t)len;
}

cr_status cr_parse_on_change(const char *name, size_t len, cr_on_change *out)
{
    if (len == 5 && memcmp(name, "apply", 5) == 0)
        *out = CR_CHANGE_APPLY;
    else if (len == 6 && memcmp(name, "refuse", 6) == 0)
        *out = CR_CHANGE_REFUSE;
    else
        return CR_E_ON_CHANGE;
    return CR_OK;
}

size_t cr_change_describe(char *buf, size_t size, const char *type_name, const char *path,
                          const cr_limit *old, const cr_limit *new_limit, int64_t capacity)
{
    char was[CR_LIMIT_DESCRIPTION_MAX], now[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit_describe(was, sizeof was, type_name, old, capacity);
    cr_limit_describe(now, sizeof now, type_name, new_limit, capacity);
    const int len = snprintf(buf, size,
                             "shared: %s's limit changed from %s to %s by this opening (the newest "
                             "configuration wins; on_change='refuse' keeps the region's)",
                             path, was, now);
    return len < 0 ? 0 : (size_t)len;
}
