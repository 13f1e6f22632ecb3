/*
 * libFuzzer target: opening damaged region files (docs/design.md §5, §13).
 *
 * Three pristine regions (a KeyedLimiter of capacity 8, a Limiter, and a
 * sliding_window KeyedLimiter, whose packed state words are the most
 * intricate) are made once. Each input picks one, patches its bytes (header, boot id, counters,
 * stripe locks, slots), may re-seal the header's checksum and may cut the
 * file short, writes it to a file and opens it as the pristine limit. Then it
 * decides for a few keys, new and old. Checked: nothing crashes, hangs or
 * reads out of bounds; every status is a known one; a header changed without
 * its checksum is refused; a region of another boot is reset on opening; a
 * lock held by a living process ends in CR_E_SHARED_LOCK, never a hang.
 */
#include "cellrate.h"
#include "lock.h"
#include "siphash.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { IDENTITY_SIZE = 80, CHECKSUM_END = 88, BOOT_OFFSET = 88, BOOT_END = 136 };

enum { KEYED, LIMITER, SLIDING, KINDS };

static char work[64], region_path[96];
static cr_limit limits[KINDS];
static unsigned char *pristine[KINDS];
static size_t pristine_size[KINDS];
static char boot_id[48];

static void read_file(const char *path, unsigned char **bytes, size_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        abort();
    *size = (size_t)st.st_size;
    *bytes = malloc(*size);
    if (pread(fd, *bytes, *size, 0) != (ssize_t)*size)
        abort();
    close(fd);
}

static void setup(void)
{
    snprintf(work, sizeof work, "/dev/shm/cellrate-fuzz-%d", (int)getpid());
    mkdir(work, 0700);
    snprintf(region_path, sizeof region_path, "%s/region", work);
    cr_limit_args args = {.rate = 10, .has_burst = true, .burst = 5};
    if (cr_limit_init(&limits[KEYED], &args) != CR_OK)
        abort();
    limits[LIMITER] = limits[KEYED];
    cr_limit_args window = {.rate = 100, .algorithm = "sliding_window", .algorithm_len = 14};
    if (cr_limit_init(&limits[SLIDING], &window) != CR_OK)
        abort();
    cr_lock_timeout_ns = 2000000; /* 2 ms: a living holder costs little time */
    char path[128];
    snprintf(path, sizeof path, "%s/region", work);
    for (int kind = 0; kind < KINDS; kind++) {
        unlink(path);
        cr_decision d;
        if (kind == LIMITER) {
            cr_limiter *limiter;
            if (cr_limiter_open(&limiter, &limits[kind], path, 0600, CR_CHANGE_APPLY) != CR_OK)
                abort();
            cr_limiter_check(limiter, 1000000000, 1, true, &d);
            cr_limiter_free(limiter);
        } else {
            cr_keyed *keyed;
            if (cr_keyed_open(&keyed, &limits[kind], 8, path, 0600, CR_CHANGE_APPLY) != CR_OK)
                abort();
            cr_keyed_check(keyed, "old", 3, 1000000000, 1, true, &d); /* a slot in use */
            cr_keyed_free(keyed);
        }
        read_file(path, &pristine[kind], &pristine_size[kind]);
    }
    unlink(path);
    rmdir(work);
    memcpy(boot_id, pristine[KEYED] + BOOT_OFFSET, 48);
}

static void check_status(cr_status status)
{
    if ((unsigned)status >= CR_STATUS_COUNT)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    int kind = (flags & 1) ? LIMITER : (flags & 8) ? SLIDING : KEYED;
    const cr_limit *limit = &limits[kind];
    bool reseal = flags & 2, cut = flags & 4;
    data++;
    size--;
    size_t file_size = pristine_size[kind];
    unsigned char *image = malloc(file_size);
    memcpy(image, pristine[kind], file_size);
    if (cut && size >= 2) {
        file_size = (data[0] | (size_t)data[1] << 8) % (file_size + 1);
        data += 2;
        size -= 2;
    }
    /* Patches: offset (2 bytes), length (1 byte), bytes. */
    while (size >= 3) {
        size_t offset = (data[0] | (size_t)data[1] << 8) % pristine_size[kind];
        size_t len = data[2] % 17;
        data += 3;
        size -= 3;
        if (len > size)
            len = size;
        if (len > pristine_size[kind] - offset)
            len = pristine_size[kind] - offset;
        memcpy(image + offset, data, len);
        data += len;
        size -= len;
    }
    if (reseal) {
        static const uint64_t zero_key[2] = {0, 0};
        uint64_t sum = cr_siphash13(zero_key, image, IDENTITY_SIZE);
        memcpy(image + IDENTITY_SIZE, &sum, sizeof sum);
    }
    bool header_changed = memcmp(image, pristine[kind], CHECKSUM_END) != 0;
    bool stale = memcmp(image + BOOT_OFFSET, boot_id, 48) != 0;

    mkdir(work, 0700);
    int fd = open(region_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0 || write(fd, image, file_size) != (ssize_t)file_size)
        abort();
    close(fd);

    cr_status status;
    cr_decision d;
    if (kind != LIMITER) {
        cr_keyed *keyed = NULL;
        status = cr_keyed_open(&keyed, limit, 8, region_path, 0600, CR_CHANGE_APPLY);
        check_status(status);
        if (status == CR_OK) {
            if (header_changed && !reseal)
                abort(); /* a header changed under its checksum was taken */
            if (file_size < pristine_size[kind])
                abort(); /* a short file was mapped */
            if (stale && (cr_keyed_len(keyed) != 0 || cr_keyed_evictions(keyed) != 0))
                abort(); /* a region of another boot was not reset */
            const char *keys[] = {"old", "new-1", "new-2", "new-3", "new-4", "new-5"};
            for (int i = 0; i < 6; i++) {
                for (int64_t now = 0; now <= 4000000000; now += 1000000000) {
                    status = cr_keyed_check(keyed, keys[i], strlen(keys[i]), now, 1, true, &d);
                    check_status(status);
                    if (status != CR_OK && status != CR_E_SHARED_LOCK)
                        abort();
                    if (status == CR_OK && (d.remaining < 0 || d.remaining > limit->burst))
                        abort();
                }
            }
            cr_keyed_reset(keyed, "old", 3);
            cr_keyed_free(keyed);
        }
    } else {
        cr_limiter *limiter = NULL;
        status = cr_limiter_open(&limiter, limit, region_path, 0600, CR_CHANGE_APPLY);
        check_status(status);
        if (status == CR_OK) {
            if ((header_changed && !reseal) || file_size < pristine_size[kind])
                abort();
            for (int64_t now = 0; now <= 2000000000; now += 500000000) {
                if (cr_limiter_check(limiter, now, 1, true, &d) != CR_OK)
                    abort();
                if (d.remaining < 0 || d.remaining > limit->burst)
                    abort();
            }
            cr_limiter_free(limiter);
        }
    }
    unlink(region_path);
    free(image);
    return 0;
}
