/*
 * The docstrings of the CPython face: every type, method and module function
 * that help() shows. A method's first line is its signature ("name($self,
 * /, ...)\n--\n\n"), which inspect.signature() reads; the .pyi stub
 * (python/cellrate/_cellrate.pyi) declares the same parameters.
 * Part of module.c's unity build.
 */

/* ------------------------------------------------------------------------ */
/* Decision and Limit                                                        */

PyDoc_STRVAR(decision_doc,
             "Decision(allowed, remaining, retry_after, reset_after, limit, window=0.0,\n"
             "         clipped=False)\n--\n\n"
             "The answer to one request: immutable; times in seconds. `limit` is the\n"
             "burst (units an idle key may spend at once), not the rate.");

PyDoc_STRVAR(
    decision_headers_doc,
    "headers($self, /, name=None, *, legacy=False)\n--\n\n"
    "The HTTP rate-limit fields of this decision (draft-ietf-httpapi-ratelimit-headers):\n"
    "RateLimit-Policy, RateLimit, and Retry-After (whole seconds, at least 1) when\n"
    "refused and the cost can fit; legacy=True adds X-RateLimit-Limit, -Remaining, -Reset.\n"
    "name: the policy name (None: 'default').");

PyDoc_STRVAR(limit_doc, "Limit(rate, period=None, *, burst=None, algorithm='gcra', max_debt=None, "
                        "tz=None, priorities=None)\n--\n\n"
                        "A validated limit, with no store: what a Limiter of the same arguments\n"
                        "decides by, refused with the same errors. Immutable; equal (and hashed)\n"
                        "by its parameters and priority classes.");

/* ------------------------------------------------------------------------ */
/* Limiter and KeyedLimiter                                                  */

PyDoc_STRVAR(limiter_doc,
             "Limiter(rate, period=None, *, burst=None, shared=None, shared_mode=None,\n"
             "        clock=None, algorithm=None, on_change=None, max_cost=None,\n"
             "        max_debt=None, tz=None, priorities=None, penalty=None, sync=None)\n--\n\n"
             "A GCRA limit on one key: `rate` units per `period` seconds, sustained,\n"
             "with up to `burst` units at once.\n\n"
             "rate: a number > 0, or a string such as '300/minute', '10/s',\n"
             "      '5 per second' or '100/5m' (then period must not be given).\n"
             "period: seconds; None means 1 second.\n"
             "burst: an int >= 1; None means max(1, ceil(rate)).\n"
             "shared: the path of a region file (e.g. '/dev/shm/login-limit') that\n"
             "        every process opening it shares as one limit; None: this\n"
             "        process alone.\n"
             "shared_mode: the mode of a region file this call creates; None: 0o600.\n"
             "on_change: 'apply' (None) or 'refuse': what opening a region made for\n"
             "           another limit does: make this one the region's, a live change\n"
             "           every process follows (a RuntimeWarning names old and new), or\n"
             "           raise InvalidArgument naming shared.\n"
             "clock: the clock read when a call passes no `now`: 'fast' (None),\n"
             "       CLOCK_MONOTONIC extrapolated from the CPU's counter, or\n"
             "       'monotonic', the same read ordered after every earlier load.\n"
             "algorithm: 'gcra' (None), 'token_bucket', 'fixed_window',\n"
             "           'sliding_window' or 'calendar'; windows are aligned to the Unix\n"
             "           epoch, read the realtime clock, take a whole rate and no burst;\n"
             "           'calendar' counts per day, ISO week, month or year of tz\n"
             "           ('1000000/month'), from local midnight.\n"
             "max_cost: the largest cost a request will have (None: not checked): a\n"
             "          burst (a window's rate) below it is refused, naming burst (rate).\n"
             "max_debt: the most units charge() may leave a key owing beyond the limit\n"
             "          (an int >= 0; None: the burst, a window's rate); a charge past\n"
             "          it is committed up to it, Decision.clipped.\n"
             "tz: the IANA time zone of a calendar quota (None: 'UTC').\n"
             "priorities: priority classes, {name: reserve}: the share of the burst each\n"
             "          may not spend, in [0, 1); one class has reserve 0 (gcra and\n"
             "          token_bucket; a decision names its class with priority=).\n"
             "penalty: a cellrate.Penalty(after, ban, max_ban=None): after `after`\n"
             "         refusals of a key, the key is refused for `ban` seconds (in\n"
             "         process only).\n"
             "sync: with shared=, seconds: this process writes the region to its disk\n"
             "      (msync) at most that often, from a decision, and when the limiter\n"
             "      is freed (None: the kernel's writeback).\n\n"
             "Safe to share between threads.");

