/*
 * cellrate: a GCRA rate limiter on integer nanoseconds.
 *
 * One 64-bit theoretical arrival time (TAT) per key; a decision is a pure
 * function of (limit, TAT, now, cost); the stores (cr_limiter, cr_keyed)
 * apply it with a compare-and-swap, and a turned-away request writes nothing.
 *
 * Units: every time is an int64_t count of nanoseconds on CLOCK_MONOTONIC
 * (window algorithms: CLOCK_REALTIME, since their windows are aligned to the
 * Unix epoch), below CR_HORIZON_NS. Pass CR_CLOCK as `now_ns` to have the
 * store read the limit's clock itself.
 *
 * Thread-safety: cr_limit and cr_decision are plain values. cr_limiter and
 * cr_keyed may be used from any number of threads at once, except that
 * cr_*_free must not race with any other call on the same handle.
 */
#ifndef CELLRATE_H
#define CELLRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared here is exported from libcellrate.so. Where the core is
 * compiled into a module (CR_EMBED: the CPython extension, the Lua module),
 * it stays hidden and the module exports only its entry point. */
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The version, written only here: every other place derives it. */
#define CR_VERSION_MAJOR 0
#define CR_VERSION_MINOR 1
#define CR_VERSION_PATCH 0
#define CR_VERSION_JOIN_(major, minor, patch) #major "." #minor "." #patch
#define CR_VERSION_EXPAND_(major, minor, patch) CR_VERSION_JOIN_(major, minor, patch)
#define CR_VERSION_STRING CR_VERSION_EXPAND_(CR_VERSION_MAJOR, CR_VERSION_MINOR, CR_VERSION_PATCH)

/* The version of the linked library, "MAJOR.MINOR.PATCH". */
const char *cr_version(void);

/* retry_after_ns of a cost that can never be admitted (cost * T > tau). */
#define CR_NEVER INT64_MAX

/* The time horizon, 2^62 ns (146 years: CLOCK_MONOTONIC uptime, or the
 * realtime clock until 2116). An explicit `now` must be below it and every
 * limit's tolerance (or window) at most it, so that no sum of a time and a
 * tolerance reaches 2^63: nothing saturates, and the decisions are exact
 * everywhere (docs/design.md §1). A clock read beyond it reads as the last
 * nanosecond before it (time stops: only stricter). */
#define CR_HORIZON_NS ((int64_t)1 << 62)

/* The deepest debt a charge may leave (docs/design.md §9): a key's GCRA
 * state is at most now + 2^62 ns (so below 2^63); a charge past it is
 * clipped there and says so (cr_decision.clipped). Windows carry a count up
 * to their packed ceiling instead (see cr_charge). */
#define CR_DEBT_MAX_NS CR_HORIZON_NS

/* As `now_ns`: read the limit's clock (CLOCK_MONOTONIC, or the fast clock)
 * at the moment of the decision. */
#define CR_CLOCK (-1)

/* File mode of a shared region when the caller names none. */
#define CR_SHARED_DEFAULT_MODE 0600

/* The cost of a call that names none. */
#define CR_DEFAULT_COST 1

/* Capacity of a keyed table when the caller names none. */
#define CR_KEYED_DEFAULT_CAPACITY 100000

/*
 * Status codes: X(number, NAME, CLASS, parameter, message). A denial is not an
 * error; these are for bad arguments and exhausted resources. CLASS (a
 * cr_status_class without CR_STATUS_) says how a face reports it: ARGUMENT,
 * the caller's mistake (raised); RUNTIME, a failure of the moment or of the
 * system (Lua: nil, message, code); REGION, a region file that is not the one
 * asked for. The parameter is the name the user gave (or "" when none
 * applies); messages start with it and name no language's types. Numbers are
 * the ABI: append new rows with the next number, never renumber (limit.c
 * fails to compile unless the numbers are 0 .. CR_STATUS_COUNT-1, each once).
 * The table is the reference model's (tests/model/gcra_model.py), row for row
 * (tests/vectors/status.txt).
 */
