/* The core under hostile file systems and extreme inputs: a dangling link at
 * the region's path, a full file system, creators and resets killed at any
 * instant, a damaged stripe lock, a living holder that never lets go, names of
 * NAME_MAX characters, and a rate string with 2^31 decimals. Every case that
 * could hang or kill runs in a child under an alarm, so a regression is a
 * failed check, not a stuck or dead test run. */
#include "cellrate.h"
#include "check.h"
#include "lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ThreadSanitizer cannot follow forked children that run threads' code, and
 * the kill loops mean nothing under it: those run in the plain and ASan builds. */
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

enum { LOCKS_OFFSET = 320, BOOT_OFFSET = 88 };

static char dir[64];

static const char *path_in(const char *subdir, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s%s%s/%s", dir, subdir[0] ? "/" : "", subdir, name);
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

/* Runs body() in a child killed after `seconds`; its exit status is body's
 * return value. Returns a description of how the child ended. */
static const char *in_child(int seconds, int (*body)(void), int *exit_code)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* `seconds` of CPU, which a busy machine does not shorten (a wall-clock
         * alarm alone failed a child that ran slowly, not long); ten times as
         * long on the wall for one that hangs without spinning. */
        struct rlimit cpu = {(rlim_t)seconds, (rlim_t)seconds + 1};
        setrlimit(RLIMIT_CPU, &cpu);
        alarm((unsigned)seconds * 10);
        _exit(body());
    }
    int st;
    waitpid(pid, &st, 0);
    *exit_code = -1;
    if (WIFEXITED(st)) {
        *exit_code = WEXITSTATUS(st);
        return "exited";
    }
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        return "hung (killed by the alarm)";
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU)
        return "spun past its CPU time";
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
        return "killed by SIGBUS";
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
        return "killed by SIGSEGV";
    return "killed by a signal";
}

