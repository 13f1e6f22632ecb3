/* Calendar periods (docs/design.md §19): the boundaries of tests/vectors/calendar.txt
 * (from Python's zoneinfo) and the changes of offset, through the system's zoneinfo;
 * the TZif parser on damaged data; the zone loader's name checks. */
#include "check.h"

#include <stdlib.h>

static const cr_zone *zone_named(const char *name)
{
    const cr_zone *zone = NULL;
    cr_status status = cr_zone_open(name, strlen(name), NULL, 0, &zone);
    CHECK_EQ_I64(status, CR_OK, "zone %s opens", name);
    return zone;
}

static bool unit_named(const char *name, cr_period_unit *unit)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(cr_period_unit_name((cr_period_unit)i), name) == 0) {
            *unit = (cr_period_unit)i;
            return true;
        }
    }
    return false;
}

static int run_vectors(const char *dir)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/calendar.txt", dir);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    int count = 0, lineno = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        char name[64], unit_text[16];
        int period_count;
        long long now, start, end, at, before, after;
        if (sscanf(line, "bounds %63s %15s %d %lld %lld %lld", name, unit_text, &period_count, &now,
                   &start, &end) == 6) {
            cr_period period = {CR_PERIOD_DAY, period_count};
            if (!CHECK(unit_named(unit_text, &period.unit), "unit, calendar.txt:%d", lineno))
                continue;
            const cr_zone *zone = zone_named(name);
            int64_t got_start = 0, got_end = 0;
            if (!zone)
                continue;
            CHECK_EQ_I64(cr_period_bounds(zone, period, now, &got_start, &got_end), CR_OK,
                         "calendar.txt:%d", lineno);
            CHECK_EQ_I64(got_start, start, "start, calendar.txt:%d", lineno);
            CHECK_EQ_I64(got_end, end, "end, calendar.txt:%d", lineno);
            count++;
        } else if (sscanf(line, "change %63s %lld %lld %lld", name, &at, &before, &after) == 4) {
            const cr_zone *zone = zone_named(name);
            if (!zone)
                continue;
            CHECK_EQ_I64(cr_zone_offset(zone, at - 1), before, "calendar.txt:%d", lineno);
            CHECK_EQ_I64(cr_zone_offset(zone, at), after, "calendar.txt:%d", lineno);
        }
    }
    fclose(file);
    return count;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    uint8_t *bytes = malloc(1 << 20);
    *len = bytes ? fread(bytes, 1, 1 << 20, file) : 0;
    fclose(file);
    return bytes;
}

/* Every prefix of a real file is refused (never read past); a byte changed
 * anywhere is refused or parsed; the whole file parses. */
static void test_damaged(void)
{
    size_t len = 0;
    const char *dir = getenv("TZDIR") ? getenv("TZDIR") : "/usr/share/zoneinfo";
    char path[512];
    snprintf(path, sizeof path, "%s/Europe/Berlin", dir);
    uint8_t *bytes = read_file(path, &len);
    if (!CHECK(bytes && len > 44, "read %s", path)) {
        free(bytes);
        return;
    }
    cr_zone *zone = NULL;
    CHECK_EQ_I64(cr_zone_parse(bytes, len, &zone), CR_OK, "the whole file");
    cr_zone_free(zone);
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exactly cut bytes: ASan sees a read past */
        memcpy(copy, bytes, cut);
        zone = NULL;
        refused += cr_zone_parse(copy, cut, &zone) == CR_E_TZ_DATA;
        CHECK(zone == NULL || cut > 0, "a prefix of %zu bytes", cut);
        cr_zone_free(zone);
        free(copy);
    }
    CHECK_EQ_I64(refused, (int64_t)len, "every prefix is refused");
    for (size_t at = 0; at < len; at += 7) {
        uint8_t *copy = malloc(len);
        memcpy(copy, bytes, len);
        copy[at] ^= 0x5a;
        zone = NULL;
        cr_status status = cr_zone_parse(copy, len, &zone);
        CHECK(status == CR_OK || status == CR_E_TZ_DATA, "byte %zu changed: %d", at, status);
        if (zone) { /* whatever it says, a period is found */
            int64_t start = 0, end = 0;
            cr_period month = {CR_PERIOD_MONTH, 1};
            if (cr_period_bounds(zone, month, (int64_t)1700000000 * 1000000000, &start, &end) ==
                CR_OK)
                CHECK(start <= (int64_t)1700000000 * 1000000000 &&
                          (int64_t)1700000000 * 1000000000 < end,
                      "byte %zu changed", at);
        }
        cr_zone_free(zone);
        free(copy);
    }
    /* version 1 alone: the 32-bit block, no footer */
    uint8_t *v1 = malloc(len);
    memcpy(v1, bytes, len);
    v1[4] = 0;
    zone = NULL;
    CHECK_EQ_I64(cr_zone_parse(v1, len, &zone), CR_OK, "version 1 data");
    if (zone) {
        int64_t start = 0, end = 0;
        cr_period day = {CR_PERIOD_DAY, 1};
        /* 2021-03-28, Berlin's 23-hour day: within 32-bit transitions */
        CHECK_EQ_I64(cr_period_bounds(zone, day, (int64_t)1616929200 * 1000000000, &start, &end),
                     CR_OK, "version 1");
        CHECK_EQ_I64(end - start, (int64_t)23 * 3600 * 1000000000, "a 23-hour day");
    }
    cr_zone_free(zone);
    free(v1);
    CHECK_EQ_I64(cr_zone_parse(NULL, 0, &zone), CR_E_TZ_DATA, "no bytes");
    CHECK_EQ_I64(cr_zone_parse((const uint8_t *)"TZif", 4, &zone), CR_E_TZ_DATA, "a header");
    free(bytes);
}