#define CR_STATUS_LIST(X)                                                                         \
    X(0, OK, NONE, "", "ok")                                                                      \
    X(1, E_RATE, ARGUMENT, "rate",                                                                \
      "rate must be a number > 0 or a rate string such as '10/second'")                           \
    X(2, E_RATE_SYNTAX, ARGUMENT, "rate",                                                         \
      "rate: cannot parse; expected a number or a string such as "                                \
      "'10/second', '300/minute', '5 per second' or '100/5m'")                                    \
    X(3, E_RATE_CALENDAR, ARGUMENT, "rate",                                                       \
      "rate: months and years have no fixed length; use a fixed duration "                        \
      "such as '1000/30d' or '1000/365d'")                                                        \
    X(4, E_RATE_TOO_HIGH, ARGUMENT, "rate",                                                       \
      "rate is too high: the interval period/rate rounds below 1 ns")                             \
    X(5, E_RATE_TOO_LOW, ARGUMENT, "rate",                                                        \
      "rate is too low: the interval period/rate exceeds 2^62 ns (146 years)")                    \
    X(6, E_PERIOD, ARGUMENT, "period", "period must be a finite number of seconds > 0")           \
    X(7, E_PERIOD_WITH_TEXT, ARGUMENT, "period",                                                  \
      "period must not be given with a rate string, which carries its own period")                \
    X(8, E_BURST, ARGUMENT, "burst", "burst must be an integer >= 1")                             \
    X(9, E_BURST_TOO_LARGE, ARGUMENT, "burst",                                                    \
      "burst is too large: burst * (period/rate) exceeds 2^62 ns (146 years)")                    \
    X(10, E_COST, ARGUMENT, "cost", "cost must be an integer >= 0")                               \
    X(11, E_NOW, ARGUMENT, "now",                                                                 \
      "now must be a finite number of seconds >= 0 and below 2^62 ns (146 years)")                \
    X(12, E_KEY, ARGUMENT, "key", "key must be a string (any bytes, any length)")                 \
    X(13, E_CLOCK, ARGUMENT, "clock", "clock must be 'monotonic' or 'fast'")                      \
    X(14, E_CAPACITY, ARGUMENT, "capacity", "capacity must be an integer >= 1 and <= 2^32")       \
    X(15, E_NOMEM, RUNTIME, "", "out of memory")                                                  \
    X(16, E_SHARED_PATH, ARGUMENT, "shared",                                                      \
      "shared must be the path of the region file (a string without NUL characters)")             \
    X(17, E_SHARED_IO, RUNTIME, "shared", "shared: cannot open, create or map the region file")   \
    X(18, E_SHARED_ACCESS, RUNTIME, "shared", "shared: permission denied on the region file")     \
    X(19, E_SHARED_SHORT, REGION, "shared",                                                       \
      "shared: the file is too short to be a cellrate region")                                    \
    X(20, E_SHARED_FOREIGN, REGION, "shared", "shared: the file is not a cellrate region")        \
    X(21, E_SHARED_VERSION, REGION, "shared", "shared: the region has another layout version")    \
    X(22, E_SHARED_CORRUPT, REGION, "shared",                                                     \
      "shared: the region is corrupt (header checksum or size)")                                  \
    X(23, E_SHARED_KIND, REGION, "shared",                                                        \
      "shared: the region holds another kind of limiter (Limiter vs KeyedLimiter)")               \
    X(24, E_SHARED_RATE, REGION, "shared",                                                        \
      "shared: the region was made with another rate or period")                                  \
    X(25, E_SHARED_BURST, REGION, "shared", "shared: the region was made with another burst")     \
    X(26, E_SHARED_CAPACITY, REGION, "shared",                                                    \
      "shared: the region was made with another capacity")                                        \
    X(27, E_SHARED_MODE, ARGUMENT, "shared_mode",                                                 \
      "shared_mode must be a file mode from 0 to 0777 (octal)")                                   \
    X(28, E_ALGORITHM, ARGUMENT, "algorithm",                                                     \
      "algorithm must be 'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'")             \
    X(29, E_BURST_WINDOW, ARGUMENT, "burst",                                                      \
      "burst: a window algorithm takes no burst (a window admits rate units); "                   \
      "leave burst out, or use 'gcra' or 'token_bucket'")                                         \
    X(30, E_RATE_WHOLE, ARGUMENT, "rate",                                                         \
      "rate: a window admits a whole number of units; write a fractional rate as "                \
      "whole units per longer window, e.g. '1/2s' for 0.5 per second")                            \
    X(31, E_RATE_FIXED_CEILING, ARGUMENT, "rate",                                                 \
      "rate is above the fixed_window ceiling: at most period_ns - 1 units per window "           \
      "(999999999 per second, 59999999999 per minute)")                                           \
    X(32, E_RATE_SLIDING_CEILING, ARGUMENT, "rate",                                               \
      "rate is above the sliding_window ceiling: (rate + 1)^2 <= period_ns "                      \
      "(31621 per second, 244947 per minute, 1897365 per hour, 9295159 per day)")                 \
    X(33, E_WINDOW_TOO_LONG, ARGUMENT, "period",                                                  \
      "period: a window longer than 2^60 ns (36.5 years) is not supported")                       \
    X(34, E_CLOCK_WINDOW, ARGUMENT, "clock",                                                      \
      "clock: window algorithms read the realtime clock (windows are aligned to the "             \
      "Unix epoch); leave clock out or pass 'realtime'")                                          \
    X(35, E_SHARED_ALGORITHM, REGION, "shared",                                                   \
      "shared: the region was made with another algorithm")                                       \
    /* 36 is unused: reserve's longest wait is `timeout` (E_TIMEOUT), as wait's */                \
    X(36, E_MAX_WAIT, ARGUMENT, "max_wait",                                                       \
      "max_wait must be a number of seconds >= 0, or absent for any wait")                        \
    X(37, E_ITEMS, ARGUMENT, "items",                                                             \
      "items must be a non-empty list of limiters and (keyed limiter, key) pairs")                \
    X(38, E_HEADER_NAME, ARGUMENT, "name",                                                        \
      "name must be 1 to 64 printable ASCII characters (the policy name of the headers)")         \
    X(39, E_HEADER_VALUE, ARGUMENT, "decision",                                                   \
      "decision: limit, remaining, retry_after, reset_after and window must be >= 0")             \
    X(40, E_SHARED_DANGLING, REGION, "shared",                                                    \
      "shared: the path is a symbolic link to nothing; remove the link or point it at a region")  \
    X(41, E_SHARED_UNSTABLE, REGION, "shared",                                                    \
      "shared: the path kept changing while it was opened (removed or replaced again and again)") \
    X(42, E_SHARED_LOCK, RUNTIME, "shared",                                                       \
      "shared: a lock of the region stayed held past its time limit (a stopped or frozen "        \
      "process holds it)")                                                                        \
    X(43, E_SHARED_MODE_ALONE, ARGUMENT, "shared_mode",                                           \
      "shared_mode is the mode of a region file: give it only with shared")                       \
    X(44, E_TIMEOUT, ARGUMENT, "timeout",                                                         \
      "timeout must be a number of seconds >= 0, or absent to wait as long as it takes")          \
    X(45, E_RATE_SEVERAL, ARGUMENT, "rate",                                                       \
      "rate: one string is one limit; for several ('100/day;10/hour') make one limiter "          \
      "of each and decide them as one with check_all")                                            \
    X(46, E_RECONFIGURE_ALGORITHM, ARGUMENT, "algorithm",                                         \
      "algorithm: a live change keeps the limit's algorithm; make a new limiter for another one") \
    X(47, E_ON_CHANGE, ARGUMENT, "on_change", "on_change must be 'apply' or 'refuse'")            \
    X(48, E_MAX_COST, ARGUMENT, "max_cost", "max_cost must be an integer >= 0")                   \
    X(49, E_BURST_MAX_COST, ARGUMENT, "burst",                                                    \
      "burst is below max_cost: a request of max_cost units would never be admitted (a "          \
      "permanent refusal); give a burst of at least max_cost")                                    \
    X(50, E_RATE_MAX_COST, ARGUMENT, "rate",                                                      \
      "rate is below max_cost: a window admits at most rate units, so a request of max_cost "     \
      "units would never be admitted; give a rate of at least max_cost per window")               \
    X(51, E_LIMIT, ARGUMENT, "limit",                                                             \
      "limit must be an integer >= 1 and <= 65536 (the units that may be held at once)")          \
    X(52, E_HOLD_COST, ARGUMENT, "cost",                                                          \
      "cost must be an integer >= 1 (the units a holding takes)")                                 \
    X(53, E_LEASE, ARGUMENT, "lease",                                                             \
      "lease must be a number of seconds > 0 and below 2^62 ns (146 years), or absent for none")  \
    X(54, E_SHARED_LIMIT, REGION, "shared",                                                       \
      "shared: the region was made with another limit, lease or peak")                            \
    X(55, E_KEY_UNKEYED, ARGUMENT, "key",                                                         \
      "key: a concurrency limit without capacity has no keys; give capacity for one limit "       \
      "per key")                                                                                  \
    X(56, E_SLOT, ARGUMENT, "slot", "slot must be a slot that a concurrency limit gave out")      \
    X(57, E_SHARED_MISSING, REGION, "shared",                                                     \
      "shared: no file at the path (a region is made by the first limiter that opens it)")        \
    X(58, E_PEAK, ARGUMENT, "peak",                                                               \
      "peak must be a boolean (true: track the most units held at once, for a shared total "      \
      "that every acquire and release updates)")                                                  \
    X(59, E_QUOTA, ARGUMENT, "quota", "quota must be 'requests' or 'tokens'")                     \
    X(60, E_HEADERS, ARGUMENT, "headers",                                                         \
      "headers must be the response's fields: a mapping of names to values, or a list of "        \
      "(name, value) pairs, each a string")                                                       \
    X(61, E_STATUS_CODE, ARGUMENT, "status",                                                      \
      "status must be an HTTP status code from 100 to 599, or absent")                            \
    X(62, E_PENDING, ARGUMENT, "pending",                                                         \
      "pending must be an integer >= 0 (units sent that the response cannot count yet)")          \
    X(63, E_SHARE, ARGUMENT, "share",                                                             \
      "share must be a number > 0 and <= 1 (this member's part of the provider's limit)")         \
    X(64, E_RETRIES, ARGUMENT, "retries",                                                         \
      "retries must be an integer >= 0 (the tries after a 429 or 503)")                           \
    X(65, E_BACKOFF, ARGUMENT, "backoff",                                                         \
      "backoff must be a number of seconds > 0, and max_backoff one >= backoff (the wait "        \
      "before a retry doubles from backoff up to max_backoff)")

#define CR_STATUS_ENUM_(number, name, class, param, message) CR_##name = number,
#define CR_STATUS_ONE_(number, name, class, param, message) +1
typedef enum cr_status {
    CR_STATUS_LIST(CR_STATUS_ENUM_)
        CR_STATUS_COUNT = 0 CR_STATUS_LIST(CR_STATUS_ONE_) /* the number of rows */
} cr_status;
#undef CR_STATUS_ENUM_
#undef CR_STATUS_ONE_

/* The message of a status ("unknown status" for a value out of range). */
const char *cr_strerror(cr_status status);
/* The parameter a status is about, or "" (never NULL). */
const char *cr_status_param(cr_status status);
/* The status's name without the CR_ prefix ("E_SHARED_RATE"; "" for a
 * value out of range), for faces that report a code as text. */
const char *cr_status_name(cr_status status);

