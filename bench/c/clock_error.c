/*
 * How far the fast clock strays from CLOCK_MONOTONIC, and whether processes
 * see one timeline: the evidence behind the default clock (docs/design.md
 * §2). Not a test: it takes minutes and its figures depend on the machine.
 *
 * Usage: clock_error [SECONDS] [PROCESSES] [BURNERS] [CLOCK]   (default 10 2 2 fast)
 *
 * CLOCK: "fast" (cr_fast_clock_ns, the counter unordered) or "monotonic"
 * (the default clock of a limit: the same line, the counter ordered).
 *
 * PROCESSES processes, forked after the clock's first use, each read in a
 * loop: CLOCK_MONOTONIC, the fast clock, CLOCK_MONOTONIC; the fast reading's
 * distance outside that bracket is its error. Each publishes its readings in
 * a shared mapping; before each of its own it takes another's latest, and a
 * reading earlier than one it has seen is a step back across processes (the
 * counter is read unfenced, so a little is expected: it only makes a
 * decision stricter). BURNERS more processes spin, so that the readers are
 * preempted and migrate between cores, as under load. One line of JSON per
 * reader, then a summary line.
 */
#include "cellrate.h"
#include "fastclock.h"

#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_READERS 8

typedef struct {
    _Alignas(64) _Atomic int64_t published[MAX_READERS];
    struct {
        long reads;
        int64_t worst_ahead, worst_behind; /* of CLOCK_MONOTONIC's bracket */
        long beyond_1us, beyond_10us;
        long back_in_process; /* a reading earlier than the process's last */
        long back_across;     /* earlier than another process's, seen before */
        int64_t worst_back_across;
    } result[MAX_READERS];
} shared;

static int64_t (*clock_read)(void) = cr_fast_clock_ns;

static int64_t monotonic_read(void) { return cr_monotonic_now(); }

static void reader(shared *s, int me, int readers, int64_t seconds)
{
    int64_t stop = cr_clock_ns() + seconds * 1000000000, last = 0;
    int other = (me + 1) % readers;
    long reads = 0, beyond_1us = 0, beyond_10us = 0, back = 0, back_across = 0;
    int64_t ahead = 0, behind = 0, worst_across = 0;
    for (int64_t before = cr_clock_ns(); before < stop; before = cr_clock_ns()) {
        int64_t seen = atomic_load(&s->published[other]);
        int64_t fast = clock_read();
        int64_t after = cr_clock_ns();
        atomic_store(&s->published[me], fast);
        reads++;
        if (fast > after && fast - after > ahead)
            ahead = fast - after;
        if (fast < before && before - fast > behind)
            behind = before - fast;
        int64_t off = fast > after ? fast - after : fast < before ? before - fast : 0;
        beyond_1us += off > 1000;
        beyond_10us += off > 10000;
        back += fast < last;
        last = fast;
        if (readers > 1 && fast < seen) {
            back_across++;
            if (seen - fast > worst_across)
                worst_across = seen - fast;
        }
    }
    s->result[me].reads = reads;
    s->result[me].worst_ahead = ahead;
    s->result[me].worst_behind = behind;
    s->result[me].beyond_1us = beyond_1us;
    s->result[me].beyond_10us = beyond_10us;
    s->result[me].back_in_process = back;
    s->result[me].back_across = back_across;
    s->result[me].worst_back_across = worst_across;
}

int main(int argc, char **argv)
{
    int64_t seconds = argc > 1 ? atoll(argv[1]) : 10;
    int readers = argc > 2 ? atoi(argv[2]) : 2;
    int burners = argc > 3 ? atoi(argv[3]) : 2;
    const char *clock = argc > 4 ? argv[4] : "fast";
    if (strcmp(clock, "monotonic") == 0)
        clock_read = monotonic_read;
    if (seconds < 1 || readers < 1 || readers > MAX_READERS || burners < 0 ||
        (clock_read != monotonic_read && strcmp(clock, "fast") != 0)) {
        fprintf(stderr,
                "usage: clock_error [SECONDS] [PROCESSES 1-%d] [BURNERS] [fast|monotonic]\n",
                MAX_READERS);
        return 2;
    }
    shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return 1;
    pid_t burner[64];
    int nburn = burners < 64 ? burners : 64;
    for (int b = 0; b < nburn; b++) {
        burner[b] = fork();
        if (burner[b] == 0) {
            volatile uint64_t spin = 0;
            for (;;)
                spin++;
        }
    }
    pid_t pid[MAX_READERS];
    for (int r = 0; r < readers; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            reader(s, r, readers, seconds);
            _exit(0);
        }
    }
    for (int r = 0; r < readers; r++)
        waitpid(pid[r], NULL, 0);
    for (int b = 0; b < nburn; b++) {
        kill(burner[b], SIGKILL);
        waitpid(burner[b], NULL, 0);
    }
    int64_t worst = 0, worst_across = 0;
    long reads = 0, back = 0;
    for (int r = 0; r < readers; r++) {
        printf("{\"reader\": %d, \"reads\": %ld, \"worst_ahead_ns\": %" PRId64
               ", \"worst_behind_ns\": %" PRId64 ", \"beyond_1us\": %ld, \"beyond_10us\": %ld, "
               "\"back_in_process\": %ld, \"back_across\": %ld, \"worst_back_across_ns\": %" PRId64
               "}\n",
               r, s->result[r].reads, s->result[r].worst_ahead, s->result[r].worst_behind,
               s->result[r].beyond_1us, s->result[r].beyond_10us, s->result[r].back_in_process,
               s->result[r].back_across, s->result[r].worst_back_across);
        reads += s->result[r].reads;
        back += s->result[r].back_in_process;
        if (s->result[r].worst_ahead > worst)
            worst = s->result[r].worst_ahead;
        if (s->result[r].worst_behind > worst)
            worst = s->result[r].worst_behind;
        if (s->result[r].worst_back_across > worst_across)
            worst_across = s->result[r].worst_back_across;
    }
    printf("{\"summary\": true, \"clock\": \"%s\", \"fast_clock_is_tsc\": %s, \"seconds\": %" PRId64
           ", \"processes\": %d, \"burners\": %d, \"reads\": %ld, \"worst_abs_error_ns\": %" PRId64
           ", \"back_in_process\": %ld, \"worst_back_across_ns\": %" PRId64 "}\n",
           clock, cr_fast_clock_is_tsc() ? "true" : "false", seconds, readers, nburn, reads, worst,
           back, worst_across);
    return 0;
}