#define CHECK_CHILD(seconds, body, want_code)                                         \
    do {                                                                              \
        int code_;                                                                    \
        const char *how_ = in_child((seconds), (body), &code_);                       \
        CHECK(code_ == (want_code), "%s: child %s with code %d", #body, how_, code_); \
    } while (0)

/* Names in `path` other than those `keep` accepts: temp files left behind. */
static int strays(const char *path, bool (*keep)(const char *name))
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || keep(e->d_name))
            continue;
        fprintf(stderr, "stray file: %s/%s\n", path, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static bool keep_none(const char *name)
{
    (void)name;
    return false;
}

/* ------------------------------------------------------------------------ */
/* 1. A symbolic link to nothing at the path.                                */

static int open_dangling(void)
{
    cr_limit limit = make_limit(10, 10);
    cr_limiter *lim = NULL;
    cr_status status = cr_limiter_open(&lim, &limit, path_in("dangling", "r"), 0600,
                                       CR_CHANGE_APPLY);
    cr_limiter_free(lim);
    return status == CR_E_SHARED_DANGLING ? 0 : 10 + (int)status;
}

static void test_dangling_link(void)
{
    char subdir[128];
    snprintf(subdir, sizeof subdir, "%s/dangling", dir);
    CHECK(mkdir(subdir, 0755) == 0, "mkdir %s", subdir);
    char target[512];
    snprintf(target, sizeof target, "%s", path_in("dangling", "nowhere"));
    CHECK(symlink(target, path_in("dangling", "r")) == 0, "symlink");
    CHECK_CHILD(10, open_dangling, 0);
    CHECK(unlink(path_in("dangling", "r")) == 0, "only the link is there");
    CHECK_EQ_I64(strays(subdir, keep_none), 0, "no temp file after a refused open");
    rmdir(subdir);
}

/* ------------------------------------------------------------------------ */
/* 2. A file system too small for the region.                                */

static char small_fs[128];

static int open_too_big(void)
{
    cr_limit limit = make_limit(10, 10);
    cr_keyed *keyed = NULL;
    char path[256];
    snprintf(path, sizeof path, "%s/r", small_fs);
    cr_status status = cr_keyed_open(&keyed, &limit, 100000, path, 0600, CR_CHANGE_APPLY);
    int saved = errno;
    cr_keyed_free(keyed);
    if (status != CR_E_SHARED_IO)
        return 10 + (int)status;
    return saved == ENOSPC ? 0 : 3;
}

/* A valid region header at the start of a sparse file of the full size,
 * from another boot: opening it resets it, writing every page. */
static int open_sparse_stale(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/sparse", small_fs);
    cr_limit limit = make_limit(10, 10);
    cr_keyed *keyed = NULL;
    cr_status status = cr_keyed_open(&keyed, &limit, 100000, path, 0600, CR_CHANGE_APPLY);
    int saved = errno;
    cr_keyed_free(keyed);
    if (status != CR_E_SHARED_IO)
        return 10 + (int)status;
    return saved == ENOSPC ? 0 : 3;
}

static void test_full_file_system(void)
{
    snprintf(small_fs, sizeof small_fs, "%s/small-fs", dir);
    CHECK(mkdir(small_fs, 0755) == 0, "mkdir %s", small_fs);
    if (mount("none", small_fs, "tmpfs", 0, "size=1M") != 0) {
        printf("SKIP full file system: cannot mount a 1 MB tmpfs at %s (%s): "
               "needs root or CAP_SYS_ADMIN\n",
               small_fs, strerror(errno));
        rmdir(small_fs);
        return;
    }
    CHECK_CHILD(20, open_too_big, 0);
    CHECK_EQ_I64(strays(small_fs, keep_none), 0, "nothing holds the space after ENOSPC");

    /* A small region still fits. */
    cr_limit limit = make_limit(10, 10);
    cr_limiter *lim = NULL;
    char path[256];
    snprintf(path, sizeof path, "%s/small", small_fs);
    CHECK(cr_limiter_open(&lim, &limit, path, 0600, CR_CHANGE_APPLY) == CR_OK,
          "a small region fits");
    cr_limiter_free(lim);
    unlink(path);

    /* A sparse copy of a big region from another boot: its reset must not
     * meet a hole it cannot fill. */
    cr_keyed *keyed = NULL;
    const char *model = path_in("", "big-model");
    CHECK(cr_keyed_open(&keyed, &limit, 100000, model, 0600, CR_CHANGE_APPLY) == CR_OK, "model");
    size_t size = cr_keyed_memory(keyed);
    cr_keyed_free(keyed);
    char header[4096];
    int from = open(model, O_RDONLY);
    snprintf(path, sizeof path, "%s/sparse", small_fs);
    int to = open(path, O_CREAT | O_RDWR, 0600);
    CHECK(from >= 0 && to >= 0 && pread(from, header, sizeof header, 0) == (ssize_t)sizeof header,
          "read the model");
    struct stat st;
    fstat(from, &st);
    memset(header + BOOT_OFFSET, 0, 48); /* another boot */
    CHECK(ftruncate(to, st.st_size) == 0 &&
              pwrite(to, header, sizeof header, 0) == (ssize_t)sizeof header,
          "write a sparse copy of %zu bytes", size);
    close(from);
    close(to);
    unlink(model);
    CHECK_CHILD(20, open_sparse_stale, 0);
    unlink(path);

    CHECK(umount(small_fs) == 0, "umount %s", small_fs);
    rmdir(small_fs);
}

/* ------------------------------------------------------------------------ */
/* 3. Creators killed at any instant leave no file behind.                   */

static bool keep_regions(const char *name)
{
    return name[0] == 'r' && strspn(name + 1, "0123456789") == strlen(name + 1) && name[1];
}

static void test_killed_creators(void)
{
    char subdir[128];
    snprintf(subdir, sizeof subdir, "%s/killed", dir);
    CHECK(mkdir(subdir, 0755) == 0, "mkdir %s", subdir);
    cr_limit limit = make_limit(10, 10);
    const int64_t capacity = 1 << 20; /* about 30 MB: creation takes milliseconds */

    /* How long one creation takes, to spread the kills over it. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_keyed *keyed = NULL;
    CHECK(cr_keyed_open(&keyed, &limit, capacity, path_in("killed", "r"), 0600, CR_CHANGE_APPLY) ==
              CR_OK,
          "timed creation");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_keyed_free(keyed);
    unlink(path_in("killed", "r"));
    long create_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;

    _Atomic long *ready = mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned seed = 777;
    int kills = 0, rounds = 60;
    for (int i = 0; i < rounds; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        *ready = 0;
        pid_t pid = fork();
        if (pid == 0) {
            *ready = 1;
            cr_keyed *k = NULL;
            cr_keyed_open(&k, &limit, capacity, path_in("killed", name), 0600, CR_CHANGE_APPLY);
            pause();
            _exit(0);
        }
        while (!*ready)
            ;
        seed = seed * 1103515245u + 12345u;
        struct timespec delay = {0, (long)((seed >> 8) % (unsigned long)(create_us + 1)) * 1000};
        nanosleep(&delay, NULL);
        kills += kill(pid, SIGKILL) == 0;
        waitpid(pid, NULL, 0);
        /* What is there is a whole region, or nothing. */
        if (access(path_in("killed", name), F_OK) == 0) {
            CHECK(cr_keyed_open(&keyed, &limit, capacity, path_in("killed", name), 0600,
                                CR_CHANGE_APPLY) == CR_OK,
                  "a region left by a killed creator opens");
            cr_keyed_free(keyed);
            unlink(path_in("killed", name));
        }
    }
    printf("killed creators: %d kills over creations of %ld us\n", kills, create_us);
    CHECK_EQ_I64(strays(subdir, keep_regions), 0, "temp files left by %d killed creators", kills);
    munmap((void *)ready, sizeof(long));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", subdir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* ------------------------------------------------------------------------ */
/* 4. A damaged stripe lock, a dead holder, a living holder.                 */

static const char *lock_path;

static int admit_new_key(void)
{
    cr_limit limit = make_limit(10, 10);
    cr_keyed *keyed = NULL;
    if (cr_keyed_open(&keyed, &limit, 1, lock_path, 0600, CR_CHANGE_APPLY) != CR_OK)
        return 2;
    cr_decision d;
    cr_status status = cr_keyed_check(keyed, "new-key", 7, 5000000000LL, 1, true, &d);
    cr_keyed_free(keyed);
    return status == CR_OK && d.allowed ? 0 : 3;
}

static void write_lock_bytes(const void *bytes, size_t len)
{
    int fd = open(lock_path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, bytes, len, LOCKS_OFFSET) == (ssize_t)len, "patch the lock");
    close(fd);
}

