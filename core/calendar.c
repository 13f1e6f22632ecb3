/* Time zones from TZif data (RFC 8536) and the calendar periods of a zone
 * (docs/design.md §19). Times here are whole seconds since the epoch: every
 * transition and offset is, so every boundary is. */
#include "calendar.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A date of a POSIX TZ rule: Jn (1..365, no Feb 29), n (0..365), Mm.w.d. */
typedef struct {
    char kind; /* 'J', 'D' (zero-based day), 'M' */
    int month, week, weekday, day;
    int32_t time; /* seconds after local midnight; -167h .. 167h (TZif v3) */
} rule_date;

typedef struct {
    int32_t std_offset; /* seconds east of UTC */
    int32_t dst_offset;
    bool has_dst;
    rule_date start, end;
} tz_rule;

struct cr_zone {
    int64_t *times; /* ascending transition instants */
    uint8_t *types; /* the local time type from each transition on */
    int32_t *offsets;
    uint32_t time_count;
    uint32_t type_count;
    bool has_rule; /* a footer rule: it holds after the last transition */
    tz_rule rule;
    char name[256];
};

#define MAX_TRANSITIONS 100000u
#define MAX_OFFSET 93599 /* 26 h - 1 s: RFC 8536's bound on utoff */
#define DAY 86400

/* ------------------------------------------------------------------------ */
/* Civil dates (proleptic Gregorian), by days since 1970-01-01               */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t days_from_civil(int64_t year, int month, int day)
{
    year -= month <= 2;
    const int64_t era = floor_div(year, 400);
    const int64_t yoe = year - era * 400;
    const int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t days, int64_t *year, int *month, int *day)
{
    days += 719468;
    const int64_t era = floor_div(days, 146097);
    const int64_t doe = days - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (*month <= 2);
}

static bool is_leap(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

static int month_days(int64_t year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return days[month - 1] + (month == 2 && is_leap(year));
}

/* ------------------------------------------------------------------------ */
/* The footer: a POSIX TZ string, "std offset [dst [offset] [,start,end]]"  */

typedef struct {
    const char *at;
    const char *end;
} cursor;

static bool read_int(cursor *c, int max_digits, int *value)
{
    int n = 0, digits = 0;
    while (c->at < c->end && *c->at >= '0' && *c->at <= '9' && digits < max_digits) {
        n = n * 10 + (*c->at - '0');
        c->at++;
        digits++;
    }
    *value = n;
    return digits > 0;
}

/* A zone abbreviation: three or more letters, or <...> of [A-Za-z0-9+-]. */
static bool read_abbreviation(cursor *c)
{
    size_t n = 0;
    if (c->at < c->end && *c->at == '<') {
        c->at++;
        while (c->at < c->end && *c->at != '>') {
            char ch = *c->at;
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '+' || ch == '-'))
                return false;
            c->at++;
            n++;
        }
        if (c->at == c->end)
            return false;
        c->at++;
        return n >= 3;
    }
    while (c->at < c->end &&
           ((*c->at >= 'A' && *c->at <= 'Z') || (*c->at >= 'a' && *c->at <= 'z'))) {
        c->at++;
        n++;
    }
    return n >= 3;
}

/* [+-]hh[:mm[:ss]], hours up to max_hours; seconds, signed as written. */
static bool read_hms(cursor *c, int max_hours, int32_t *seconds)
{
    int sign = 1, hours, minutes = 0, secs = 0;
    if (c->at < c->end && (*c->at == '+' || *c->at == '-')) {
        sign = *c->at == '-' ? -1 : 1;
        c->at++;
    }
    if (!read_int(c, 3, &hours) || hours > max_hours)
        return false;
    if (c->at < c->end && *c->at == ':') {
        c->at++;
        if (!read_int(c, 2, &minutes) || minutes > 59)
            return false;
        if (c->at < c->end && *c->at == ':') {
            c->at++;
            if (!read_int(c, 2, &secs) || secs > 59)
                return false;
        }
    }
    *seconds = sign * (hours * 3600 + minutes * 60 + secs);
    return true;
}

