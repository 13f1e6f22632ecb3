/* A GCRA key's books, for the tests that decide on the real clock: the fewest
 * units of cost 1 that the decisions must have admitted, whatever the
 * schedule, from their verdicts and CLOCK_MONOTONIC alone.
 *
 * A key admits one unit per T and keeps nothing for time it lies idle (its
 * TAT behind the clock): a pause of the deciding threads longer than what
 * the key had in hand (a busy machine) forfeits that time for good, so no
 * floor taken from the wall clock alone holds under load. The books balance
 * exactly, for a key fresh at the first decision:
 *
 *     admitted * T = TAT_last - t_first - idle
 *
 * idle being the time the key lay idle between the first decision and the
 * last. Each thread brackets each decision by two CLOCK_MONOTONIC reads. The
 * verdict bounds TAT from below: an admission leaves it at least T past the
 * decision's time, a refusal finds it more than tau - T past. TAT never goes
 * back, so a decision rules idle time out until its bracket's start plus that
 * much; the key may have been idle only where no thread ruled it out. A clock
 * that runs slow decides on times behind the brackets, so its limit admits
 * fewer than the books say. The clock read by the decisions may be a little
 * off CLOCK_MONOTONIC: books_fewest allows 1 ms for it. */
#ifndef CELLRATE_TEST_BOOKS_H
#define CELLRATE_TEST_BOOKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define BOOKS_SPANS 4096 /* a thread's spans kept apart; later ones widen the last */

typedef struct {
    int64_t from, to; /* CLOCK_MONOTONIC, [from, to) */
} books_span;

/* One deciding thread's books: owned by that thread until it is joined. */
typedef struct {
    int64_t since;                     /* the run's start, before any decision */
    int64_t emission_ns, tolerance_ns; /* the limit's T and tau */
    int64_t first_after;               /* the first decision's bracket's end; 0 before it */
    int64_t last_after;                /* the last decision's bracket's end */
    int64_t busy_until;                /* TAT is at least this from the last decision on */
    books_span *idle; /* where the key may have been idle, for all this thread saw */
    int spans;
} books;

static inline void books_add_idle(books *b, int64_t from, int64_t to)
{
    if (b->spans > 0 && (from <= b->idle[b->spans - 1].to || b->spans == BOOKS_SPANS))
        b->idle[b->spans - 1].to = to; /* overlaps the last, or no room: a wider span */
    else
        b->idle[b->spans++] = (books_span){from, to};
}

static inline void books_open(books *b, int64_t since, int64_t emission_ns, int64_t tolerance_ns)
{
    *b = (books){.since = since,
                 .emission_ns = emission_ns,
                 .tolerance_ns = tolerance_ns,
                 .idle = malloc(BOOKS_SPANS * sizeof(books_span))};
    if (b->idle == NULL)
        abort();
}

/* A decision of cost 1 made between `before` and `after`. */
static inline void books_record(books *b, int64_t before, int64_t after, bool allowed)
{
    if (b->first_after == 0) {
        b->first_after = after;
        books_add_idle(b, b->since, after);
    } else if (after > b->busy_until) {
        books_add_idle(b, b->busy_until, after);
    }
    b->last_after = after;
    int64_t busy = before + (allowed ? b->emission_ns : b->tolerance_ns - b->emission_ns);
    if (busy > b->busy_until)
        b->busy_until = busy; /* what an earlier decision ruled out stays so */
}

typedef struct {
    int64_t at;
    int step; /* +1 a span begins, -1 it ends */
} books_edge;

static inline int books_edge_order(const void *a, const void *b)
{
    int64_t x = ((const books_edge *)a)->at, y = ((const books_edge *)b)->at;
    return (x > y) - (x < y);
}

/* The fewest units the decisions of `count` threads on one key admitted
 * (threads that decided nothing rule nothing out); *idle: how long the key
 * may have lain idle. Frees the books' spans. */
static inline int64_t books_fewest(books *threads, int count, int64_t *idle)
{
    int64_t first = INT64_MAX, last = INT64_MIN, tat = INT64_MIN;
    int deciders = 0;
    for (int i = 0; i < count; i++) {
        books *b = &threads[i];
        if (b->first_after == 0)
            continue;
        deciders++;
        first = b->first_after < first ? b->first_after : first;
        last = b->last_after > last ? b->last_after : last;
        tat = b->busy_until > tat ? b->busy_until : tat;
    }
    books_edge *edges = malloc((size_t)count * (BOOKS_SPANS + 1) * 2 * sizeof *edges);
    if (edges == NULL)
        abort();
    size_t edges_count = 0;
    for (int i = 0; i < count; i++) {
        books *b = &threads[i];
        if (b->first_after != 0) {
            if (last > b->busy_until)
                books_add_idle(b, b->busy_until, last); /* after its last decision */
            for (int s = 0; s < b->spans; s++) {
                edges[edges_count++] = (books_edge){b->idle[s].from, 1};
                edges[edges_count++] = (books_edge){b->idle[s].to, -1};
            }
        }
        free(b->idle);
        b->idle = NULL;
    }
    qsort(edges, edges_count, sizeof *edges, books_edge_order);
    *idle = 0;
    int open = 0;
    for (size_t e = 1; e < edges_count; e++) {
        open += edges[e - 1].step; /* the spans open between edge e - 1 and e */
        /* idle before the first decision forfeits nothing */
        int64_t from = edges[e - 1].at > first ? edges[e - 1].at : first;
        if (open == deciders && edges[e].at > from)
            *idle += edges[e].at - from;
    }
    free(edges);
    if (deciders == 0)
        return 0;
    int64_t emission_ns = threads[0].emission_ns;
    return (tat - first - *idle + emission_ns - 1) / emission_ns - 1;
}

#endif