static void test_names(void)
{
    const char *good[] = {"UTC",       "Europe/Berlin", "America/Argentina/Buenos_Aires",
                          "Etc/GMT+5", "Etc/GMT-14",    "posix/Europe/Paris"};
    const char *bad[] = {
        "",        "/etc/passwd", "../etc/passwd",  "Europe/../../etc", "Europe//Berlin",
        "Europe/", "./UTC",       "Europe/Ber lin", "Europe\\Berlin",   "a\nb"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(cr_zone_name_valid(good[i], strlen(good[i])), "%s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(!cr_zone_name_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
        const cr_zone *zone = NULL;
        CHECK_EQ_I64(cr_zone_open(bad[i], strlen(bad[i]), NULL, 0, &zone), CR_E_TZ, "%s", bad[i]);
    }
    const cr_zone *zone = NULL;
    CHECK_EQ_I64(cr_zone_open("Mars/Olympus_Mons", 17, NULL, 0, &zone), CR_E_TZ, "unknown zone");
    CHECK(zone == NULL, "no zone");
    cr_zone *read = NULL;
    CHECK_EQ_I64(cr_zone_read("Europe/Berlin", 13, "/nonexistent", &read), CR_E_TZ, "a TZDIR");
    CHECK_EQ_I64(cr_zone_read("Europe", 6, NULL, &read), CR_E_TZ, "a directory");
    /* a name need not be NUL-terminated */
    CHECK_EQ_I64(cr_zone_open("UTC+junk", 3, NULL, 0, &zone), CR_OK, "UTC of a longer text");
    CHECK_EQ_STR(cr_zone_name(zone), "UTC", "its name");
}

static void test_periods(void)
{
    const cr_zone *utc = zone_named("UTC");
    int64_t start = 0, end = 0;
    const cr_period bad[] = {{CR_PERIOD_DAY, 0},
                             {CR_PERIOD_DAY, -1},
                             {CR_PERIOD_YEAR, 11},
                             {CR_PERIOD_MONTH, 121},
                             {(cr_period_unit)4, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_I64(cr_period_bounds(utc, bad[i], 0, &start, &end), CR_E_CALENDAR_PERIOD,
                     "period %zu", i);
    const cr_period year10 = {CR_PERIOD_YEAR, 10}, day3660 = {CR_PERIOD_DAY, 3660};
    CHECK(cr_period_valid(year10) && cr_period_valid(day3660), "the longest periods");
    CHECK_EQ_I64(cr_period_bounds(utc, year10, -1, &start, &end), CR_E_NOW, "before the epoch");
    CHECK_EQ_I64(cr_period_bounds(utc, year10, CR_HORIZON_NS, &start, &end), CR_E_NOW, "horizon");
    /* the last instant before the horizon (2116-02-20): its decade ends in 2120 */
    CHECK_EQ_I64(cr_period_bounds(utc, year10, CR_HORIZON_NS - 1, &start, &end), CR_OK, "horizon");
    CHECK_EQ_I64(end, (int64_t)4733510400 * 1000000000, "2120-01-01");
    /* the epoch's own day, week (Monday 1969-12-29 .. ) and month */
    const cr_period week = {CR_PERIOD_WEEK, 1};
    CHECK_EQ_I64(cr_period_bounds(utc, week, 0, &start, &end), CR_OK, "the epoch");
    CHECK_EQ_I64(start, (int64_t)-3 * 86400 * 1000000000, "Monday 1969-12-29");
    CHECK_EQ_I64(end, (int64_t)4 * 86400 * 1000000000, "Monday 1970-01-05");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    int bounds = run_vectors(dir);
    CHECK(bounds > 10000, "calendar.txt holds %d bounds", bounds);
    test_damaged();
    test_names();
    test_periods();
    printf("calendar: %d bounds\n", bounds);
    return check_summary("test_calendar");
}