PyDoc_STRVAR(keyed_doc,
             "KeyedLimiter(rate, period=None, *, burst=None, capacity=None, shared=None,\n"
             "             shared_mode=None, clock=None, algorithm=None, on_change=None,\n"
             "             max_cost=None, max_debt=None, tz=None, priorities=None,\n"
             "             penalty=None, plans=None, sync=None)\n--\n\n"
             "One GCRA limit applied to each key (str or bytes) separately, in a table\n"
             "of bounded size. rate, period and burst are as for Limiter.\n\n"
             "capacity: the number of live keys the table is sized for; None means\n"
             "          the default (100000).\n"
             "shared, shared_mode, clock, algorithm, on_change, max_cost, max_debt, tz,\n"
             "priorities, penalty, sync: as for Limiter (a penalty per key).\n\n"
             "len() is the number of keys holding a slot. Safe to share between threads.");

#define DECIDE_DOC(sig, what)                                                       \
    sig "\n--\n\n" what "\n\n"                                                      \
        "cost: units to spend (an int >= 0; 0 is a probe that always passes).\n"    \
        "now: seconds on the limit's clock (time.monotonic(); window algorithms:\n" \
        "time.time()); None reads the clock.\n"                                     \
        "priority: the name of one of the limit's priority classes; None: none."

PyDoc_STRVAR(limiter_allow_doc,
             DECIDE_DOC("allow($self, /, cost=1, *, now=None, priority=None)",
                        "Admit `cost` units if the limit allows; return True if admitted."));
PyDoc_STRVAR(limiter_check_doc, DECIDE_DOC("check($self, /, cost=1, *, now=None, priority=None)",
                                           "As allow(), but return the whole Decision."));
PyDoc_STRVAR(limiter_peek_doc,
             DECIDE_DOC("peek($self, /, cost=1, *, now=None, priority=None)",
                        "The Decision check() would return, without spending anything."));
PyDoc_STRVAR(keyed_allow_doc,
             DECIDE_DOC("allow($self, /, key, cost=1, *, now=None,\n"
                        "priority=None, plan=None)",
                        "Admit `cost` units for `key` (str or bytes; a str counts as its\n"
                        "UTF-8 bytes) if its limit allows; return True if admitted."));
PyDoc_STRVAR(keyed_check_doc, DECIDE_DOC("check($self, /, key, cost=1, *, now=None,\n"
                                         "priority=None, plan=None)",
                                         "As allow(), but return the whole Decision."));
PyDoc_STRVAR(keyed_peek_doc,
             DECIDE_DOC("peek($self, /, key, cost=1, *, now=None,\n"
                        "priority=None, plan=None)",
                        "The Decision check() would return, without spending anything."));
#define RESERVE_DOC(sig)                                                              \
    sig "\n--\n\n"                                                                    \
        "Commit `cost` units at the earliest instant they fit, if that is at most\n"  \
        "`timeout` seconds away (None: any wait); return the delay in seconds\n"      \
        "until they may be used (0.0: now), or None, committing nothing, when that\n" \
        "is not possible. Window algorithms reserve only for now (delay 0)."
#define REFUND_DOC(sig)                                                           \
    sig "\n--\n\n"                                                                \
        "Give back `cost` units taken earlier (a cancelled reservation); never\n" \
        "better than idle."

#define ANCHOR_DOC(sig)                                                            \
    sig "\n--\n\n"                                                                 \
        "`cost` units reserved earlier start only now (a waiter woken after its\n" \
        "instant): what follows is spaced from now, never less strictly. wait()\n" \
        "and acquire() call it after their sleep; windows: nothing to do."

PyDoc_STRVAR(limiter_anchor_doc, ANCHOR_DOC("anchor($self, /, cost=1, *, now=None)"));
PyDoc_STRVAR(keyed_anchor_doc, ANCHOR_DOC("anchor($self, /, key, cost=1, *, now=None, plan=None)"));
PyDoc_STRVAR(limiter_reserve_doc,
             RESERVE_DOC("reserve($self, /, cost=1, *, timeout=None, now=None)"));
PyDoc_STRVAR(limiter_refund_doc, REFUND_DOC("refund($self, /, cost=1, *, now=None)"));
PyDoc_STRVAR(keyed_reserve_doc,
             RESERVE_DOC("reserve($self, /, key, cost=1, *, timeout=None, now=None,\n"
                         "plan=None)"));
