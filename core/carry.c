/* Live change: the state of a key carried from one limit to another
 * (docs/design.md §4). Integer only, rare (once per key per change): clarity
 * over speed. */
#include "carry.h"
#include "decide.h"

/* The same state words mean the same units (max_debt aside: it bounds what a
 * charge may add, not what a state holds). */
static bool same_units(const cr_limit *a, const cr_limit *b)
{
    return a->algorithm == b->algorithm && a->emission_ns == b->emission_ns &&
           a->tolerance_ns == b->tolerance_ns && a->burst == b->burst && a->zone == b->zone &&
           a->period.unit == b->period.unit && a->period.count == b->period.count;
}

bool cr_limit_same(const cr_limit *a, const cr_limit *b)
{
    return same_units(a, b) && a->max_debt == b->max_debt;
}

cr_status cr_limit_reconfigurable(const cr_limit *from, const cr_limit *to)
{
    return from->algorithm == to->algorithm ? CR_OK : CR_E_RECONFIGURE_ALGORITHM;
}

/* TAT' = now + ceil((TAT - now) * T_to / T_from): exact in 128 bits, since
 * (TAT - now) < 2^63 and T_to <= 2^62. */
static int64_t gcra_carry(const cr_limit *from, const cr_limit *to, int64_t tat, int64_t now_ns)
{
    if (tat <= now_ns)
        return tat; /* idle under every limit */
    const cr_u128 scaled = (cr_u128)(uint64_t)(tat - now_ns) * (uint64_t)to->emission_ns;
    const uint64_t t_from = (uint64_t)from->emission_ns;
    cr_u128 span = scaled / t_from + (scaled % t_from != 0);
    if (span > (cr_u128)CR_HORIZON_NS)
        span = CR_HORIZON_NS; /* now < 2^62: the sum stays below 2^63 */
    return now_ns + (int64_t)span;
}

static int64_t min_count(int64_t count, int64_t rate) { return count < rate ? count : rate; }

/* The counts go to the new window holding `now`, or the key's own later
 * window (the clock stepped back), re-aligned; a count above the new rate is
 * a full window. Every start is below 2^62 + 2^60, every window at most 2^60:
 * no sum reaches 2^63. */
static int64_t fixed_carry(const cr_limit *from, const cr_limit *to, int64_t state, int64_t now_ns)
{
    const cr_fixed_state s = cr_fixed_read(from, state, now_ns);
    if (s.count == 0)
        return 0;
    const int64_t start = s.end - from->tolerance_ns;
    const int64_t anchor = start > now_ns ? start : now_ns;
    const int64_t end = (cr_window_index(to, anchor) + 1) * to->tolerance_ns;
    return end + min_count(s.count, to->burst);
}

static int64_t sliding_carry(const cr_limit *from, const cr_limit *to, int64_t state,
                             int64_t now_ns)
{
    cr_sliding_state s = cr_sliding_read(from, state, now_ns);
    if (s.prev == 0 && s.curr == 0)
        return 0;
    const int64_t anchor = s.start > now_ns ? s.start : now_ns;
    const int64_t window = to->tolerance_ns, rate = to->burst;
    const int64_t start = cr_window_index(to, anchor) * window;
    s.base = start + 2 * window;
    s.curr = min_count(s.curr, rate);
    if (s.prev > rate) {
        /* the previous count's excess weighs on, for the rest of the window, in
         * the current count (rounded up): never less than the counts weighed */
        const int64_t elapsed = now_ns > start ? now_ns - start : 0;
        const cr_u128 weight = (cr_u128)(uint64_t)(s.prev - rate) * (uint64_t)(window - elapsed);
        const int64_t excess = (int64_t)((weight + (uint64_t)window - 1) / (uint64_t)window);
        s.curr = min_count(s.curr + excess, rate);
        s.prev = rate;
    }
    return cr_sliding_pack(to, &s);
}

/* The count goes to the new limit's period holding now (another zone or
 * period: another calendar), up to its amount. */
static int64_t calendar_carry(const cr_limit *from, const cr_limit *to, int64_t state,
                              int64_t now_ns)
{
    const cr_fixed_state s = cr_calendar_read(from, state, now_ns);
    if (s.count == 0)
        return 0;
    int64_t start, end;
    cr_calendar_period(to, now_ns, &start, &end);
    return end + min_count(s.count, to->burst);
}

int64_t cr_carry(const cr_limit *from, const cr_limit *to, int64_t state, int64_t now_ns)
{
    if (same_units(from, to))
        return state; /* a debt carries whole: max_debt bounds only later charges */
    switch (from->algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
        return fixed_carry(from, to, state, now_ns);
    case CR_ALGORITHM_SLIDING_WINDOW:
        return sliding_carry(from, to, state, now_ns);
    case CR_ALGORITHM_CALENDAR:
        return calendar_carry(from, to, state, now_ns);
    default:
        return gcra_carry(from, to, state, now_ns);
    }
}

/* Everything used at now_ns: no unit admissible now (gcra: TAT = now + tau;
 * windows: the window holding now full). */
int64_t cr_full(const cr_limit *limit, int64_t now_ns)
{
    switch (limit->algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
        return (cr_window_index(limit, now_ns) + 1) * limit->tolerance_ns + limit->burst;
    case CR_ALGORITHM_SLIDING_WINDOW:
        return (cr_window_index(limit, now_ns) + 2) * limit->tolerance_ns + limit->burst;
    case CR_ALGORITHM_CALENDAR: {
        int64_t start, end;
        cr_calendar_period(limit, now_ns, &start, &end);
        return end + limit->burst;
    }
    default:
        return now_ns + limit->tolerance_ns;
    }
}