static uint64_t holder_word(pid_t pid)
{
    return ((uint64_t)(uint32_t)pid << 32) | (uint32_t) ~(uint32_t)pid;
}

static void test_damaged_lock(void)
{
    lock_path = path_in("", "lock");
    const unsigned char stray[] = {0x01, 0x80, 0xff, 0x2a};
    for (size_t i = 0; i < sizeof stray; i++) {
        unlink(lock_path);
        cr_limit limit = make_limit(10, 10);
        cr_keyed *keyed = NULL;
        CHECK(cr_keyed_open(&keyed, &limit, 1, lock_path, 0600, CR_CHANGE_APPLY) == CR_OK,
              "fresh region");
        cr_keyed_free(keyed);
        write_lock_bytes(&stray[i], 1); /* one byte at LOCKS_OFFSET */
        CHECK_CHILD(10, admit_new_key, 0);
    }

    /* A holder that died holding it (a reaped child's id). */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    uint64_t word = holder_word(dead);
    write_lock_bytes(&word, sizeof word);
    CHECK_CHILD(10, admit_new_key, 0);

    /* A holder that died and was not reaped (a zombie still answers kill()). */
    pid_t zombie = fork();
    if (zombie == 0)
        _exit(0);
    siginfo_t exited;
    waitid(P_PID, (id_t)zombie, &exited, WEXITED | WNOWAIT); /* exited, not reaped */
    word = holder_word(zombie);
    write_lock_bytes(&word, sizeof word);
    CHECK_CHILD(10, admit_new_key, 0);
    waitpid(zombie, NULL, 0);

    /* A living holder that never lets go: a bounded wait, then an error. */
    pid_t alive = fork();
    if (alive == 0) {
        pause();
        _exit(0);
    }
    word = holder_word(alive);
    write_lock_bytes(&word, sizeof word);
    cr_limit limit = make_limit(10, 10);
    cr_keyed *keyed = NULL;
    CHECK(cr_keyed_open(&keyed, &limit, 1, lock_path, 0600, CR_CHANGE_APPLY) == CR_OK, "reopen");
    int64_t saved_timeout = cr_lock_timeout_ns;
    cr_lock_timeout_ns = 200000000; /* 0.2 s */
    cr_decision d;
    int64_t start = cr_clock_ns();
    cr_status status = cr_keyed_check(keyed, "held-key", 8, 5000000000LL, 1, true, &d);
    int64_t waited = cr_clock_ns() - start;
    CHECK_EQ_I64(status, CR_E_SHARED_LOCK, "a living holder keeps the lock");
    CHECK(waited >= 200000000 && waited < 5000000000LL, "waited %" PRId64 " ns", waited);
    /* check_all reports the failure, never the decision it could not store,
     * and gives back what it committed before: here the limiter, the last
     * item, committed first. */
    cr_limiter *limiter = NULL;
    CHECK(cr_limiter_new(&limiter, &limit) == CR_OK, "a limiter");
    const cr_item items[2] = {{.keyed = keyed, .key = "held-key", .key_len = 8},
                              {.limiter = limiter}};
    for (size_t count = 1; count <= 2; count++) {
        status = cr_check_all(items, count, 5000000000LL, 1, &d, NULL);
        CHECK_EQ_I64(status, CR_E_SHARED_LOCK, "check_all of %zu items meets the lock", count);
    }
    CHECK(cr_limiter_check(limiter, 5000000000LL, 0, false, &d) == CR_OK && d.remaining == 10,
          "the limiter's unit given back: %" PRId64 " remaining", d.remaining);
    cr_limiter_free(limiter);
    kill(alive, SIGKILL);
    waitpid(alive, NULL, 0);
    status = cr_keyed_check(keyed, "held-key", 8, 5000000000LL, 1, true, &d);
    CHECK(status == CR_OK && d.allowed, "taken over once the holder died: status %d", (int)status);
    cr_lock_timeout_ns = saved_timeout;
    cr_keyed_free(keyed);
    unlink(lock_path);
}