static bool read_rule_date(cursor *c, rule_date *date)
{
    memset(date, 0, sizeof *date);
    if (c->at < c->end && *c->at == 'J') {
        c->at++;
        date->kind = 'J';
        if (!read_int(c, 3, &date->day) || date->day < 1 || date->day > 365)
            return false;
    } else if (c->at < c->end && *c->at == 'M') {
        c->at++;
        date->kind = 'M';
        if (!read_int(c, 2, &date->month) || date->month < 1 || date->month > 12)
            return false;
        if (c->at == c->end || *c->at++ != '.')
            return false;
        if (!read_int(c, 1, &date->week) || date->week < 1 || date->week > 5)
            return false;
        if (c->at == c->end || *c->at++ != '.')
            return false;
        if (!read_int(c, 1, &date->weekday) || date->weekday > 6)
            return false;
    } else {
        date->kind = 'D';
        if (!read_int(c, 3, &date->day) || date->day > 365)
            return false;
    }
    date->time = 2 * 3600;
    if (c->at < c->end && *c->at == '/') {
        c->at++;
        if (!read_hms(c, 167, &date->time))
            return false;
    }
    return true;
}

static bool parse_rule(const char *text, size_t len, tz_rule *rule)
{
    cursor c = {text, text + len};
    int32_t posix;
    memset(rule, 0, sizeof *rule);
    if (!read_abbreviation(&c) || !read_hms(&c, 24, &posix))
        return false;
    rule->std_offset = -posix; /* POSIX counts west of Greenwich */
    if (c.at == c.end)
        return true;
    if (!read_abbreviation(&c))
        return false;
    rule->has_dst = true;
    rule->dst_offset = rule->std_offset + 3600;
    if (c.at < c.end && *c.at != ',') {
        if (!read_hms(&c, 24, &posix))
            return false;
        rule->dst_offset = -posix;
    }
    if (c.at == c.end) { /* no dates: the US rules, as POSIX suggests */
        rule->start = (rule_date){'M', 3, 2, 0, 0, 7200};
        rule->end = (rule_date){'M', 11, 1, 0, 0, 7200};
        return true;
    }
    if (*c.at++ != ',' || !read_rule_date(&c, &rule->start))
        return false;
    if (c.at == c.end || *c.at++ != ',' || !read_rule_date(&c, &rule->end))
        return false;
    return c.at == c.end;
}

/* The day (since the epoch) of a rule's date in `year`. */
static int64_t rule_day(const rule_date *date, int64_t year)
{
    const int64_t jan1 = days_from_civil(year, 1, 1);
    switch (date->kind) {
    case 'J':
        return jan1 + date->day - 1 + (is_leap(year) && date->day >= 60);
    case 'D':
        return jan1 + date->day;
    default: {
        const int64_t first = days_from_civil(year, date->month, 1);
        const int first_weekday = (int)((first % 7 + 11) % 7); /* 1970-01-01: Thursday (4) */
        int day = 1 + (date->weekday - first_weekday + 7) % 7 + (date->week - 1) * 7;
        while (day > month_days(year, date->month))
            day -= 7;
        return first + day - 1;
    }
    }
}

/* A run of one offset: from `from` (inclusive) to `until` (exclusive). */
typedef struct {
    int32_t offset;
    int64_t until;
} segment;

