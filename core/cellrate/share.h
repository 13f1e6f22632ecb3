/*
 * cellrate/share.h: a fleet share's member rules (docs/design/share.md): the
 * local limit a share gives, what a heartbeat reports, how its reply reads,
 * and what a member does after each heartbeat.
 *
 * A part of cellrate.h (include <cellrate.h>). Every function here is pure
 * and thread-safe: the faces (cellrate.share in Python and Lua) do the I/O
 * (the heartbeat's round trip, the clock, the thread or timer) and keep the
 * member's state; the server script (redis/share.lua) does the split.
 */
#ifndef CELLRATE_SHARE_H
#define CELLRATE_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"
#include "stats.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The smallest share the script grants a member among n: 1 / (8 n). The
 * script (redis/share.lua, FLOOR_DIVISOR) says the same; the vectors pin
 * both. */
#define CR_SHARE_FLOOR_DIVISOR 8

/* The share a member runs at until Redis first answers it: 1/8 of the fleet. */
#define CR_SHARE_COLD_START (1.0 / CR_SHARE_FLOOR_DIVISOR)

/* The slowest local limit a share gives: a unit per 2^61 ns (73 years; the
 * core refuses a unit per more than 2^62 ns), so that a share of nothing is
 * still a limit. */
#define CR_SHARE_SLOWEST_NS ((int64_t)1 << 61)

/* A demand not known (a member's first heartbeat): as much as it may. */
#define CR_SHARE_UNKNOWN (-1.0)

/*
 * The local limit of `share` of `fleet` (a gcra or token_bucket limit; a
 * window limit is CR_E_ALGORITHM, shares divide GCRA limits only): the
 * fleet's period and algorithm, rate * share units per period but at least
 * a unit per CR_SHARE_SLOWEST_NS (or the fleet's rate, when slower still:
 * never more than the fleet), burst floor(burst * share) but at least 1,
 * at most the fleet's burst and at most what the local T keeps within
 * CR_HORIZON_NS (a fleet near the ceilings). `share` is a fraction of the
 * fleet: below 0 or NaN counts as 0, above 1 as 1 (never more than the
 * fleet). Fills `local` on CR_OK; another status (a fleet of an absurd
 * period, below about 1e-300 s) leaves it untouched.
 */
cr_status cr_share_local_limit(const cr_limit *fleet, double share, cr_limit *local);

/* The share a local limit of `rate` units per `period_s` seconds is of
 * `fleet` (its rate per second over the fleet's), from 0 to 1 (0 for NaN). */
double cr_share_of_rate(const cr_limit *fleet, double rate, double period_s);

/*
 * The units asked of a local limiter by its counters (`stats`), since the
 * count `baseline` (what this function put in *counted at the last
 * heartbeat; 0 at the first): units_admitted + units_refused -
 * units_refunded (refunded units were not used), at most CR_COUNT_MAX; 0 when
 * the count fell (a refund of earlier units, a reset of the counters).
 * *counted: the count now, the next baseline.
 */
uint64_t cr_share_asked(const cr_stats *stats, uint64_t baseline, uint64_t *counted);

/* The numbers a heartbeat sends, besides the member's name and the fleet's
 * ttl, interval and timeout. */
typedef struct cr_share_report {
    double demand;     /* units asked per second since the last heartbeat, at most
                          the fleet's rate; CR_SHARE_UNKNOWN */
    double held;       /* the fraction the member runs at now, as the records know
                          it: 0 before Redis first answered */
    double fleet_rate; /* the fleet's units per second */
} cr_share_report;

/*
 * What a member reports: `asked` units (cr_share_asked, or the caller's
 * count) over `elapsed_s` seconds, CR_SHARE_UNKNOWN unless `known` (the
 * member has a baseline from a heartbeat Redis answered), elapsed_s is
 * finite and > 0 and asked finite and >= 0; what it holds, its `share`
 * (from 0 to 1) once `joined` (Redis answered it once), else 0.
 */
cr_share_report cr_share_report_of(const cr_limit *fleet, double asked, double elapsed_s,
                                   bool known, double share, bool joined);

/* A heartbeat's reply, read: the script's { share, members, target }. */
typedef struct cr_share_reply {
    double share;    /* the fraction the member may run at until its next heartbeat */
    int64_t members; /* live members, this one included */
    double target;   /* its max-min fair fraction by the demands */
} cr_share_reply;

/*
 * Reads the script's reply: `share` and `target` decimal texts (digits, a
 * point, an exponent: what %.17g writes; read the same in every locale),
 * each a fraction from 0 to 1, and `members` >= 1. CR_E_SHARE_REPLY for
 * anything else (a reply not of this script): the member then does as for
 * no reply. Fills `reply` on CR_OK.
 */
cr_status cr_share_read_reply(const char *share, size_t share_len, int64_t members,
                              const char *target, size_t target_len, cr_share_reply *reply);

/* How a heartbeat (or the member's life) went, for cr_share_after. */
typedef enum cr_share_outcome {
    CR_SHARE_ANSWERED = 0,    /* the script answered a heartbeat */
    CR_SHARE_CONFIRMED = 1,   /* the script answered the confirmation of a shrunk share */
    CR_SHARE_UNAVAILABLE = 2, /* no answer of the script's within the timeout */
    CR_SHARE_REFUSED = 3,     /* the script refused the member (its ttl or interval) */
    CR_SHARE_LEFT = 4,        /* the member left the fleet (close, leave) */
    CR_SHARE_OUTCOMES = 5     /* their number */
} cr_share_outcome;

/* "answered", "confirmed", "unavailable", "refused", "left" ("" out of range). */
const char *cr_share_outcome_name(cr_share_outcome outcome);

/* What a member does after an outcome. */
typedef struct cr_share_step {
    double share; /* its share from now on */
    bool apply;   /* run the local limiter at `share` now (cr_share_local_limit and a
                     live change), even when unchanged: a limit changed by hand is undone */
    bool confirm; /* heartbeat again at once, holding `share`: it shrank below what
                     the heartbeat said it held, so that the old share counts no more */
} cr_share_step;

/*
 * The step after `outcome`, for a member at `share` that has `joined` (Redis
 * answered it once) and sent `held` (cr_share_report): answered, the answered
 * share (`answered`, from cr_share_read_reply) applied, confirmed when below
 * `held`; confirmed, the answered share applied, no confirmation again;
 * unavailable, the last share applied again once joined (never more), nothing
 * before (the cold start stays); refused or left, nothing held (0) applied.
 */
cr_share_step cr_share_after(cr_share_outcome outcome, double share, bool joined, double held,
                             double answered);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_SHARE_H */