/* ------------------------------------------------------------------------ */
/* 7. A reset (region of another boot) killed at any instant.                */

static void read_boot(char boot_id[48])
{
    memset(boot_id, 0, 48);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot_id, 48, f))
            memset(boot_id, 0, 48);
        fclose(f);
    }
}

static void test_killed_reset(void)
{
    const char *path = path_in("", "reset");
    unlink(path);
    cr_limit limit = make_limit(1, 1);
    const int64_t capacity = 1 << 19, far = 1000 * 1000000000LL;
    cr_keyed *keyed = NULL;
    CHECK(cr_keyed_open(&keyed, &limit, capacity, path, 0600, CR_CHANGE_APPLY) == CR_OK, "create");
    cr_decision d;
    cr_keyed_check(keyed, "k", 1, far, 1, true, &d); /* TAT far ahead */
    cr_keyed_free(keyed);

    /* What a reset killed between its writes could leave: the new boot id
     * in place, nothing else changed. It must not be refused. */
    char boot_id[48];
    read_boot(boot_id);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, boot_id, 48, BOOT_OFFSET) == 48, "write this boot's id");
    close(fd);
    keyed = NULL;
    CHECK_EQ_I64(cr_keyed_open(&keyed, &limit, capacity, path, 0600, CR_CHANGE_APPLY), CR_OK,
                 "a region whose boot id was rewritten alone still opens");
    cr_keyed_free(keyed);

    /* Resets killed at spread instants: after each, the region opens and is
     * either reset or not yet, never refused and never half cleared. */
    struct timespec t0, t1;
    unsigned seed = 4242;
    int kills = 0, refused = 0, kept = 0;
    long reset_us = 0;
    for (int round = 0; round < 40; round++) {
        char other_boot[48] = "00000000-0000-0000-0000-000000000000\n";
        fd = open(path, O_RDWR);
        CHECK(fd >= 0 && pwrite(fd, other_boot, 48, BOOT_OFFSET) == 48, "make it stale");
        close(fd);
        if (round == 0) { /* time one reset */
            clock_gettime(CLOCK_MONOTONIC, &t0);
            CHECK(cr_keyed_open(&keyed, &limit, capacity, path, 0600, CR_CHANGE_APPLY) == CR_OK,
                  "reset");
            clock_gettime(CLOCK_MONOTONIC, &t1);
            cr_keyed_free(keyed);
            reset_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
            continue;
        }
        pid_t pid = fork();
        if (pid == 0) {
            cr_keyed *k = NULL;
            cr_keyed_open(&k, &limit, capacity, path, 0600, CR_CHANGE_APPLY);
            pause();
            _exit(0);
        }
        seed = seed * 1103515245u + 12345u;
        struct timespec delay = {0, (long)((seed >> 8) % (unsigned long)(2 * reset_us + 1)) * 1000};
        nanosleep(&delay, NULL);
        kills += kill(pid, SIGKILL) == 0;
        waitpid(pid, NULL, 0);
        cr_status status = cr_keyed_open(&keyed, &limit, capacity, path, 0600, CR_CHANGE_APPLY);
        refused += status != CR_OK;
        if (status == CR_OK) {
            /* After the open the region is of this boot: the old key is gone. */
            cr_keyed_check(keyed, "k", 1, 1000000000LL, 1, true, &d);
            kept += !d.allowed;
            cr_keyed_check(keyed, "k", 1, far, 1, true, &d); /* for the next round */
            cr_keyed_free(keyed);
        }
    }
    printf("killed resets: %d kills over resets of %ld us\n", kills, reset_us);
    CHECK_EQ_I64(refused, 0, "regions refused after a killed reset");
    CHECK_EQ_I64(kept, 0, "regions whose reset left an old key");
    unlink(path);
}