PyDoc_STRVAR(keyed_refund_doc, REFUND_DOC("refund($self, /, key, cost=1, *, now=None, plan=None)"));
#define CHARGE_DOC(sig)                                                                \
    sig "\n--\n\n"                                                                     \
        "Commit `cost` units whatever the state (a cost known after the fact): the\n"  \
        "key may go into debt, refused until it drains. The Decision is check()'s\n"   \
        "when the units fit; else allowed is False and retry_after the wait for one\n" \
        "unit. clipped: the debt met its bound (now + 2**62 ns; windows: the count\n"  \
        "their state carries) and the rest was dropped. Settle an estimate with\n"     \
        "charge(actual - estimate) or refund(estimate - actual)."
#define TAKE_DOC(sig)                                                            \
    sig "\n--\n\n"                                                               \
        "Admit as many units as fit now, at most `max_cost`, in one decision;\n" \
        "return their number (0 when none fits)."
PyDoc_STRVAR(limiter_charge_doc, CHARGE_DOC("charge($self, /, cost, *, now=None)"));
PyDoc_STRVAR(keyed_charge_doc, CHARGE_DOC("charge($self, /, key, cost, *, now=None, plan=None)"));
PyDoc_STRVAR(limiter_take_doc, TAKE_DOC("take($self, /, max_cost, *, now=None)"));
PyDoc_STRVAR(keyed_take_doc, TAKE_DOC("take($self, /, key, max_cost, *, now=None, plan=None)"));
#define WAIT_DOC(sig)                                                                  \
    sig "\n--\n\n"                                                                     \
        "Blocks until `cost` units are admitted, sleeping with the GIL released.\n\n"  \
        "Raises RateLimited, without sleeping, when they cannot be admitted within\n"  \
        "`timeout` seconds (None: no limit) or can never fit the limit; a wait that\n" \
        "a later block (a provider's 429 followed) pushes past `timeout` raises\n"     \
        "then. This process's waiters are admitted in the order they arrive."
#define ACQUIRE_DOC(sig)                                                            \
    sig "\n--\n\n"                                                                  \
        "The asyncio form of wait(), a coroutine: never blocks the event loop; a\n" \
        "cancelled waiter gives its place in line back."
PyDoc_STRVAR(limiter_wait_doc, WAIT_DOC("wait($self, /, cost=1, *, timeout=None)"));
PyDoc_STRVAR(keyed_wait_doc, WAIT_DOC("wait($self, /, key, cost=1, *, timeout=None, plan=None)"));
PyDoc_STRVAR(limiter_acquire_doc, ACQUIRE_DOC("acquire($self, /, cost=1, *, timeout=None)"));
PyDoc_STRVAR(keyed_acquire_doc, ACQUIRE_DOC("acquire($self, /, key, cost=1, *, timeout=None,\n"
                                            "plan=None)"));

PyDoc_STRVAR(limiter_reset_doc, "reset($self, /)\n--\n\nBack to idle: a full burst.");
PyDoc_STRVAR(keyed_reset_doc,
             "reset($self, key, /)\n--\n\nForget `key`: it is back to a full burst.");
PyDoc_STRVAR(keyed_clear_doc, "clear($self, /)\n--\n\n"
                              "Forget every key, as reset(key) of each: each starts again with a "
                              "full burst.\nThe limit and the counters stay.");

PyDoc_STRVAR(store_reconfigure_doc,
             "reconfigure($self, /, rate, period=None, *, burst=None, algorithm=None,\n"
             "            max_debt=None, tz=None, now=None, plan=None)\n"
             "--\n\n"
             "Change the limit live: what was used carries (a change never hands out a\n"
             "fresh allowance); rate, period, burst and max_debt as for Limiter (a\n"
             "max_debt given before stays unless given again; a debt carries whole).\n"
             "The algorithm cannot change (InvalidArgument naming algorithm); the clock\n"
             "stays. A KeyedLimiter carries each key on its next touch.");
PyDoc_STRVAR(store_stats_doc,
             "stats($self, /)\n--\n\n"
             "The counters since the limiter was made or reset_stats() (a dict of ints):\n"
             "admitted, refused, units_admitted, units_refused, unfittable, would_refuse,\n"
             "evicted. A shared limiter's are the region's: every process's decisions.");
PyDoc_STRVAR(store_stats_by_doc,
             "stats_by($self, /)\n--\n\n"
             "The requests admitted and refused by plan and by class since the limiter\n"
             "was made or reset_stats(): {\"plan\": {name: {\"admitted\": n, \"refused\": n}},\n"
             "\"priority\": {...}}, each empty without plans or classes. A decision that\n"
             "names no class counts in the first class of reserve 0. Each sums to stats()'\n"
             "admitted and refused; a shared limiter's are the region's.");
