/* Shared regions across processes: exact admission counts, racing creators,
 * every refusal, permissions, reboot, fork, and a SIGKILL storm. */
#include "cellrate.h"
#include "siphash.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ThreadSanitizer emulates 16-byte atomics with a lock of its own process,
 * so under it the cross-process counts mean nothing (and it cannot watch
 * other processes anyway): those tests run in the plain and ASan builds. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static int passed, failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            passed++;                                                                \
        } else {                                                                     \
            failed++;                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

static char dir[64];

static const char *region_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static cr_limit make_limit(double rate, int64_t burst)
{
    cr_limit limit;
    cr_limit_args args = {.rate = rate, .has_burst = true, .burst = burst};
    if (cr_limit_init(&limit, &args) != CR_OK)
        abort();
    return limit;
}

/* Counters every child can bump: a shared anonymous mapping. */
static _Atomic long *shared_counters(size_t n)
{
    void *p = mmap(NULL, n * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                   0);
    if (p == MAP_FAILED)
        abort();
    memset(p, 0, n * sizeof(long));
    return p;
}

static int wait_all(int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    return bad;
}

/* Children spin on *go so they start at one moment. */
static void wait_for_go(_Atomic long *go)
{
    while (!*go)
        ;
}

static void test_frozen_instant_exact(void)
{
    const int procs = 4;
    const int64_t burst = 25, now = 7000000000;
    cr_limit limit = make_limit(10, burst);
    _Atomic long *c = shared_counters(4);
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            cr_limiter *lim;
            cr_keyed *keyed;
            if (cr_limiter_open(&lim, &limit, region_path("one"), 0600, CR_CHANGE_APPLY) != CR_OK ||
                cr_keyed_open(&keyed, &limit, 64, region_path("many"), 0600, CR_CHANGE_APPLY) !=
                    CR_OK)
                _exit(1);
            c[2]++;
            wait_for_go(&c[3]);
            for (int i = 0; i < 2000; i++) {
                cr_decision d;
                cr_limiter_check(lim, now, 1, true, &d);
                c[0] += d.allowed;
                cr_keyed_check(keyed, "user-1", 6, now, 1, true, &d);
                c[1] += d.allowed;
            }
            cr_limiter_free(lim);
            cr_keyed_free(keyed);
            _exit(0);
        }
    }
    while (c[2] < procs)
        ;
    c[3] = 1;
    CHECK(wait_all(procs) == 0);
    CHECK(c[0] == burst);
    CHECK(c[1] == burst);
}

static void test_racing_creators(void)
{
    const int procs = 8;
    const int64_t burst = 10, now = 5000000000;
    cr_limit limit = make_limit(1, burst);
    _Atomic long *c = shared_counters(4);
    unlink(region_path("race"));
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            c[2]++;
            wait_for_go(&c[3]);
            cr_keyed *keyed;
            if (cr_keyed_open(&keyed, &limit, 1000, region_path("race"), 0600, CR_CHANGE_APPLY) !=
                CR_OK)
                _exit(1);
            for (int i = 0; i < 100; i++) {
                cr_decision d;
                cr_keyed_check(keyed, "k", 1, now, 1, true, &d);
                c[0] += d.allowed;
            }
            cr_keyed_free(keyed);
            _exit(0);
        }
    }
    while (c[2] < procs)
        ;
    c[3] = 1;
    CHECK(wait_all(procs) == 0);
    CHECK(c[0] == burst); /* one region, not several */
    struct stat st;
    CHECK(stat(region_path("race"), &st) == 0 && (st.st_mode & 0777) == 0600);
}

/* Writes `len` bytes at `offset` of a file. */
static void patch(const char *path, off_t offset, const void *bytes, size_t len)
{
    int fd = open(path, O_RDWR);
    if (fd < 0 || pwrite(fd, bytes, len, offset) != (ssize_t)len)
        abort();
    close(fd);
}

/* The header's checksummed identity is its first IDENTITY_SIZE bytes, the
 * checksum follows, then the boot id (outside the checksum); the stripe
 * locks start at LOCKS_OFFSET. */
