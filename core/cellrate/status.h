/*
 * cellrate/status.h: the version call, the units every part shares, the status codes
 *
 * A part of cellrate.h (include <cellrate.h>).
 *
 * Units: every time is an int64_t count of nanoseconds on CLOCK_MONOTONIC
 * (window algorithms: CLOCK_REALTIME, since their windows are aligned to the
 * Unix epoch), below CR_HORIZON_NS. Pass CR_CLOCK as `now_ns` to have the
 * store read the limit's clock itself.
 */
#ifndef CELLRATE_STATUS_H
#define CELLRATE_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

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

/* As `now_ns`: read the limit's clock (CLOCK_MONOTONIC, or the fast clock)
 * at the moment of the decision. */
#define CR_CLOCK (-1)

/*
 * Status codes: X(number, NAME, CLASS, parameter, message). A denial is not an
 * error; these are for bad arguments and exhausted resources. CLASS (a
 * cr_status_class without CR_STATUS_) says how a face reports it: ARGUMENT,
 * the caller's mistake (raised); RUNTIME, a failure of the moment or of the
 * system (Lua: nil, message, code); REGION, a region file that is not the one
 * asked for. The parameter is the name the user gave (or "" when none
 * applies); messages start with it and name no language's types. Numbers are
 * the ABI: append new rows in ascending order, never renumber. A number without a
 * row is reserved (work under way elsewhere takes a range): it reads as a value
 * out of range ("unknown status", no parameter, no name). status.c fails to
 * compile unless every number is below CR_STATUS_COUNT (one past the last row's)
 * and used once.
 * The table is the reference model's (tests/model/gcra_model.py), row for row
 * (tests/vectors/status.txt).
 */