/* How a face reports a status (the CLASS column of CR_STATUS_LIST). */
typedef enum cr_status_class {
    CR_STATUS_NONE = 0,     /* CR_OK, and a value out of range */
    CR_STATUS_ARGUMENT = 1, /* the caller's mistake: raised, naming the parameter */
    CR_STATUS_RUNTIME = 2,  /* memory, the system, a lock held past its bound: Lua
                               returns nil, message, code */
    CR_STATUS_REGION = 3    /* a region file that is not the one asked for: the path
                               is part of the report */
} cr_status_class;

/* The class of a status (CR_STATUS_NONE for CR_OK or a value out of range). */
cr_status_class cr_status_class_of(cr_status status);

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */

/* The algorithm catalogue (docs/design.md §7). Every one keeps one 64-bit
 * state word per key, so every store carries every algorithm. */
typedef enum cr_algorithm {
    CR_ALGORITHM_GCRA = 0,          /* the default */
    CR_ALGORITHM_TOKEN_BUCKET = 1,  /* GCRA's arithmetic under the bucket's name */
    CR_ALGORITHM_FIXED_WINDOW = 2,  /* rate units per window aligned to the Unix epoch */
    CR_ALGORITHM_SLIDING_WINDOW = 3 /* the previous window's count, decaying, + the current */
} cr_algorithm;

/* "gcra", "token_bucket", "fixed_window", "sliding_window" ("" out of range). */
const char *cr_algorithm_name(cr_algorithm algorithm);

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
} cr_limit;

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
} cr_limit_args;

/* Validates `args` and fills `limit`. On error `limit` is left untouched.
 * With has_max_cost: CR_E_MAX_COST unless max_cost >= 0, and a limit that
 * could never admit max_cost units is refused (a permanent refusal is a
 * configuration mistake): CR_E_BURST_MAX_COST (gcra, token_bucket: burst <
 * max_cost, also a default burst) or CR_E_RATE_MAX_COST (windows: rate <
 * max_cost). max_cost is checked, not kept. */
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
 * when not gcra, no burst for a window algorithm, and ", capacity=N" when
 * `capacity` >= 0 (a keyed table's). Writes at most `size` bytes, NUL
 * included, into the caller's `buf` (nothing allocated) and returns the length
 * of the whole text, as snprintf. Pure; thread-safe.
 */
size_t cr_limit_describe(char *buf, size_t size, const char *type_name, const cr_limit *limit,
                         int64_t capacity);

/* Parses a rate string into units and period seconds, without applying it.
 * Grammar: NUMBER ("/" | "per") [NUMBER] UNIT, spaces allowed between parts;
 * UNIT: ns us ms s sec second m min minute h hr hour d day w week (plurals
 * accepted). Months and years are refused (CR_E_RATE_CALENDAR). */
cr_status cr_parse_rate(const char *text, size_t len, double *rate, double *period_s);

/* ------------------------------------------------------------------------ */
/* Decisions                                                                 */

typedef struct cr_decision {
    bool allowed;
    int64_t limit;          /* = burst */
    int64_t remaining;      /* units that would still be admitted right after */
    int64_t retry_after_ns; /* 0 when allowed; CR_NEVER when the cost can never fit */
    int64_t reset_after_ns; /* until the key is back to a full burst */
    bool clipped;           /* a charge that met the debt bound and dropped the rest */
} cr_decision;

/*
 * One decision, pure (docs/design.md §1 and §7): `state` is the key's stored
 * state word (0 for a key never seen; GCRA: its TAT), `now_ns` in
 * [0, CR_HORIZON_NS) on the limit's clock, `cost` >= 0. Fills `out` and
 * returns the state to store: equal to `state` when nothing is to be written
 * (turned away, or cost 0). Never wraps and never saturates.
 */
int64_t cr_decide(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out);

/*
 * A reservation, pure: commits `cost` units at the earliest instant they fit
 * if that is at most `max_wait_ns` after `now_ns` (CR_NEVER: any wait).
 * Returns the state to store and sets *delay_ns to the wait (0: now) and
 * *reserved; when not reserved (beyond max_wait, unfittable, or a window
 * algorithm that cannot admit now: windows reserve only with delay 0) the
 * state is returned unchanged. Cost 0 reserves nothing, with delay 0.
 */
int64_t cr_reserve(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                   int64_t max_wait_ns, bool *reserved, int64_t *delay_ns);

/*
 * A refund, pure: gives back `cost` units taken earlier (a cancelled
 * reservation; check_all's give-back) and returns the state to store. Never
 * makes a key better than idle; units of a window that has ended are gone
 * and give nothing back.
 */
int64_t cr_refund(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost);

/*
 * An anchor, pure: `cost` units reserved earlier start only at `now_ns` (a
 * waiter woken after its instant). Returns the state of a key at least as
 * spent as if they had been admitted at `now_ns` (GCRA: max(TAT, now + cost *
 * T)), so that later units are spaced from this real start instead of
 * catching up on the reserved instants; never less strict. Windows: `state`
 * (their units count in the window that admitted them).
 */
int64_t cr_anchor(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost);

/*
 * A charge, pure (docs/design.md §9): commits `cost` units whatever the
 * state; the key may go into debt, and while it is every request is refused
 * with its exact retry_after. gcra, token_bucket: TAT' = max(TAT, now) +
 * cost * T, at most now + CR_DEBT_MAX_NS. fixed_window: the count may pass
 * the rate up to period_ns - 1 (the packed ceiling; the debt ends with its
 * window). sliding_window: the current count carries at most the rate (its
 * packed ceiling: the window full, weighing on the next as it decays). A
 * charge past the ceiling is committed up to it: out->clipped. `out` (may be
 * NULL) is the Decision of check when the units fit; else allowed false,
 * retry_after the wait for one unit, remaining and reset_after of the state
 * charged. Cost 0 is a probe. Returns the state to store.
 */
int64_t cr_charge(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out);

/*
 * A take, pure: admits as many units as fit now, at most `max_cost` (>= 0),
 * in one decision; *taken is their number (0 when none fits). Returns the
 * state to store.
 */
int64_t cr_take(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t max_cost,
                int64_t *taken);

/*
 * A live change, pure (docs/design.md §4): the state under `to` of a key
 * whose state under `from` is `state`, at `now_ns`. What carries is units
 * used. gcra and token_bucket: used = max(0, TAT - now) / T_from exactly, and
 * TAT' = now + ceil(used * T_to) (the span clipped at CR_HORIZON_NS: a debt
 * that far stays refused, never admitted sooner). Windows: the counts carry as
 * counts, clipped at the new rate, in the new windows holding `now_ns`. An idle
 * key, and a change that decides as before (cr_limit_same), keep `state`.
 * Pre-condition: the same algorithm on both sides (see cr_limit_reconfigurable).
 */
int64_t cr_carry(const cr_limit *from, const cr_limit *to, int64_t state, int64_t now_ns);

/* Whether `a` and `b` make the same decisions (algorithm, T, tau, burst). */
bool cr_limit_same(const cr_limit *a, const cr_limit *b);

/* CR_OK when `from` may change live to `to`, else
 * CR_E_RECONFIGURE_ALGORITHM (the algorithm differs). */
cr_status cr_limit_reconfigurable(const cr_limit *from, const cr_limit *to);

/* ------------------------------------------------------------------------ */
/* Time                                                                      */

/* CLOCK_MONOTONIC in nanoseconds (system-wide: the same in every process). */
int64_t cr_clock_ns(void);

/* CLOCK_REALTIME in nanoseconds since the Unix epoch: the clock of the window
 * algorithms, whose windows are aligned to the epoch. */
int64_t cr_realtime_ns(void);

/*
 * CLOCK_MONOTONIC extrapolated from the CPU's time-stamp counter: cheaper
 * than cr_clock_ns where clock_gettime is slow, never steps back in a thread,
 * and follows cr_clock_ns to within ~100 ns (it is re-anchored to it every
 * 2 ms). The counter is read without a fence: a reading may precede, by up
 * to a few microseconds, one another thread or process published just
 * before it (a decision on an earlier time is only stricter). The default
 * clock of a store ("fast"). Its "monotonic" clock reads the same line with
 * the counter ordered (rdtscp), which never does. Used only where the
 * TSC is invariant, has rdtscp and is the kernel's own clocksource
 * (cr_fast_clock_is_tsc); elsewhere it is cr_clock_ns. Thread-safe.
 */
int64_t cr_fast_clock_ns(void);
bool cr_fast_clock_is_tsc(void);

/* Seconds (a caller's `now`) to nanoseconds, rounded to the nearest ns.
 * CR_E_NOW unless finite, >= 0 and below CR_HORIZON_NS. */
cr_status cr_seconds_to_ns(double seconds, int64_t *ns);

/* The checks every decision makes of its call's arguments, without a store:
 * CR_E_COST unless cost >= 0, CR_E_NOW unless now_ns is CR_CLOCK or in
 * [0, CR_HORIZON_NS). For a store kept elsewhere (Redis) that decides by the
 * core's rules and must refuse what the core refuses. Pure; thread-safe. */
cr_status cr_check_call(int64_t now_ns, int64_t cost);

/* A longest wait in seconds (the timeout of reserve and wait) to
 * nanoseconds: rounded as cr_seconds_to_ns, and +infinity or anything at or
 * beyond CR_HORIZON_NS is CR_NEVER (any wait: no wait can be that long).
 * `invalid` (the parameter's status: CR_E_TIMEOUT) unless
 * seconds >= 0. An absent value is the face's to read as CR_NEVER. */
cr_status cr_wait_from_seconds(double seconds, cr_status invalid, int64_t *ns);

/* Nanoseconds to seconds; CR_NEVER becomes +infinity. */
double cr_ns_to_seconds(int64_t ns);

/* Blocks the calling thread for `ns` nanoseconds of CLOCK_MONOTONIC (resumed
 * after signals; returns at once for ns <= 0). The sleep of wait(): call it
 * without any lock held (Python: with the GIL released). */
void cr_sleep_ns(int64_t ns);

/* ------------------------------------------------------------------------ */
/* Limiter: one key, one atomic TAT.                                         */

typedef struct cr_limiter cr_limiter;

/* What opening a shared region with another limit than the region's does
 * (docs/design.md §4): CR_CHANGE_APPLY makes the opener's limit the
 * region's, a live change every process follows (the newest configuration
 * wins); CR_CHANGE_REFUSE fails with CR_E_SHARED_RATE or CR_E_SHARED_BURST
 * and changes nothing. Another algorithm or capacity is refused either way. */
typedef enum { CR_CHANGE_APPLY = 0, CR_CHANGE_REFUSE = 1 } cr_on_change;

/* Parses "apply" or "refuse" (CR_E_ON_CHANGE otherwise). */
cr_status cr_parse_on_change(const char *name, size_t len, cr_on_change *out);

/* Bytes of a cr_change_describe text, with its NUL, besides the path's. */
#define CR_CHANGE_DESCRIPTION_MAX (2 * CR_LIMIT_DESCRIPTION_MAX + 160)

/* The warning every face gives when opening a shared region changed its
 * limit: "shared: <path>'s limit changed from <old> to <new> by this opening
 * (the newest configuration wins; on_change='refuse' keeps the region's)",
 * as snprintf into `buf`. */
size_t cr_change_describe(char *buf, size_t size, const char *type_name, const char *path,
                          const cr_limit *old, const cr_limit *new_limit, int64_t capacity);

/*
 * Makes a limiter for `limit`, idle (full burst): with `path` NULL, of this
 * process alone (`mode` unused); else in the shared region at `path`, a file
 * mapped MAP_SHARED (tmpfs such as /dev/shm is its natural home), opened or
 * created: every process that opens the same path shares one limit. A new
 * file gets `mode` (e.g. CR_SHARED_DEFAULT_MODE) and appears whole or not at
 * all, however many processes race to create it. An existing one is checked
 * before use and refused with a CR_E_SHARED_* status when it is short,
 * foreign, of another layout version, corrupt, or made for another kind,
 * limit or capacity; one made before the last reboot is reset (its
 * CLOCK_MONOTONIC times mean nothing now). A process may die at any instant
 * without harm to the others, and leaves no file behind. The file's space is
 * reserved before it is used, so a full file system is CR_E_SHARED_IO with
 * errno ENOSPC, never a SIGBUS. A symbolic link to nothing at `path` is
 * CR_E_SHARED_DANGLING; opening gives up with CR_E_SHARED_UNSTABLE when the
 * path keeps changing under it. The mapping survives fork(). On
 * CR_E_SHARED_IO / CR_E_SHARED_ACCESS, errno says why (docs/design.md §5).
 */
cr_status cr_limiter_open(cr_limiter **out, const cr_limit *limit, const char *path, int64_t mode,
                          cr_on_change on_change);
/* cr_limiter_open(out, limit, NULL, 0, CR_CHANGE_APPLY). */
cr_status cr_limiter_new(cr_limiter **out, const cr_limit *limit);

/* The region's limit that opening the limiter replaced (CR_CHANGE_APPLY),
 * or NULL when it changed nothing. */
const cr_limit *cr_limiter_replaced(const cr_limiter *limiter);
/* Frees it (unmapping a shared region; the file stays); NULL is a no-op. */
void cr_limiter_free(cr_limiter *limiter);
const cr_limit *cr_limiter_limit(const cr_limiter *limiter);

/*
 * Decides for `cost` units at `now_ns` (or CR_CLOCK). With `commit`, an
 * admission is stored by compare-and-swap (lock-free); without it (peek),
 * nothing is written. CR_E_COST / CR_E_NOW for bad arguments.
 */
cr_status cr_limiter_check(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool commit,
                           cr_decision *out);

/* As cr_limiter_check with `commit`, deciding only whether `cost` is
 * admitted (the fast path of allow(): no remaining or times worked out). */
cr_status cr_limiter_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);