/* ------------------------------------------------------------------------ */
/* An unprivileged creator: the unnamed file is linked through /proc.        */

static int create_as_nobody(void)
{
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 2;
    cr_limit limit = make_limit(10, 10);
    cr_limiter *lim = NULL;
    cr_status status = cr_limiter_open(&lim, &limit, path_in("open-to-all", "r"), 0600,
                                       CR_CHANGE_APPLY);
    bool allowed = false;
    if (status == CR_OK)
        cr_limiter_allow(lim, 1000, 1, &allowed);
    cr_limiter_free(lim);
    return status == CR_OK && allowed ? 0 : 10 + (int)status;
}

static bool keep_r(const char *name) { return strcmp(name, "r") == 0; }

static void test_unprivileged_creator(void)
{
    if (geteuid() != 0)
        return; /* we are the unprivileged case already: every test above was it */
    char subdir[128];
    snprintf(subdir, sizeof subdir, "%s/open-to-all", dir);
    CHECK(mkdir(subdir, 01777) == 0 && chmod(subdir, 01777) == 0, "mkdir %s", subdir);
    CHECK_CHILD(10, create_as_nobody, 0);
    struct stat st;
    CHECK(stat(path_in("open-to-all", "r"), &st) == 0 && st.st_uid == 65534 &&
              (st.st_mode & 0777) == 0600,
          "the region belongs to its creator, mode 0600");
    CHECK_EQ_I64(strays(subdir, keep_r), 0, "no temp file");
}