PyDoc_STRVAR(store_reset_stats_doc, "reset_stats($self, /)\n--\n\nZero the counters.");
PyDoc_STRVAR(store_would_refuse_doc,
             "_would_refuse($self, cost, plan=None, priority=None, /)\n--\n\n"
             "A dry run let a refusal of cost units through (under plan, in class\n"
             "priority): counted as would_refuse.");
/* ------------------------------------------------------------------------ */
/* Concurrency and Slot                                                      */

PyDoc_STRVAR(concurrency_doc,
             "Concurrency(limit, *, capacity=None, shared=None, shared_mode=None, lease=None,\n"
             "            peak=False)\n"
             "--\n\n"
             "At most `limit` units held at once: work in flight, not a rate.\n\n"
             "limit: an int from 1 to 65536.\n"
             "capacity: None for one limit; an int >= 1 for one limit per key, in a\n"
             "          table sized for that many keys holding units at once.\n"
             "shared, shared_mode: a region file shared by the processes that open it,\n"
             "          as for Limiter; a dead process's holdings come back.\n"
             "lease: seconds after which a holding is reclaimed (a hung holder);\n"
             "       None: held until released.\n"
             "peak: True tracks the most units held at once (stats()['peak']): one\n"
             "       total that every acquire and release updates atomically, shared\n"
             "       by every thread and process; False (the default): peak is None.\n\n"
             "Safe to share between threads.");
PyDoc_STRVAR(concurrency_try_acquire_doc,
             "try_acquire($self, /, key=None, cost=1)\n--\n\n"
             "Hold `cost` units (an int >= 1) of `key`'s limit (key: str or bytes, only\n"
             "with capacity) if they are free: a Slot to release(), or None.");
PyDoc_STRVAR(concurrency_wait_doc,
             "_wait($self, /, key=None, cost=1, timeout=None)\n--\n\n"
             "Private: try_acquire, blocking with the GIL released for up to `timeout`\n"
             "seconds (None: as long as it takes); None when the time ran out. hold()\n"
             "is the public form.");
PyDoc_STRVAR(concurrency_in_flight_doc,
             "in_flight($self, /, key=None)\n--\n\n"
             "Units of `key` held now (after reclaiming dead holders' and expired\n"
             "leases').");
PyDoc_STRVAR(slot_doc, "A holding of a Concurrency: release() gives its units back.");
PyDoc_STRVAR(slot_release_doc,
             "release($self, /)\n--\n\n"
             "Give the units back. Idempotent: True the first time, False after (or\n"
             "when the lease ran out and they were reclaimed).");

PyDoc_STRVAR(concurrency_hold_doc,
             "hold($self, /, key=None, cost=1, *, timeout=None)\n--\n\n"
             "Hold `cost` units of `key` for a `with` or `async with` block: blocks\n"
             "(the GIL released) or awaits until they are free, at most `timeout`\n"
             "seconds (None: as long as it takes), else raises RateLimited.");
PyDoc_STRVAR(
    concurrency_stats_doc,
    "stats($self, /)\n--\n\nThe counters (a dict of ints): acquired, refused, units_acquired,\n"
    "units_refused, released, reclaimed, in_flight (the units held now, counted in\n"
    "the holdings: a keyed limit's whole table is read), peak (None unless made\n"
    "with peak=True), evicted.");
PyDoc_STRVAR(concurrency_poll_doc,
             "_poll($self, /, key=None, cost=1)\n--\n\n"
             "try_acquire for a waiter's tries: a refusal is counted once, by _gave_up.");
PyDoc_STRVAR(concurrency_gave_up_doc,
             "_gave_up($self, cost, /)\n--\n\nA waiter gave up: one refusal of cost units.");
PyDoc_STRVAR(
    concurrency_reset_stats_doc,
    "reset_stats($self, /)\n--\n\nZero the counters (a tracked peak becomes the units held).");

/* ------------------------------------------------------------------------ */
/* The module                                                                */

PyDoc_STRVAR(check_all_doc,
             "check_all(items, cost=1, *, now=None)\n--\n\n"
             "Decide `cost` units against several limits as one: `items` is a list of\n"
             "Limiters and (KeyedLimiter, key) pairs. Admitted only if every one admits;\n"
             "a refusal spends nothing of any. Returns the tightest Decision: on a\n"
             "refusal the longest retry_after, on an admission the fewest remaining.");

PyDoc_STRVAR(check_policy_name_doc,
             "check_policy_name(name, /)\n--\n\n"
             "None when `name` can be the policy name of Decision.headers() (1 to 64\n"
             "printable ASCII characters, or None for the default); else InvalidArgument\n"
             "(InvalidArgumentType for a non-str) naming `name`.");