/* The rule's offset at `t`, and when it next changes. */
static segment rule_segment(const tz_rule *rule, int64_t t)
{
    segment s = {rule->std_offset, INT64_MAX};
    if (!rule->has_dst)
        return s;
    int64_t year;
    int month, day;
    civil_from_days(floor_div(t, DAY), &year, &month, &day);
    /* The changes of three years around t, in order; at one instant an end
     * comes before a start (DST all year: "0/0,J365/25"). */
    int64_t when[6];
    int32_t to[6];
    int n = 0;
    for (int64_t y = year - 1; y <= year + 1; y++) {
        const int64_t start = rule_day(&rule->start, y) * DAY + rule->start.time - rule->std_offset;
        const int64_t end = rule_day(&rule->end, y) * DAY + rule->end.time - rule->dst_offset;
        when[n] = end;
        to[n++] = rule->std_offset;
        when[n] = start;
        to[n++] = rule->dst_offset;
    }
    for (int i = 1; i < n; i++) { /* insertion sort, stable */
        for (int j = i; j > 0 && when[j - 1] > when[j]; j--) {
            int64_t w = when[j];
            when[j] = when[j - 1];
            when[j - 1] = w;
            int32_t o = to[j];
            to[j] = to[j - 1];
            to[j - 1] = o;
        }
    }
    for (int i = 0; i < n; i++) {
        if (when[i] <= t)
            s.offset = to[i];
        else {
            s.until = when[i];
            break;
        }
    }
    return s;
}

static segment zone_segment(const cr_zone *zone, int64_t t)
{
    const uint32_t n = zone->time_count;
    if (n == 0 || t >= zone->times[n - 1]) {
        if (zone->has_rule)
            return rule_segment(&zone->rule, t);
        segment s = {zone->offsets[n == 0 ? 0 : zone->types[n - 1]], INT64_MAX};
        return s;
    }
    if (t < zone->times[0]) {
        segment s = {zone->offsets[0], zone->times[0]};
        return s;
    }
    uint32_t lo = 0, hi = n - 1; /* times[lo] <= t < times[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (zone->times[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    segment s = {zone->offsets[zone->types[lo]], zone->times[hi]};
    return s;
}

int32_t cr_zone_offset(const cr_zone *zone, int64_t seconds)
{
    return zone_segment(zone, seconds).offset;
}

/* The first instant at which the local time is `local` or later: local
 * midnight, or where a gap that skips it ends. Starts two days early, where
 * the local time is surely before `local` (offsets are below 26 h), and
 * walks the runs of one offset forward. */
static int64_t first_local(const cr_zone *zone, int64_t local)
{
    int64_t t = local - 2 * DAY;
    segment s = {0, 0};
    for (int guard = 0; guard < 1000; guard++) {
        s = zone_segment(zone, t);
        int64_t at = local - s.offset;
        if (at < t)
            at = t;
        if (at < s.until)
            return at;
        t = s.until;
    }
    return local - s.offset; /* not reached: a zone changes offset far less often */
}

/* ------------------------------------------------------------------------ */
/* Periods                                                                   */

static const char *const unit_names[] = {"day", "week", "month", "year"};

const char *cr_period_unit_name(cr_period_unit unit)
{
    return (unsigned)unit < 4 ? unit_names[unit] : "";
}

static const int32_t unit_days_max[] = {1, 7, 31, 366};
static const int32_t unit_count_max[] = {3660, 522, 120, 10}; /* about 10 years */

bool cr_period_valid(cr_period period)
{
    return (unsigned)period.unit < 4 && period.count >= 1 &&
           period.count <= unit_count_max[period.unit];
}

int64_t cr_period_longest_ns(cr_period period)
{
    return ((int64_t)period.count * unit_days_max[period.unit] * DAY + 3600) * 1000000000;
}

/* The first local day of the k-th period (k counted as the header says). */
static int64_t period_first_day(cr_period period, int64_t k)
{
    switch (period.unit) {
    case CR_PERIOD_DAY:
        return k * period.count;
    case CR_PERIOD_WEEK:
        return k * 7 * period.count - 3; /* day -3: Monday 1969-12-29 */
    case CR_PERIOD_MONTH: {
        const int64_t month = k * period.count;
        return days_from_civil(floor_div(month, 12), (int)(month - floor_div(month, 12) * 12) + 1,
                               1);
    }
    default:
        return days_from_civil(k * period.count, 1, 1);
    }
}

/* The k of the period whose days hold the local day `day`. */
static int64_t period_index(cr_period period, int64_t day)
{
    int64_t year;
    int month, mday;
    switch (period.unit) {
    case CR_PERIOD_DAY:
        return floor_div(day, period.count);
    case CR_PERIOD_WEEK:
        return floor_div(day + 3, 7 * (int64_t)period.count);
    case CR_PERIOD_MONTH:
        civil_from_days(day, &year, &month, &mday);
        return floor_div(year * 12 + month - 1, period.count);
    default:
        civil_from_days(day, &year, &month, &mday);
        return floor_div(year, period.count);
    }
}

cr_status cr_period_bounds(const cr_zone *zone, cr_period period, int64_t now_ns, int64_t *start_ns,
                           int64_t *end_ns)
{
    if (now_ns < 0 || now_ns >= CR_HORIZON_NS)
        return CR_E_NOW;
    if (!cr_period_valid(period))
        return CR_E_CALENDAR_PERIOD;
    const int64_t t = now_ns / 1000000000;
    int64_t k = period_index(period, floor_div(t + cr_zone_offset(zone, t), DAY));
    int64_t start = first_local(zone, period_first_day(period, k) * DAY);
    int64_t end = first_local(zone, period_first_day(period, k + 1) * DAY);
    /* A local date can step back over midnight (an offset falling back
     * across it): then t may lie in a neighbour by the instants' order. */
    for (int guard = 0; guard < 4 && (t < start || t >= end); guard++) {
        k += t < start ? -1 : 1;
        start = first_local(zone, period_first_day(period, k) * DAY);
        end = first_local(zone, period_first_day(period, k + 1) * DAY);
    }
    *start_ns = start * 1000000000;
    *end_ns = end * 1000000000;
    return CR_OK;
}

/* ------------------------------------------------------------------------ */
/* TZif                                                                      */

typedef struct {
    const uint8_t *at;
    size_t left;
} reader;

static bool take(reader *r, size_t n, const uint8_t **out)
{
    if (n > r->left)
        return false;
    *out = r->at;
    r->at += n;
    r->left -= n;
    return true;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int64_t be64(const uint8_t *p) { return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4)); }