/* Back to idle (full burst). */
void cr_limiter_reset(cr_limiter *limiter);

/*
 * Changes the limit live at `now_ns` (or CR_CLOCK), keeping what was used
 * (cr_carry). Safe against concurrent decisions, which never see the new
 * limit with the old state or the reverse: each decides wholly before the
 * change or wholly after it. Concurrent changes are serialized. The limit of
 * cr_limiter_limit() before the call stays valid (every limit a limiter had
 * is kept until it is freed: one small block per change). The clock stays the
 * limiter's. In a shared region the change is the region's: every process
 * sharing it decides under the new limit from its next decision (the old
 * limit's units carried, once, by whichever touches a state first).
 * CR_E_RECONFIGURE_ALGORITHM for another algorithm; CR_E_NOW; CR_E_NOMEM;
 * CR_E_SHARED_LOCK when another process holds the region's change lock
 * past the bound of cr_lock_acquire.
 */
cr_status cr_limiter_reconfigure(cr_limiter *limiter, const cr_limit *limit, int64_t now_ns);

/* cr_reserve on the limiter's state, by compare-and-swap. `max_wait_ns` >= 0
 * or CR_NEVER (else CR_E_TIMEOUT, the face's `timeout`). */
cr_status cr_limiter_reserve(cr_limiter *limiter, int64_t now_ns, int64_t cost, int64_t max_wait_ns,
                             bool *reserved, int64_t *delay_ns);

/* cr_refund on the limiter's state, by compare-and-swap. */
cr_status cr_limiter_refund(cr_limiter *limiter, int64_t now_ns, int64_t cost);

/* cr_anchor on the limiter's state, by compare-and-swap. */
cr_status cr_limiter_anchor(cr_limiter *limiter, int64_t now_ns, int64_t cost);

