/* The GCRA decision (DESIGN §1), pure and saturating. */
#include "cellrate.h"

/* floor(a / b) for b > 0; C division truncates towards zero. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t cr_decide(const cr_limit *limit, int64_t tat, int64_t now_ns, int64_t cost,
                  cr_decision *out)
{
    const int64_t T = limit->emission_ns;
    const int64_t tau = limit->tolerance_ns;
    const int64_t base = tat > now_ns ? tat : now_ns;

    out->limit = limit->burst;
    /* base >= now_ns and tau >= 0, so now_ns - (base - tau) <= tau: no overflow. */
    const int64_t room = floor_div(now_ns - (base - tau), T);
    const int64_t room_left = room > 0 ? room : 0;

    if (cost == 0) { /* a probe: always admitted, nothing to store */
        out->allowed = true;
        out->remaining = room_left;
        out->retry_after_ns = 0;
        out->reset_after_ns = base - now_ns;
        return tat;
    }

    int64_t increment;
    if (__builtin_mul_overflow(cost, T, &increment) || increment > tau) {
        out->allowed = false; /* unfittable: no wait would ever admit it */
        out->remaining = room_left;
        out->retry_after_ns = CR_NEVER;
        out->reset_after_ns = base - now_ns;
        return tat;
    }

    int64_t new_tat;
    if (__builtin_add_overflow(base, increment, &new_tat))
        new_tat = INT64_MAX;
    const int64_t allow_at = new_tat - tau; /* both non-negative: cannot overflow */

    if (now_ns >= allow_at) {
        out->allowed = true;
        out->remaining = (now_ns - allow_at) / T; /* 0 <= now_ns - allow_at <= tau */
        out->retry_after_ns = 0;
        out->reset_after_ns = new_tat - now_ns;
        return new_tat;
    }
    out->allowed = false;
    out->remaining = room_left;
    out->retry_after_ns = allow_at - now_ns;
    out->reset_after_ns = base - now_ns;
    return tat;
}
