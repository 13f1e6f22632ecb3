/*
 * Shared regions: a file mapped MAP_SHARED that holds one limit's state for
 * every process that opens it.
 *
 * A new region is built whole in a temporary file beside `path` and published
 * with link(2), which fails if the name exists: racing creators cannot see or
 * make a half-built region, and exactly one wins. An existing region is read
 * with pread(2) and checked (size, magic, version, checksum, kind, limit,
 * capacity) before it is mapped. A region from another boot is reset under an
 * exclusive flock(2), which every opener holds shared while it checks; flock
 * dies with its process, so no lock is ever left held.
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

#define REGION_VERSION 1
static const char region_magic[8] = {'C', 'E', 'L', 'L', 'R', 'A', 'T', 'E'};

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
    char boot_id[48];
} region_identity;

typedef struct {
    region_identity identity;
    uint64_t checksum;
    _Alignas(64) _Atomic uint64_t evictions;
    _Alignas(64) _Atomic int64_t tat; /* the Limiter's TAT */
} region_header;

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
    spec->buckets_offset = align64(spec->stripes_offset + spec->nstripes * sizeof(pthread_mutex_t));
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
    region->stripes = (pthread_mutex_t *)((char *)base + spec->stripes_offset);
    region->buckets = (char *)base + spec->buckets_offset;
    region->evictions = &header->evictions;
    region->tat = &header->tat;
    memcpy(region->seed, header->identity.seed, sizeof region->seed);
}

/* Locks that a process may die holding: the next taker is told and goes on. */
static void init_stripes(pthread_mutex_t *stripes, uint32_t n)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    for (uint32_t i = 0; i < n; i++)
        pthread_mutex_init(&stripes[i], &attr);
    pthread_mutexattr_destroy(&attr);
}

/* Everything but the identity's seed and boot id back to a fresh region. */
static void clear_state(void *base, const cr_region_spec *spec)
{
    region_header *header = base;
    atomic_store(&header->evictions, 0);
    atomic_store(&header->tat, 0);
    init_stripes((pthread_mutex_t *)((char *)base + spec->stripes_offset), spec->nstripes);
    memset((char *)base + spec->buckets_offset, 0, spec->buckets_size);
}

/* Builds a region in a temporary file and links it in at `path`; *lost when
 * another process linked its own first. */
static cr_status create_region(const char *path, int64_t mode, const cr_region_spec *spec,
                               cr_region *region, bool *lost)
{
    *lost = false;
    size_t path_len = strlen(path);
    char *temp = malloc(path_len + 8);
    if (!temp)
        return CR_E_NOMEM;
    memcpy(temp, path, path_len);
    memcpy(temp + path_len, ".XXXXXX", 8);
    int fd = mkostemp(temp, O_CLOEXEC);
    if (fd < 0) {
        cr_status status = io_status();
        free(temp);
        return status;
    }
    void *base = MAP_FAILED;
    cr_status status = CR_OK;
    if (fchmod(fd, (mode_t)mode) != 0 || ftruncate(fd, (off_t)spec->total_size) != 0 ||
        (base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
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
        read_boot_id(identity->boot_id);
        clear_state(base, spec);
        header->checksum = identity_checksum(identity);
        if (status == CR_OK && link(temp, path) != 0) {
            *lost = errno == EEXIST;
            status = io_status();
        }
    }
    int saved_errno = errno;
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

/* Checks an existing region's header against what the caller wants. */
static cr_status check_identity(int fd, const cr_region_spec *spec, region_identity *identity,
                                uint64_t *checksum)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_status();
    if ((uint64_t)st.st_size < sizeof(region_header))
        return CR_E_SHARED_SHORT;
    if (pread(fd, identity, sizeof *identity, 0) != (ssize_t)sizeof *identity ||
        pread(fd, checksum, sizeof *checksum, offsetof(region_header, checksum)) !=
            (ssize_t)sizeof *checksum)
        return io_status();
    if (memcmp(identity->magic, region_magic, sizeof region_magic) != 0)
        return CR_E_SHARED_FOREIGN;
    if (identity->version != REGION_VERSION)
        return CR_E_SHARED_VERSION;
    if (*checksum != identity_checksum(identity))
        return CR_E_SHARED_CORRUPT;
    if (identity->total_size != (uint64_t)st.st_size)
        return (uint64_t)st.st_size < identity->total_size ? CR_E_SHARED_SHORT
                                                           : CR_E_SHARED_CORRUPT;
    if ((identity->kind & 0xff) != spec->kind)
        return CR_E_SHARED_KIND;
    if (identity->kind >> 8 != spec->algorithm)
        return CR_E_SHARED_ALGORITHM;
    if (identity->emission_ns != spec->emission_ns)
        return CR_E_SHARED_RATE;
    if (identity->burst != spec->burst) /* a window's burst is its rate */
        return spec->algorithm >= CR_ALGORITHM_FIXED_WINDOW ? CR_E_SHARED_RATE : CR_E_SHARED_BURST;
    if (identity->capacity != spec->capacity)
        return CR_E_SHARED_CAPACITY;
    if (identity->nbuckets != spec->nbuckets || identity->nstripes != spec->nstripes ||
        identity->total_size != spec->total_size)
        return CR_E_SHARED_CORRUPT;
    return CR_OK;
}

static cr_status open_existing(int fd, const cr_region_spec *spec, cr_region *region)
{
    region_identity identity;
    uint64_t checksum;
    char boot_id[48];
    read_boot_id(boot_id);

    if (flock(fd, LOCK_SH) != 0)
        return io_status();
    cr_status status = check_identity(fd, spec, &identity, &checksum);
    bool stale = status == CR_OK && memcmp(identity.boot_id, boot_id, sizeof boot_id) != 0;
    if (stale) { /* made before a reboot: reset it, once, under the exclusive lock */
        flock(fd, LOCK_EX);
        status = check_identity(fd, spec, &identity, &checksum);
        stale = status == CR_OK && memcmp(identity.boot_id, boot_id, sizeof boot_id) != 0;
    }
    void *base = MAP_FAILED;
    if (status == CR_OK) {
        base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            status = io_status();
    }
    if (status == CR_OK && stale) {
        region_header *header = base;
        clear_state(base, spec);
        memcpy(header->identity.boot_id, boot_id, sizeof boot_id);
        header->checksum = identity_checksum(&header->identity);
    }
    int saved_errno = errno;
    flock(fd, LOCK_UN);
    if (status != CR_OK) {
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
    /* a window algorithm's limit is its window and rate (docs/design.md §7) */
    spec->algorithm = limit->algorithm;
    spec->emission_ns = cr_is_window(limit) ? limit->tolerance_ns : limit->emission_ns;
    spec->burst = limit->burst;
    layout(spec);
    for (;;) {
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
        bool lost;
        cr_status status = create_region(path, mode, spec, region, &lost);
        if (!lost)
            return status;
        /* another process published the region first: open theirs */
    }
}

void cr_region_close(cr_region *region)
{
    if (region->base)
        munmap(region->base, region->size);
    region->base = NULL;
}