/* cr_charge on the limiter's state, by compare-and-swap; `out` may be NULL. */
cr_status cr_limiter_charge(cr_limiter *limiter, int64_t now_ns, int64_t cost, cr_decision *out);

/* cr_take on the limiter's state, in one compare-and-swap: never more than
 * fits, however many threads take at once. CR_E_MAX_COST unless max_cost >= 0. */
cr_status cr_limiter_take(cr_limiter *limiter, int64_t now_ns, int64_t max_cost, int64_t *taken);

/* ------------------------------------------------------------------------ */
/* Keyed: many keys in a table of bounded size.                              */

typedef struct cr_keyed cr_keyed;

/*
 * Makes a table sized for `capacity` live keys (28 bytes of table each),
 * hashed with SipHash-1-3 under a random 128-bit seed of its own: with `path`
 * NULL, of this process alone; else in a shared region, as cr_limiter_open.
 */
cr_status cr_keyed_open(cr_keyed **out, const cr_limit *limit, int64_t capacity, const char *path,
                        int64_t mode, cr_on_change on_change);
/* cr_keyed_open(out, limit, capacity, NULL, 0, CR_CHANGE_APPLY). */
cr_status cr_keyed_new(cr_keyed **out, const cr_limit *limit, int64_t capacity);

/* As cr_limiter_replaced. */
const cr_limit *cr_keyed_replaced(const cr_keyed *keyed);
/* Frees it (unmapping a shared region; the file stays); NULL is a no-op. */
void cr_keyed_free(cr_keyed *keyed);
const cr_limit *cr_keyed_limit(const cr_keyed *keyed);

/*
 * As cr_limiter_check, for `key` (any bytes, any length). A lookup of a key
 * that holds a slot takes no lock and writes only that slot; the first
 * admission of a key takes a short per-stripe lock to claim a slot. That
 * wait is bounded: CR_E_SHARED_LOCK when a living process keeps the lock
 * (stopped, or frozen in a debugger) past about a second.
 */
cr_status cr_keyed_check(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                         int64_t cost, bool commit, cr_decision *out);

/* As cr_keyed_check with `commit`, deciding only whether `cost` is admitted. */
cr_status cr_keyed_allow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                         int64_t cost, bool *allowed);

/* As cr_limiter_reserve, for `key`. */
cr_status cr_keyed_reserve(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                           int64_t cost, int64_t max_wait_ns, bool *reserved, int64_t *delay_ns);

/* As cr_limiter_refund, for `key` (an absent key has nothing to give back). */
cr_status cr_keyed_refund(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int64_t cost);

/* As cr_limiter_anchor, for `key`. */
cr_status cr_keyed_anchor(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int64_t cost);

/* As cr_limiter_charge, for `key`. */
cr_status cr_keyed_charge(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int64_t cost, cr_decision *out);

/* As cr_limiter_take, for `key`. */
cr_status cr_keyed_take(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                        int64_t max_cost, int64_t *taken);

/*
 * Changes the table's limit live at `now_ns` (or CR_CLOCK), for every key,
 * keeping what each used (cr_carry, at this instant). Lock-free for
 * decisions: each key is converted on its first touch after the change, and
 * the change itself converts 1/112 of the table (no pause, no walk of every
 * key): a key may sleep through any number of changes. Concurrent changes
 * are serialized. As cr_limiter_reconfigure otherwise (errors, the clock,
 * every limit kept until the table is freed).
 */
cr_status cr_keyed_reconfigure(cr_keyed *keyed, const cr_limit *limit, int64_t now_ns);

/* Forgets `key` (back to idle) and frees its slot. */
void cr_keyed_reset(cr_keyed *keyed, const void *key, size_t key_len);
/* Forgets every key, as cr_keyed_reset of each (lock-free; a key decided
 * meanwhile may be kept). Counters and the limit stay. */
void cr_keyed_clear(cr_keyed *keyed);

/* Keys holding a slot now (a key whose TAT has passed may hold one until
 * reused). Counts the table: O(capacity), not for a hot path. */
size_t cr_keyed_len(const cr_keyed *keyed);
/* The capacity the table was sized for. */
int64_t cr_keyed_capacity(const cr_keyed *keyed);
/* Bytes of table (slots, locks and header). */
size_t cr_keyed_memory(const cr_keyed *keyed);
/* Live keys evicted so far to make room (docs/operations.md: "When the table is full"). */
uint64_t cr_keyed_evictions(const cr_keyed *keyed);

/* ------------------------------------------------------------------------ */
/* Counters (docs/design/stores.md, "Counters").                             */

/*
 * What a rate limit decided since it was made or its counters were last
 * reset, exact (each verdict counted once, in the thread's own cell). A
 * shared region keeps them in the region: every process reads the host's
 * totals. Requests and units:
 *   allow, check (commit), reserve: admitted or refused, with the cost;
 *     a refusal of a cost above what the limit ever admits at once is also
 *     unfittable;
 *   charge: admitted, with the units charged (it always commits);
 *   take: admitted with the units taken, or refused (max_cost units) when
 *     none fit; a take of 0 counts nothing;
 *   refund: its units come off units_admitted (not used after all);
 *   peek, check without commit, anchor: nothing;
 * would_refuse: refusals let through by a dry run (cr_limiter_would_refuse),
 * which are not counted as refused. evicted: live keys a keyed table evicted.
 * check_all: each item counts its own admissions; a composite refusal is one
 * refusal, of the item whose decision cr_check_all returns (*index), and the
 * items that had admitted count nothing (their units were given back).
 */
#define CR_STATS_LIST(X) \
    X(admitted)          \
    X(refused)           \
    X(units_admitted)    \
    X(units_refused) X(unfittable) X(would_refuse) X(evicted) /* evicted: 0 for a Limiter */
#define CR_STATS_FIELD_(name) uint64_t name;
typedef struct cr_stats {
    CR_STATS_LIST(CR_STATS_FIELD_)
} cr_stats;

void cr_limiter_stats(const cr_limiter *limiter, cr_stats *out);
void cr_keyed_stats(const cr_keyed *keyed, cr_stats *out);
/* Zeroes the counters (a baseline: the cells are never written by another
 * thread than their owner). CR_E_SHARED_LOCK as cr_limiter_reconfigure. */
cr_status cr_limiter_reset_stats(cr_limiter *limiter);
cr_status cr_keyed_reset_stats(cr_keyed *keyed);
/* A dry run lets a refusal of `cost` units through: moves it from refused
 * (and units_refused) to would_refuse. Call it once per refusal let through,
 * after the decision that counted it. */
void cr_limiter_would_refuse(cr_limiter *limiter, int64_t cost);
void cr_keyed_would_refuse(cr_keyed *keyed, int64_t cost);

/* ------------------------------------------------------------------------ */
/* Several limits as one (docs/design.md §8).                                */

/* One limit of a composite: a limiter (keyed NULL), or a keyed table and a
 * key (limiter NULL). */
typedef struct cr_item {
    cr_limiter *limiter;
    cr_keyed *keyed;
    const void *key;
    size_t key_len;
} cr_item;

/*
 * Decides `cost` units against every item as one: admitted only if every
 * item admits. Each item reads its own limit's clock once (CR_CLOCK) or
 * takes `now_ns`. The items but the last are first peeked, then the last is
 * committed (the call's first write); if any of these refuses, nothing is
 * written and the refusal with the longest retry_after is returned. Else the
 * others are committed in turn; one that refuses then (another thread took
 * its units meanwhile) has the items committed before it given back
 * (cr_refund) and its refusal is returned. On admission the decision with the fewest remaining
 * is returned. *index (may be NULL) is the item whose decision `out` is.
 * No item ever admits more than its own bound; a refused composite leaves
 * every item as it was, a unit taken and given back counting as none taken.
 * CR_E_ITEMS for no items or an item that is neither kind; CR_E_SHARED_LOCK
 * when an item's commit meets a region's lock held past its bound (what the
 * call committed before is given back; `out` is not set).
 */