PyDoc_STRVAR(inspect_region_doc,
             "inspect_region(path, /)\n--\n\n"
             "What the region file at path holds, read without changing it (a dict):\n"
             "layout_version, kind ('limiter', 'keyed', 'concurrency'), algorithm, limit\n"
             "(its description), rate, period, burst, max_in_flight, lease, peak\n"
             "(whether a concurrency limit tracks it), capacity, live_keys, generation,\n"
             "size, this_boot, stats (the counters) and, for a keyed region with plans,\n"
             "plans ({name: {rate, period, burst}}, 'default' first). A path\n"
             "that is not a region raises InvalidArgument naming it.");
PyDoc_STRVAR(inspect_key_doc,
             "inspect_key(path, key, /)\n--\n\n"
             "key of the keyed region at path, read without changing it (a dict): key,\n"
             "plan (the name it was last decided under; None: the key holds no slot),\n"
             "limit (that plan's rate, period, burst), used and remaining (units now,\n"
             "carried through the plan's changes) and reset_after (seconds). A region\n"
             "of another kind raises InvalidArgument naming key.");
PyDoc_STRVAR(metrics_doc,
             "metrics($module, /)\n--\n\n"
             "The metrics every exporter publishes, in order (a list of dicts): name\n"
             "(OpenTelemetry), prometheus_name, help, type (Prometheus), instrument\n"
             "(OpenTelemetry), unit, stats ('rate' or 'concurrency': whose stats() it\n"
             "reads), labels ((name, attribute) pairs every series may carry), label\n"
             "(the pair telling its samples apart, or None) and samples ((stats field,\n"
             "label value or None) pairs).");
PyDoc_STRVAR(check_timeout_doc,
             "_check_timeout(timeout, /)\n--\n\n"
             "Private: the seconds of a wait's `timeout` (None for any wait), or\n"
             "InvalidArgument / InvalidArgumentType naming `timeout`.");

PyDoc_STRVAR(check_request_doc,
             "_check_request(key, cost, now, /)\n--\n\n"
             "Private: refuses what a decision of `cost` units of `key` at `now` would\n"
             "(InvalidArgument / InvalidArgumentType naming the parameter); returns\n"
             "`now` as the integer ns the core decides at, or None when `now` is None.");

PyDoc_STRVAR(check_hold_doc,
             "_check_hold(limit, key, cost, lease, /)\n--\n\n"
             "Private: refuses what a concurrency limit would of its limit and lease and\n"
             "of a holding's key and cost (InvalidArgument / InvalidArgumentType naming\n"
             "the parameter); returns the lease in integer ns, or None when it is None.");

PyDoc_STRVAR(check_options_doc,
             "_check_options(constructor, options, /)\n--\n\n"
             "Private: the options given to a constructor (a dict of keyword arguments;\n"
             "None is absent) judged by the core's table (cellrate/options.h): a dict of\n"
             "every option the Python face takes, normalised, absent ones at their\n"
             "default (or None). An unknown name is TypeError, a refused value\n"
             "InvalidArgument / InvalidArgumentType in the core's words.");

PyDoc_STRVAR(options_doc,
             "_options(constructor, /)\n--\n\n"
             "Private: the rows of the core's options table the Python face takes for\n"
             "`constructor`: {name: {'kind', 'default', 'words', 'status'}}.");

PyDoc_STRVAR(penalty_check_doc,
             "_penalty_check(after, ban, max_ban, /)\n--\n\n"
             "None for a penalty the core takes; else its refusal, naming the parameter.");

PyDoc_STRVAR(parse_rates_doc,
             "_parse_rates(text, zoned=False, /)\n--\n\n"
             "Private: the limits a rate string names ('100/minute;1000000/month'): a\n"
             "list of (rate, period, the part's text, calendar period or None), or\n"
             "InvalidArgument naming `rate`. zoned: a zone was given (tz=): days and\n"
             "weeks are calendar periods too.");

PyDoc_STRVAR(check_zoned_doc,
             "_check_zoned(zoned, calendars, /)\n--\n\n"
             "Private: None, or InvalidArgument naming `tz` for a zone given for rate\n"
             "strings none of whose parts is a calendar quota.");

PyDoc_STRVAR(algorithm_takes_burst_doc,
             "_algorithm_takes_burst(algorithm, /)\n--\n\n"
             "Private: whether the algorithm reads a burst (gcra, token_bucket; the\n"
             "window algorithms refuse one).");

/* ------------------------------------------------------------------------ */
/* The Redis store's protocol (private: cellrate.redis)                      */

