/*
 * cellrate/limit.h: a limit (algorithm, rate, period, burst): validation,
 * defaults, the rate grammar, its description; seconds and nanoseconds.
 *
 * A part of cellrate.h (include <cellrate.h>). A cr_limit is a plain value:
 * copy it freely; every function here is pure and thread-safe.
 */
#ifndef CELLRATE_LIMIT_H
#define CELLRATE_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calendar.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The algorithm catalogue (docs/design.md §7). Every one keeps one 64-bit
 * state word per key, so every store carries every algorithm. */
typedef enum cr_algorithm {
    CR_ALGORITHM_GCRA = 0,           /* the default */
    CR_ALGORITHM_TOKEN_BUCKET = 1,   /* GCRA's arithmetic under the bucket's name */
    CR_ALGORITHM_FIXED_WINDOW = 2,   /* rate units per window aligned to the Unix epoch */
    CR_ALGORITHM_SLIDING_WINDOW = 3, /* the previous window's count, decaying, + the current */
    CR_ALGORITHM_CALENDAR = 4        /* rate units per calendar period of a time zone (a quota) */
} cr_algorithm;

/* "gcra", "token_bucket", "fixed_window", "sliding_window", "calendar" ("" out
 * of range). */
const char *cr_algorithm_name(cr_algorithm algorithm);

/* The algorithm of a name of cr_algorithm_name (need not be NUL-terminated;
 * NULL: "gcra"), or CR_E_ALGORITHM. */
cr_status cr_algorithm_from_name(const char *name, size_t len, cr_algorithm *algorithm);

/* Whether `algorithm` reads a burst: gcra and token_bucket do; the window
 * algorithms refuse one (CR_E_BURST_WINDOW: their amount is the rate). */
bool cr_algorithm_takes_burst(cr_algorithm algorithm);

/* Priorities inside one limit (cellrate/priority.h): at most this many
 * classes, each named by 1 to CR_PRIORITY_NAME_MAX - 1 bytes. */
#define CR_PRIORITIES_MAX 8
#define CR_PRIORITY_NAME_MAX 32

/* A class of a limit's priorities: its name and its reserve, the share of
 * the burst it may not spend, as given (in [0, 1)) and in ns of this limit's
 * tolerance (cr_priority_reserve_ns). */
typedef struct cr_priority_class {
    char name[CR_PRIORITY_NAME_MAX]; /* NUL-terminated */
    double reserve;
    int64_t reserve_ns;
} cr_priority_class;

/* A class as a caller gives it (cr_limit_args.priorities). */
typedef struct cr_priority_arg {
    const char *name; /* need not be NUL-terminated */
    size_t name_len;
    double reserve;
} cr_priority_arg;

/* A validated limit. A plain value: copy it freely.
 *
 * GCRA and token_bucket: T = emission_ns, tau = tolerance_ns = T * burst.
 * Window algorithms: tolerance_ns is the window (period) and burst the whole
 * number of units a window admits (rate); emission_ns is period/rate rounded,
 * for information only. For every algorithm tolerance_ns is the time in which
 * `burst` units are restored, and `burst` is the Decision's `limit`. */
typedef struct cr_limit {
    int64_t emission_ns;  /* T: nanoseconds per unit, >= 1 */
    int64_t tolerance_ns; /* tau = T * burst; windows: the window */
    int64_t burst;        /* units an idle key may spend at once, >= 1 */
    double rate;          /* units per period, as given or parsed */
    double period_s;      /* seconds, as given or parsed */
    bool fast_clock;      /* CR_CLOCK reads cr_fast_clock_ns, not the ordered reading */
    cr_algorithm algorithm;
    uint64_t window_inverse; /* windows: floor((2^64 - 1) / window), to divide by a multiply */
    uint64_t count_inverse;  /* sliding_window: floor((2^64 - 1) / (rate + 1)), likewise */
    int64_t max_debt;        /* units a charge may leave a key owing beyond the limit, >= 0 */
    /* calendar: the zone (kept for the life of the process: cr_zone_open, or
     * the built-in UTC) and the period; the period that held the last
     * decision's now, start and length in seconds packed in one word that
     * decisions rewrite through a const limit (atomically: a limit is never
     * a const object; each copy keeps its own). Other algorithms: NULL, 0. */
    const cr_zone *zone;
    cr_period period;
    uint64_t calendar_cache;
    int32_t npriorities; /* classes in `priorities`, sorted by name; 0: none */
    cr_priority_class priorities[CR_PRIORITIES_MAX];
} cr_limit;