typedef struct {
    char version;
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
} tzif_header;

static bool read_header(reader *r, tzif_header *h)
{
    const uint8_t *p;
    if (!take(r, 44, &p) || memcmp(p, "TZif", 4) != 0)
        return false;
    h->version = (char)p[4];
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    return (h->version == 0 || (h->version >= '2' && h->version <= '9')) && h->typecnt >= 1 &&
           h->typecnt <= 256 && h->charcnt >= 1 && h->timecnt <= MAX_TRANSITIONS &&
           (h->isutcnt == 0 || h->isutcnt == h->typecnt) &&
           (h->isstdcnt == 0 || h->isstdcnt == h->typecnt) && h->leapcnt <= MAX_TRANSITIONS;
}

/* Reads one data block (time_size 4: version 1's; 8: version 2+'s) into
 * `zone` when `keep`, else only steps over it. */
static cr_status read_block(reader *r, const tzif_header *h, size_t time_size, bool keep,
                            cr_zone *zone)
{
    const uint8_t *times, *types, *infos, *rest;
    if (!take(r, (size_t)h->timecnt * time_size, &times) || !take(r, h->timecnt, &types) ||
        !take(r, (size_t)h->typecnt * 6, &infos) ||
        !take(r,
              (size_t)h->charcnt + (size_t)h->leapcnt * (time_size + 4) + h->isstdcnt + h->isutcnt,
              &rest))
        return CR_E_TZ_DATA;
    if (!keep)
        return CR_OK;
    if (h->leapcnt != 0) /* "right/" zones count leap seconds: not the clock's time */
        return CR_E_TZ_DATA;
    zone->time_count = h->timecnt;
    zone->type_count = h->typecnt;
    zone->times = malloc(sizeof *zone->times * (h->timecnt ? h->timecnt : 1));
    zone->types = malloc(h->timecnt ? h->timecnt : 1);
    zone->offsets = malloc(sizeof *zone->offsets * h->typecnt);
    if (!zone->times || !zone->types || !zone->offsets)
        return CR_E_NOMEM;
    for (uint32_t i = 0; i < h->typecnt; i++) {
        const int32_t offset = (int32_t)be32(infos + 6 * i);
        if (offset < -MAX_OFFSET || offset > MAX_OFFSET || infos[6 * i + 4] > 1 ||
            infos[6 * i + 5] >= h->charcnt)
            return CR_E_TZ_DATA;
        zone->offsets[i] = offset;
    }
    for (uint32_t i = 0; i < h->timecnt; i++) {
        zone->times[i] = time_size == 4 ? (int64_t)(int32_t)be32(times + 4 * i)
                                        : be64(times + 8 * i);
        zone->types[i] = types[i];
        if (types[i] >= h->typecnt || (i > 0 && zone->times[i] <= zone->times[i - 1]))
            return CR_E_TZ_DATA;
        /* beyond +-2^59 s, a boundary's arithmetic could overflow */
        if (zone->times[i] < -((int64_t)1 << 59) || zone->times[i] > ((int64_t)1 << 59))
            return CR_E_TZ_DATA;
    }
    return CR_OK;
}

