"""Reference model of cellrate's semantics (docs/design.md §1 and §2).

Written from the design contract alone, in exact Python integers and
fractions, so that the compiled core can be checked against something that
shares none of its code. Every function here is pure.

Statuses are the names of STATUSES below (the core's cr_status without the
CR_ prefix).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

INT64_MAX = 2**63 - 1
NEVER = INT64_MAX  # retry_after_ns of a cost that can never fit
# The time horizon (docs/design.md §1): every `now` is below it and every tolerance
# (or window) at most it, so a time plus a tolerance never reaches 2**63 and the
# decision below is exact with no saturation anywhere.
HORIZON_NS = 2**62


# --------------------------------------------------------------------------
# Statuses: (number, name, class, parameter, message), the table every face
# reports from. Numbers are fixed once given (append only). The class says
# how a face reports the status: "argument", a mistake of the caller's (Python
# raises InvalidArgument, Lua raises); "runtime", a failure of the moment or
# of the system (memory, the file system, a lock held past its bound: Lua
# returns nil, message, code); "region", a region file that is not the one
# asked for (Python: InvalidArgument naming the path; Lua: nil, message,
# code); "-" for OK alone. The parameter ("" for none) is what the user gave;
# each message starts with it and names no language's types.

STATUSES: list[tuple[int, str, str, str, str]] = [
    (0, "OK", "-", "", "ok"),
    (1, "E_RATE", "argument", "rate", "rate must be a number > 0 or a rate string such as '10/second'"),
    (2, "E_RATE_SYNTAX", "argument", "rate",
     "rate: cannot parse; expected a number or a string such as "
     "'10/second', '300/minute', '5 per second' or '100/5m'"),
    (3, "E_RATE_CALENDAR", "argument", "rate",
     "rate: months and years have no fixed length; use a fixed duration "
     "such as '1000/30d' or '1000/365d'"),
    (4, "E_RATE_TOO_HIGH", "argument", "rate",
     "rate is too high: the interval period/rate rounds below 1 ns"),
    (5, "E_RATE_TOO_LOW", "argument", "rate",
     "rate is too low: the interval period/rate exceeds 2^62 ns (146 years)"),
    (6, "E_PERIOD", "argument", "period", "period must be a finite number of seconds > 0"),
    (7, "E_PERIOD_WITH_TEXT", "argument", "period",
     "period must not be given with a rate string, which carries its own period"),
    (8, "E_BURST", "argument", "burst", "burst must be an integer >= 1"),
    (9, "E_BURST_TOO_LARGE", "argument", "burst",
     "burst is too large: burst * (period/rate) exceeds 2^62 ns (146 years)"),
    (10, "E_COST", "argument", "cost", "cost must be an integer >= 0"),
    (11, "E_NOW", "argument", "now",
     "now must be a finite number of seconds >= 0 and below 2^62 ns (146 years)"),
    (12, "E_KEY", "argument", "key", "key must be a string (any bytes, any length)"),
    (13, "E_CLOCK", "argument", "clock", "clock must be 'monotonic' or 'fast'"),
    (14, "E_CAPACITY", "argument", "capacity", "capacity must be an integer >= 1 and <= 2^32"),
    (15, "E_NOMEM", "runtime", "", "out of memory"),
    (16, "E_SHARED_PATH", "argument", "shared",
     "shared must be the path of the region file (a string without NUL characters)"),
    (17, "E_SHARED_IO", "runtime", "shared", "shared: cannot open, create or map the region file"),
    (18, "E_SHARED_ACCESS", "runtime", "shared", "shared: permission denied on the region file"),
    (19, "E_SHARED_SHORT", "region", "shared", "shared: the file is too short to be a cellrate region"),
    (20, "E_SHARED_FOREIGN", "region", "shared", "shared: the file is not a cellrate region"),
    (21, "E_SHARED_VERSION", "region", "shared", "shared: the region has another layout version"),
    (22, "E_SHARED_CORRUPT", "region", "shared", "shared: the region is corrupt (header checksum or size)"),
    (23, "E_SHARED_KIND", "region", "shared",
     "shared: the region holds another kind of limiter (Limiter vs KeyedLimiter)"),
    (24, "E_SHARED_RATE", "region", "shared", "shared: the region was made with another rate or period"),
    (25, "E_SHARED_BURST", "region", "shared", "shared: the region was made with another burst"),
    (26, "E_SHARED_CAPACITY", "region", "shared", "shared: the region was made with another capacity"),
    (27, "E_SHARED_MODE", "argument", "shared_mode",
     "shared_mode must be a file mode from 0 to 0777 (octal)"),
    (28, "E_ALGORITHM", "argument", "algorithm",
     "algorithm must be 'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'"),
    (29, "E_BURST_WINDOW", "argument", "burst",
     "burst: a window algorithm takes no burst (a window admits rate units); "
     "leave burst out, or use 'gcra' or 'token_bucket'"),
    (30, "E_RATE_WHOLE", "argument", "rate",
     "rate: a window admits a whole number of units; write a fractional rate as "
     "whole units per longer window, e.g. '1/2s' for 0.5 per second"),
    (31, "E_RATE_FIXED_CEILING", "argument", "rate",
     "rate is above the fixed_window ceiling: at most period_ns - 1 units per window "
     "(999999999 per second, 59999999999 per minute)"),
    (32, "E_RATE_SLIDING_CEILING", "argument", "rate",
     "rate is above the sliding_window ceiling: (rate + 1)^2 <= period_ns "
     "(31621 per second, 244947 per minute, 1897365 per hour, 9295159 per day)"),
    (33, "E_WINDOW_TOO_LONG", "argument", "period",
     "period: a window longer than 2^60 ns (36.5 years) is not supported"),
    (34, "E_CLOCK_WINDOW", "argument", "clock",
     "clock: window algorithms read the realtime clock (windows are aligned to the "
     "Unix epoch); leave clock out or pass 'realtime'"),
    (35, "E_SHARED_ALGORITHM", "region", "shared", "shared: the region was made with another algorithm"),
    # 36 is unused: reserve's longest wait is `timeout` (E_TIMEOUT), as wait's
    (36, "E_MAX_WAIT", "argument", "max_wait",
     "max_wait must be a number of seconds >= 0, or absent for any wait"),
    (37, "E_ITEMS", "argument", "items",
     "items must be a non-empty list of limiters and (keyed limiter, key) or (keyed limiter, "
     "key, plan) items"),
    (38, "E_HEADER_NAME", "argument", "name",
     "name must be 1 to 64 printable ASCII characters (the policy name of the headers)"),
    (39, "E_HEADER_VALUE", "argument", "decision",
     "decision: limit, remaining, retry_after, reset_after and window must be >= 0"),
    (40, "E_SHARED_DANGLING", "region", "shared",
     "shared: the path is a symbolic link to nothing; remove the link or point it at a region"),
    (41, "E_SHARED_UNSTABLE", "region", "shared",
     "shared: the path kept changing while it was opened (removed or replaced again and again)"),
    (42, "E_SHARED_LOCK", "runtime", "shared",
     "shared: a lock of the region stayed held past its time limit (a stopped or frozen "
     "process holds it)"),
    (43, "E_SHARED_MODE_ALONE", "argument", "shared_mode",
     "shared_mode is the mode of a region file: give it only with shared"),
    (44, "E_TIMEOUT", "argument", "timeout",
     "timeout must be a number of seconds >= 0, or absent to wait as long as it takes"),
    (45, "E_RATE_SEVERAL", "argument", "rate",
     "rate: one string is one limit; for several ('100/day;10/hour') make one limiter "
     "of each and decide them as one with check_all"),
    (46, "E_RECONFIGURE_ALGORITHM", "argument", "algorithm",
     "algorithm: a live change keeps the limit's algorithm; make a new limiter for another one"),
    (47, "E_ON_CHANGE", "argument", "on_change", "on_change must be 'apply' or 'refuse'"),
    (48, "E_MAX_COST", "argument", "max_cost", "max_cost must be an integer >= 0"),
    (49, "E_BURST_MAX_COST", "argument", "burst",
     "burst is below max_cost: a request of max_cost units would never be admitted (a "
     "permanent refusal); give a burst of at least max_cost"),
    (50, "E_RATE_MAX_COST", "argument", "rate",
     "rate is below max_cost: a window admits at most rate units, so a request of max_cost "
     "units would never be admitted; give a rate of at least max_cost per window"),
    (51, "E_LIMIT", "argument", "limit",
     "limit must be an integer >= 1 and <= 65536 (the units that may be held at once)"),
    (52, "E_HOLD_COST", "argument", "cost",
     "cost must be an integer >= 1 (the units a holding takes)"),
    (53, "E_LEASE", "argument", "lease",
     "lease must be a number of seconds > 0 and below 2^62 ns (146 years), or absent for none"),
    (54, "E_SHARED_LIMIT", "region", "shared",
     "shared: the region was made with another limit, lease or peak"),
    (55, "E_KEY_UNKEYED", "argument", "key",
     "key: a concurrency limit without capacity has no keys; give capacity for one limit "
     "per key"),
    (56, "E_SLOT", "argument", "slot", "slot must be a slot that a concurrency limit gave out"),
    (57, "E_SHARED_MISSING", "region", "shared",
     "shared: no file at the path (a region is made by the first limiter that opens it)"),
    (58, "E_PEAK", "argument", "peak",
     "peak must be a boolean (true: track the most units held at once, for a shared total "
     "that every acquire and release updates)"),
    (59, "E_MAX_DEBT", "argument", "max_debt",
     "max_debt must be an integer >= 0 (the units a charge may leave a key owing beyond its "
     "limit)"),
    (60, "E_SHARED_MAX_DEBT", "region", "shared", "shared: the region was made with another max_debt"),
    (61, "E_SHARE_REPLY", "runtime", "",
     "the heartbeat's reply is not the share script's { share, members, target } (fractions "
     "from 0 to 1, members >= 1)"),
    (62, "E_STATUS", "argument", "status", "status must be an integer from 400 to 599"),
    (63, "E_IPV4_PREFIX", "argument", "ipv4_prefix", "ipv4_prefix must be an integer from 0 to 32"),
    (64, "E_IPV6_PREFIX", "argument", "ipv6_prefix", "ipv6_prefix must be an integer from 0 to 128"),
    (65, "E_TRUSTED_PROXIES", "argument", "trusted_proxies",
     "trusted_proxies must be addresses or networks such as '10.0.0.0/8', or 'unix'"),
    (66, "E_CHARGE_COUNT", "argument", "charge",
     "charge: a count of units is a whole number >= 0 (as text, decimal digits); any other "
     "figure settles nothing"),
    (67, "E_QUOTA", "argument", "quota", "quota must be 'requests' or 'tokens'"),
    (68, "E_HEADERS", "argument", "headers",
     "headers must be the response's fields: a mapping of names to values, or a list of "
     "(name, value) pairs, each a string"),
    (69, "E_STATUS_CODE", "argument", "status",
     "status must be an HTTP status code from 100 to 599, or absent"),
    (70, "E_PENDING", "argument", "pending",
     "pending must be an integer >= 0 (units sent that the response cannot count yet)"),
    (71, "E_SHARE", "argument", "share",
     "share must be a number > 0 and <= 1 (this member's part of the provider's limit)"),
    (72, "E_RETRIES", "argument", "retries",
     "retries must be an integer >= 0 (the tries after a 429 or 503)"),
    (73, "E_BACKOFF", "argument", "backoff",
     "backoff must be a number of seconds > 0, and max_backoff one >= backoff (the wait "
     "before a retry doubles from backoff up to max_backoff)"),
    # the options of the stores above the core, one table for both faces (options_model.py)
    (74, "E_ON_ERROR", "argument", "on_error", "on_error must be 'allow', 'deny' or 'raise'"),
    (75, "E_PREFIX", "argument", "prefix",
     "prefix must be a string without '{' or '}': a hash tag in the prefix would put every key "
     "in one Redis Cluster slot (put hash tags in keys)"),
    (76, "E_STORE_NAME", "argument", "name",
     "name must be 1 to 64 printable ASCII characters, none of them '{', '}' or ':' (a hash tag "
     "would put every key of the limit in one Redis Cluster slot, and ':' ends the name in its "
     "keys)"),
    (77, "E_STORE_TIMEOUT", "argument", "timeout",
     "timeout must be a finite number of seconds > 0 (the longest a call to Redis may take)"),
    (78, "E_DENY_CACHE", "argument", "deny_cache", "deny_cache must be a boolean"),
    (79, "E_STORE_LEASE", "argument", "lease",
     "lease must be a number of seconds > 0 and below 2^62 ns (146 years), required by the Redis "
     "store: the seconds after which units not released come back (a holder killed never "
     "releases)"),
    (80, "E_FLEET_NAME", "argument", "name",
     "name must be given, the fleet's name, the same on every member: 1 to 64 printable ASCII "
     "characters, none of them '{', '}' or ':'"),
    (81, "E_INTERVAL", "argument", "interval", "interval must be a finite number of seconds > 0"),
    (82, "E_TTL", "argument", "ttl", "ttl must be a finite number of seconds > 0"),
    (83, "E_TTL_SHORT", "argument", "ttl", "ttl must be longer than interval"),
    (84, "E_MEMBER", "argument", "member", "member must be a non-empty string without a colon"),
    (85, "E_BACKGROUND", "argument", "background", "background must be a boolean"),
    (86, "E_SHARE_MAX_COST", "argument", "max_cost",
     "max_cost is not taken by a share store: its local limiter follows the share"),
    (87, "E_SHARE_ALGORITHM", "argument", "algorithm",
     "algorithm is not taken by a share store: its local limiter follows the share"),
    (88, "E_SHARE_ON_CHANGE", "argument", "on_change",
     "on_change is not taken by a share store: its local limiter follows the share"),
    (89, "E_LEGACY_HEADERS", "argument", "legacy_headers", "legacy_headers must be a boolean"),
    (90, "E_ADMITTED_HEADERS", "argument", "admitted_headers",
     "admitted_headers must be a boolean"),
    (91, "E_DRY_RUN", "argument", "dry_run", "dry_run must be a boolean"),
    (92, "E_BODY", "argument", "body", "body must be a string (the refusal's body)"),
    (93, "E_CONTENT_TYPE", "argument", "content_type", "content_type must be a string"),
    (94, "E_KEY_FUNCTION", "argument", "key", "key must be a function giving the key, or absent"),
    (95, "E_KEY_OPTION", "argument", "key",
     "key must be a string (the request's key) or a function returning one, or absent for the "
     "client's address"),
    (96, "E_COST_FUNCTION", "argument", "cost",
     "cost must be an integer >= 0 or a function giving one"),
    (97, "E_BLOCK", "argument", "block", "block must be a boolean"),
    (98, "E_WAIT", "argument", "wait",
     "wait must be a number of seconds >= 0 (the longest a request is held), or absent for none"),
    (99, "E_CHARGE_HEADER", "argument", "header",
     "header must be a string: the response header that carries the request's cost"),
    (100, "E_CHARGE_VARIABLE", "argument", "variable",
     "variable must be a string: the nginx variable that carries the request's cost"),
    (101, "E_PROXY_HEADER", "argument", "proxy_header",
     "proxy_header must be 'X-Forwarded-For' or 'Forwarded'"),
    (102, "E_EXEMPT", "argument", "exempt",
     "exempt must be a function of the request returning a bool, or absent"),
    (103, "E_NOW_FUNCTION", "argument", "now", "now must be a function returning seconds, or absent"),
    (104, "E_CHARGE_FUNCTION", "argument", "charge",
     "charge must be a function of the request and the response returning units, or absent"),
    (105, "E_SHARED_DIRECTORY", "argument", "shared",
     "shared must be the path of a directory (a string without NUL characters)"),
    (106, "E_RATE_EMPTY", "argument", "rate",
     "rate: a list of limits ('100/day;10/hour') has an empty part"),
    (107, "E_RATE_TOO_MANY", "argument", "rate",
     "rate: a list of limits holds at most 8 ('100/day;10/hour' is two)"),
    # the Redis store's protocol (redis_model.py)
    (108, "E_REDIS_TOLERANCE", "argument", "burst",
     "burst is too large for the Redis store: burst * (period/rate), or a window, must be "
     "below 9e15 ns (about 104 days)"),
    (109, "E_REDIS_SLOTS", "argument", "items",
     "items must name keys of one Redis Cluster hash slot, as the keys of one script call "
     "must: put the same hash tag in each key, the part in braces that Cluster hashes (e.g. "
     "'{user:42}' and '{user:42}:search'); the keys and their slots:"),
    (110, "E_REDIS_REPLY", "runtime", "",
     "the Redis script answered what it never answers to that request (another script "
     "under its SHA?)"),
    # 111-129: reserved for work under way elsewhere
    # priorities inside one limit (priority_model.py)
    (130, "E_PRIORITIES", "argument", "priorities",
     "priorities must be a mapping of 1 to 8 class names to reserves (a class name: 1 to 31 bytes, "
     "each name once)"),
    (131, "E_PRIORITIES_RESERVE", "argument", "priorities",
     "priorities: a reserve must be a number >= 0 and < 1 (the share of the burst the class may not "
     "spend)"),
    (132, "E_PRIORITIES_DEFAULT", "argument", "priorities",
     "priorities: one class must have reserve 0 (what a decision that names no priority spends)"),
    (133, "E_PRIORITIES_ALGORITHM", "argument", "priorities",
     "priorities are taken by gcra and token_bucket only (a window algorithm has no burst to hold "
     "back)"),
    (134, "E_PRIORITY", "argument", "priority",
     "priority must be the name of one of the limit's priority classes"),
    (135, "E_PRIORITY_NONE", "argument", "priority",
     "priority: this limit has no priority classes (a limit takes them when it is made)"),
    (136, "E_SHARED_PRIORITIES", "region", "shared", "shared: the region was made with other priorities"),
    (137, "E_PRIORITY_SEVERAL", "argument", "priority",
     "priority: several limits decided as one take no class (give priority to one limit)"),
    # 138-139: reserved; calendar quotas from 140
    (140, "E_TZ", "argument", "tz",
     "tz must be the name of an IANA time zone that the system's zoneinfo (or TZDIR; in "
     "Python also the tzdata package) holds, such as 'Europe/Berlin'"),
    (141, "E_TZ_DATA", "argument", "tz",
     "tz: the zone's file is not TZif data that cellrate reads (truncated, inconsistent, or "
     "counting leap seconds)"),
    (142, "E_CALENDAR_PERIOD", "argument", "rate",
     "rate: a calendar quota counts per day, week, month or year, or a whole multiple of one "
     "('1000000/month', '500/2weeks'), at most 10 years"),
    (143, "E_RATE_CALENDAR_ALGORITHM", "argument", "algorithm",
     "algorithm: months and years are calendar periods; give algorithm='calendar' (and tz) or "
     "a fixed duration such as '1000/30d'"),
    (144, "E_CALENDAR_AMOUNT", "argument", "rate",
     "rate: a calendar quota is a whole number of units from 1 to 2^40 per period"),
    (145, "E_TZ_ALONE", "argument", "tz",
     "tz is the time zone of a calendar quota: give it only with algorithm='calendar'"),
    (146, "E_CALENDAR_STORE", "argument", "algorithm",
     "algorithm: a fleet share takes no calendar quota (one is decided in process, in a shared "
     "region or through Redis)"),
    (147, "E_TZ_RATES", "argument", "tz",
     "tz: the rate names no calendar period for the zone to count in (a part per day, week, "
     "month or year, such as '100/minute;1000000/month')"),
    (148, "E_SHARED_ZONE", "region", "shared",
     "shared: the region was made with another time zone or calendar period"),
    (149, "E_SHARED_ZONES", "region", "shared",
     "shared: a region holds at most 16 time zones over its life (delete the file to start "
     "anew)"),
    # 150-154: calendar quotas through Redis
    (150, "E_REDIS_CALENDAR_FALLBACK", "argument", "on_error",
     "on_error: a calendar quota through Redis takes 'allow', 'deny' or 'raise' (no local "
     "fallback: a local count would start the period afresh)"),
    # 155-159: reserved; Redis in production from 160
    (160, "E_REDIS_FALLBACK", "argument", "fallback",
     "fallback must be a share of the Redis limit (a number, 0 < share <= 1), a rate or a "
     "limit, or a keyed limiter (one in a shared region: the host's fallback)"),
    (161, "E_REDIS_FALLBACK_UNUSED", "argument", "fallback",
     "fallback is the limit of on_error='fallback': give it only with that on_error"),
    (162, "E_REDIS_ON_ERROR", "argument", "on_error",
     "on_error must be 'allow', 'deny', 'raise' or 'fallback' (a Redis rate limit)"),
    # 163-169: reserved; a Redis limit in nginx from 170
    (170, "E_NGINX_CLIENT", "argument", "client",
     "client must be a function returning each request's Redis client (a Redis limit in nginx: "
     "a connection belongs to one request)"),
    (171, "E_NGINX_CLIENT_UNUSED", "argument", "client",
     "client is the Redis client of a Redis limit: a limit in process or in a shared region "
     "takes none"),
    (172, "E_NGINX_REDIS_SEVERAL", "argument", "limits",
     "limits: a Redis limit is decided alone in nginx (not in a list of limits decided as one)"),
    # 173-179: reserved; plans (a limit per key) from 180
    (180, "E_PLANS", "argument", "plans",
     "plans must be a mapping of 1 to 15 plan names to limits besides 'default' (a plan name: 1 "
     "to 31 bytes, each name once)"),
    (181, "E_PLANS_ALGORITHM", "argument", "plans",
     "plans: every plan takes the table's algorithm (a key carries what it used from plan to "
     "plan)"),
    (182, "E_PLAN", "argument", "plan", "plan must be 'default' or the name of one of the plans"),
    (183, "E_PLANS_STORE", "argument", "plans",
     "plans: a table with plans is kept in process, in a shared region or in Redis (not in a fleet share)"),
    (184, "E_SHARED_PLANS", "argument", "plans",
     "plans: a shared region holds at most 16 plans, 'default' included, counting every name "
     "ever given to it (remove the file to start a new table)"),
    (190, "E_REDIS_BATCH", "argument", "items",
     "items: one script call decides at most 256 decisions (the stores send a longer batch as "
     "several calls, in order)"),
    (191, "E_REDIS_COALESCE", "argument", "coalesce",
     "coalesce must be a boolean, and is taken by the asyncio store alone (it sends the "
     "decisions of one event-loop turn as one script call)"),
    (192, "E_REDIS_BATCH_ITEM", "argument", "items",
     "items: each decision of a batch is (limiter, key), (limiter, key, cost), (limiter, key, "
     "cost, plan) or ([(limiter, key) or (limiter, key, plan), ...], cost)"),
    (200, "E_REDIS_ON_WIPE", "argument", "on_wipe",
     "on_wipe must be 'refuse' (a key Redis lost reads as fully used for one period) or "
     "'allow' (a fresh burst)"),
    (210, "E_PENALTY_AFTER", "argument", "after",
     "after must be a rate string of a whole number of refusals per period, such as '5/minute' "
     "(a penalty)"),
    (211, "E_PENALTY_BAN", "argument", "ban",
     "ban must be a finite number of seconds > 0 (a penalty's first ban)"),
    (212, "E_PENALTY_MAX_BAN", "argument", "max_ban",
     "max_ban must be a finite number of seconds >= ban (a penalty's longest ban)"),
    (213, "E_PENALTY_STORE", "argument", "penalty",
     "penalty: a penalty box is kept in process, in shared regions and through Redis for now "
     "(not in a fleet share)"),
    (214, "E_PENALTY", "argument", "penalty",
     "penalty must be a penalty: after (a rate string of refusals), ban and max_ban (seconds)"),
    (220, "E_REDIS_ITEMS", "argument", "items",
     "items must be a non-empty list of (Redis rate limiter, key) pairs, or (limiter, key, "
     "plan)"),
    (221, "E_REDIS_CLIENT", "argument", "items",
     "items: every limiter must use the same Redis client (one script call decides them)"),
    (222, "E_REDIS_NAME_NEEDED", "argument", "name",
     "name: give the limit a name to change it live: an unnamed limit's keys are named by its "
     "parameters, which the change would leave behind"),
    (223, "E_REDIS_ALGORITHM_KEPT", "argument", "algorithm",
     "algorithm: a live change keeps the algorithm of a limit; give another algorithm another "
     "name"),
    (224, "E_REDIS_PLANS_NAME", "argument", "name",
     "name: give a Redis limit with plans a name: a key moves between the plans' limits as in a "
     "live change, and an unnamed limit's keys are named by its parameters"),
    (230, "E_REDIS_PENALTY", "argument", "penalty",
     "penalty: through Redis, the span of its strikes (after's period) and max_ban must be "
     "below 104 days (9e15 ns: the script carries them exactly)"),
    (240, "E_INSPECT_KEY", "argument", "key",
     "key: only a keyed rate limit's region holds keys (this region is a limiter or a "
     "concurrency limit)"),
    (250, "E_PLAN_SEVERAL", "argument", "plan",
     "plan: several limits decided as one take no plan (give plan to one keyed limit)"),
    (251, "E_PLAN_KEYED", "argument", "plan",
     "plan: a limit without keys has only the plan 'default' (plans are a keyed limit's: give "
     "it a key)"),
    (252, "E_PLANS_KEYED", "argument", "plans",
     "plans: a limit without keys takes no plans (plans are a keyed limit's: give it a key)"),
    # 253-254: reserved; a region's sync from 255
    (255, "E_SYNC", "argument", "sync",
     "sync must be a number of seconds > 0: how often a shared region is written to its disk"),
    (256, "E_SYNC_SHARED", "argument", "sync",
     "sync is given only with shared= (a region on a disk path)"),
]


def round_half_away(value: Fraction) -> int:
    """Nearest integer; ties go away from zero."""
    magnitude = abs(value)
    rounded = math.floor(magnitude + Fraction(1, 2))
    return rounded if value >= 0 else -rounded


# --------------------------------------------------------------------------
# Decisions


@dataclass(frozen=True)
class Limit:
    emission_ns: int  # T
    burst: int
    max_debt: int | None = None  # units a charge may leave owing beyond tau; None: the burst

    @property
    def tolerance_ns(self) -> int:
        return self.emission_ns * self.burst

    @property
    def debt(self) -> int:
        return self.burst if self.max_debt is None else self.max_debt


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    limit: int
    tat_after: int  # the TAT stored once the decision is applied


def decide(limit: Limit, stored_tat: int, now_ns: int, cost: int, commit: bool = True) -> Decision:
    """One GCRA decision for a key whose stored TAT is `stored_tat` (0: never seen)."""
    if not 0 <= now_ns < HORIZON_NS or cost < 0:
        raise ValueError("now_ns must be in [0, 2**62) and cost >= 0")
    emission = limit.emission_ns
    tau = limit.tolerance_ns
    t = now_ns
    tat = max(stored_tat, t)

    def turned_away(retry_after_ns: int) -> Decision:
        return Decision(
            allowed=False,
            remaining=max(0, (t + tau - tat) // emission),
            retry_after_ns=retry_after_ns,
            reset_after_ns=tat - t,
            limit=limit.burst,
            tat_after=stored_tat,
        )

    if cost == 0:
        # A probe: always admitted, never written.
        return Decision(
            allowed=True,
            remaining=max(0, (t + tau - tat) // emission),
            retry_after_ns=0,
            reset_after_ns=tat - t,
            limit=limit.burst,
            tat_after=stored_tat,
        )
    increment = cost * emission
    if increment > tau:
        return turned_away(NEVER)
    new_tat = tat + increment  # exact: admission needs new_tat <= t + tau < 2**63
    if t >= new_tat - tau:
        return Decision(
            allowed=True,
            remaining=(t + tau - new_tat) // emission,
            retry_after_ns=0,
            reset_after_ns=new_tat - t,
            limit=limit.burst,
            tat_after=new_tat if commit else stored_tat,
        )
    return turned_away(new_tat - tau - t)


class Store:
    """Many keys, each a TAT; what cr_limiter (one key) and cr_keyed do."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        self.tats: dict[object, int] = {}

    def check(self, key: object, now_ns: int, cost: int, commit: bool) -> Decision:
        decision = decide(self.limit, self.tats.get(key, 0), now_ns, cost, commit)
        if decision.tat_after:
            self.tats[key] = decision.tat_after
        return decision

    def reset(self, key: object) -> None:
        self.tats.pop(key, None)