enum { IDENTITY_SIZE = 80, VERSION_OFFSET = 8, BOOT_OFFSET = 88, LOCKS_OFFSET = 320 };

static void fix_checksum(const char *path)
{
    unsigned char identity[IDENTITY_SIZE];
    int fd = open(path, O_RDWR);
    if (fd < 0 || pread(fd, identity, sizeof identity, 0) != (ssize_t)sizeof identity)
        abort();
    static const uint64_t zero_key[2] = {0, 0};
    uint64_t sum = cr_siphash13(zero_key, identity, sizeof identity);
    if (pwrite(fd, &sum, sizeof sum, IDENTITY_SIZE) != (ssize_t)sizeof sum)
        abort();
    close(fd);
}

static cr_status open_keyed_then(const char *path, double rate, int64_t burst, int64_t capacity,
                                 cr_on_change on_change)
{
    cr_limit limit = make_limit(rate, burst);
    cr_keyed *keyed = NULL;
    cr_status status = cr_keyed_open(&keyed, &limit, capacity, path, 0600, on_change);
    cr_keyed_free(keyed);
    return status;
}

static cr_status open_keyed(const char *path, double rate, int64_t burst, int64_t capacity)
{
    return open_keyed_then(path, rate, burst, capacity, CR_CHANGE_REFUSE);
}

static void test_refusals(void)
{
    const char *path = region_path("refuse");
    unlink(path);
    CHECK(open_keyed(path, 10, 5, 100) == CR_OK);
    CHECK(open_keyed(path, 10, 5, 100) == CR_OK); /* reopen */
    CHECK(open_keyed(path, 20, 5, 100) == CR_E_SHARED_RATE);
    CHECK(open_keyed(path, 10, 6, 100) == CR_E_SHARED_BURST);
    CHECK(open_keyed(path, 10, 5, 101) == CR_E_SHARED_CAPACITY);
    cr_limit limit = make_limit(10, 5);
    cr_limiter *lim = NULL;
    CHECK(cr_limiter_open(&lim, &limit, path, 0600, CR_CHANGE_APPLY) == CR_E_SHARED_KIND);
    CHECK(open_keyed(path, 600.0 / 60.0, 5, 100) == CR_OK); /* same T: same limit */

    uint32_t version = 99;
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 2; /* the layout before slots carried a generation tag (docs/design.md §4) */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 3; /* the layout before a region kept its limit's changes */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 4; /* the layout before a region kept its counters */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 5; /* the layout before a record kept max_debt and counters units_refunded */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 6; /* the layout before the identity held the priority classes */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 7; /* the layout before a keyed slot held its key's plan */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 8; /* the layout before a region kept a penalty box */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 9; /* the layout before a keyed region held its plan table */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 10; /* the layout before a calendar region held its zones */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 11; /* the layout before the counters counted by plan and class */
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_VERSION);
    version = 12;
    patch(path, VERSION_OFFSET, &version, sizeof version);
    CHECK(open_keyed(path, 10, 5, 100) == CR_OK);

    int64_t capacity = 100000;
    patch(path, 40, &capacity, sizeof capacity); /* capacity, checksum not fixed */
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_CORRUPT);

    unlink(path);
    CHECK(open_keyed(path, 10, 5, 100) == CR_OK);
    struct stat full;
    CHECK(stat(path, &full) == 0 && truncate(path, full.st_size - 64) == 0);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_SHORT);
    CHECK(truncate(path, 10) == 0);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_SHORT);

    unlink(path);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    char junk[8192];
    memset(junk, 'x', sizeof junk);
    CHECK(fd >= 0 && write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
    close(fd);
    CHECK(open_keyed(path, 10, 5, 100) == CR_E_SHARED_FOREIGN);
    unlink(path);

    CHECK(cr_keyed_open(NULL, &limit, 10, path, 01000, CR_CHANGE_APPLY) == CR_E_SHARED_MODE);
    CHECK(cr_keyed_open(NULL, &limit, 10, path, -1, CR_CHANGE_APPLY) == CR_E_SHARED_MODE);
    CHECK(cr_keyed_open(NULL, &limit, 0, path, 0600, CR_CHANGE_APPLY) == CR_E_CAPACITY);
    CHECK(cr_keyed_open(NULL, &limit, 10, path, 0600, (cr_on_change)2) == CR_E_ON_CHANGE);
    CHECK(cr_limiter_open(NULL, &limit, path, 0600, (cr_on_change)-1) == CR_E_ON_CHANGE);
    CHECK(open_keyed("/nonexistent-dir/x", 10, 5, 100) == CR_E_SHARED_IO);
}