cr_status cr_zone_parse(const uint8_t *bytes, size_t len, cr_zone **out)
{
    *out = NULL;
    if (!bytes)
        return CR_E_TZ_DATA;
    reader r = {bytes, len};
    tzif_header h;
    if (!read_header(&r, &h))
        return CR_E_TZ_DATA;
    cr_zone *zone = calloc(1, sizeof *zone);
    if (!zone)
        return CR_E_NOMEM;
    const bool v1 = h.version == 0;
    cr_status status = read_block(&r, &h, 4, v1, zone);
    if (status == CR_OK && !v1) {
        if (!read_header(&r, &h))
            status = CR_E_TZ_DATA;
        else
            status = read_block(&r, &h, 8, true, zone);
        /* The footer: "\n" rule "\n"; an empty rule: none. */
        const uint8_t *newline;
        if (status == CR_OK && (!take(&r, 1, &newline) || *newline != '\n'))
            status = CR_E_TZ_DATA;
        if (status == CR_OK) {
            const uint8_t *text = r.at, *close = memchr(r.at, '\n', r.left);
            if (!close)
                status = CR_E_TZ_DATA;
            else if (close > text) {
                zone->has_rule = true;
                if (!parse_rule((const char *)text, (size_t)(close - text), &zone->rule) ||
                    zone->rule.std_offset < -MAX_OFFSET || zone->rule.std_offset > MAX_OFFSET ||
                    zone->rule.dst_offset < -MAX_OFFSET || zone->rule.dst_offset > MAX_OFFSET)
                    status = CR_E_TZ_DATA;
            }
        }
    }
    if (status != CR_OK) {
        cr_zone_free(zone);
        return status;
    }
    *out = zone;
    return CR_OK;
}

void cr_zone_free(cr_zone *zone)
{
    if (!zone)
        return;
    free(zone->times);
    free(zone->types);
    free(zone->offsets);
    free(zone);
}

const char *cr_zone_name(const cr_zone *zone) { return zone->name; }

/* UTC without a file: no transition, no rule, offset 0. */
static int32_t utc_offsets[1];
static const cr_zone utc_zone = {.offsets = utc_offsets, .type_count = 1, .name = "UTC"};

const cr_zone *cr_zone_utc(void) { return &utc_zone; }

/* ------------------------------------------------------------------------ */
/* A calendar limit's period, cached                                         */