def carry(old: Limit, new: Limit, stored_tat: int, now_ns: int) -> int:
    """The TAT under `new` of a key whose TAT under `old` is `stored_tat`, at now_ns
    (docs/design.md §4): what carries is the units used, exactly,
    used = max(0, TAT - now) / T_old, and TAT' = now + ceil(used * T_new), so that
    remaining' = max(0, floor(burst' - used)). The carried span is clipped at the
    horizon (2**62 ns): a key that far in debt stays refused for 146 years less
    tau', never admitted sooner. An idle key, and a change to the same
    parameters, keep their state word."""
    if (old.emission_ns, old.burst) == (new.emission_ns, new.burst) or stored_tat <= now_ns:
        return stored_tat  # max_debt bounds later charges: a debt carries whole
    used = Fraction(stored_tat - now_ns, old.emission_ns)
    return now_ns + min(math.ceil(used * new.emission_ns), HORIZON_NS)


# --------------------------------------------------------------------------
# Times


def seconds_to_ns(seconds: float) -> tuple[str, int]:
    """A caller's `now` in seconds to ns: nearest, ties away from zero."""
    if not math.isfinite(seconds) or seconds < 0:
        return "E_NOW", 0
    ns = round_half_away(Fraction(seconds) * 10**9)
    if ns >= HORIZON_NS:
        return "E_NOW", 0
    return "OK", ns


