/*
 * cellrate/concurrency.h: concurrency limits, units held at once
 * (docs/design.md §15).
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_CONCURRENCY_H
#define CELLRATE_CONCURRENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

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

/* What the limit did (cellrate/stats.h, cr_gauge_stats). */
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

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_CONCURRENCY_H */