void cr_calendar_bounds(const cr_limit *limit, int64_t now_ns, int64_t *start_ns, int64_t *end_ns)
{
    if (cr_period_bounds(limit->zone, limit->period, now_ns, start_ns, end_ns) != CR_OK) {
        *start_ns = now_ns; /* not reached: the stores pass a valid now */
        *end_ns = now_ns + 1;
        return;
    }
    /* start (seconds, 34 bits: until the year 2514) and length (seconds, 30
     * bits: 34 years) in one word, so that a reader never sees half of one
     * period and half of another; before the epoch or beyond, not cached. */
    const int64_t start = *start_ns / 1000000000, length = (*end_ns - *start_ns) / 1000000000;
    if (start >= 0 && start < ((int64_t)1 << (64 - CR_CALENDAR_LENGTH_BITS)) &&
        length < ((int64_t)1 << CR_CALENDAR_LENGTH_BITS)) {
        const uint64_t word = (uint64_t)start << CR_CALENDAR_LENGTH_BITS | (uint64_t)length;
        /* a limit is never a const object (limit.h): the cache is its one mutable word */
        __atomic_store_n((uint64_t *)&limit->calendar_cache, word, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------------ */
/* Reading a zone's file                                                     */

bool cr_zone_name_valid(const char *name, size_t len)
{
    if (!name || len == 0 || len > 255 || name[0] == '/')
        return false;
    size_t component = 0; /* length of the current component */
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/') {
            const char *begin = name + i - component;
            if (component == 0 || (component == 1 && begin[0] == '.') ||
                (component == 2 && begin[0] == '.' && begin[1] == '.'))
                return false;
            component = 0;
            continue;
        }
        const char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-' || ch == '+' || ch == '.'))
            return false;
        component++;
    }
    return true;
}

#define MAX_ZONE_FILE (1u << 20)

cr_status cr_zone_read(const char *name, size_t len, const char *tzdir, cr_zone **zone)
{
    *zone = NULL;
    if (!cr_zone_name_valid(name, len))
        return CR_E_TZ;
    if (!tzdir || !tzdir[0])
        tzdir = getenv("TZDIR");
    if (!tzdir || !tzdir[0])
        tzdir = "/usr/share/zoneinfo";
    const size_t dir_len = strlen(tzdir);
    char *path = malloc(dir_len + len + 2);
    if (!path)
        return CR_E_NOMEM;
    memcpy(path, tzdir, dir_len);
    path[dir_len] = '/';
    memcpy(path + dir_len + 1, name, len);
    path[dir_len + 1 + len] = '\0';
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    free(path);
    if (fd < 0)
        return CR_E_TZ;
    struct stat st;
    uint8_t *bytes = NULL;
    size_t got = 0;
    cr_status status = CR_E_TZ;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= MAX_ZONE_FILE) {
        bytes = malloc((size_t)st.st_size);
        status = bytes ? CR_OK : CR_E_NOMEM;
        while (status == CR_OK && got < (size_t)st.st_size) {
            ssize_t n = read(fd, bytes + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fd);
    if (status == CR_OK)
        status = cr_zone_parse(bytes, got, zone);
    free(bytes);
    if (status == CR_OK) {
        memcpy((*zone)->name, name, len);
        (*zone)->name[len] = '\0';
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* The process's zones: made once, kept (a limit holds its zone's address)  */

typedef struct opened {
    struct opened *next;
    cr_zone *zone;
} opened;

static pthread_mutex_t opened_lock = PTHREAD_MUTEX_INITIALIZER;
static opened *opened_zones;

cr_status cr_zone_open(const char *name, size_t len, const uint8_t *bytes, size_t bytes_len,
                       const cr_zone **zone)
{
    *zone = NULL;
    if (!cr_zone_name_valid(name, len))
        return CR_E_TZ;
    cr_status status = CR_OK;
    pthread_mutex_lock(&opened_lock);
    for (opened *o = opened_zones; o; o = o->next) {
        if (strlen(o->zone->name) == len && memcmp(o->zone->name, name, len) == 0) {
            *zone = o->zone;
            break;
        }
    }
    if (!*zone) {
        cr_zone *made = NULL;
        status = bytes ? cr_zone_parse(bytes, bytes_len, &made)
                       : cr_zone_read(name, len, NULL, &made);
        opened *o = status == CR_OK ? malloc(sizeof *o) : NULL;
        if (status == CR_OK && !o)
            status = CR_E_NOMEM;
        if (status == CR_OK) {
            memcpy(made->name, name, len);
            made->name[len] = '\0';
            o->zone = made;
            o->next = opened_zones;
            opened_zones = o;
            *zone = made;
        } else {
            cr_zone_free(made);
        }
    }
    pthread_mutex_unlock(&opened_lock);
    return status;
}