def _is_whole_seconds_over_512(ns: int) -> bool:
    return ns % 1953125 == 0  # 5**9: ns / 1e9 is then k / 2**9, an exact double


def float_face_seconds(ns: int) -> float | None:
    """The float the Python and Lua faces pass for a vector time of `ns`, or None.

    The rule is one both faces can apply without exact arithmetic: below 2**50 ns
    the correctly rounded ns / 1e9 is within 0.12 ns of the true value; a
    multiple of 5**9 ns is an exact dyadic number of seconds. Other times are
    skipped by those faces (and counted). `vector_time_ok` proves the rule on
    every time written.
    """
    if ns < 0:
        return None
    if ns < 2**50 or _is_whole_seconds_over_512(ns):
        return float(Fraction(ns, 10**9))
    return None


def float_face_period(emission_ns: int) -> float | None:
    """Period (seconds) such that Limiter(rate=1, period=p) has T == emission_ns, or None."""
    period = float_face_seconds(emission_ns)
    if period is None:
        return None
    status, derived, _ = limit_from_number(1.0, period, 1)
    return period if status == "OK" and derived == emission_ns else None


# --------------------------------------------------------------------------
# Limits


def _exact_or_none(value: float) -> Fraction | None:
    return Fraction(value) if math.isfinite(value) else None


