/*
 * cellrate/stores.h: the stores of rate limits (cr_limiter: one key; cr_keyed:
 * many), their counters, several limits decided as one, waiting.
 *
 * A part of cellrate.h (include <cellrate.h>).
 *
 * Thread-safety: cr_limiter and cr_keyed may be used from any number of
 * threads at once, except that cr_*_free must not race with any other call on
 * the same handle. A turned-away request writes nothing.
 */
#ifndef CELLRATE_STORES_H
#define CELLRATE_STORES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decision.h"
#include "penalty.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* File mode of a shared region when the caller names none. */
#define CR_SHARED_DEFAULT_MODE 0600
/* The largest file mode of a shared region (CR_E_SHARED_MODE beyond it). */
#define CR_SHARED_MAX_MODE 0777
/* Capacity of a keyed table when the caller names none, and the largest a
 * keyed table (or a keyed concurrency limit) takes (CR_E_CAPACITY beyond). */
#define CR_KEYED_DEFAULT_CAPACITY 100000
#define CR_KEYED_MAX_CAPACITY ((int64_t)1 << 32)

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
/* Gives the limiter a penalty box (cellrate/penalty.h), before its first
 * decision: a turn-away of check or allow is a strike; a ban is written into
 * the state, so a banned decision reads as a plain turn-away whose
 * retry_after runs to the ban's end. Reset lets the key out. In a shared
 * region the box is the region's (docs/design/penalty.md). CR_E_NOMEM. */
cr_status cr_limiter_set_penalty(cr_limiter *limiter, const cr_penalty *penalty);
/* sync= of a limiter in a shared region, before its first decision: this
 * process writes the region to its disk (msync, MS_SYNC) at most every
 * `seconds`, from a committing decision once that long has passed, and when
 * the limiter is freed; what a power loss may lose is bounded by it
 * (docs/design/calendar.md). CR_E_SYNC unless seconds > 0 and finite;
 * CR_E_SYNC_SHARED for a limiter of one process. */
cr_status cr_limiter_set_sync(cr_limiter *limiter, double seconds);
/* The bans a penalty started (0: none, or no penalty). */
uint64_t cr_limiter_bans(cr_limiter *limiter);

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

/*
 * The operations below each take the plan of `key` (an index of
 * cr_plan_find: CR_PLAN_DEFAULT for a table without plans), as
 * cr_keyed_check_plan: a key last decided under another plan is carried into
 * `plan` first; CR_E_PLAN for an index the table lacks.
 */

/* As cr_limiter_reserve, for `key`. */
cr_status cr_keyed_reserve(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                           int32_t plan, int64_t cost, int64_t max_wait_ns, bool *reserved,
                           int64_t *delay_ns);

/* As cr_limiter_refund, for `key` (an absent key has nothing to give back). */
cr_status cr_keyed_refund(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost);

/* As cr_limiter_anchor, for `key`. */
cr_status cr_keyed_anchor(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost);

/* As cr_limiter_charge, for `key`. */
cr_status cr_keyed_charge(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, int64_t cost, cr_decision *out);

/* As cr_limiter_take, for `key`. */
cr_status cr_keyed_take(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                        int32_t plan, int64_t max_cost, int64_t *taken);

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
/* As cr_limiter_set_penalty, per key; the box holds at most the table's
 * capacity of keys (beyond, refused keys whose state no longer matters are
 * forgotten; a box full of live ones counts no new key: it fails open). */
cr_status cr_keyed_set_penalty(cr_keyed *keyed, const cr_penalty *penalty);
/* As cr_limiter_set_sync, for a table in a shared region. */
cr_status cr_keyed_set_sync(cr_keyed *keyed, double seconds);
uint64_t cr_keyed_bans(cr_keyed *keyed);
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
/* Counters (docs/design/stores.md, "Counters"; cellrate/stats.h).          */

void cr_limiter_stats(const cr_limiter *limiter, cr_stats *out);
void cr_keyed_stats(const cr_keyed *keyed, cr_stats *out);
/* The requests by plan and by class (cellrate/stats.h, cr_stats_by). A
 * keyed region's plans are first taken in (names other openers gave it). */
void cr_limiter_stats_by(const cr_limiter *limiter, cr_stats_by *out);
void cr_keyed_stats_by(cr_keyed *keyed, cr_stats_by *out);
/* Zeroes the counters (a baseline: the cells are never written by another
 * thread than their owner). CR_E_SHARED_LOCK as cr_limiter_reconfigure. */
cr_status cr_limiter_reset_stats(cr_limiter *limiter);
cr_status cr_keyed_reset_stats(cr_keyed *keyed);
/* A dry run lets a refusal of `cost` units through: moves it from refused
 * (and units_refused) to would_refuse, also in the counts of its plan (an
 * index of cr_plan_find) and its class (an index of cr_priority_find, or -1:
 * none). Call it once per refusal let through, after the decision that
 * counted it. */
void cr_limiter_would_refuse(cr_limiter *limiter, int64_t cost, int32_t priority);
void cr_keyed_would_refuse(cr_keyed *keyed, int64_t cost, int32_t plan, int32_t priority);

/* ------------------------------------------------------------------------ */
/* Several limits as one (docs/design.md §8).                                */

/* One limit of a composite: a limiter (keyed NULL), or a keyed table and a
 * key (limiter NULL) decided under the table's plan `plan` (an index of
 * cr_plan_find; 0, CR_PLAN_DEFAULT, for a table without plans). */
