/*
 * libFuzzer target: the TZif parser and the calendar periods over any zone it
 * accepts (docs/design.md §19, §13).
 *
 * Input: one byte choosing the period (its unit and a count from 1 to 8), 8
 * bytes of an instant, then the TZif bytes, handed to the parser in a buffer
 * of exactly their length (ASan sees any read past it). Checked:
 * - cr_zone_parse refuses with CR_E_TZ_DATA or returns a zone, and nothing in
 *   between leaks or reads past the bytes;
 * - over an accepted zone, every offset is within 26 h, and the period that
 *   holds the instant holds it: start <= now < end, its boundaries whole
 *   seconds, at most the period's longest;
 * - the next period starts where this one ends.
 */
#include "cellrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                     \
    do {                              \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr);          \
        abort();                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    const cr_period period = {(cr_period_unit)(data[0] & 3), 1 + ((data[0] >> 2) & 7)};
    uint64_t word = 0;
    for (int i = 0; i < 8; i++)
        word = word << 8 | data[1 + i];
    const int64_t now = (int64_t)(word % (uint64_t)CR_HORIZON_NS);
    const size_t len = size - 9;
    uint8_t *bytes = malloc(len ? len : 1);
    if (!bytes)
        return 0;
    memcpy(bytes, data + 9, len);
    cr_zone *zone = NULL;
    const cr_status status = cr_zone_parse(bytes, len, &zone);
    free(bytes); /* the zone holds nothing of the caller's bytes */
    if (status != CR_OK) {
        if (status != CR_E_TZ_DATA || zone)
            FAIL("refused with status %d", status);
        return 0;
    }
    const int32_t offset = cr_zone_offset(zone, now / 1000000000);
    if (offset <= -93600 || offset >= 93600)
        FAIL("offset %d", offset);
    int64_t start = 0, end = 0, next_start = 0, next_end = 0;
    if (cr_period_bounds(zone, period, now, &start, &end) != CR_OK)
        FAIL("no period");
    /* A zone can make a period a few days shorter or longer than its
     * nominal length (offsets up to 26 h either side), never a day more. */
    if (!(start <= now && now < end) || start % 1000000000 || end % 1000000000 ||
        end - start > cr_period_longest_ns(period) + (int64_t)2 * 93600 * 1000000000)
        FAIL("period [%lld, %lld) for %lld", (long long)start, (long long)end, (long long)now);
    if (end < CR_HORIZON_NS) {
        if (cr_period_bounds(zone, period, end, &next_start, &next_end) != CR_OK ||
            next_start != end)
            FAIL("the next period starts at %lld, not %lld", (long long)next_start, (long long)end);
    }
    cr_zone_free(zone);
    return 0;
}
