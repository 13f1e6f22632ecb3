/*
 * A process's waiters in line (docs/design.md §9): per key, the line's tail,
 * the instant from which the next waiter of this process takes its turn.
 *
 * Why a line of the process and not a reservation in the store: a waiter
 * that wakes late (a busy machine, a blocked event loop) must not start
 * closer to the one before it than the limit allows, and a waiter must see a
 * block that a provider's 429 put on the limit after it began to wait. Both
 * need the start to be decided at the real instant, against the store. The
 * line only orders this process's waiters (first come, first served) and
 * spreads their wake-ups one interval apart, so that they do not all wake at
 * one retry_after. Waiting is the slow path: a mutex guards the few slots.
 */
#include "line.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    uint64_t fingerprint; /* the key's; 0: free */
    int64_t tail;         /* the line's tail; a slot whose tail has passed is free */
} line_slot;

struct cr_lines {
    pthread_mutex_t lock;
    _Atomic int64_t latest; /* the latest tail any line has had: none waits once it has passed */
    uint32_t count;
    line_slot slots[];
};

cr_lines *cr_lines_new(uint32_t count)
{
    cr_lines *lines = calloc(1, sizeof *lines + count * sizeof lines->slots[0]);
    if (!lines)
        return NULL;
    pthread_mutex_init(&lines->lock, NULL);
    atomic_init(&lines->latest, 0);
    lines->count = count;
    return lines;
}

void cr_lines_free(cr_lines *lines)
{
    if (!lines)
        return;
    pthread_mutex_destroy(&lines->lock);
    free(lines);
}

bool cr_lines_apply(cr_lines *lines, uint64_t fingerprint, int64_t now_ns, cr_line_apply apply,
                    void *context)
{
    pthread_mutex_lock(&lines->lock);
    line_slot *found = NULL, *free_slot = NULL;
    for (uint32_t i = 0; i < lines->count && !found; i++) {
        line_slot *slot = &lines->slots[i];
        if (slot->fingerprint == fingerprint)
            found = slot;
        else if (!free_slot && (slot->fingerprint == 0 || slot->tail <= now_ns))
            free_slot = slot;
    }
    if (!found && free_slot) {
        found = free_slot;
        found->fingerprint = fingerprint;
        found->tail = 0; /* an empty line: its tail has passed */
    }
    if (found) {
        found->tail = apply(found->tail, context);
        if (found->tail > atomic_load_explicit(&lines->latest, memory_order_relaxed))
            atomic_store_explicit(&lines->latest, found->tail, memory_order_release);
    }
    pthread_mutex_unlock(&lines->lock);
    return found != NULL;
}

int64_t cr_lines_latest(const cr_lines *lines)
{
    return atomic_load_explicit(&((cr_lines *)lines)->latest, memory_order_acquire);
}