def _derive(rate: float, period_s: float, burst: int | None) -> tuple[str, int, int]:
    """From a validated rate, period and (validated or absent) burst to (status, T, burst)."""
    x = (period_s * 1e9) / rate  # two IEEE double operations, in this order
    exact = _exact_or_none(x)
    if exact is None:
        return "E_RATE_TOO_LOW", 0, 0
    emission = round_half_away(exact)
    if emission < 1:
        return "E_RATE_TOO_HIGH", 0, 0
    if emission > HORIZON_NS:
        return "E_RATE_TOO_LOW", 0, 0
    if burst is None:
        burst = max(1, math.ceil(rate))
    if emission * burst > HORIZON_NS:
        return "E_BURST_TOO_LARGE", 0, 0
    return "OK", emission, burst


def _valid_rate(rate: float) -> bool:
    return math.isfinite(rate) and rate > 0


def limit_from_number(rate: float, period_s: float | None, burst: int | None) -> tuple[str, int, int]:
    """cr_limit_init with a numeric rate: (status, emission_ns, burst); 0, 0 on error."""
    if not _valid_rate(rate):
        return "E_RATE", 0, 0
    if period_s is not None and not (math.isfinite(period_s) and period_s > 0):
        return "E_PERIOD", 0, 0
    if burst is not None and burst < 1:
        return "E_BURST", 0, 0
    return _derive(rate, 1.0 if period_s is None else period_s, burst)