/* The most units a calendar quota counts per period, with its debt: the
 * count stays far below a day in ns, so a state word holds the period's end
 * plus its count (docs/design.md §19). */
#define CR_CALENDAR_COUNT_MAX ((int64_t)1 << 40)

/* What a user gives. `rate_text`, when not NULL, takes the place of `rate`
 * and carries its own period (then `has_period` must be false). Absent
 * period: 1 s. Absent burst: max(1, ceil(rate)). `clock`: "fast" (the
 * default, also when NULL) or "monotonic", the clock that CR_CLOCK reads; window
 * algorithms read the realtime clock ("realtime", the only one they take).
 * `algorithm`: a name of cr_algorithm_name, NULL meaning "gcra". */
typedef struct cr_limit_args {
    double rate;
    const char *rate_text; /* need not be NUL-terminated */
    size_t rate_text_len;
    double period_s;
    bool has_period;
    int64_t burst;
    bool has_burst;
    const char *clock; /* need not be NUL-terminated */
    size_t clock_len;
    const char *algorithm; /* need not be NUL-terminated */
    size_t algorithm_len;
    int64_t max_cost; /* with has_max_cost: the largest cost the limit must admit */
    bool has_max_cost;
    int64_t max_debt; /* with has_max_debt: the deepest debt a charge may leave, in units */
    bool has_max_debt;
    const cr_zone *zone;               /* calendar: the zone of cr_zone_open (tz); NULL: UTC */
    const cr_priority_arg *priorities; /* with has_priorities: `npriorities` classes */
    size_t npriorities;
    bool has_priorities;
} cr_limit_args;

/* Validates `args` and fills `limit`. On error `limit` is left untouched.
 * Calendar (docs/design.md §19): the rate is a string of a whole amount per
 * day, week, month or year or a multiple ("1000000/month", "500/2 weeks"):
 * CR_E_CALENDAR_PERIOD (another unit, no string), CR_E_CALENDAR_AMOUNT (not
 * a whole number from 1, amount + max_debt at most CR_CALENDAR_COUNT_MAX); a
 * zone given to any other algorithm is CR_E_TZ_ALONE, and a month or year in
 * another algorithm's rate is CR_E_RATE_CALENDAR_ALGORITHM.
 * With has_max_cost: CR_E_MAX_COST unless max_cost >= 0, and a limit that
 * could never admit max_cost units is refused (a permanent refusal is a
 * configuration mistake): CR_E_BURST_MAX_COST (gcra, token_bucket: burst <
 * max_cost, also a default burst) or CR_E_RATE_MAX_COST (windows: rate <
 * max_cost). max_cost is checked, not kept. max_debt (kept: cr_limit.max_debt):
 * CR_E_MAX_DEBT unless >= 0; absent, the burst (a window: its rate), so that
 * a charge leaves a key refused for at most about one more tau (a window:
 * until it ends) however large its figure (docs/design.md §9). With
 * has_priorities, the classes as cr_priorities_set takes them. */
cr_status cr_limit_init(cr_limit *limit, const cr_limit_args *args);

/* The name of the clock CR_CLOCK reads for `limit`: "monotonic", "fast" or
 * "realtime" (window algorithms): the words cr_limit_args.clock takes. */
const char *cr_clock_name(const cr_limit *limit);

/* Bytes of a description by cr_limit_describe, with its NUL, for a
 * `type_name` of at most 64 bytes. */
#define CR_LIMIT_DESCRIPTION_MAX 320

/*
 * The description of `limit` that repr() and __tostring print, one text in
 * every face: "<type_name>(rate=300, period=60, burst=60)", numbers in the
 * shortest form that reads back as the same double (integral ones without a
 * fraction); then ", clock='monotonic'" when not the default, ", algorithm='...'"
 * when not gcra, no burst for a window algorithm, ", max_debt=N" when not the
 * default (the burst: a window's rate), and ", capacity=N" when
 * `capacity` >= 0 (a keyed table's). Writes at most `size` bytes, NUL
 * included, into the caller's `buf` (nothing allocated) and returns the length
 * of the whole text, as snprintf. Pure; thread-safe.
 */