#define CR_STATUS_LIST(X)                                                                          \
    X(0, OK, NONE, "", "ok")                                                                       \
    X(1, E_RATE, ARGUMENT, "rate",                                                                 \
      "rate must be a number > 0 or a rate string such as '10/second'")                            \
    X(2, E_RATE_SYNTAX, ARGUMENT, "rate",                                                          \
      "rate: cannot parse; expected a number or a string such as "                                 \
      "'10/second', '300/minute', '5 per second' or '100/5m'")                                     \
    X(3, E_RATE_CALENDAR, ARGUMENT, "rate",                                                        \
      "rate: months and years have no fixed length; use a fixed duration "                         \
      "such as '1000/30d' or '1000/365d'")                                                         \
    X(4, E_RATE_TOO_HIGH, ARGUMENT, "rate",                                                        \
      "rate is too high: the interval period/rate rounds below 1 ns")                              \
    X(5, E_RATE_TOO_LOW, ARGUMENT, "rate",                                                         \
      "rate is too low: the interval period/rate exceeds 2^62 ns (146 years)")                     \
    X(6, E_PERIOD, ARGUMENT, "period", "period must be a finite number of seconds > 0")            \
    X(7, E_PERIOD_WITH_TEXT, ARGUMENT, "period",                                                   \
      "period must not be given with a rate string, which carries its own period")                 \
    X(8, E_BURST, ARGUMENT, "burst", "burst must be an integer >= 1")                              \
    X(9, E_BURST_TOO_LARGE, ARGUMENT, "burst",                                                     \
      "burst is too large: burst * (period/rate) exceeds 2^62 ns (146 years)")                     \
    X(10, E_COST, ARGUMENT, "cost", "cost must be an integer >= 0")                                \
    X(11, E_NOW, ARGUMENT, "now",                                                                  \
      "now must be a finite number of seconds >= 0 and below 2^62 ns (146 years)")                 \
    X(12, E_KEY, ARGUMENT, "key", "key must be a string (any bytes, any length)")                  \
    X(13, E_CLOCK, ARGUMENT, "clock", "clock must be 'monotonic' or 'fast'")                       \
    X(14, E_CAPACITY, ARGUMENT, "capacity", "capacity must be an integer >= 1 and <= 2^32")        \
    X(15, E_NOMEM, RUNTIME, "", "out of memory")                                                   \
    X(16, E_SHARED_PATH, ARGUMENT, "shared",                                                       \
      "shared must be the path of the region file (a string without NUL characters)")              \
    X(17, E_SHARED_IO, RUNTIME, "shared", "shared: cannot open, create or map the region file")    \
    X(18, E_SHARED_ACCESS, RUNTIME, "shared", "shared: permission denied on the region file")      \
    X(19, E_SHARED_SHORT, REGION, "shared",                                                        \
      "shared: the file is too short to be a cellrate region")                                     \
    X(20, E_SHARED_FOREIGN, REGION, "shared", "shared: the file is not a cellrate region")         \
    X(21, E_SHARED_VERSION, REGION, "shared", "shared: the region has another layout version")     \
    X(22, E_SHARED_CORRUPT, REGION, "shared",                                                      \
      "shared: the region is corrupt (header checksum or size)")                                   \
    X(23, E_SHARED_KIND, REGION, "shared",                                                         \
      "shared: the region holds another kind of limiter (Limiter vs KeyedLimiter)")                \
    X(24, E_SHARED_RATE, REGION, "shared",                                                         \
      "shared: the region was made with another rate or period")                                   \
    X(25, E_SHARED_BURST, REGION, "shared", "shared: the region was made with another burst")      \
    X(26, E_SHARED_CAPACITY, REGION, "shared",                                                     \
      "shared: the region was made with another capacity")                                         \
    X(27, E_SHARED_MODE, ARGUMENT, "shared_mode",                                                  \
      "shared_mode must be a file mode from 0 to 0777 (octal)")                                    \
    X(28, E_ALGORITHM, ARGUMENT, "algorithm",                                                      \
      "algorithm must be 'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'")              \
    X(29, E_BURST_WINDOW, ARGUMENT, "burst",                                                       \
      "burst: a window algorithm takes no burst (a window admits rate units); "                    \
      "leave burst out, or use 'gcra' or 'token_bucket'")                                          \
    X(30, E_RATE_WHOLE, ARGUMENT, "rate",                                                          \
      "rate: a window admits a whole number of units; write a fractional rate as "                 \
      "whole units per longer window, e.g. '1/2s' for 0.5 per second")                             \
    X(31, E_RATE_FIXED_CEILING, ARGUMENT, "rate",                                                  \
      "rate is above the fixed_window ceiling: at most period_ns - 1 units per window "            \
      "(999999999 per second, 59999999999 per minute)")                                            \
    X(32, E_RATE_SLIDING_CEILING, ARGUMENT, "rate",                                                \
      "rate is above the sliding_window ceiling: (rate + 1)^2 <= period_ns "                       \
      "(31621 per second, 244947 per minute, 1897365 per hour, 9295159 per day)")                  \
    X(33, E_WINDOW_TOO_LONG, ARGUMENT, "period",                                                   \
      "period: a window longer than 2^60 ns (36.5 years) is not supported")                        \
    X(34, E_CLOCK_WINDOW, ARGUMENT, "clock",                                                       \
      "clock: window algorithms read the realtime clock (windows are aligned to the "              \
      "Unix epoch); leave clock out or pass 'realtime'")                                           \
    X(35, E_SHARED_ALGORITHM, REGION, "shared",                                                    \
      "shared: the region was made with another algorithm")                                        \
    /* 36 is unused: reserve's longest wait is `timeout` (E_TIMEOUT), as wait's */                 \
    X(36, E_MAX_WAIT, ARGUMENT, "max_wait",                                                        \
      "max_wait must be a number of seconds >= 0, or absent for any wait")                         \
    X(37, E_ITEMS, ARGUMENT, "items",                                                              \
      "items must be a non-empty list of limiters and (keyed limiter, key) or (keyed limiter, "    \
      "key, plan) items")                                                                          \
    X(38, E_HEADER_NAME, ARGUMENT, "name",                                                         \
      "name must be 1 to 64 printable ASCII characters (the policy name of the headers)")          \
    X(39, E_HEADER_VALUE, ARGUMENT, "decision",                                                    \
      "decision: limit, remaining, retry_after, reset_after and window must be >= 0")              \
    X(40, E_SHARED_DANGLING, REGION, "shared",                                                     \
      "shared: the path is a symbolic link to nothing; remove the link or point it at a region")   \
    X(41, E_SHARED_UNSTABLE, REGION, "shared",                                                     \
      "shared: the path kept changing while it was opened (removed or replaced again and again)")  \
    X(42, E_SHARED_LOCK, RUNTIME, "shared",                                                        \
      "shared: a lock of the region stayed held past its time limit (a stopped or frozen "         \
      "process holds it)")                                                                         \
    X(43, E_SHARED_MODE_ALONE, ARGUMENT, "shared_mode",                                            \
      "shared_mode is the mode of a region file: give it only with shared")                        \
    X(44, E_TIMEOUT, ARGUMENT, "timeout",                                                          \
      "timeout must be a number of seconds >= 0, or absent to wait as long as it takes")           \
    X(45, E_RATE_SEVERAL, ARGUMENT, "rate",                                                        \
      "rate: one string is one limit; for several ('100/day;10/hour') make one limiter "           \
      "of each and decide them as one with check_all")                                             \
    X(46, E_RECONFIGURE_ALGORITHM, ARGUMENT, "algorithm",                                          \
      "algorithm: a live change keeps the limit's algorithm; make a new limiter for another one")  \
    X(47, E_ON_CHANGE, ARGUMENT, "on_change", "on_change must be 'apply' or 'refuse'")             \
    X(48, E_MAX_COST, ARGUMENT, "max_cost", "max_cost must be an integer >= 0")                    \
    X(49, E_BURST_MAX_COST, ARGUMENT, "burst",                                                     \
      "burst is below max_cost: a request of max_cost units would never be admitted (a "           \
      "permanent refusal); give a burst of at least max_cost")                                     \
    X(50, E_RATE_MAX_COST, ARGUMENT, "rate",                                                       \
      "rate is below max_cost: a window admits at most rate units, so a request of max_cost "      \
      "units would never be admitted; give a rate of at least max_cost per window")                \
    X(51, E_LIMIT, ARGUMENT, "limit",                                                              \
      "limit must be an integer >= 1 and <= 65536 (the units that may be held at once)")           \
    X(52, E_HOLD_COST, ARGUMENT, "cost",                                                           \
      "cost must be an integer >= 1 (the units a holding takes)")                                  \
    X(53, E_LEASE, ARGUMENT, "lease",                                                              \
      "lease must be a number of seconds > 0 and below 2^62 ns (146 years), or absent for none")   \
    X(54, E_SHARED_LIMIT, REGION, "shared",                                                        \
      "shared: the region was made with another limit, lease or peak")                             \
    X(55, E_KEY_UNKEYED, ARGUMENT, "key",                                                          \
      "key: a concurrency limit without capacity has no keys; give capacity for one limit "        \
      "per key")                                                                                   \
    X(56, E_SLOT, ARGUMENT, "slot", "slot must be a slot that a concurrency limit gave out")       \
    X(57, E_SHARED_MISSING, REGION, "shared",                                                      \
      "shared: no file at the path (a region is made by the first limiter that opens it)")         \
    X(58, E_PEAK, ARGUMENT, "peak",                                                                \
      "peak must be a boolean (true: track the most units held at once, for a shared total "       \
      "that every acquire and release updates)")                                                   \
    X(59, E_MAX_DEBT, ARGUMENT, "max_debt",                                                        \
      "max_debt must be an integer >= 0 (the units a charge may leave a key owing beyond its "     \
      "limit)")                                                                                    \
    X(60, E_SHARED_MAX_DEBT, REGION, "shared",                                                     \
      "shared: the region was made with another max_debt")                                         \
    X(61, E_SHARE_REPLY, RUNTIME, "",                                                              \
      "the heartbeat's reply is not the share script's { share, members, target } (fractions "     \
      "from 0 to 1, members >= 1)")                                                                \
    X(62, E_STATUS, ARGUMENT, "status", "status must be an integer from 400 to 599")               \
    X(63, E_IPV4_PREFIX, ARGUMENT, "ipv4_prefix", "ipv4_prefix must be an integer from 0 to 32")   \
    X(64, E_IPV6_PREFIX, ARGUMENT, "ipv6_prefix", "ipv6_prefix must be an integer from 0 to 128")  \
    X(65, E_TRUSTED_PROXIES, ARGUMENT, "trusted_proxies",                                          \
      "trusted_proxies must be addresses or networks such as '10.0.0.0/8', or 'unix'")             \
    X(66, E_CHARGE_COUNT, ARGUMENT, "charge",                                                      \
      "charge: a count of units is a whole number >= 0 (as text, decimal digits); any other "      \
      "figure settles nothing")                                                                    \
    X(67, E_QUOTA, ARGUMENT, "quota", "quota must be 'requests' or 'tokens'")                      \
    X(68, E_HEADERS, ARGUMENT, "headers",                                                          \
      "headers must be the response's fields: a mapping of names to values, or a list of "         \
      "(name, value) pairs, each a string")                                                        \
    X(69, E_STATUS_CODE, ARGUMENT, "status",                                                       \
      "status must be an HTTP status code from 100 to 599, or absent")                             \
    X(70, E_PENDING, ARGUMENT, "pending",                                                          \
      "pending must be an integer >= 0 (units sent that the response cannot count yet)")           \
    X(71, E_SHARE, ARGUMENT, "share",                                                              \
      "share must be a number > 0 and <= 1 (this member's part of the provider's limit)")          \
    X(72, E_RETRIES, ARGUMENT, "retries",                                                          \
      "retries must be an integer >= 0 (the tries after a 429 or 503)")                            \
    X(73, E_BACKOFF, ARGUMENT, "backoff",                                                          \
      "backoff must be a number of seconds > 0, and max_backoff one >= backoff (the wait "         \
      "before a retry doubles from backoff up to max_backoff)")                                    \
    /* the options of the stores above the core: one table, both faces (options.h) */              \
    X(74, E_ON_ERROR, ARGUMENT, "on_error", "on_error must be 'allow', 'deny' or 'raise'")         \
    X(75, E_PREFIX, ARGUMENT, "prefix",                                                            \
      "prefix must be a string without '{' or '}': a hash tag in the prefix would put every "      \
      "key in one Redis Cluster slot (put hash tags in keys)")                                     \
    X(76, E_STORE_NAME, ARGUMENT, "name",                                                          \
      "name must be 1 to 64 printable ASCII characters, none of them '{', '}' or ':' (a hash "     \
      "tag would put every key of the limit in one Redis Cluster slot, and ':' ends the name "     \
      "in its keys)")                                                                              \
    X(77, E_STORE_TIMEOUT, ARGUMENT, "timeout",                                                    \
      "timeout must be a finite number of seconds > 0 (the longest a call to Redis may take)")     \
    X(78, E_DENY_CACHE, ARGUMENT, "deny_cache", "deny_cache must be a boolean")                    \
    X(79, E_STORE_LEASE, ARGUMENT, "lease",                                                        \
      "lease must be a number of seconds > 0 and below 2^62 ns (146 years), required by the "      \
      "Redis store: the seconds after which units not released come back (a holder killed "        \
      "never releases)")                                                                           \
    X(80, E_FLEET_NAME, ARGUMENT, "name",                                                          \
      "name must be given, the fleet's name, the same on every member: 1 to 64 printable "         \
      "ASCII characters, none of them '{', '}' or ':'")                                            \
    X(81, E_INTERVAL, ARGUMENT, "interval", "interval must be a finite number of seconds > 0")     \
    X(82, E_TTL, ARGUMENT, "ttl", "ttl must be a finite number of seconds > 0")                    \
    X(83, E_TTL_SHORT, ARGUMENT, "ttl", "ttl must be longer than interval")                        \
    X(84, E_MEMBER, ARGUMENT, "member", "member must be a non-empty string without a colon")       \
    X(85, E_BACKGROUND, ARGUMENT, "background", "background must be a boolean")                    \
    X(86, E_SHARE_MAX_COST, ARGUMENT, "max_cost",                                                  \
      "max_cost is not taken by a share store: its local limiter follows the share")               \
    X(87, E_SHARE_ALGORITHM, ARGUMENT, "algorithm",                                                \
      "algorithm is not taken by a share store: its local limiter follows the share")              \
    X(88, E_SHARE_ON_CHANGE, ARGUMENT, "on_change",                                                \
      "on_change is not taken by a share store: its local limiter follows the share")              \
    X(89, E_LEGACY_HEADERS, ARGUMENT, "legacy_headers", "legacy_headers must be a boolean")        \
    X(90, E_ADMITTED_HEADERS, ARGUMENT, "admitted_headers", "admitted_headers must be a boolean")  \
    X(91, E_DRY_RUN, ARGUMENT, "dry_run", "dry_run must be a boolean")                             \
    X(92, E_BODY, ARGUMENT, "body", "body must be a string (the refusal's body)")                  \
    X(93, E_CONTENT_TYPE, ARGUMENT, "content_type", "content_type must be a string")               \
    X(94, E_KEY_FUNCTION, ARGUMENT, "key", "key must be a function giving the key, or absent")     \
    X(95, E_KEY_OPTION, ARGUMENT, "key",                                                           \
      "key must be a string (the request's key) or a function returning one, or absent for the "   \
      "client's address")                                                                          \
    X(96, E_COST_FUNCTION, ARGUMENT, "cost",                                                       \
      "cost must be an integer >= 0 or a function giving one")                                     \
    X(97, E_BLOCK, ARGUMENT, "block", "block must be a boolean")                                   \
    X(98, E_WAIT, ARGUMENT, "wait",                                                                \
      "wait must be a number of seconds >= 0 (the longest a request is held), or absent for "      \
      "none")                                                                                      \
    X(99, E_CHARGE_HEADER, ARGUMENT, "header",                                                     \
      "header must be a string: the response header that carries the request's cost")              \
    X(100, E_CHARGE_VARIABLE, ARGUMENT, "variable",                                                \
      "variable must be a string: the nginx variable that carries the request's cost")             \
    X(101, E_PROXY_HEADER, ARGUMENT, "proxy_header",                                               \
      "proxy_header must be 'X-Forwarded-For' or 'Forwarded'")                                     \
    X(102, E_EXEMPT, ARGUMENT, "exempt",                                                           \
      "exempt must be a function of the request returning a bool, or absent")                      \
    X(103, E_NOW_FUNCTION, ARGUMENT, "now", "now must be a function returning seconds, or absent") \
    X(104, E_CHARGE_FUNCTION, ARGUMENT, "charge",                                                  \
      "charge must be a function of the request and the response returning units, or absent")      \
    X(105, E_SHARED_DIRECTORY, ARGUMENT, "shared",                                                 \
      "shared must be the path of a directory (a string without NUL characters)")                  \
    X(106, E_RATE_EMPTY, ARGUMENT, "rate",                                                         \
      "rate: a list of limits ('100/day;10/hour') has an empty part")                              \
    X(107, E_RATE_TOO_MANY, ARGUMENT, "rate",                                                      \
      "rate: a list of limits holds at most 8 ('100/day;10/hour' is two)")                         \
    /* the Redis store's protocol (redis.h) */                                                     \
    X(108, E_REDIS_TOLERANCE, ARGUMENT, "burst",                                                   \
      "burst is too large for the Redis store: burst * (period/rate), or a window, must be "       \
      "below 9e15 ns (about 104 days)")                                                            \
    X(109, E_REDIS_SLOTS, ARGUMENT, "items",                                                       \
      "items must name keys of one Redis Cluster hash slot, as the keys of one script call "       \
      "must: put the same hash tag in each key, the part in braces that Cluster hashes (e.g. "     \
      "'{user:42}' and '{user:42}:search'); the keys and their slots:")                            \
    X(110, E_REDIS_REPLY, RUNTIME, "",                                                             \
      "the Redis script answered what it never answers to that request (another script "           \
      "under its SHA?)")                                                                           \
    /* 111-129: reserved for work under way elsewhere */                                           \
    /* priorities inside one limit (priority.h) */                                                 \
    X(130, E_PRIORITIES, ARGUMENT, "priorities",                                                   \
      "priorities must be a mapping of 1 to 8 class names to reserves (a class name: 1 to 31 "     \
      "bytes, each name once)")                                                                    \
    X(131, E_PRIORITIES_RESERVE, ARGUMENT, "priorities",                                           \
      "priorities: a reserve must be a number >= 0 and < 1 (the share of the burst the class "     \
      "may not spend)")                                                                            \
    X(132, E_PRIORITIES_DEFAULT, ARGUMENT, "priorities",                                           \
      "priorities: one class must have reserve 0 (what a decision that names no priority "         \
      "spends)")                                                                                   \
    X(133, E_PRIORITIES_ALGORITHM, ARGUMENT, "priorities",                                         \
      "priorities are taken by gcra and token_bucket only (a window algorithm has no burst to "    \
      "hold back)")                                                                                \
    X(134, E_PRIORITY, ARGUMENT, "priority",                                                       \
      "priority must be the name of one of the limit's priority classes")                          \
    X(135, E_PRIORITY_NONE, ARGUMENT, "priority",                                                  \
      "priority: this limit has no priority classes (a limit takes them when it is made)")         \
    X(136, E_SHARED_PRIORITIES, REGION, "shared",                                                  \
      "shared: the region was made with other priorities")                                         \
    X(137, E_PRIORITY_SEVERAL, ARGUMENT, "priority",                                               \
      "priority: several limits decided as one take no class (give priority to one limit)")        \
    /* 138-139: reserved; calendar quotas from 140 */                                              \
    X(140, E_TZ, ARGUMENT, "tz",                                                                   \
      "tz must be the name of an IANA time zone that the system's zoneinfo (or TZDIR; in "         \
      "Python also the tzdata package) holds, such as 'Europe/Berlin'")                            \
    X(141, E_TZ_DATA, ARGUMENT, "tz",                                                              \
      "tz: the zone's file is not TZif data that cellrate reads (truncated, inconsistent, or "     \
      "counting leap seconds)")                                                                    \
    X(142, E_CALENDAR_PERIOD, ARGUMENT, "rate",                                                    \
      "rate: a calendar quota counts per day, week, month or year, or a whole multiple of one "    \
      "('1000000/month', '500/2weeks'), at most 10 years")                                         \
    X(143, E_RATE_CALENDAR_ALGORITHM, ARGUMENT, "algorithm",                                       \
      "algorithm: months and years are calendar periods; give algorithm='calendar' (and tz) or "   \
      "a fixed duration such as '1000/30d'")                                                       \
    X(144, E_CALENDAR_AMOUNT, ARGUMENT, "rate",                                                    \
      "rate: a calendar quota is a whole number of units from 1 to 2^40 per period")               \
    X(145, E_TZ_ALONE, ARGUMENT, "tz",                                                             \
      "tz is the time zone of a calendar quota: give it only with algorithm='calendar'")           \
    X(146, E_CALENDAR_STORE, ARGUMENT, "algorithm",                                                \
      "algorithm: a fleet share takes no calendar quota (one is decided in process, in a shared "  \
      "region or through Redis)")                                                                  \
    X(147, E_TZ_RATES, ARGUMENT, "tz",                                                             \
      "tz: the rate names no calendar period for the zone to count in (a part per day, week, "     \
      "month or year, such as '100/minute;1000000/month')")                                        \
    X(148, E_SHARED_ZONE, REGION, "shared",                                                        \
      "shared: the region was made with another time zone or calendar period")                     \
    X(149, E_SHARED_ZONES, REGION, "shared",                                                       \
      "shared: a region holds at most 16 time zones over its life (delete the file to start "      \
      "anew)")                                                                                     \
    /* 150-154: calendar quotas through Redis */                                                   \
    X(150, E_REDIS_CALENDAR_FALLBACK, ARGUMENT, "on_error",                                        \
      "on_error: a calendar quota through Redis takes 'allow', 'deny' or 'raise' (no local "       \
      "fallback: a local count would start the period afresh)")                                    \
    /* 155-159: reserved; Redis in production from 160 */                                          \
    X(160, E_REDIS_FALLBACK, ARGUMENT, "fallback",                                                 \
      "fallback must be a share of the Redis limit (a number, 0 < share <= 1), a rate or a "       \
      "limit, or a keyed limiter (one in a shared region: the host's fallback)")                   \
    X(161, E_REDIS_FALLBACK_UNUSED, ARGUMENT, "fallback",                                          \
      "fallback is the limit of on_error='fallback': give it only with that on_error")             \
    X(162, E_REDIS_ON_ERROR, ARGUMENT, "on_error",                                                 \
      "on_error must be 'allow', 'deny', 'raise' or 'fallback' (a Redis rate limit)")              \
    /* 163-169: reserved; a Redis limit in nginx from 170 */                                       \
    X(170, E_NGINX_CLIENT, ARGUMENT, "client",                                                     \
      "client must be a function returning each request's Redis client (a Redis limit in nginx: "  \
      "a connection belongs to one request)")                                                      \
    X(171, E_NGINX_CLIENT_UNUSED, ARGUMENT, "client",                                              \
      "client is the Redis client of a Redis limit: a limit in process or in a shared region "     \
      "takes none")                                                                                \
    X(172, E_NGINX_REDIS_SEVERAL, ARGUMENT, "limits",                                              \
      "limits: a Redis limit is decided alone in nginx (not in a list of limits decided as one)")  \
    /* 173-179: reserved; plans (a limit per key) from 180 */                                      \
    X(180, E_PLANS, ARGUMENT, "plans",                                                             \
      "plans must be a mapping of 1 to 15 plan names to limits besides 'default' (a plan name: 1 " \
      "to 31 bytes, each name once)")                                                              \
    X(181, E_PLANS_ALGORITHM, ARGUMENT, "plans",                                                   \
      "plans: every plan takes the table's algorithm (a key carries what it used from plan to "    \
      "plan)")                                                                                     \
    X(182, E_PLAN, ARGUMENT, "plan", "plan must be 'default' or the name of one of the plans")     \
    X(183, E_PLANS_STORE, ARGUMENT, "plans",                                                       \
      "plans: a table with plans is kept in process, in a shared region or in Redis (not in a "    \
      "fleet share)")                                                                              \
    X(184, E_SHARED_PLANS, ARGUMENT, "plans",                                                      \
      "plans: a shared region holds at most 16 plans, 'default' included, counting every name "    \
      "ever given to it (remove the file to start a new table)")                                   \
    /* 185-189: reserved; Redis batches from 190 */                                                \
    X(190, E_REDIS_BATCH, ARGUMENT, "items",                                                       \
      "items: one script call decides at most 256 decisions (the stores send a longer batch as "   \
      "several calls, in order)")                                                                  \
    X(191, E_REDIS_COALESCE, ARGUMENT, "coalesce",                                                 \
      "coalesce must be a boolean, and is taken by the asyncio store alone (it sends the "         \
      "decisions of one event-loop turn as one script call)")                                      \
    X(192, E_REDIS_BATCH_ITEM, ARGUMENT, "items",                                                  \
      "items: each decision of a batch is (limiter, key), (limiter, key, cost), (limiter, key, "   \
      "cost, plan) or ([(limiter, key) or (limiter, key, plan), ...], cost)")                      \
    /* 193-199: reserved; a wiped Redis from 200 */                                                \
    X(200, E_REDIS_ON_WIPE, ARGUMENT, "on_wipe",                                                   \
      "on_wipe must be 'refuse' (a key Redis lost reads as fully used for one period) or 'allow' " \
      "(a fresh burst)")                                                                           \
    /* 201-209: reserved; the penalty box from 210 */                                              \
    X(210, E_PENALTY_AFTER, ARGUMENT, "after",                                                     \
      "after must be a rate string of a whole number of refusals per period, such as '5/minute' "  \
      "(a penalty)")                                                                               \
    X(211, E_PENALTY_BAN, ARGUMENT, "ban",                                                         \
      "ban must be a finite number of seconds > 0 (a penalty's first ban)")                        \
    X(212, E_PENALTY_MAX_BAN, ARGUMENT, "max_ban",                                                 \
      "max_ban must be a finite number of seconds >= ban (a penalty's longest ban)")               \
    X(213, E_PENALTY_STORE, ARGUMENT, "penalty",                                                   \
      "penalty: a penalty box is kept in process, in shared regions and through Redis for now "    \
      "(not in a fleet share)")                                                                    \
    X(214, E_PENALTY, ARGUMENT, "penalty",                                                         \
      "penalty must be a penalty: after (a rate string of refusals), ban and max_ban (seconds)")   \
    /* 215-219: reserved; the Redis store's check_all from 220 (redis.h) */                        \
    X(220, E_REDIS_ITEMS, ARGUMENT, "items",                                                       \
      "items must be a non-empty list of (Redis rate limiter, key) pairs, or (limiter, key, "      \
      "plan)")                                                                                     \
    X(221, E_REDIS_CLIENT, ARGUMENT, "items",                                                      \
      "items: every limiter must use the same Redis client (one script call decides them)")        \
    X(222, E_REDIS_NAME_NEEDED, ARGUMENT, "name",                                                  \
      "name: give the limit a name to change it live: an unnamed limit's keys are named by its "   \
      "parameters, which the change would leave behind")                                           \
    X(223, E_REDIS_ALGORITHM_KEPT, ARGUMENT, "algorithm",                                          \
      "algorithm: a live change keeps the algorithm of a limit; give another algorithm another "   \
      "name")                                                                                      \
    /* plans through Redis from 224 (redis.h, cr_redis_check_plans) */                             \
    X(224, E_REDIS_PLANS_NAME, ARGUMENT, "name",                                                   \
      "name: give a Redis limit with plans a name: a key moves between the plans' limits as in a " \
      "live change, and an unnamed limit's keys are named by its parameters")                      \
    /* 225-229: reserved; the penalty box through Redis from 230 (redis.h) */                      \
    X(230, E_REDIS_PENALTY, ARGUMENT, "penalty",                                                   \
      "penalty: through Redis, the span of its strikes (after's period) and max_ban must be "      \
      "below 104 days (9e15 ns: the script carries them exactly)")                                 \
    /* 231-239: reserved; inspecting a region's key from 240 (inspect.h) */                        \
    X(240, E_INSPECT_KEY, ARGUMENT, "key",                                                         \
      "key: only a keyed rate limit's region holds keys (this region is a limiter or a "           \
      "concurrency limit)")                                                                        \
    /* 241-249: reserved; where a plan is taken (plans.h, cr_plan_items) from 250 */               \
    X(250, E_PLAN_SEVERAL, ARGUMENT, "plan",                                                       \
      "plan: several limits decided as one take no plan (give plan to one keyed limit)")           \
    X(251, E_PLAN_KEYED, ARGUMENT, "plan",                                                         \
      "plan: a limit without keys has only the plan 'default' (plans are a keyed limit's: give "   \
      "it a key)")                                                                                 \
    X(252, E_PLANS_KEYED, ARGUMENT, "plans",                                                       \
      "plans: a limit without keys takes no plans (plans are a keyed limit's: give it a key)")     \
    /* 253-254: reserved; a region's sync from 255 */                                              \
    X(255, E_SYNC, ARGUMENT, "sync",                                                               \
      "sync must be a number of seconds > 0: how often a shared region is written to its disk")    \
    X(256, E_SYNC_SHARED, ARGUMENT, "sync",                                                        \
      "sync is given only with shared= (a region on a disk path)")

#define CR_STATUS_ENUM_(number, name, class, param, message) CR_##name = number,
typedef enum cr_status {
    CR_STATUS_LIST(CR_STATUS_ENUM_) CR_STATUS_COUNT /* one past the last (the highest) number */
} cr_status;
#undef CR_STATUS_ENUM_

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

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_STATUS_H */