PyDoc_STRVAR(redis_request_doc,
             "_redis_request(mode, cost, now, limit, prefix, name, key, ..., /)\n--\n\n"
             "Private: the words after EVALSHA and the SHA of a request of `mode` (the\n"
             "script's digit) for one (limit, prefix, name, key) group per limit: a list of\n"
             "bytes. Refuses what a decision refuses, in the core's words.");

PyDoc_STRVAR(redis_reply_doc,
             "_redis_reply(mode, reply, limit, ..., /)\n--\n\n"
             "Private: the script's reply to a request of `mode` for these limits: a\n"
             "Decision, or a take's (refund's) count. CellrateError for a reply the\n"
             "script never gives.");

PyDoc_STRVAR(redis_remember_doc,
             "_redis_remember(mode, now, cost, asked_ns, reply, limit, /)\n--\n\n"
             "Private: what the deny cache keeps of a reply (a tuple), or None.");

PyDoc_STRVAR(redis_recall_doc,
             "_redis_recall(mode, now, cost, clock_ns, refusal, limit, /)\n--\n\n"
             "Private: what a kept refusal answers at `clock_ns`: a Decision, None (ask\n"
             "Redis) or False (ask Redis and forget the refusal).");

PyDoc_STRVAR(redis_unavailable_doc,
             "_redis_unavailable(mode, limit, allow, cost, probe_in_ns, /)\n--\n\n"
             "Private: on_error's answer while Redis cannot decide: a Decision, or a\n"
             "take's count.");

PyDoc_STRVAR(redis_backoff_doc, "_redis_backoff(previous_ns, /)\n--\n\n"
                                "Private: the probe's next back-off (ns) after `previous_ns`.");

PyDoc_STRVAR(redis_fallback_check_doc,
             "_redis_fallback_check(on_error, has_fallback, /)\n--\n\n"
             "Private: None, or the core's error naming fallback given with another on_error.");

PyDoc_STRVAR(redis_check_items_doc,
             "_redis_check_items(clients, /)\n--\n\n"
             "Private: None, or the core's error naming items for a check_all's items, each "
             "given as its client (None: not a pair of a Redis rate limiter and a key).");

PyDoc_STRVAR(redis_check_change_doc,
             "_redis_check_change(named, algorithm, given, /)\n--\n\n"
             "Private: None, or the core's error for a live change of a Redis rate limit.");

PyDoc_STRVAR(redis_fallback_limit_doc,
             "_redis_fallback_limit(limit, share, /)\n--\n\n"
             "Private: the Limit that is `share` (0 < share <= 1) of the Redis `limit`.");

PyDoc_STRVAR(redis_going_back_doc,
             "_redis_going_back(mode, cost, fallback, held_remaining, /)\n--\n\n"
             "Private: the (mode, cost) to send for a key decided locally during an outage.");

PyDoc_STRVAR(redis_key_doc, "_redis_key(prefix, name, key, /)\n--\n\n"
                            "Private: the Redis key of `key` under the limit named `name`.");

PyDoc_STRVAR(redis_penalty_key_doc,
             "_redis_penalty_key(prefix, name, key, /)\n--\n\n"
             "Private: the Redis key of the strikes of `key` under the limit named `name`.");

PyDoc_STRVAR(redis_penalty_doc, "_redis_penalty(penalty, /)\n--\n\n"
                                "Private: a penalty as the Redis requests send it.");

PyDoc_STRVAR(redis_signature_doc,
             "_redis_signature(limit, /)\n--\n\n"
             "Private: the signature the script writes with each value, an unnamed limit's name.");

PyDoc_STRVAR(redis_check_limit_doc,
             "_redis_check_limit(limit, /)\n--\n\n"
             "Private: None when the script carries `limit` exactly, else the core's\n"
             "error naming burst.");

PyDoc_STRVAR(redis_plans_doc,
             "_redis_plans(limit, plans, named, max_cost, max_debt, /)\n--\n\n"
             "Private: a Redis limit's plans, {name: Limit}, 'default' first: the core's table.");

PyDoc_STRVAR(redis_plan_doc, "_redis_plan(plans, plan, /)\n--\n\n"
                             "Private: the limit of `plan`, else the core's error naming plan.");

PyDoc_STRVAR(redis_classify_doc,
             "_redis_classify(word, text, /)\n--\n\n"
             "Private: what a failure means, and a wrong algorithm's own words.");

PyDoc_STRVAR(redis_slots_message_doc,
             "_redis_slots_message(keys, slots, /)\n--\n\n"
             "Private: the words of keys in several Redis Cluster hash slots.");

