/*
 * cellrate/calendar.h: time zones (TZif data) and calendar periods: the
 * boundaries of a day, ISO week, month or year (or a whole multiple of one)
 * at local midnight in a named IANA zone (docs/design.md §19).
 *
 * A part of cellrate.h (include <cellrate.h>). A cr_zone is immutable once
 * made: any number of threads may read it at once.
 */
#ifndef CELLRATE_CALENDAR_H
#define CELLRATE_CALENDAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* A time zone: its transitions and the POSIX rule of its footer. Opaque. */
typedef struct cr_zone cr_zone;

/* The calendar units. A week is the ISO week: Monday to Sunday. */
typedef enum cr_period_unit {
    CR_PERIOD_DAY = 0,
    CR_PERIOD_WEEK = 1,
    CR_PERIOD_MONTH = 2,
    CR_PERIOD_YEAR = 3
} cr_period_unit;

/* `count` whole units. Multiples are aligned: days to 1970-01-01, weeks to
 * Monday 1969-12-29, months to January of year 0 (3 months: quarters), years
 * to year 0 (10 years: 2020-2029), all in the zone's local dates. At most
 * about 10 years: 3660 days, 522 weeks, 120 months, 10 years. */
typedef struct cr_period {
    cr_period_unit unit;
    int32_t count; /* >= 1 */
} cr_period;

/* "day", "week", "month", "year" ("" out of range). */
const char *cr_period_unit_name(cr_period_unit unit);

/* Whether `period` is one cr_period_bounds takes (a unit, 1 <= count, at
 * most about 10 years). */
bool cr_period_valid(cr_period period);

/* The longest the period can last, in ns (the nominal length, months of 31
 * days, years of 366, plus an hour for a change of offset). */
int64_t cr_period_longest_ns(cr_period period);

/*
 * Parses TZif data (RFC 8536, versions 1 to 4) from the caller's `bytes`
 * into a new zone (*zone; free with cr_zone_free). Pure: no I/O; reads only
 * bytes[0 .. len); every count is checked against the length before it is
 * used. Version 2+ data uses the 64-bit block and the footer's POSIX TZ rule,
 * which gives the offsets after the last transition. CR_E_TZ_DATA: not TZif,
 * truncated, inconsistent, leap-second ("right/") data, or a footer rule it
 * cannot read; CR_E_NOMEM.
 */
cr_status cr_zone_parse(const uint8_t *bytes, size_t len, cr_zone **zone);

/* Frees a zone of cr_zone_parse or cr_zone_read; NULL is a no-op. Never
 * free one of cr_zone_open. */
void cr_zone_free(cr_zone *zone);

/* Whether `name` may name a zone file: 1 to 255 bytes of letters, digits,
 * '_', '-', '+', '.' and '/', not starting with '/', with no empty, "." or
 * ".." component. */
bool cr_zone_name_valid(const char *name, size_t len);

/* Reads the zone `name` (need not be NUL-terminated) from the directory
 * `tzdir` (NULL: the TZDIR environment variable, else /usr/share/zoneinfo)
 * and parses it. CR_E_TZ: an invalid name or no such zone file; else as
 * cr_zone_parse. */
cr_status cr_zone_read(const char *name, size_t len, const char *tzdir, cr_zone **zone);

/* The process's zone of that name, made once and kept for the life of the
 * process (a limit holds it by address and is copied freely). With `bytes`
 * (not NULL), those bytes are the zone's TZif data (a face that carries the
 * tzdata package where the system has none); else cr_zone_read(name, len,
 * NULL). A zone once made answers for its name from then on. Thread-safe. */
cr_status cr_zone_open(const char *name, size_t len, const uint8_t *bytes, size_t bytes_len,
                       const cr_zone **zone);

/* UTC, built in: no file is read (a calendar limit's zone when none is given). */
const cr_zone *cr_zone_utc(void);

/* The zone's name as it was opened ("" for a zone of cr_zone_parse). */
const char *cr_zone_name(const cr_zone *zone);

/* The offset from UTC, in seconds, in force at `seconds` since the epoch. */
int32_t cr_zone_offset(const cr_zone *zone, int64_t seconds);

/*
 * The period of `zone` that holds the instant `now_ns` (ns since the Unix
 * epoch, 0 <= now_ns < CR_HORIZON_NS): *start_ns <= now_ns < *end_ns. A
 * period starts at the first instant whose local date is its first day (local
 * midnight, or the end of a gap that skips it). CR_E_NOW, CR_E_CALENDAR_PERIOD.
 */
cr_status cr_period_bounds(const cr_zone *zone, cr_period period, int64_t now_ns, int64_t *start_ns,
                           int64_t *end_ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_CALENDAR_H */
