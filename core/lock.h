/*
 * The locks of the shared tables and regions (core/lock.c), and the
 * liveness of the processes that hold them. Not part of the public API.
 */
#ifndef CELLRATE_LOCK_H
#define CELLRATE_LOCK_H

#include "cellrate/status.h"

#include <stdatomic.h>

/* A stripe lock of the keyed table: one word, 0 when free, safe in a shared
 * region whatever its content (see lock.c). */
typedef _Atomic uint64_t cr_lock;

/* Takes `lock`, waiting for its holder; takes it over from a holder that has
 * died or from a damaged word. CR_E_SHARED_LOCK when a living holder keeps it
 * past cr_lock_timeout_ns: the wait is bounded. */
cr_status cr_lock_acquire(cr_lock *lock);
void cr_lock_release(cr_lock *lock);
/* This process's id (kept; forgotten in a fork child). */
uint32_t cr_own_pid(void);
/* cr_own_pid's kept id, for a path that must not call (the counters' hot
 * path reads it inline): 0 until cr_own_pid first runs in the process
 * (again in a fork child, which then takes the slow path once). */
extern __attribute__((visibility("hidden"))) _Atomic uint32_t cr_own_pid_cache;
/* Whether process `pid` runs (kill(pid, 0), and /proc for a zombie): the
 * liveness a lock's and a holding's holder is judged by. */
bool cr_process_alive(uint32_t pid);
/* The bound on a wait, in ns (1 s); tests shorten it. */
extern int64_t cr_lock_timeout_ns;

#endif