cr_status cr_check_all(const cr_item *items, size_t count, int64_t now_ns, int64_t cost,
                       cr_decision *out, size_t *index);

/* As cr_limiter_would_refuse, for the item whose refusal cr_check_all
 * returned (its *index): a dry run of several limits. */
void cr_item_would_refuse(const cr_item *item, int64_t cost);

/* ------------------------------------------------------------------------ */
/* Waiting (docs/design.md §9).                                              */

/*
 * Blocks the calling thread until `cost` units of `item` (a limiter, or a
 * keyed table and a key, as for cr_check_all) are admitted on its clock: the
 * steps of cr_wait_step, sleeping each one out with cr_sleep_ns. Gives up,
 * nothing spent, when they cannot be had within `timeout_ns` (>= 0, or
 * CR_NEVER: any) of the call, or ever (an unfittable cost): *admitted false
 * and, unless `refusal` is NULL, the decision that said so in *refusal; at
 * once when that is known at once. *slept_ns: the time slept. Call it with
 * no lock held (a signal does not cut a sleep short). CR_E_TIMEOUT for a
 * negative timeout; CR_E_ITEMS for an item that is neither kind.
 */
cr_status cr_wait(const cr_item *item, int64_t cost, int64_t timeout_ns, bool *admitted,
                  int64_t *slept_ns, cr_decision *refusal);

/* ------------------------------------------------------------------------ */
/* A wait, one step at a time (docs/design.md §9): what a face that sleeps   */
/* by itself (Python: threads and asyncio) asks between its sleeps.          */

/* The place of a waiter that holds none in its process's line. */
#define CR_NO_TURN INT64_MIN

typedef enum cr_wait_action {
    CR_WAIT_GO = 0,     /* admitted now: start */
    CR_WAIT_SLEEP = 1,  /* not yet: sleep, then take the next step */
    CR_WAIT_REFUSED = 2 /* not in time, or never: nothing spent */
} cr_wait_action;

/*
 * The next step of a wait for `cost` units of `item`, at most `max_wait_ns`
 * (CR_NEVER: any) from now, for a waiter whose place in its process's line
 * is *turn_ns (CR_NO_TURN for none: its first step). Units are admitted at
 * the instant of a step, by the store, or not at all: a start is decided at
 * its real instant, so that starts keep the limit's spacing however late a
 * sleeper wakes (docs/design.md §9, "Real starts"), and a block put on the
 * limit meanwhile (a provider's 429, cr_limiter_follow) holds every waiter.
 *   CR_WAIT_GO: admitted now; *turn_ns is CR_NO_TURN.
 *   CR_WAIT_SLEEP: sleep *sleep_ns, then step again with *turn_ns. A first
 *     step that finds waiters of this process ahead of it, or that the
 *     store refuses, takes the turn after the line's last (cr_line_join),
 *     first come, first served; a waiter the store refuses at its turn (a
 *     late start before it, another process, a block) keeps its place and
 *     sleeps until the store would admit it.
 *   CR_WAIT_REFUSED: not within max_wait_ns, or never (an unfittable cost):
 *     the place given back; *refusal (unless NULL) is the store's decision,
 *     its retry_after the wait the units would have taken.
 * The line is this process's, per key (64 keys of a keyed table at once;
 * past that a key's waiters wait without one); it holds no units. Call it
 * with no lock held. CR_E_TIMEOUT for a negative max_wait_ns; CR_E_ITEMS.
 */
cr_status cr_wait_step(const cr_item *item, int64_t cost, int64_t max_wait_ns, int64_t *turn_ns,
                       cr_wait_action *step, int64_t *sleep_ns, cr_decision *refusal);

/* Gives back the place of a waiter that stops waiting (cancelled,
 * interrupted) at `turn_ns`; nothing for CR_NO_TURN. CR_E_ITEMS. */
cr_status cr_wait_leave(const cr_item *item, int64_t cost, int64_t turn_ns);

/* The line's rule, pure: a waiter of `cost` units that joins a line whose
 * tail is `tail_ns`, for units the store would admit at `ready_ns`, takes
 * its turn at max(ready_ns, tail_ns) (*turn_ns); the returned tail is the
 * turn plus cost * T (at most CR_NEVER). */
int64_t cr_line_join(const cr_limit *limit, int64_t tail_ns, int64_t ready_ns, int64_t cost,
                     int64_t *turn_ns);

/* ------------------------------------------------------------------------ */
/* Concurrency: units held at once (docs/design.md §15).                    */

/* The largest limit of a gauge: each unit of it is a 16-byte cell. */
#define CR_GAUGE_MAX_LIMIT 65536

typedef struct cr_gauge cr_gauge;

/* What an acquire gave out: the receipt its release hands back. A plain
 * value; `holder` 0 is no holding (releasing it does nothing). */
typedef struct cr_holding {
    uint64_t holder;     /* the holder's process id << 32 | its sequence number */
    int64_t acquired_ns; /* CLOCK_MONOTONIC at the acquire (0 without a lease) */
    int64_t cost;        /* units held */
    uint32_t entry;      /* the gauge of the table it is held in */
    uint32_t first;      /* its cells lie in the `span` cells from cell `first` on */
    uint32_t span;
} cr_holding;

/*
 * Makes a concurrency limit: at most `limit` units (1 .. CR_GAUGE_MAX_LIMIT,
 * else CR_E_LIMIT) held at once; without `keyed`, one gauge; with it, one per
 * key in a table sized for `capacity` keys holding units at once (else
 * CR_E_CAPACITY; 16 * (limit + 1) * 7/4 bytes of table per key). A key with
 * nothing held is absent: its place is reused. `lease_ns` > 0 reclaims a
 * holding older than it; 0 is no lease (CR_E_LEASE when negative or at
 * least CR_HORIZON_NS). `peak` tracks the most units held at once
 * (cr_gauge_stats): one total of the units held, shared by every thread (and
 * process), that each acquire and release updates with locked instructions;
 * without it nothing but the cells is written. With `path`, the gauges live
 * in a shared region as for cr_limiter_open (CR_E_SHARED_LIMIT for a region
 * of another limit, lease or peak setting), and each holding records its
 * holder process: holdings of a dead process are reclaimed when an acquire
 * next finds the limit full, or by cr_gauge_in_flight. Thread-safe, as
 * cr_keyed; the mapping survives fork().
 */
cr_status cr_gauge_open(cr_gauge **out, int64_t limit, bool keyed, int64_t capacity,
                        int64_t lease_ns, bool peak, const char *path, int64_t mode);
/* Frees it (unmapping a shared region; the file stays); NULL is a no-op.
 * Holdings still held in a region stay held (until their process dies). */
void cr_gauge_free(cr_gauge *gauge);
int64_t cr_gauge_limit(const cr_gauge *gauge);
/* The capacity of a keyed table; 0 for a single gauge. */
int64_t cr_gauge_capacity(const cr_gauge *gauge);
/* The lease in ns; 0 for none. */
int64_t cr_gauge_lease_ns(const cr_gauge *gauge);
/* Whether it tracks the peak (cr_gauge_open's `peak`). */
bool cr_gauge_tracks_peak(const cr_gauge *gauge);

/*
 * Takes `cost` units (>= 1, else CR_E_HOLD_COST) of `key`'s gauge when
 * in_flight + cost <= limit, by compare-and-swap on the gauge's cells (one
 * per unit: lock-free; the first holding of an absent key takes the key's
 * stripe locks, as cr_keyed). *acquired says whether; then *holding is the
 * receipt for cr_gauge_release, else holder 0. A refusal takes nothing: a
 * cost above the limit, a limit found full after reclaiming what dead
 * holders and expired leases left, or a table whose places are all held by
 * other keys. `key` NULL for a gauge made without `keyed`
 * (CR_E_KEY_UNKEYED otherwise), any bytes for a keyed one (NULL:
 * CR_E_KEY). CR_E_SHARED_LOCK as cr_keyed_check.
 */