typedef struct cr_item {
    cr_limiter *limiter;
    cr_keyed *keyed;
    const void *key;
    size_t key_len;
    int32_t plan;
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
/* Waiting (docs/design/waiting.md): one plan for every face. The plan says  */
/* "start", "sleep this long, then step again", or "give up"; the faces      */
/* read the clocks and sleep (Python: time.sleep, asyncio.sleep; nginx:      */
/* ngx.sleep; cr_wait: cr_sleep_ns), nothing more.                           */

/* The place of a waiter that holds none in its process's line. */
#define CR_NO_TURN INT64_MIN

typedef enum cr_wait_action {
    CR_WAIT_GO = 0,      /* admitted now: start */
    CR_WAIT_SLEEP = 1,   /* not yet: sleep, then take the next step */
    CR_WAIT_REFUSED = 2, /* never (a cost that can never fit): nothing spent */
    CR_WAIT_TIMEOUT = 3  /* not within the timeout: nothing spent */
} cr_wait_action;

/* A wait under way. `deadline_ns` is on the clock of the `now_ns` its caller
 * passes (CLOCK_MONOTONIC: a timeout is elapsed time), CR_NEVER for none;
 * `turn_ns` the waiter's place in its process's line, on the store's clock
 * (CR_NO_TURN: none). */
typedef struct cr_wait_plan {
    int64_t cost;
    int64_t deadline_ns;
    int64_t turn_ns;
} cr_wait_plan;

/* Pure: a wait for `cost` units begun at `now_ns`, for at most `timeout_ns`
 * (>= 0, or CR_NEVER: any). CR_E_TIMEOUT for a negative timeout, CR_E_COST
 * for a negative cost. */
cr_status cr_wait_begin(cr_wait_plan *plan, int64_t cost, int64_t timeout_ns, int64_t now_ns);

/* Pure: what a waiter refused at `now_ns` does, when the units would fit
 * `wait_ns` later (CR_NEVER: never): CR_WAIT_REFUSED for never,
 * CR_WAIT_TIMEOUT when that is past the deadline, else CR_WAIT_SLEEP for
 * *sleep_ns = wait_ns. The rule of every store, in the core or not (Python
 * waits on a store outside the core, retried at its retry_after, by it). */
cr_wait_action cr_wait_answer(const cr_wait_plan *plan, int64_t now_ns, int64_t wait_ns,
                              int64_t *sleep_ns);

/*
 * The next step of `plan` on `item` (a limiter, or a keyed table and a key,
 * as for cr_check_all), non-blocking: `now_ns` on the deadline's clock,
 * `store_now_ns` on the store's (CR_CLOCK: read it). Units are admitted at
 * the instant of a step, by the store, or not at all: a start is decided at
 * its real instant, so that starts keep the limit's spacing however late a
 * sleeper wakes (re-anchoring: docs/design/waiting.md, "Real starts"), and a
 * block put on the limit meanwhile (a provider's 429) holds every waiter.
 *   CR_WAIT_GO: admitted now; plan->turn_ns is CR_NO_TURN.
 *   CR_WAIT_SLEEP: sleep *sleep_ns, then step again. A first step that finds
 *     waiters of this process ahead of it, or that the store refuses, takes
 *     the turn after the line's last (cr_line_join), first come, first
 *     served; a waiter the store refuses at its turn (a late start before
 *     it, another process, a block) keeps its place and sleeps until the
 *     store would admit it.
 *   CR_WAIT_REFUSED, CR_WAIT_TIMEOUT (cr_wait_answer): the place given back;
 *     *refusal (unless NULL) is the store's decision, its retry_after the
 *     wait the units would have taken (CR_NEVER: never).
 * The line is this process's, per key (64 keys of a keyed table at once;
 * past that a key's waiters wait without one); it holds no units. Call it
 * with no lock held. CR_E_ITEMS; the store's statuses.
 */
cr_status cr_wait_step(const cr_item *item, cr_wait_plan *plan, int64_t now_ns,
                       int64_t store_now_ns, cr_wait_action *action, int64_t *sleep_ns,
                       cr_decision *refusal);

/* Gives back the place of a waiter that stops waiting (cancelled,
 * interrupted); nothing for one that holds none. CR_E_ITEMS. */
cr_status cr_wait_leave(const cr_item *item, cr_wait_plan *plan, int64_t store_now_ns);

/*
 * Blocks the calling thread until `cost` units of `item` are admitted: the
 * plan's steps on CLOCK_MONOTONIC, each sleep slept with cr_sleep_ns (Lua's
 * wait). Gives up, nothing spent, when they cannot be had within
 * `timeout_ns` (>= 0, or CR_NEVER: any) of the call, or ever: *admitted
 * false and, unless `refusal` is NULL, the decision that said so; at once
 * when that is known at once. *slept_ns: the time slept. Call it with no
 * lock held. CR_E_TIMEOUT for a negative timeout; CR_E_ITEMS.
 */
cr_status cr_wait(const cr_item *item, int64_t cost, int64_t timeout_ns, bool *admitted,
                  int64_t *slept_ns, cr_decision *refusal);

/* The line's rule, pure: a waiter of `cost` units that joins a line whose
 * tail is `tail_ns`, for units the store would admit at `ready_ns`, takes
 * its turn at max(ready_ns, tail_ns) (*turn_ns); the returned tail is the
 * turn plus cost * T (at most CR_NEVER). */
int64_t cr_line_join(const cr_limit *limit, int64_t tail_ns, int64_t ready_ns, int64_t cost,
                     int64_t *turn_ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_STORES_H */
