/*
 * Shared regions: a file mapped MAP_SHARED that holds one limit's state for
 * every process that opens it (docs/design.md §5).
 *
 * A new region is built whole in an unnamed file (O_TMPFILE) in the target's
 * directory and published with linkat(2), which fails if the name exists:
 * racing creators cannot see or make a half-built region, exactly one wins,
 * and a creator killed at any point leaves nothing behind. Where the file
 * system has no O_TMPFILE, a short-named temporary file takes its place (a
 * creator killed before removing it leaves that file). The file's blocks are
 * reserved (fallocate) before it is mapped: a full file system is an error
 * (ENOSPC), never a SIGBUS on a first write through the mapping.
 *
 * An existing region is read with pread(2) and checked (size, magic, version,
 * checksum, kind, limit, capacity) before it is mapped. A region from another
 * boot is reset under an exclusive flock(2), which every opener holds shared
 * while it checks; flock dies with its process, so no lock is ever left held.
 * The reset clears the state, then writes the new boot id: the boot id is the
 * one publish step, outside the checksum, and a reset killed at any point
 * leaves the old (or a torn) boot id, so the next opener resets again.
 */
#include "internal.h"
#include "siphash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2: boot id outside the checksum; stripe locks are cr_lock words. */
#define REGION_VERSION 3
static const char region_magic[8] = {'C', 'E', 'L', 'L', 'R', 'A', 'T', 'E'};

/* Opening gives up after this many rounds of "absent, then present". */
#define OPEN_TRIES 16

/* The immutable part of a header, covered by its checksum. */
typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t kind; /* the store kind | the algorithm << 8 (gcra: 0, as before the catalogue) */
    uint64_t total_size;
    int64_t emission_ns; /* T; for a window algorithm the window (and burst its rate) */
    int64_t burst;
    int64_t capacity;
    uint32_t nbuckets;
    uint32_t nstripes;
    uint64_t seed[2];
} region_identity;

typedef struct {
    region_identity identity;
    uint64_t checksum;
    char boot_id[48]; /* the boot the state belongs to; written last by a reset */
    _Alignas(64) _Atomic uint64_t evictions;
    _Alignas(64) _Atomic int64_t tat; /* the Limiter's TAT */
} region_header;

/* The layout is the file format (the tests patch these offsets). */
_Static_assert(sizeof(region_identity) == 72, "the identity is 72 bytes");
_Static_assert(offsetof(region_header, boot_id) == 80, "the boot id follows the checksum");
_Static_assert(sizeof(region_header) == 256, "the stripe locks start at offset 256");

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static uint64_t identity_checksum(const region_identity *identity)
{
    static const uint64_t zero_key[2] = {0, 0};
    return cr_siphash13(zero_key, identity, sizeof *identity);
}

/* This boot's id; all zeros where the system does not tell. */
static void read_boot_id(char boot_id[48])
{
    memset(boot_id, 0, 48);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return;
    if (!fgets(boot_id, 48, f))
        memset(boot_id, 0, 48);
    fclose(f);
}

static void layout(cr_region_spec *spec)
{
    spec->stripes_offset = align64(sizeof(region_header));
    spec->buckets_offset = align64(spec->stripes_offset + spec->nstripes * sizeof(cr_lock));
    spec->total_size = spec->buckets_offset + spec->buckets_size;
}

static cr_status io_status(void)
{
    return (errno == EACCES || errno == EPERM || errno == EROFS) ? CR_E_SHARED_ACCESS
                                                                 : CR_E_SHARED_IO;
}

static void bind_region(cr_region *region, void *base, const cr_region_spec *spec)
{
    region_header *header = base;
    region->base = base;
    region->size = spec->total_size;
    region->stripes = (cr_lock *)((char *)base + spec->stripes_offset);
    region->buckets = (char *)base + spec->buckets_offset;
    region->evictions = &header->evictions;
    region->tat = &header->tat;
    memcpy(region->seed, header->identity.seed, sizeof region->seed);
}

/* The directory part of `path` ("." when it has none), malloc'd. */
static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(len + 1);
    if (dir) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

/* A new file for a region being built: unnamed where the file system can,
 * else a short hidden name (*temp, malloc'd) that the caller removes. The
 * short name keeps names of up to NAME_MAX characters creatable. */