cr_status cr_gauge_acquire(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                           bool *acquired, cr_holding *holding);

/* Gives back the units of `holding` and returns how many came back: 0 for a
 * holding already released, reclaimed (its lease ran out), of another gauge,
 * or holder 0. Never more than the holding took: a gauge never goes below
 * zero. Lock-free; reads only the cells the holding's span covers (one, for
 * a unit taken where a free cell was found at once). */
int64_t cr_gauge_release(cr_gauge *gauge, const cr_holding *holding);

/* As cr_gauge_acquire, counting only an acquisition: a waiter's tries, whose
 * refusal is counted once, when it gives up (cr_gauge_count_refusal). */
cr_status cr_gauge_poll(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                        bool *acquired, cr_holding *holding);
void cr_gauge_count_refusal(cr_gauge *gauge, int64_t cost);

/* As cr_gauge_acquire, blocking the calling thread until the units are
 * taken or `timeout_ns` (>= 0, or CR_NEVER) has passed (CR_E_TIMEOUT when
 * negative): polls, sleeping 20 us doubling to 1 ms between tries. A cost
 * above the limit is refused at once. Call it with no lock held (Python:
 * with the GIL released). */
cr_status cr_gauge_wait(cr_gauge *gauge, const void *key, size_t key_len, int64_t cost,
                        int64_t timeout_ns, bool *acquired, cr_holding *holding);

/* The units of `key` held now, after reclaiming what dead holders and
 * expired leases left. O(limit); an absent key has 0. */
cr_status cr_gauge_in_flight(cr_gauge *gauge, const void *key, size_t key_len, int64_t *in_flight);

/* What a concurrency limit did since it was made or last reset: acquires
 * (acquired, refused, with their units), units released by their holders,
 * units reclaimed (a dead holder's, an ended lease's), keys evicted (never:
 * a key holding units keeps its place; always 0), the units in flight now
 * and, when `peak_tracked`, the most in flight at once since the reset (else
 * peak is 0: not counted). Exact, as cr_stats; in a shared region, the
 * host's. in_flight is counted in the holdings themselves at the reading (the
 * cells held, those of a dead holder not yet reclaimed included): O(limit)
 * for one gauge, O(table) for a keyed one. */
#define CR_GAUGE_STATS_LIST(X) \
    X(acquired)                \
    X(refused)                 \
    X(units_acquired) X(units_refused) X(released) X(reclaimed) X(in_flight) X(peak) X(evicted)
typedef struct cr_gauge_stats {
    CR_GAUGE_STATS_LIST(CR_STATS_FIELD_)
    bool peak_tracked; /* made with `peak` (cr_gauge_open) */
} cr_gauge_stats;

void cr_gauge_stats_read(const cr_gauge *gauge, cr_gauge_stats *out);
/* The description every face prints: "cellrate.Concurrency(limit=4,
 * capacity=10, lease=30, peak=True)" (no capacity for one gauge, no lease for
 * none, no peak when not tracked), as snprintf into `buf`. */
size_t cr_gauge_describe(char *buf, size_t size, int64_t limit, int64_t capacity, int64_t lease_ns,
                         bool peak);
cr_status cr_gauge_reset_stats(cr_gauge *gauge);

/* What cr_gauge_open and cr_gauge_acquire refuse of a limit and a cost,
 * for the stores that hold units elsewhere (Redis): CR_E_LIMIT, then
 * CR_E_HOLD_COST, else CR_OK. */
cr_status cr_gauge_check(int64_t limit, int64_t cost);

/* A face's lease in seconds to ns for cr_gauge_open: CR_E_LEASE unless
 * > 0 and below CR_HORIZON_NS once rounded (an absent lease is 0). */
cr_status cr_lease_from_seconds(double seconds, int64_t *ns);

/* ------------------------------------------------------------------------ */
/* Metrics (docs/design.md §17): the one list of what the exporters publish  */
/* (Prometheus in Python and in the nginx helper, OpenTelemetry), read by    */
/* every one of them.                                                        */

/* A label as Prometheus names it and the attribute it is in OpenTelemetry. */
typedef struct cr_metric_label {
    const char *name;      /* "limit" */
    const char *attribute; /* "cellrate.limit.name" */
} cr_metric_label;

/* One series of a metric: the counter it reads and the value of the
 * metric's own label. */
typedef struct cr_metric_sample {
    const char *field; /* a field of cr_stats or cr_gauge_stats, as stats() names it */
    size_t offset;     /* offsetof that field in its struct */
    const char *value; /* the value of the metric's `label`; NULL when it has none */
} cr_metric_sample;

#define CR_METRIC_SAMPLES_MAX 3

typedef struct cr_metric {
    const char *name;            /* OpenTelemetry: "cellrate.decisions" */
    const char *prometheus_name; /* "cellrate_decisions_total": `name` with '_' for '.', and
                                    "_total" after a counter's, as OpenTelemetry's own
                                    Prometheus exporter writes it */
    const char *help;            /* one sentence: Prometheus HELP, OpenTelemetry description */
    const char *type;            /* Prometheus: "counter" or "gauge" */
    const char *instrument;      /* OpenTelemetry: "counter", "updowncounter" or "gauge" */
    const char *unit;            /* UCUM, as OpenTelemetry takes it: "{request}" */
    const char *stats;           /* what it reads: "rate" (cr_stats) or "concurrency"
                                    (cr_gauge_stats) */
    /* the labels every series may carry; an exporter writes those it has a
     * value for (a web policy's limits all; the nginx helper's "limit") */
    const cr_metric_label *labels;
    size_t label_count;
    cr_metric_label label; /* the label that tells the samples apart; name NULL: one sample */
    size_t sample_count;
    cr_metric_sample samples[CR_METRIC_SAMPLES_MAX];
} cr_metric;

/* The metrics, in the order the exporters publish them; *count set to their
 * number. A static table: never freed, the same for every call; thread-safe.
 * A sample whose counter a limit does not keep (peak without
 * peak_tracked) is left out by the exporters. */
const cr_metric *cr_metrics(size_t *count);

/* ------------------------------------------------------------------------ */
/* Inspecting a region (docs/design/shared-regions.md, "Inspecting").         */

/* What a region file holds, read by cr_inspect_region. */
typedef struct cr_region_info {
    uint32_t layout_version;
    const char *kind;      /* "limiter", "keyed" or "concurrency" */
    const char *algorithm; /* a rate limit's (cr_algorithm_name); NULL for concurrency */
    cr_limit limit;        /* a rate limit's current limit (its clock: the default) */
    int64_t capacity;      /* the keys a keyed table is sized for; 0 for one key */
    int64_t max_in_flight; /* concurrency: its limit (0 for a rate limit) */
    int64_t lease_ns;      /* concurrency: its lease (0: none) */
    uint64_t live_keys;    /* keys holding a slot (keyed) or units (keyed concurrency) */
    uint64_t generation;   /* changes of its limit so far (0: the first) */
    uint64_t size;         /* bytes of the file */
    bool this_boot;        /* false: made before the last reboot (reset on next opening) */
    /* cr_limit_describe's text, or "cellrate.Concurrency(limit=.., ...)" */
    char description[CR_LIMIT_DESCRIPTION_MAX];
    cr_stats stats;             /* a rate limit's counters */
    cr_gauge_stats gauge_stats; /* a concurrency limit's (peak_tracked: its setting) */
} cr_region_info;

