/*
 * The stripe locks of the keyed table: one 64-bit word each, in process
 * memory or in a shared region (docs/design.md §5).
 *
 * A held lock holds its holder's process id, written twice (pid in the high
 * half, its complement in the low half) by one compare-and-swap, so every
 * value the word can take means one thing:
 *   0                  free;
 *   pid : ~pid         held by process `pid` (any of its threads);
 *   anything else      damage (a stray write to the region): nobody holds it.
 * A waiter takes a damaged lock at once, and a lock whose holder has died
 * once it has seen it held unchanged for a while (a process killed inside
 * its few instructions of critical section). A holder that is alive but
 * does not let go (stopped, or frozen in a debugger) makes the wait end, after
 * cr_lock_timeout_ns, in CR_E_SHARED_LOCK: never an unbounded block.
 *
 * Liveness is kill(pid, 0) (and /proc, for a zombie), so the processes
 * sharing a region must see one another's ids: one PID namespace. Nothing in a lock word is a pointer, so
 * no value of it, however damaged, can make a taker touch other memory (a
 * pthread mutex in shared memory holds list pointers and a type field that
 * glibc trusts).
 */
#include "lock.h"
#include "cellrate/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t cr_lock_timeout_ns = 1000000000; /* 1 s */

/* How long a holder's word must stay the same before its liveness is asked:
 * far above a critical section, even a preempted one. */
#define HOLDER_CHECK_NS 1000000 /* 1 ms */

/* getpid() is a system call; the id is kept, and forgotten in a fork child. */
_Atomic uint32_t cr_own_pid_cache; /* 0: not yet read (or forgotten by a fork) */
static pthread_once_t fork_hook_once = PTHREAD_ONCE_INIT;

static void forget_pid(void) { atomic_store_explicit(&cr_own_pid_cache, 0, memory_order_relaxed); }

static void install_fork_hook(void) { pthread_atfork(NULL, NULL, forget_pid); }

uint32_t cr_own_pid(void)
{
    uint32_t pid = atomic_load_explicit(&cr_own_pid_cache, memory_order_relaxed);
    if (pid == 0) {
        pthread_once(&fork_hook_once, install_fork_hook);
        pid = (uint32_t)getpid();
        atomic_store_explicit(&cr_own_pid_cache, pid, memory_order_relaxed);
    }
    return pid;
}

static uint64_t holder_word(uint32_t pid) { return ((uint64_t)pid << 32) | (uint32_t)~pid; }

/* The process a word names, or 0 for a word no holder writes. */
static uint32_t holder_of(uint64_t word)
{
    uint32_t pid = (uint32_t)(word >> 32);
    if ((uint32_t)word != (uint32_t)~pid || pid == 0 || pid > INT32_MAX)
        return 0;
    return pid;
}

/* Whether `pid` runs. A zombie (dead, not yet reaped: common under a PID 1
 * that reaps nothing) still answers kill(), so /proc says which it is. */
bool cr_process_alive(uint32_t pid)
{
    if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
        return false;
    char path[32], stat[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT; /* no /proc: trust kill() */
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0)
        return true;
    stat[n] = '\0';
    const char *end_of_name = strrchr(stat, ')'); /* "pid (name) S ..." */
    return !(end_of_name && end_of_name[1] == ' ' &&
             (end_of_name[2] == 'Z' || end_of_name[2] == 'X'));
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static bool try_take(cr_lock *lock, uint64_t expected, uint64_t mine)
{
    return atomic_compare_exchange_strong_explicit(lock, &expected, mine, memory_order_acquire,
                                                   memory_order_relaxed);
}

cr_status cr_lock_acquire(cr_lock *lock)
{
    const uint64_t mine = holder_word(cr_own_pid());
    if (try_take(lock, 0, mine))
        return CR_OK;
    for (int spin = 0; spin < 100; spin++) {
        cpu_relax();
        uint64_t word = atomic_load_explicit(lock, memory_order_relaxed);
        if ((word == 0 || holder_of(word) == 0) && try_take(lock, word, mine))
            return CR_OK;
    }
    const int64_t start = cr_clock_ns();
    uint64_t watched = 0;
    int64_t watched_since = start;
    long pause_ns = 1000;
    for (int round = 0;; round++) {
        uint64_t word = atomic_load_explicit(lock, memory_order_relaxed);
        int64_t now = cr_clock_ns();
        uint32_t holder = holder_of(word);
        if (word == 0 || holder == 0) { /* free, or damage that nobody holds */
            if (try_take(lock, word, mine))
                return CR_OK;
            continue;
        }
        if (word != watched) {
            watched = word;
            watched_since = now;
        } else if (now - watched_since >= HOLDER_CHECK_NS && !cr_process_alive(holder)) {
            if (try_take(lock, word, mine)) /* its holder died inside */
                return CR_OK;
            continue;
        }
        if (now - start >= cr_lock_timeout_ns)
            return CR_E_SHARED_LOCK;
        if (round < 16) {
            sched_yield();
        } else {
            struct timespec pause = {0, pause_ns};
            nanosleep(&pause, NULL);
            if (pause_ns < 1000000)
                pause_ns *= 2;
        }
    }
}

void cr_lock_release(cr_lock *lock)
{
    /* A compare-and-swap, not a store: a lock taken from us as if we had
     * died (see the PID namespace note above) stays with its new holder. */
    uint64_t mine = holder_word(cr_own_pid());
    atomic_compare_exchange_strong_explicit(lock, &mine, 0, memory_order_release,
                                            memory_order_relaxed);
}
