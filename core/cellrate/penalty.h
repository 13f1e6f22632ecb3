/*
 * cellrate/penalty.h: the penalty box (docs/design.md §15): after `after`
 * refusals of one key within a period, the key is refused for a ban that
 * may grow on repeat offences up to a cap.
 *
 * A part of cellrate.h (include <cellrate.h>). Every function here is pure
 * and thread-safe: the caller keeps the state and passes `now`.
 */
#ifndef CELLRATE_PENALTY_H
#define CELLRATE_PENALTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* A validated penalty. A plain value. */
typedef struct cr_penalty {
    int64_t after;      /* refusals that bring a ban, >= 1 ... */
    int64_t within_ns;  /* ... within this span (the `after` rate's period) */
    int64_t strike_ns;  /* within_ns / after, rounded up: the strikes' GCRA interval */
    int64_t ban_ns;     /* the first ban, >= 1 ns */
    int64_t max_ban_ns; /* the longest ban, >= ban_ns (== ban_ns: bans never grow) */
} cr_penalty;

/* Builds a penalty: `after` a rate string of a whole number of refusals per
 * period ("5/minute": CR_E_PENALTY_AFTER otherwise), `ban_s` seconds > 0
 * (CR_E_PENALTY_BAN), `max_ban_s` with has_max_ban: seconds >= ban_s
 * (CR_E_PENALTY_MAX_BAN); absent, the ban never grows. Durations below the
 * horizon once rounded to ns. */
cr_status cr_penalty_init(cr_penalty *penalty, const char *after, size_t after_len, double ban_s,
                          double max_ban_s, bool has_max_ban);

/* One key's penalty state; all zero: a key never refused. */
typedef struct cr_penalty_state {
    int64_t strikes; /* the refusals' TAT (a GCRA of `after` per `within`) */
    int64_t ban_end; /* the end of the current or last ban, 0: none yet */
    int64_t level;   /* the last ban was ban_ns << level (capped at max_ban_ns) */
} cr_penalty_state;

/*
 * A refusal of the key at `now_ns` (its decision was a turn-away): during a
 * ban it counts nothing; otherwise it is a strike, and the strike that makes
 * `after` within `within_ns` starts a ban (and forgives the strikes). A ban
 * that starts before the last one ended + max_ban_ns is a repeat offence:
 * twice the last one, up to max_ban_ns; otherwise it is ban_ns again.
 * Returns the ban's end when the key is banned at now_ns (*started: this
 * refusal started it), else 0.
 */
int64_t cr_penalty_refused(const cr_penalty *penalty, cr_penalty_state *state, int64_t now_ns,
                           bool *started);

/* Whether a state still matters at now_ns: false means the same as a key
 * never refused (a box may forget it). */
bool cr_penalty_state_live(const cr_penalty *penalty, const cr_penalty_state *state,
                           int64_t now_ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