/* ------------------------------------------------------------------------ */
/* Names of up to NAME_MAX characters.                                       */

static void test_long_names(void)
{
    cr_limit limit = make_limit(10, 10);
    for (int len = 240; len <= NAME_MAX; len++) {
        char name[NAME_MAX + 1];
        memset(name, 'n', (size_t)len);
        name[len] = '\0';
        cr_limiter *lim = NULL;
        cr_status status = cr_limiter_open(&lim, &limit, path_in("", name), 0600, CR_CHANGE_APPLY);
        CHECK_EQ_I64(status, CR_OK, "a name of %d characters (errno %d)", len, errno);
        cr_limiter_free(lim);
        unlink(path_in("", name));
    }
}

/* ------------------------------------------------------------------------ */
/* 5. A rate with 2^31 decimals: "0.000...0001/s".                           */

/* The text, in a window of many mappings of one zero-filled chunk, so that
 * gigabytes of text cost one chunk of memory. */
static int huge_decimals(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t chunk = (size_t)1 << 22;              /* 4 MB of '0', mapped again and again */
    const size_t zeros = ((size_t)1 << 31) + page - 2; /* 2^31 + 4094 decimals before the 1 */
    const size_t tail = 2 + zeros;                     /* page-aligned: where "1/s" starts */
    const size_t total = tail + 3;
    const size_t span = (total + chunk - 1) / chunk * chunk;
    char *window = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int fd = memfd_create("zeros", 0);
    if (window == MAP_FAILED || fd < 0 || ftruncate(fd, (off_t)chunk) != 0)
        return 2;
    char *one = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (one == MAP_FAILED)
        return 2;
    memset(one, '0', chunk);
    munmap(one, chunk);
    for (size_t at = 0; at < span; at += chunk)
        if (mmap(window + at, chunk, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
            return 2;
    /* The first page and the tail's page are private copies we write on. */
    if (mmap(window, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED ||
        mmap(window + tail, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
             (off_t)(tail % chunk)) == MAP_FAILED)
        return 2;
    memcpy(window, "0.", 2);
    memcpy(window + tail, "1/s", 3);
    double rate = -1, period = -1;
    cr_status status = cr_parse_rate(window, total, &rate, &period);
    munmap(window, span);
    close(fd);
    /* The value is below every double: 0, which no limit accepts. */
    return status == CR_OK && rate == 0.0 && period == 1.0 ? 0 : 3;
}

static void test_huge_decimals(void)
{
    CHECK_CHILD(120, huge_decimals, 0);
    /* Shorter ones, through cr_limit_init: refused, naming rate. */
    size_t n = 100000;
    char *text = malloc(n + 8);
    memcpy(text, "0.", 2);
    memset(text + 2, '0', n);
    memcpy(text + 2 + n, "1/s", 3);
    cr_limit limit;
    cr_limit_args args = {.rate_text = text, .rate_text_len = n + 5};
    cr_status status = cr_limit_init(&limit, &args);
    CHECK_EQ_I64(status, CR_E_RATE, "a rate of 1e-100001 per second");
    CHECK_EQ_STR(cr_status_param(status), "rate", "the parameter");
    free(text);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/cellrate-hostile-%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        snprintf(dir, sizeof dir, "/tmp/cellrate-hostile-%d", (int)getpid());
        if (mkdir(dir, 0755) != 0)
            return 2;
    }
    test_dangling_link();
    test_unprivileged_creator();
    test_long_names();
    test_damaged_lock();
    if (!UNDER_TSAN) { /* (the 2^31-character parse is minutes long under TSan) */
        test_huge_decimals();
        test_full_file_system();
        test_killed_creators();
        test_killed_reset();
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        check_failed++;
    return check_summary("test_hostile");
}