PyDoc_STRVAR(redis_batch_doc,
             "_redis_batch(now, calls, /)\n--\n\n"
             "Private: the words after EVALSHA and the batch script's SHA of several\n"
             "decisions, each (mode, cost, limit, prefix, name, key, ...): a list of bytes.");

PyDoc_STRVAR(redis_batch_command_doc,
             "_redis_batch_command(sha, now, calls, /)\n--\n\n"
             "Private: the whole command EVALSHA sha and _redis_batch(now, calls)'s words,\n"
             "as the bytes a connection sends (RESP).");

PyDoc_STRVAR(redis_batch_reply_doc,
             "_redis_batch_reply(ncalls, reply, /)\n--\n\n"
             "Private: None when reply is a batch's reply to ncalls decisions.");

PyDoc_STRVAR(redis_protocol_doc, "_redis_protocol()\n--\n\n"
                                 "Private: the Redis protocol's constants.");

PyDoc_STRVAR(share_limit_doc,
             "_share_limit(fleet, share, /)\n--\n\n"
             "Private: the local limit of `share` of the fleet (a Limit), as (rate,\n"
             "period, burst) for the local limiter (cellrate.share).");

PyDoc_STRVAR(share_of_doc,
             "_share_of(fleet, rate, period, /)\n--\n\n"
             "Private: the share of the fleet (a Limit) that a local limit of `rate`\n"
             "per `period` is, from 0 to 1.");

PyDoc_STRVAR(share_asked_doc,
             "_share_asked(stats, baseline, /)\n--\n\n"
             "Private: (asked, counted): the units asked of a local limiter since\n"
             "`baseline` by its stats() (admitted + refused - refunded), and the next\n"
             "baseline.");

PyDoc_STRVAR(share_report_doc,
             "_share_report(fleet, asked, elapsed, known, share, joined, /)\n--\n\n"
             "Private: (demand, held, fleet_rate), the numbers a heartbeat sends.");

PyDoc_STRVAR(share_reply_doc, "_share_reply(reply, /)\n--\n\n"
                              "Private: (share, members, target), the share script's reply read;\n"
                              "CellrateError for a reply that is not the script's.");

PyDoc_STRVAR(share_after_doc,
             "_share_after(outcome, share, joined, held, answered, /)\n--\n\n"
             "Private: (share, apply, confirm), what a member does after a heartbeat's\n"
             "outcome ('answered', 'confirmed', 'unavailable', 'refused', 'left').");

PyDoc_STRVAR(set_waits_doc,
             "_set_waits(methods, /)\n--\n\n"
             "Private: the Python functions that are the bodies of Limiter.wait,\n"
             "Limiter.acquire, KeyedLimiter.wait, KeyedLimiter.acquire and\n"
             "Concurrency.hold, and RateLimited, a dict by those names. The package\n"
             "sets them once, at import; other functions later are refused.");

/* ------------------------------------------------------------------------ */
/* The web policy's rules (web.c)                                            */

PyDoc_STRVAR(client_keys_doc,
             "_ClientKeys(ipv4_prefix=32, ipv6_prefix=64, trusted=(), forwarded=False)\n--\n\n"
             "Private: the client's address as a key (cellrate.web.Policy): its network\n"
             "of ipv4_prefix / ipv6_prefix bits in canonical text ('192.0.2.1',\n"
             "'2001:db8::/64'), 'unknown' for what is no address. trusted: the networks\n"
             "of the trusted proxies (str each); forwarded: their field is Forwarded,\n"
             "not X-Forwarded-For. Immutable.");
PyDoc_STRVAR(client_keys_key_doc, "key($self, address, /)\n--\n\n"
                                  "The key of a peer's address (a str).");
PyDoc_STRVAR(client_keys_peer_doc,
             "peer($self, address, /)\n--\n\n"
             "(key, trusted): the key of a peer's address and whether it is a trusted proxy.");
PyDoc_STRVAR(client_keys_hop_doc, "hop($self, hop, /)\n--\n\n"
                                  "The key of one hop of X-Forwarded-For or Forwarded's for=\n"
                                  "(quotes, brackets and a port dropped).");
PyDoc_STRVAR(client_keys_client_doc,
             "client($self, value, /)\n--\n\n"
             "The key of the client behind the trusted proxies, from the value of their\n"
             "field read from the right; None when the value names no hop.");
PyDoc_STRVAR(check_refusal_status_doc,
             "_check_refusal_status(status, /)\n--\n\n"
             "Private: `status` as a refusal's HTTP status (an int from 400 to 599), or\n"
             "InvalidArgument / InvalidArgumentType naming `status`.");