/* Reads the region at `path` without changing it: opened read-only, never
 * created, truncated, locked or written. A path that is not a region is
 * refused with the status an opening would give: CR_E_SHARED_MISSING (no
 * file), CR_E_SHARED_DANGLING, CR_E_SHARED_FOREIGN (not a region, or not a
 * regular file), CR_E_SHARED_SHORT, CR_E_SHARED_VERSION (another layout:
 * nothing past the version is read), CR_E_SHARED_CORRUPT; CR_E_SHARED_ACCESS
 * or CR_E_SHARED_IO (errno set) when it cannot be read. */
cr_status cr_inspect_region(const char *path, cr_region_info *out);

/* ------------------------------------------------------------------------ */
/* HTTP header fields (draft-ietf-httpapi-ratelimit-headers-11)              */

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

/* ------------------------------------------------------------------------ */
/* Following a provider (docs/design.md §18): what a response says of the    */
/* limit it met (Retry-After, the IETF RateLimit fields, x-ratelimit-*,      */
/* anthropic-ratelimit-*), read here once for every face, and the store      */
/* operation that pulls a limiter into line with it.                         */

/* One field of a response, as the face received it (name and value need not
 * be NUL-terminated; the name in any case). */
typedef struct cr_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} cr_field;

/* The quota a limiter counts: the provider's requests, or its tokens. */
typedef enum cr_quota { CR_QUOTA_REQUESTS = 0, CR_QUOTA_TOKENS = 1 } cr_quota;

/* Parses "requests" or "tokens" (CR_E_QUOTA otherwise); NULL is "requests". */
cr_status cr_parse_quota(const char *name, size_t len, cr_quota *out);
/* "requests", "tokens" ("" out of range). */
const char *cr_quota_name(cr_quota quota);

/* The longest a response may hold a limiter: one hour. A Retry-After, a reset
 * or a window further away is read as this; a value that does not fit 63
 * bits of nanoseconds (or units) is no value and is ignored. */
#define CR_FOLLOW_MAX_NS ((int64_t)3600 * 1000000000)

/* The bounds a signal keeps; more are merged into the last (the fewest
 * remaining over the longest time: stricter than each). */
#define CR_BOUNDS_MAX 8

/* "At most `remaining` more units in [now, now + within_ns)", within_ns in
 * [0, CR_FOLLOW_MAX_NS] (0: now): what a response says of one quota. A wait
 * (a 429's Retry-After) is remaining 0 within the wait. (cr_follow reads a
 * remaining above 0 as "at most that many now".) */
typedef struct cr_bound {
    int64_t remaining;
    int64_t within_ns;
} cr_bound;

typedef struct cr_signal {
    int count; /* bounds filled; 0: the response said nothing of the quota */
    cr_bound bound[CR_BOUNDS_MAX];
} cr_signal;

/*
 * Reads what the response (its `status`, 0 when unknown, else 100..599:
 * CR_E_STATUS_CODE, and its `count` fields) says of `quota`, into `out`:
 *
 *   Retry-After (delay-seconds, with a fraction, or an HTTP-date) or, in its
 *     place when valid, retry-after-ms (the same wait to the millisecond), on
 *     a 429, a 503 or an unknown status: remaining 0 within the wait, for
 *     every quota;
 *   RateLimit: "policy";r=R;t=T (draft-ietf-httpapi-ratelimit-headers-08 to
 *     -11; the policy's quota unit from RateLimit-Policy's qu, "requests" when
 *     absent), RateLimit: limit=L, remaining=R, reset=T (draft 07), and
 *     RateLimit-Remaining / RateLimit-Reset (drafts up to 06): requests;
 *   x-ratelimit-remaining-{requests,tokens} with x-ratelimit-reset-{...}
 *     (durations such as "6m0s", "1.5s", "20ms"), and x-ratelimit-remaining
 *     with x-ratelimit-reset (seconds; a number >= 10^9 is a Unix time in
 *     seconds, >= 10^12 in milliseconds): requests, tokens;
 *   anthropic-ratelimit-{requests,tokens}-remaining with -reset (RFC 3339).
 *
 * A remaining without a reset is remaining within 0 (now). A 429 that carries
 * none of these fields, valid or not, is remaining 0 now, for requests. A
 * value that is not a number of its field's syntax, negative, past, or
 * beyond 63 bits is ignored (a
 * Structured Field that does not parse: the whole field); waits beyond
 * CR_FOLLOW_MAX_NS are capped at it; repeated fields each count (of one
 * family, the fewest remaining and the longest reset). The bounds come in
 * this order: RateLimit's as its fields come, the wait, the families above
 * in their order, a bare 429's; past CR_BOUNDS_MAX they merge. Absolute times are
 * read against `realtime_ns` (the Unix time in ns, below CR_HORIZON_NS, else
 * CR_E_NOW; CR_CLOCK reads CLOCK_REALTIME, only when such a time is met).
 * CR_E_HEADERS for fields NULL with a count, or a field NULL with a length.
 * Pure with an explicit `realtime_ns`; thread-safe; reads nothing beyond the
 * lengths given.
 */
cr_status cr_signal_read(cr_signal *out, const cr_field *fields, size_t count, int64_t status,
                         cr_quota quota, int64_t realtime_ns);

/* The checks of a follow's own arguments: CR_E_PENDING unless pending >= 0,
 * CR_E_SHARE unless 0 < share <= 1. */
cr_status cr_follow_check(int64_t pending, double share);

/*
 * A follow, pure: the state of a key pulled into line with `signal` at
 * `now_ns`. Each bound is first made this process's: remaining scaled by
 * `share` (a fleet member's part, floor) less `pending` (units sent that the
 * response cannot count yet), at least 0. A remaining above 0 spends the
 * difference: no more than it left now (gcra, token_bucket: TAT' = max(TAT,
 * now + tau - remaining * T), the next unit one T after them; windows: the
 * count raised to rate - remaining). A wait (remaining 0: a 429's
 * Retry-After, a remaining of 0 with its reset) holds the key until its end:
 * gcra TAT' = max(TAT, now + tau + max(0, within - T)), at most now +
 * CR_DEBT_MAX_NS; windows fill every window up to the one holding its last
 * instant (a window's state cannot stop part-way). Only ever stricter: never
 * a unit more than before, whatever the signal. Returns the state to store
 * (equal to `state`: nothing to write).
 */
int64_t cr_follow(const cr_limit *limit, int64_t state, int64_t now_ns, const cr_signal *signal,
                  int64_t pending, double share);

/* CR_OK when retries >= 0 (CR_E_RETRIES) and 0 < backoff_ns <= max_backoff_ns
 * (CR_E_BACKOFF): the settings of cr_retry_wait. */
cr_status cr_retry_check(int64_t retries, int64_t backoff_ns, int64_t max_backoff_ns);

/*
 * Whether to retry a request that a provider answered with `status`, as try
 * `attempt` after it (1: the first retry), and how long to wait first
 * (*wait_ns): a 429 or a 503, while attempt <= retries. The wait is the
 * back-off backoff_ns * 2^(attempt - 1), at most max_backoff_ns, half of it
 * fixed and half spread by `random` (uniform over 64 bits): clients refused
 * at once come back apart. A Retry-After is followed into the limiter (a
 * 429's holds it until then), which the retry waits on after this. Pure.
 */
bool cr_retry_wait(int64_t status, int64_t attempt, int64_t retries, int64_t backoff_ns,
                   int64_t max_backoff_ns, uint64_t random, int64_t *wait_ns);

/* cr_follow on the limiter's state, by compare-and-swap (lock-free); *pulled
 * says whether it changed. Counts nothing. CR_E_NOW, CR_E_PENDING, CR_E_SHARE. */
cr_status cr_limiter_follow(cr_limiter *limiter, int64_t now_ns, const cr_signal *signal,
                            int64_t pending, double share, bool *pulled);

/* As cr_limiter_follow, for `key` (an absent key takes a slot when pulled). */
cr_status cr_keyed_follow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          const cr_signal *signal, int64_t pending, double share, bool *pulled);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_H */