static int open_building(const char *path, mode_t mode, char **temp)
{
    *temp = NULL;
    char *dir = directory_of(path);
    if (!dir)
        return errno = ENOMEM, -1;
    /* An unnamed file is published through AT_EMPTY_PATH (which needs a
     * capability) or /proc/self/fd: without /proc, only a name will do. */
    int fd = -1;
    if (access("/proc/self/fd", F_OK) == 0)
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    else
        errno = EOPNOTSUPP;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        size_t len = strlen(dir);
        *temp = malloc(len + sizeof "/.cellrate-XXXXXX");
        if (*temp) {
            memcpy(*temp, dir, len);
            memcpy(*temp + len, "/.cellrate-XXXXXX", sizeof "/.cellrate-XXXXXX");
            fd = mkostemp(*temp, O_CLOEXEC);
        } else {
            errno = ENOMEM;
        }
        if (fd < 0) {
            free(*temp);
            *temp = NULL;
        }
    }
    free(dir);
    return fd;
}

/* Gives the built file its name; fails with EEXIST when the name is taken. */
static int publish(int fd, const char *temp, const char *path)
{
    if (temp)
        return link(temp, path);
    if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOENT && errno != EPERM)
        return -1;
    /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc gives the same link. */
    char proc_path[40];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc_path, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* Builds a region in a file of its own and links it in at `path`; *lost when
 * another process linked its own first. The file is all zeros after
 * posix_fallocate, which is what a free lock, a zero TAT and an empty slot
 * are: only the header is written. */