size_t cr_limit_describe(char *buf, size_t size, const char *type_name, const cr_limit *limit,
                         int64_t capacity);

/* Parses a rate string into units and period seconds, without applying it.
 * Grammar: NUMBER ("/" | "per") [NUMBER] UNIT, spaces allowed between parts;
 * UNIT: ns us ms s sec second m min minute h hr hour d day w week (plurals
 * accepted). Months and years are refused (CR_E_RATE_CALENDAR: a calendar
 * quota's, cr_parse_calendar_rate); a ';'
 * (several limits: cr_parse_rates) is CR_E_RATE_SEVERAL. */
cr_status cr_parse_rate(const char *text, size_t len, double *rate, double *period_s);

/* Parses a calendar quota's rate string: NUMBER ("/" | "per") [COUNT] UNIT,
 * UNIT one of d day w wk week mo month y yr year (plurals accepted), into
 * the amount and the period. CR_E_RATE_SYNTAX, CR_E_CALENDAR_PERIOD (another
 * unit, a count that is not whole or is out of range), CR_E_CALENDAR_AMOUNT
 * (an amount that is not a whole number from 1 to CR_CALENDAR_COUNT_MAX). */
cr_status cr_parse_calendar_rate(const char *text, size_t len, int64_t *amount, cr_period *period);

/* A calendar period alone, "[COUNT] UNIT" ("month", "2 weeks", "10y"), as
 * cr_parse_calendar_rate reads it after the "/". CR_E_CALENDAR_PERIOD. */
cr_status cr_parse_period(const char *text, size_t len, cr_period *period);

/* The most limits one rate string names (cr_parse_rates). */
#define CR_RATES_MAX 8

/* One limit of a rate string: its rate and period, and where its text is
 * (bytes of the string, spaces around it left out). A calendar quota's part
 * (period.count > 0): `rate` is its amount, `period` its calendar period,
 * `period_s` 0. */
typedef struct cr_rate {
    double rate;
    double period_s;
    size_t start;
    size_t len;
    cr_period period;
} cr_rate;

/* Parses a rate string that may name several limits, "100/day;10/hour" (as
 * flask-limiter and slowapi write them), into `rates` (room for CR_RATES_MAX)
 * and their `*count`: each part between ';' is a rate of cr_parse_rate's
 * grammar, or a calendar quota of cr_parse_calendar_rate's
 * ("100/minute;1000000/month", docs/design.md §19): a part whose unit is a
 * month or a year, and when `zoned` (the caller was given a zone, tz=) a day
 * or a week too (hours never: "1000/24h" stays a rate). A string without ';'
 * is one part. Refused: an empty part among several (CR_E_RATE_EMPTY), more
 * than CR_RATES_MAX parts (CR_E_RATE_TOO_MANY), and a part its grammar
 * refuses (its status, the first one's); `*count` is then 0. */
cr_status cr_parse_rates(const char *text, size_t len, bool zoned, cr_rate *rates, size_t *count);

/* A zone given (tz=) for the limits of rate strings of which `calendars`
 * parts are calendar quotas: CR_E_TZ_RATES when there is none for it to
 * count in (a web policy's several strings are judged together). */
cr_status cr_rates_zoned(bool zoned, size_t calendars);

/* Seconds (a caller's `now`) to nanoseconds, rounded to the nearest ns.
 * CR_E_NOW unless finite, >= 0 and below CR_HORIZON_NS. */
cr_status cr_seconds_to_ns(double seconds, int64_t *ns);

/* A longest wait in seconds (the timeout of reserve and wait) to
 * nanoseconds: rounded as cr_seconds_to_ns, and +infinity or anything at or
 * beyond CR_HORIZON_NS is CR_NEVER (any wait: no wait can be that long).
 * `invalid` (the parameter's status: CR_E_TIMEOUT) unless
 * seconds >= 0. An absent value is the face's to read as CR_NEVER. */
cr_status cr_wait_from_seconds(double seconds, cr_status invalid, int64_t *ns);

/* Nanoseconds to seconds; CR_NEVER becomes +infinity. */
double cr_ns_to_seconds(int64_t ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_LIMIT_H */