static void test_permissions(void)
{
    const char *path = region_path("perm");
    unlink(path);
    cr_limit limit = make_limit(10, 5);
    cr_limiter *lim;
    CHECK(cr_limiter_open(&lim, &limit, path, 0640, CR_CHANGE_APPLY) == CR_OK);
    cr_limiter_free(lim);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);

    /* Another user may not open it (meaningful only when we can become one). */
    if (geteuid() == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(2);
            cr_limiter *other = NULL;
            cr_status status = cr_limiter_open(&other, &limit, path, 0600, CR_CHANGE_APPLY);
            _exit(status == CR_E_SHARED_ACCESS ? 0 : 1);
        }
        int wst;
        waitpid(pid, &wst, 0);
        CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    }
}

static void test_reboot_resets(void)
{
    const char *path = region_path("boot");
    unlink(path);
    cr_limit limit = make_limit(1, 1);
    cr_keyed *keyed;
    cr_decision d;
    CHECK(cr_keyed_open(&keyed, &limit, 10, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    cr_keyed_check(keyed, "k", 1, 1000 * 1000000000LL, 1, true, &d); /* TAT far ahead */
    CHECK(d.allowed);
    cr_keyed_free(keyed);

    char other_boot[48] = "00000000-0000-0000-0000-000000000000\n";
    patch(path, BOOT_OFFSET, other_boot, sizeof other_boot);
    fix_checksum(path);
    CHECK(cr_keyed_open(&keyed, &limit, 10, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_keyed_len(keyed) == 0);
    cr_keyed_check(keyed, "k", 1, 1000000000LL, 1, true, &d); /* an early time of a new boot */
    CHECK(d.allowed);
    cr_keyed_free(keyed);
}

static void test_fork_inherits(void)
{
    const char *path = region_path("fork");
    unlink(path);
    cr_limit limit = make_limit(1, 3);
    cr_keyed *keyed;
    CHECK(cr_keyed_open(&keyed, &limit, 10, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    _Atomic long *c = shared_counters(1);
    for (int p = 0; p < 3; p++) {
        if (fork() == 0) {
            cr_decision d;
            for (int i = 0; i < 5; i++) {
                cr_keyed_check(keyed, "pre-fork", 8, 9000000000LL, 1, true, &d);
                c[0] += d.allowed;
            }
            _exit(0);
        }
    }
    CHECK(wait_all(3) == 0);
    CHECK(c[0] == 3);
    cr_keyed_free(keyed);
}

/* Workers on a virtual clock (a shared counter) are killed at random moments
 * and replaced; every admission is counted per key. For each key, n
 * admissions need n*T <= (max_now - min_now) + tau, so n <= burst + span/T. */
enum { STORM_KEYS = 300, STORM_WORKERS = 8, STORM_OPS = 300000, STORM_KILLS = 60 };

static void storm_worker(cr_limit limit, _Atomic long *c, unsigned seed)
{
    cr_keyed *keyed, *flood;
    if (cr_keyed_open(&keyed, &limit, 4 * STORM_KEYS, region_path("storm"), 0600,
                      CR_CHANGE_APPLY) != CR_OK ||
        cr_keyed_open(&flood, &limit, 64, region_path("flood"), 0600, CR_CHANGE_APPLY) != CR_OK)
        _exit(1);
    _Atomic long *clock_ns = &c[0], *ops = &c[1], *stop = &c[2], *admitted = &c[3];
    while (!*stop) {
        (*ops)++;
        seed = seed * 1103515245u + 12345u;
        int key = (int)((seed >> 8) % STORM_KEYS);
        char name[16];
        int len = snprintf(name, sizeof name, "key%d", key);
        int64_t now = 1000000 + (*clock_ns += 1000);
        cr_decision d;
        if ((seed >> 4) % 4 == 0) { /* new keys: slot claims and evictions, under stripe locks */
            char fresh[16];
            int fresh_len = snprintf(fresh, sizeof fresh, "f%u", seed);
            cr_keyed_check(flood, fresh, (size_t)fresh_len, now, 1, true, &d);
        }
        if ((seed >> 4) % 16 == 1) {
            cr_keyed_check(keyed, name, (size_t)len, now, 0, false, &d);
            continue;
        }
        cr_keyed_check(keyed, name, (size_t)len, now, 1, true, &d);
        if (d.allowed)
            admitted[key]++;
    }
    cr_keyed_free(keyed);
    cr_keyed_free(flood);
    _exit(0);
}

/* Admits 2000 keys never seen, which takes every stripe lock of a small
 * table: a lock left held would hang here, so an alarm ends the test. */
static int admits_new_keys(cr_keyed *keyed, int64_t now)
{
    int admitted = 0;
    alarm(20);
    for (int i = 0; i < 2000; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "new%d", i);
        cr_decision d;
        cr_keyed_check(keyed, name, (size_t)len, now, 1, true, &d);
        admitted += d.allowed;
    }
    alarm(0);
    return admitted;
}

static void test_sigkill_storm(void)
{
    unlink(region_path("storm"));
    unlink(region_path("flood"));
    cr_limit limit = make_limit(1000, 4); /* T = 1 ms, virtual time 1 us per op */
    _Atomic long *c = shared_counters(3 + STORM_KEYS);
    pid_t workers[STORM_WORKERS];
    unsigned seed = 12345;
    for (int w = 0; w < STORM_WORKERS; w++) {
        if ((workers[w] = fork()) == 0)
            storm_worker(limit, c, seed + (unsigned)w * 7919u);
    }
    int kills = 0;
    struct timespec pause = {0, 200000};
    while (c[1] < STORM_OPS || kills < STORM_KILLS) {
        nanosleep(&pause, NULL);
        seed = seed * 1103515245u + 12345u;
        int w = (int)((seed >> 8) % STORM_WORKERS);
        if (kill(workers[w], SIGKILL) == 0) {
            waitpid(workers[w], NULL, 0);
            kills++;
            if ((workers[w] = fork()) == 0)
                storm_worker(limit, c, seed);
        }
    }
    c[2] = 1;
    for (int w = 0; w < STORM_WORKERS; w++)
        waitpid(workers[w], NULL, 0);

    long span = c[0];
    long bound = limit.burst + span / limit.emission_ns;
    long total = 0, worst = 0;
    for (int k = 0; k < STORM_KEYS; k++) {
        long n = c[3 + k];
        total += n;
        if (n > worst)
            worst = n;
    }
    printf("sigkill storm: %d kills, %ld ops, %ld admitted, most for one key %ld (bound %ld)\n",
           kills, (long)c[1], total, worst, bound);
    CHECK(kills >= STORM_KILLS && c[1] >= STORM_OPS);
    CHECK(worst <= bound);
    CHECK(total > STORM_KEYS * (bound / 2)); /* it did admit: not everything was refused */

    /* The regions still open, and every stripe lock can still be taken. */
    cr_keyed *keyed;
    CHECK(cr_keyed_open(&keyed, &limit, 4 * STORM_KEYS, region_path("storm"), 0600,
                        CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_keyed_len(keyed) <= (size_t)(4 * STORM_KEYS * 2));
    CHECK(admits_new_keys(keyed, 1000000 + span + 1000000000LL) == 2000);
    cr_keyed_free(keyed);

    cr_keyed *flood;
    CHECK(cr_keyed_open(&flood, &limit, 64, region_path("flood"), 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(admits_new_keys(flood, 1000000 + span + 1000000000LL) == 2000);
    printf("sigkill storm: flood region evicted %llu live keys to make room\n",
           (unsigned long long)cr_keyed_evictions(flood));
    cr_keyed_free(flood);
}

/* Opening with another limit changes the region's, for every store open on
 * it; refusing changes nothing (docs/design.md §4). */
static void test_open_changes_the_limit(void)
{
    const char *path = region_path("opened-change");
    unlink(path);
    cr_limit ten = make_limit(10, 10), hundred = make_limit(100, 20);
    cr_keyed *first, *second, *third;
    cr_decision d;
    CHECK(cr_keyed_open(&first, &ten, 100, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_keyed_replaced(first) == NULL);
    for (int i = 0; i < 6; i++)
        cr_keyed_check(first, "k", 1, CR_CLOCK, 1, true, &d);
    CHECK(d.allowed && d.remaining == 4);
    CHECK(open_keyed_then(path, 100, 20, 100, CR_CHANGE_REFUSE) == CR_E_SHARED_RATE);
    CHECK(open_keyed_then(path, 10, 11, 100, CR_CHANGE_REFUSE) == CR_E_SHARED_BURST);
    CHECK(cr_keyed_open(&second, &hundred, 100, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    const cr_limit *replaced = cr_keyed_replaced(second);
    CHECK(replaced && replaced->emission_ns == ten.emission_ns && replaced->burst == 10);
    /* the first store follows from its next decision: 6 of 20 used (less
     * the few nanoseconds since), this one more */
    CHECK(cr_keyed_check(first, "k", 1, CR_CLOCK, 1, true, &d) == CR_OK);
    CHECK(d.allowed && d.limit == 20 && d.remaining == 13);
    CHECK(cr_keyed_limit(first)->burst == 20);
    CHECK(cr_keyed_check(second, "k", 1, CR_CLOCK, 1, false, &d) == CR_OK);
    CHECK(d.remaining == 12);
    /* the first store's own limit is no longer the region's: reopening with
     * it is a change again */
    CHECK(cr_keyed_open(&third, &hundred, 100, path, 0600, CR_CHANGE_REFUSE) == CR_OK);
    CHECK(cr_keyed_replaced(third) == NULL);
    cr_keyed_free(first);
    cr_keyed_free(second);
    cr_keyed_free(third);

    /* the same for a Limiter: the second reference vector of a live change (docs/design.md §4) at t0 */
    unlink(path);
    const int64_t t0 = 50 * 1000000000LL;
    cr_limit fast = make_limit(100, 100), slow = make_limit(10, 10);
    cr_limiter *lim, *other;
    CHECK(cr_limiter_open(&lim, &fast, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_limiter_open(&other, &fast, path, 0600, CR_CHANGE_REFUSE) == CR_OK);
    for (int i = 0; i < 80; i++)
        cr_limiter_check(lim, t0, 1, true, &d);
    CHECK(d.allowed && d.remaining == 20);
    CHECK(cr_limiter_reconfigure(other, &slow, t0) == CR_OK);
    CHECK(cr_limiter_check(lim, t0, 1, true, &d) == CR_OK);
    CHECK(!d.allowed && d.limit == 10);
    CHECK(cr_limiter_check(lim, t0 + 7100000000LL - 1, 1, true, &d) == CR_OK && !d.allowed);
    CHECK(cr_limiter_check(lim, t0 + 7100000000LL, 1, true, &d) == CR_OK && d.allowed);
    CHECK(cr_limiter_reconfigure(other, &fast, t0) == CR_OK); /* back: 81 of 100 used */
    CHECK(cr_limiter_check(lim, t0 + 7100000000LL, 1, false, &d) == CR_OK);
    cr_limiter_free(lim);
    cr_limiter_free(other);
    unlink(path);
}

/* max_debt is part of the region's limit: an opener with another changes it
 * (or is refused, naming it), and every handle charges by the region's. */
static void test_max_debt_is_the_regions(void)
{
    const char *path = region_path("max-debt");
    unlink(path);
    const int64_t T = 100000000, now = 7000000000LL;
    cr_limit ten = make_limit(10, 10), deeper = ten;
    cr_limit_args args = {
        .rate = 10, .has_burst = true, .burst = 10, .has_max_debt = true, .max_debt = 100};
    CHECK(cr_limit_init(&deeper, &args) == CR_OK && deeper.max_debt == 100);
    cr_limiter *first, *second;
    cr_decision d;
    CHECK(cr_limiter_open(&first, &ten, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_limiter_charge(first, now, INT64_MAX, &d) == CR_OK);
    CHECK(d.clipped && d.retry_after_ns == 11 * T); /* the default: 10 units of debt */
    CHECK(cr_limiter_open(&second, &deeper, path, 0600, CR_CHANGE_REFUSE) == CR_E_SHARED_MAX_DEBT);
    CHECK(strcmp(cr_status_param(CR_E_SHARED_MAX_DEBT), "shared") == 0);
    CHECK(cr_limiter_open(&second, &deeper, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_limiter_replaced(second) && cr_limiter_replaced(second)->max_debt == 10);
    /* the first handle follows: the debt it left carries whole, then deepens */
    CHECK(cr_limiter_check(first, now, 1, false, &d) == CR_OK && d.retry_after_ns == 11 * T);
    CHECK(cr_limiter_charge(first, now, INT64_MAX, &d) == CR_OK);
    CHECK(d.clipped && d.retry_after_ns == 101 * T);
    CHECK(cr_limiter_limit(first)->max_debt == 100);
    cr_limiter_free(first);
    cr_limiter_free(second);
    unlink(path);
}

/* A key that sleeps through more changes than the region keeps records of
 * is carried by the sweeps, never handed a fresh allowance. */
static void test_sleeping_key_many_changes(void)
{
    const char *path = region_path("sleeper");
    unlink(path);
    const int64_t t0 = 9 * 1000000000LL;
    cr_limit a = make_limit(10, 10), b = make_limit(10, 12);
    cr_keyed *keyed, *changer;
    cr_decision d;
    CHECK(cr_keyed_open(&keyed, &a, 1000, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_keyed_open(&changer, &a, 1000, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    for (int i = 0; i < 6; i++)
        cr_keyed_check(keyed, "sleeper", 7, t0, 1, true, &d);
    for (int c = 0; c < 3 * 256 + 1; c++)
        CHECK(cr_keyed_reconfigure(changer, c % 2 ? &a : &b, t0) == CR_OK);
    /* 769 changes, the last to b: 6 of 12 used */
    CHECK(cr_keyed_check(keyed, "sleeper", 7, t0, 1, false, &d) == CR_OK);
    CHECK(d.limit == 12 && d.remaining == 5);
    cr_keyed_free(keyed);
    cr_keyed_free(changer);
    unlink(path);
}

/* Changes this process never saw: a store that slept through two changes
 * another made carries its keys through both from the region's records. */
static void test_carried_through_unseen_changes(void)
{
    const char *path = region_path("unseen");
    unlink(path);
    const int64_t t0 = 9 * 1000000000LL, t1 = t0 + 300000000, t2 = t1 + 400000000;
    cr_limit l0 = make_limit(10, 10), l1 = make_limit(4, 6), l2 = make_limit(25, 30);
    cr_keyed *sleeper, *changer;
    cr_decision d;
    CHECK(cr_keyed_open(&sleeper, &l0, 100000, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    CHECK(cr_keyed_open(&changer, &l0, 100000, path, 0600, CR_CHANGE_APPLY) == CR_OK);
    char key[16];
    for (int k = 0; k < 50; k++) {
        const int len = snprintf(key, sizeof key, "key-%d", k);
        for (int i = 0; i <= k % 9; i++)
            cr_keyed_check(sleeper, key, (size_t)len, t0, 1, true, &d);
    }
    CHECK(cr_keyed_reconfigure(changer, &l1, t1) == CR_OK);
    CHECK(cr_keyed_reconfigure(changer, &l2, t2) == CR_OK);
    const int64_t t3 = t2 + 100000000;
    int exact = 0;
    for (int k = 0; k < 50; k++) {
        const int len = snprintf(key, sizeof key, "key-%d", k);
        int64_t tat = 0;
        for (int i = 0; i <= k % 9; i++)
            tat = cr_decide(&l0, tat, t0, 1, &d);
        tat = cr_carry(&l1, &l2, cr_carry(&l0, &l1, tat, t1), t2);
        cr_decision want, got;
        cr_decide(&l2, tat, t3, 1, &want);
        CHECK(cr_keyed_check(sleeper, key, (size_t)len, t3, 1, false, &got) == CR_OK);
        exact += got.allowed == want.allowed && got.remaining == want.remaining &&
                 got.retry_after_ns == want.retry_after_ns && got.limit == 30;
    }
    CHECK(exact == 50);
    cr_keyed_free(sleeper);
    cr_keyed_free(changer);
    unlink(path);
}

/* Processes deciding at one instant while another changes the limit: the
 * units used carry, so exactly the old burst, then the new one in all. */
static void test_processes_follow_a_change(bool keyed)
{
    const int procs = 4;
    const int64_t now = 7000000000;
    const char *path = region_path(keyed ? "follow-keyed" : "follow-one");
    unlink(path);
    cr_limit small = make_limit(10, 10), large = make_limit(20, 25);
    _Atomic long *c = shared_counters(8); /* admitted, ready, go, refused, changed */
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            cr_limiter *lim = NULL;
            cr_keyed *table = NULL;
            if ((keyed ? cr_keyed_open(&table, &small, 64, path, 0600, CR_CHANGE_APPLY)
                       : cr_limiter_open(&lim, &small, path, 0600, CR_CHANGE_APPLY)) != CR_OK)
                _exit(1);
            c[1]++;
            wait_for_go(&c[2]);
            for (int phase = 0; phase < 2; phase++) {
                for (int i = 0; i < 1000; i++) {
                    cr_decision d;
                    if ((keyed ? cr_keyed_check(table, "k", 1, now, 1, true, &d)
                               : cr_limiter_check(lim, now, 1, true, &d)) != CR_OK)
                        _exit(2);
                    c[0] += d.allowed;
                }
                c[3]++;
                while (phase == 0 && !c[4])
                    ;
            }
            cr_limiter_free(lim);
            cr_keyed_free(table);
            _exit(0);
        }
    }
    while (c[1] < procs)
        ;
    c[2] = 1;
    while (c[3] < procs)
        ;
    CHECK(c[0] == 10);
    cr_limiter *lim = NULL;
    cr_keyed *table = NULL;
    CHECK((keyed ? cr_keyed_open(&table, &small, 64, path, 0600, CR_CHANGE_REFUSE)
                 : cr_limiter_open(&lim, &small, path, 0600, CR_CHANGE_REFUSE)) == CR_OK);
    CHECK((keyed ? cr_keyed_reconfigure(table, &large, now)
                 : cr_limiter_reconfigure(lim, &large, now)) == CR_OK);
    c[4] = 1;
    CHECK(wait_all(procs) == 0);
    CHECK(c[0] == 25); /* 10 under the old limit, 15 more under the new */
    printf("processes across a change (%s): %ld admitted (10 before, burst 25 after)\n",
           keyed ? "keyed" : "limiter", (long)c[0]);
    cr_limiter_free(lim);
    cr_keyed_free(table);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/cellrate-test-%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        snprintf(dir, sizeof dir, "/tmp/cellrate-test-%d", (int)getpid());
        if (mkdir(dir, 0755) != 0)
            return 2;
    }
    test_refusals();
    test_permissions();
    test_reboot_resets();
    test_open_changes_the_limit();
    test_max_debt_is_the_regions();
    test_sleeping_key_many_changes();
    test_carried_through_unseen_changes();
    if (!UNDER_TSAN) {
        test_processes_follow_a_change(false);
        test_processes_follow_a_change(true);
        test_frozen_instant_exact();
        test_racing_creators();
        test_fork_inherits();
        test_sigkill_storm();
    }

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        failed++;
    printf("test_shared: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