def limit_from_text(text: str, period_given: bool, burst: int | None = None) -> tuple[str, int, int]:
    """cr_limit_init with a rate string: (status, emission_ns, burst); 0, 0 on error."""
    status, rate, period_s = parse_rate(text)
    if status == "E_RATE_CALENDAR":  # a month or a year: a calendar quota's (§19)
        return "E_RATE_CALENDAR_ALGORITHM", 0, 0
    if status != "OK":
        return status, 0, 0
    if not _valid_rate(rate):
        return "E_RATE", 0, 0
    if period_given:
        return "E_PERIOD_WITH_TEXT", 0, 0
    if not period_s > 0:
        return "E_PERIOD", 0, 0
    if burst is not None and burst < 1:
        return "E_BURST", 0, 0
    return _derive(rate, period_s, burst)


# --------------------------------------------------------------------------
# Rate strings

UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "wk": 604800.0, "wks": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
# a month's and a year's words (docs/design/calendar.md): a calendar quota's only
CALENDAR_UNITS = {"mo", "mon", "month", "months", "y", "yr", "yrs", "year", "years"}
MAX_SIGNIFICANT_DIGITS = 15

_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_RATE_TEXT = re.compile(
    r" *(?P<rate>" + _NUMBER + r") *(?:/|[pP][eE][rR]) *(?P<count>" + _NUMBER + r")? *"
    r"(?P<unit>[A-Za-z]+) *"
)


def _number_value(digits: str) -> float | None:
    """NUMBER's value as one correctly rounded division, or None if too precise."""
    whole, _, fraction = digits.partition(".")
    all_digits = whole + fraction
    significant = all_digits.lstrip("0")
    if len(significant) > MAX_SIGNIFICANT_DIGITS:
        return None
    return float(Fraction(int(all_digits), 10 ** len(fraction)))


def parse_rate(text: str) -> tuple[str, float, float]:
    """cr_parse_rate: (status, rate, period_s)."""
    if ";" in text:
        return "E_RATE_SEVERAL", 0.0, 0.0
    match = _RATE_TEXT.fullmatch(text)
    if match is None:
        return "E_RATE_SYNTAX", 0.0, 0.0
    unit = match["unit"].lower()
    if unit in CALENDAR_UNITS:
        return "E_RATE_CALENDAR", 0.0, 0.0
    if unit not in UNIT_SECONDS:
        return "E_RATE_SYNTAX", 0.0, 0.0
    rate = _number_value(match["rate"])
    count = 1.0 if match["count"] is None else _number_value(match["count"])
    if rate is None or count is None:
        return "E_RATE_SYNTAX", 0.0, 0.0
    return "OK", rate, count * UNIT_SECONDS[unit]