PyDoc_STRVAR(check_address_prefix_doc,
             "_check_address_prefix(name, prefix, /)\n--\n\n"
             "Private: `prefix` as the prefix length option `name` ('ipv4_prefix': 0 to\n"
             "32, 'ipv6_prefix': 0 to 128) takes, or the error naming it.");
PyDoc_STRVAR(dry_run_fields_doc,
             "_dry_run_fields($module, fields, /)\n--\n\n"
             "Private: the (name, value) pairs of a refusal's fields (a dict) that a dry\n"
             "run sends: without those the core leaves out (Retry-After).");
PyDoc_STRVAR(settle_doc,
             "_settle(charged, count, max_cost, /)\n--\n\n"
             "Private: (total, units, clipped) of settling a request charged `charged`\n"
             "units by the `count` it was reported to cost (an int, or its decimal\n"
             "digits as a str), at most `max_cost` (None: no bound); InvalidArgument\n"
             "naming charge for a figure that is no count (nothing settled).");

PyDoc_STRVAR(error_doc,
             "Base of the errors cellrate raises; `param` names the parameter at fault.");
PyDoc_STRVAR(invalid_argument_doc, "An argument of the right type with a value cellrate refuses.");
PyDoc_STRVAR(invalid_argument_type_doc, "An argument of a type its parameter never takes.");
PyDoc_STRVAR(cellrate_doc, "The compiled core of cellrate: GCRA rate limiting.");

/* ------------------------------------------------------------------------ */
/* Following a provider                                                      */

PyDoc_STRVAR(check_retry_doc, "_check_retry(retries, backoff, max_backoff, /)\n--\n\n"
                              "None, or the core's error naming retries or backoff.");
PyDoc_STRVAR(retry_wait_doc,
             "_retry_wait(status, attempt, retries, backoff, max_backoff, random, /)\n--\n\n"
             "The seconds to wait before retry `attempt` of a request answered `status`\n"
             "(429 or 503), or None: not retried (the core's cr_retry_wait).");
PyDoc_STRVAR(limiter_follow_doc,
             "follow($self, headers, status=None, *, quota=None, pending=0, share=1.0,\n"
             "       now=None)\n--\n\n"
             "Pulls the limit into line with what a provider's response says of its\n"
             "own limit (Retry-After, the IETF RateLimit fields, x-ratelimit-*,\n"
             "anthropic-ratelimit-*; cellrate.read_signal). Only ever stricter: a 429's\n"
             "Retry-After holds every caller of the limit until then, a remaining\n"
             "below this limit's spends the difference, never more than this limit\n"
             "allows. Returns whether it changed the limit.\n\n"
             "headers: the response's fields, a mapping or (name, value) pairs.\n"
             "status: its status code (None: unknown; Retry-After counts on 429, 503\n"
             "        or unknown).\n"
             "quota: 'requests' (None) or 'tokens': what this limit counts.\n"
             "pending: units sent that the response cannot count yet (in flight).\n"
             "share: this member's part of the provider's limit (a fleet share).");
PyDoc_STRVAR(keyed_follow_doc,
             "follow($self, key, headers, status=None, *, quota=None, pending=0,\n"
             "       share=1.0, now=None, plan=None)\n--\n\n"
             "Limiter.follow() for the limit of `key` under `plan`.");
PyDoc_STRVAR(read_signal_doc,
             "read_signal(headers, status=None, *, quota=None, now=None)\n--\n\n"
             "What a provider's response says of its limit: a list of bounds\n"
             "(remaining, within), each 'at most `remaining` more units in the next\n"
             "`within` seconds' (a 429's Retry-After is (0, wait)). Waits are capped at\n"
             "one hour; values that are not numbers, negative, past or beyond 63 bits\n"
             "are ignored. now: the Unix time in seconds for HTTP-dates and other\n"
             "absolute times (None: the clock).");

/* ------------------------------------------------------------------------ */
/* A wait, one step at a time                                                */

PyDoc_STRVAR(wait_plan_doc,
             "_wait_plan(store, key, cost, timeout, now=None, plan=None, /)\n--\n\n"
             "Private: a wait for `cost` units of `store` (a Limiter with key None, a\n"
             "KeyedLimiter and a key under `plan`; None: a store outside the core, retried by\n"
             "retry(decision)) at most `timeout` seconds (None: any), begun now: the\n"
             "core's wait plan (docs/design/waiting.md). Iterated, it yields the\n"
             "seconds to sleep before each next step, stops once the units are\n"
             "admitted and raises RateLimited when they cannot be in time. step(now),\n"
             "leave(now), retry(decision, now): now in seconds on one stand-in clock.");