static cr_status create_region(const char *path, int64_t mode, const cr_region_spec *spec,
                               cr_region *region, bool *lost)
{
    *lost = false;
    char *temp;
    int fd = open_building(path, (mode_t)mode, &temp);
    if (fd < 0)
        return io_status();
    void *base = MAP_FAILED;
    cr_status status = CR_OK;
    int err;
    if (fchmod(fd, (mode_t)mode) != 0) {
        status = io_status();
    } else if ((err = posix_fallocate(fd, 0, (off_t)spec->total_size)) != 0) {
        errno = err;
        status = io_status();
    } else if ((base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
               MAP_FAILED) {
        status = io_status();
    } else {
        region_header *header = base;
        region_identity *identity = &header->identity;
        memcpy(identity->magic, region_magic, sizeof region_magic);
        identity->version = REGION_VERSION;
        identity->kind = spec->kind | spec->algorithm << 8;
        identity->total_size = spec->total_size;
        identity->emission_ns = spec->emission_ns;
        identity->burst = spec->burst;
        identity->capacity = spec->capacity;
        identity->nbuckets = spec->nbuckets;
        identity->nstripes = spec->nstripes;
        if (cr_random_seed(identity->seed) != CR_OK)
            status = CR_E_NOMEM;
        read_boot_id(header->boot_id);
        header->checksum = identity_checksum(identity);
        if (status == CR_OK && publish(fd, temp, path) != 0) {
            *lost = errno == EEXIST;
            status = io_status();
        }
    }
    int saved_errno = errno;
    if (temp)
        unlink(temp);
    close(fd);
    free(temp);
    if (status == CR_OK) {
        bind_region(region, base, spec);
        return CR_OK;
    }
    if (base != MAP_FAILED)
        munmap(base, spec->total_size);
    errno = saved_errno;
    return status;
}

/* Checks an existing region's header against what the caller wants, and
 * reads the boot id it belongs to. */
static cr_status check_identity(int fd, const cr_region_spec *spec, char boot_id[48])
{
    region_identity identity;
    uint64_t checksum;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_status();
    if ((uint64_t)st.st_size < sizeof(region_header))
        return CR_E_SHARED_SHORT;
    if (pread(fd, &identity, sizeof identity, 0) != (ssize_t)sizeof identity ||
        pread(fd, &checksum, sizeof checksum, offsetof(region_header, checksum)) !=
            (ssize_t)sizeof checksum ||
        pread(fd, boot_id, 48, offsetof(region_header, boot_id)) != 48)
        return io_status();
    if (memcmp(identity.magic, region_magic, sizeof region_magic) != 0)
        return CR_E_SHARED_FOREIGN;
    if (identity.version != REGION_VERSION)
        return CR_E_SHARED_VERSION;
    if (checksum != identity_checksum(&identity))
        return CR_E_SHARED_CORRUPT;
    if (identity.total_size != (uint64_t)st.st_size)
        return (uint64_t)st.st_size < identity.total_size ? CR_E_SHARED_SHORT : CR_E_SHARED_CORRUPT;
    if ((identity.kind & 0xff) != spec->kind)
        return CR_E_SHARED_KIND;
    if (identity.kind >> 8 != spec->algorithm)
        return CR_E_SHARED_ALGORITHM;
    if (spec->kind == CR_REGION_CONCURRENCY &&
        (identity.emission_ns != spec->emission_ns || identity.burst != spec->burst))
        return CR_E_SHARED_LIMIT; /* a concurrency region's lease and limit */
    if (identity.emission_ns != spec->emission_ns)
        return CR_E_SHARED_RATE;
    if (identity.burst != spec->burst) /* a window's burst is its rate */
        return spec->algorithm >= CR_ALGORITHM_FIXED_WINDOW ? CR_E_SHARED_RATE : CR_E_SHARED_BURST;
    if (identity.capacity != spec->capacity)
        return CR_E_SHARED_CAPACITY;
    if (identity.nbuckets != spec->nbuckets || identity.nstripes != spec->nstripes ||
        identity.total_size != spec->total_size)
        return CR_E_SHARED_CORRUPT;
    return CR_OK;
}

/* Backs every page of an existing region with blocks, so that no write
 * through the mapping can meet a hole on a full file system (a file copied
 * sparse, or made by hand). fallocate(2) only: glibc's emulation writes
 * bytes, which would race with the processes using the region. */
static cr_status reserve_existing(int fd, size_t size)
{
    if (fallocate(fd, 0, 0, (off_t)size) == 0 || errno == EOPNOTSUPP || errno == ENOSYS)
        return CR_OK;
    return io_status();
}

static cr_status open_existing(int fd, const cr_region_spec *spec, cr_region *region)
{
    char boot_id[48], region_boot_id[48];
    read_boot_id(boot_id);

    if (flock(fd, LOCK_SH) != 0)
        return io_status();
    cr_status status = check_identity(fd, spec, region_boot_id);
    bool stale = status == CR_OK && memcmp(region_boot_id, boot_id, sizeof boot_id) != 0;
    if (stale) { /* made before a reboot: reset it, once, under the exclusive lock */
        flock(fd, LOCK_EX);
        status = check_identity(fd, spec, region_boot_id);
        stale = status == CR_OK && memcmp(region_boot_id, boot_id, sizeof boot_id) != 0;
    }
    if (status == CR_OK)
        status = reserve_existing(fd, spec->total_size);
    void *base = MAP_FAILED;
    if (status == CR_OK) {
        base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            status = io_status();
    }
    if (status == CR_OK && stale) {
        region_header *header = base;
        atomic_store(&header->tat, 0);
        atomic_store(&header->evictions, 0);
        memset((char *)base + spec->stripes_offset, 0, spec->nstripes * sizeof(cr_lock));
        memset((char *)base + spec->buckets_offset, 0, spec->buckets_size);
        /* The publish step: the state above is complete before the id says so.
         * Only a kill can observe the order (openers wait on the flock), and
         * a kill sees program order: a compiler barrier is all it takes. */
        atomic_signal_fence(memory_order_seq_cst);
        memcpy(header->boot_id, boot_id, sizeof boot_id);
    }
    int saved_errno = errno;
    flock(fd, LOCK_UN);
    if (status != CR_OK) {
        if (base != MAP_FAILED)
            munmap(base, spec->total_size);
        errno = saved_errno;
        return status;
    }
    bind_region(region, base, spec);
    return CR_OK;
}

cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode)
{
    if (mode < 0 || mode > 0777)
        return CR_E_SHARED_MODE;
    /* a window algorithm's limit is its window and rate (docs/design.md §7);
     * a store without a rate (NULL: concurrency) fills these in itself */
    if (limit) {
        spec->algorithm = limit->algorithm;
        spec->emission_ns = cr_is_window(limit) ? limit->tolerance_ns : limit->emission_ns;
        spec->burst = limit->burst;
    }
    layout(spec);
    /* Each round either opens the file or finds it absent and creates it; a
     * round ends in another only when a racing process linked first, or
     * removed the file between our open and our link. */
    for (int round = 0; round < OPEN_TRIES; round++) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            cr_status status = open_existing(fd, spec, region);
            int saved_errno = errno;
            close(fd);
            errno = saved_errno;
            return status;
        }
        if (errno != ENOENT)
            return io_status();
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return CR_E_SHARED_DANGLING; /* link(2) would never replace it */
        bool lost;
        cr_status status = create_region(path, mode, spec, region, &lost);
        if (!lost)
            return status;
        /* another process published the region first: open theirs */
    }
    return CR_E_SHARED_UNSTABLE;
}

void cr_region_close(cr_region *region)
{
    if (region->base)
        munmap(region->base, region->size);
    region->base = NULL;
}
