/* The Redis store's protocol (cellrate/redis.h): the words a request sends to
 * redis/decide.lua, a key's name, the reading of replies and error replies,
 * the deny cache's answers, on_error's answers, the probe's back-off. The
 * script is the other side of every rule here; the vectors hold the two to
 * one another (tests/vectors/redis.txt). */
#include <string.h>

#include "cellrate.h"
#include "priority.h"

cr_status cr_redis_check_limit(const cr_limit *limit)
{
    /* a calendar's periods go as whole seconds and the script keeps its
     * times as two numbers: a year carries exactly */
    return limit->algorithm == CR_ALGORITHM_CALENDAR ||
                   limit->tolerance_ns < CR_REDIS_MAX_TOLERANCE_NS
               ? CR_OK
               : CR_E_REDIS_TOLERANCE;
}

cr_status cr_redis_check_penalty(const cr_penalty *penalty)
{
    /* strike_ns * after < within_ns + after: no overflow */
    return penalty->strike_ns * penalty->after < CR_REDIS_MAX_TOLERANCE_NS &&
                   penalty->max_ban_ns < CR_REDIS_MAX_TOLERANCE_NS
               ? CR_OK
               : CR_E_REDIS_PENALTY;
}

/* Copies what fits of `len` bytes to `buf + at` (of `size`); returns at + len. */
static size_t put(char *buf, size_t size, size_t at, const char *bytes, size_t len)
{
    if (at < size && len > 0)
        memcpy(buf + at, bytes, len < size - at ? len : size - at);
    return at + len;
}

size_t cr_redis_key(char *buf, size_t size, const char *prefix, size_t prefix_len, const char *name,
                    size_t name_len, const char *key, size_t key_len)
{
    size_t at = put(buf, size, 0, prefix, prefix_len);
    at = put(buf, size, at, name, name_len);
    if (key != NULL) {
        at = put(buf, size, at, ":", 1);
        at = put(buf, size, at, key, key_len);
    }
    return at;
}

/* A number's decimal digits: at most 20 bytes ("-9223372036854775808"). */
#define DECIMAL_MAX 20

static size_t decimal(char *out, int64_t value)
{
    char digits[DECIMAL_MAX];
    size_t n = 0;
    /* negated in unsigned arithmetic: INT64_MIN has no positive twin */
    uint64_t magnitude = value < 0 ? 0u - (uint64_t)value : (uint64_t)value;
    do {
        digits[n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude > 0);
    size_t len = 0;
    if (value < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = digits[--n];
    return len;
}

/* snprintf's contract on a text built piece by piece: `at` counts every
 * byte, what fits (and a NUL) is written. */
static size_t text_put(char *buf, size_t size, size_t at, const char *bytes, size_t len)
{
    at = put(buf, size > 0 ? size - 1 : 0, at, bytes, len);
    if (size > 0)
        buf[at < size - 1 ? at : size - 1] = '\0';
    return at;
}

/* A calendar's name in a signature: "<count><unit>@<zone>" ("1month@Europe/Berlin"):
 * what makes two calendars of one amount distinct. At most CALENDAR_NAME_MAX bytes. */
#define CALENDAR_NAME_MAX (DECIMAL_MAX + 8 + 255)

static size_t calendar_name(char *out, const cr_limit *limit)
{
    const char *unit = cr_period_unit_name(limit->period.unit);
    const char *zone = cr_zone_name(limit->zone);
    const size_t unit_len = strlen(unit), zone_len = strlen(zone);
    size_t len = decimal(out, limit->period.count);
    memcpy(out + len, unit, unit_len);
    len += unit_len;
    out[len++] = '@';
    memcpy(out + len, zone, zone_len);
    return len + zone_len;
}

size_t cr_redis_signature(char *buf, size_t size, const cr_limit *limit)
{
    const char *algorithm = cr_algorithm_name(limit->algorithm);
    char number[DECIMAL_MAX + 1] = ":";
    size_t at = text_put(buf, size, 0, algorithm, strlen(algorithm));
    if (limit->algorithm == CR_ALGORITHM_CALENDAR) {
        char name[1 + CALENDAR_NAME_MAX] = ":";
        at = text_put(buf, size, at, name, 1 + calendar_name(name + 1, limit));
    } else {
        at = text_put(buf, size, at, number, 1 + decimal(number + 1, limit->tolerance_ns));
    }
    return text_put(buf, size, at, number, 1 + decimal(number + 1, limit->burst));
}

/* Adds a*b to *total, false past SIZE_MAX. */
static bool add_size(size_t *total, size_t a, size_t b)
{
    if (a > 0 && b > (SIZE_MAX - *total) / a)
        return false;
    *total += a * b;
    return true;
}

size_t cr_redis_request_size(const cr_redis_item *items, size_t nitems)
{
    size_t total = 0;
    /* every number, the mode and an algorithm's name fit DECIMAL_MAX bytes */
    if (nitems > SIZE_MAX / 8 || !add_size(&total, CR_REDIS_REQUEST_WORDS(nitems), DECIMAL_MAX))
        return SIZE_MAX;
    /* the wipe marker, "cellrate{TTTT}", and a penalty key's "{TTTT}:" */
    if (!add_size(&total, 1, strlen(CR_REDIS_WIPE_MARKER_PREFIX) + 6 + 7))
        return SIZE_MAX;
    /* a penalty key repeats the first item's prefix, name and key */
    if (nitems > 0 &&
        (!add_size(&total, 1, items[0].prefix_len) || !add_size(&total, 1, items[0].name_len) ||
         !add_size(&total, 1, items[0].key_len)))
        return SIZE_MAX;
    for (size_t i = 0; i < nitems; i++) {
        const cr_redis_item *item = &items[i];
        if (!add_size(&total, 1, item->prefix_len) || !add_size(&total, 1, item->name_len) ||
            !add_size(&total, 1, item->key_len) || !add_size(&total, 1, 1))
            return SIZE_MAX;
        /* a calendar's bounds and its name (calendar_words) */
        if (item->limit->algorithm == CR_ALGORITHM_CALENDAR &&
            !add_size(&total, 1, 4 * (DECIMAL_MAX + 1) + CALENDAR_NAME_MAX))
            return SIZE_MAX;
    }
    return total;
}

/* The request under construction: the buffer and its words. */
typedef struct request {
    char *buf;
    size_t size, at;
    cr_redis_word *words;
    size_t count;
    bool short_of_room;
} request;

static void word_bytes(request *r, const char *bytes, size_t len)
{
    if (len > r->size - r->at) {
        r->short_of_room = true;
        return;
    }
    memcpy(r->buf + r->at, bytes, len);
    r->words[r->count++] = (cr_redis_word){r->at, len};
    r->at += len;
}

static void word_number(request *r, int64_t value)
{
    char digits[DECIMAL_MAX];
    word_bytes(r, digits, decimal(digits, value));
}

/* A penalty's word: "<after>:<strike_ns>:<ban_ns>:<max_ban_ns>". */
static void word_penalty(request *r, const cr_penalty *penalty)
{
    char text[4 * (DECIMAL_MAX + 1)];
    const int64_t numbers[4] = {penalty->after, penalty->strike_ns, penalty->ban_ns,
                                penalty->max_ban_ns};
    size_t len = 0;
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            text[len++] = ':';
        len += decimal(text + len, numbers[i]);
    }
    word_bytes(r, text, len);
}

/* A key of `item` as the next word, written by `write` (cr_redis_key: its
 * state; cr_redis_penalty_key: its strikes). */
typedef size_t key_writer(char *buf, size_t size, const char *prefix, size_t prefix_len,
                          const char *name, size_t name_len, const char *key, size_t key_len);

static void word_key_by(request *r, const cr_redis_item *item, key_writer *write)
{
    const size_t room = r->size - r->at;
    const size_t len = write(r->buf + r->at, room, item->prefix, item->prefix_len, item->name,
                             item->name_len, item->key, item->key_len);
    if (len > room) {
        r->short_of_room = true;
        return;
    }
    r->words[r->count++] = (cr_redis_word){r->at, len};
    r->at += len;
}

static void word_key(request *r, const cr_redis_item *item) { word_key_by(r, item, cr_redis_key); }

/* CRC16 of Redis Cluster (XMODEM: polynomial 0x1021, from 0), a byte at a
 * time: crc16_table[b] is the CRC of the byte b (the model computes it bit by
 * bit; the vectors hold the two to one another). */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b,
    0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
    0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738,
    0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
    0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb,
    0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290, 0x22f3, 0x32d2,
    0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
    0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827,
    0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e, 0xed0f, 0xdd6c, 0xcd4d,
    0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static unsigned crc16(const unsigned char *bytes, size_t len, unsigned crc)
{
    for (size_t i = 0; i < len; i++)
        crc = ((crc << 8) ^ crc16_table[((crc >> 8) ^ bytes[i]) & 0xffu]) & 0xffffu;
    return crc;
}

int64_t cr_redis_slot(const char *key, size_t len)
{
    const char *open = len > 0 ? memchr(key, '{', len) : NULL;
    if (open != NULL) {
        const size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(key + from, '}', len - from);
        if (close != NULL && close > key + from) {
            key += from;
            len = (size_t)(close - key);
        }
    }
    return (int64_t)(crc16((const unsigned char *)key, len, 0) & 0x3fffu);
}

/* A marker's tag is four letters 0x40 | d, d the hex digits of x; CRC16 is
 * linear over same-length messages, so slot(tag(x)) = BASE ^ (L(x) & 0x3fff)
 * with L linear: BASE is the slot of "@@@@", TAG_BIT[b] the least x with
 * L(x) = 1 << b, TAG_KERNEL the x with L(x) = 0 (tests/model/redis_model.py
 * finds each marker's x by search, independently). */
#define TAG_BASE 13881u
static const unsigned tag_bit[14] = {0x1afa, 0x06ed, 0x277b, 0x110c, 0x2a91, 0x39c0, 0x1f63,
                                     0x277f, 0x1104, 0x2208, 0x1bea, 0x04cd, 0x233b, 0x198c};
static const unsigned tag_kernel[4] = {0x0000, 0x5772, 0xaee5, 0xf997};

/* The tag "{TTTT}" of a slot (the wipe marker's, the penalty key's). */
static void slot_tag(char tag[6], int64_t slot)
{
    const unsigned target = (unsigned)slot ^ TAG_BASE;
    unsigned x = 0;
    for (int b = 0; b < 14; b++)
        if (target >> b & 1u)
            x ^= tag_bit[b];
    unsigned least = 0xffffu;
    for (int k = 0; k < 4; k++)
        if ((x ^ tag_kernel[k]) < least)
            least = x ^ tag_kernel[k];
    tag[0] = '{';
    tag[1] = (char)(0x40 | (least >> 12 & 15u));
    tag[2] = (char)(0x40 | (least >> 8 & 15u));
    tag[3] = (char)(0x40 | (least >> 4 & 15u));
    tag[4] = (char)(0x40 | (least & 15u));
    tag[5] = '}';
}

size_t cr_redis_wipe_marker(char *buf, size_t size, const char *key, size_t key_len)
{
    char tag[6];
    slot_tag(tag, cr_redis_slot(key, key_len));
    const size_t at = put(buf, size, 0, CR_REDIS_WIPE_MARKER_PREFIX,
                          strlen(CR_REDIS_WIPE_MARKER_PREFIX));
    return put(buf, size, at, tag, sizeof tag);
}

/* A key as its parts (cr_redis_key's), read without copying them. */
typedef struct key_parts {
    const char *bytes[4];
    size_t len[4];
} key_parts;

/* The byte at `at` of the parts laid end to end (at below their length). */
static char parts_at(const key_parts *parts, size_t at)
{
    int i = 0;
    while (at >= parts->len[i])
        at -= parts->len[i++];
    return parts->bytes[i][at];
}

/* cr_redis_slot of the parts laid end to end. */
static int64_t parts_slot(const key_parts *parts)
{
    const size_t len = parts->len[0] + parts->len[1] + parts->len[2] + parts->len[3];
    size_t from = 0, to = len, open = 0;
    while (open < len && parts_at(parts, open) != '{')
        open++;
    if (open < len) {
        size_t close = open + 1;
        while (close < len && parts_at(parts, close) != '}')
            close++;
        if (close < len && close > open + 1) {
            from = open + 1;
            to = close;
        }
    }
    unsigned crc = 0;
    for (size_t at = from; at < to; at++) {
        const unsigned char byte = (unsigned char)parts_at(parts, at);
        crc = crc16(&byte, 1, crc);
    }
    return (int64_t)(crc & 0x3fffu);
}

size_t cr_redis_penalty_key(char *buf, size_t size, const char *prefix, size_t prefix_len,
                            const char *name, size_t name_len, const char *key, size_t key_len)
{
    const key_parts parts = {{prefix, name, ":", key}, {prefix_len, name_len, 1, key_len}};
    char tag[7];
    slot_tag(tag, parts_slot(&parts));
    tag[6] = ':';
    size_t at = put(buf, size, 0, prefix, prefix_len);
    at = put(buf, size, at, name, name_len);
    at = put(buf, size, at, tag, sizeof tag);
    return put(buf, size, at, key, key_len);
}

/* Whether a request sends its item's penalty: a check or an allow of one key. */
static bool penalized(cr_redis_mode mode, const cr_redis_item *items, size_t nitems)
{
    return nitems == 1 && items[0].penalty != NULL &&
           (mode == CR_REDIS_CHECK || mode == CR_REDIS_ALLOW);
}

/* What every request refuses (cr_redis_request's refusals). */
static cr_status check_request(cr_redis_mode mode, int64_t cost, int64_t now_ns,
                               const cr_redis_item *items, size_t nitems)
{
    if ((unsigned)mode > CR_REDIS_ALLOW_CLASS)
        return CR_E_ITEMS; /* no request of the faces: the script answers no other mode */
    const cr_status checked = cr_check_call(now_ns, cost);
    if (checked != CR_OK)
        return checked == CR_E_COST && mode == CR_REDIS_TAKE ? CR_E_MAX_COST : checked;
    const bool in_class = mode >= CR_REDIS_PEEK_CLASS;
    if (in_class && nitems > 1)
        return cr_priority_items(nitems);
    /* refund, charge and take decide one key (the script refuses several) */
    if (nitems == 0 || (mode >= CR_REDIS_REFUND && nitems != 1))
        return CR_E_ITEMS;
    if (in_class) {
        const cr_status status = cr_priority_check(items[0].limit, items[0].priority);
        if (status != CR_OK)
            return status;
    }
    for (size_t i = 0; i < nitems; i++) {
        const cr_status status = cr_redis_check_limit(items[i].limit);
        if (status != CR_OK)
            return status;
    }
    return penalized(mode, items, nitems) ? cr_redis_check_penalty(items[0].penalty) : CR_OK;
}

/* A request's mode with CR_REDIS_WIPE_MARKER or'ed in (on_wipe="refuse"), and
 * the mode without it nor CR_REDIS_PENALTY (the item's penalty says that). */
static bool is_marked(cr_redis_mode mode) { return ((unsigned)mode & CR_REDIS_WIPE_MARKER) != 0; }

static cr_redis_mode plain_mode(cr_redis_mode mode)
{
    return (cr_redis_mode)((unsigned)mode & ~(unsigned)(CR_REDIS_WIPE_MARKER | CR_REDIS_PENALTY));
}

/* The wipe marker of the key written as word `first` (a request's first key). */
static void word_marker(request *r, size_t first)
{
    if (r->short_of_room)
        return;
    const size_t room = r->size - r->at;
    const size_t len = cr_redis_wipe_marker(r->buf + r->at, room, r->buf + r->words[first].offset,
                                            r->words[first].len);
    if (len > room) {
        r->short_of_room = true;
    } else {
        r->words[r->count++] = (cr_redis_word){r->at, len};
        r->at += len;
    }
}

/* A calendar's words in the place of emission_ns and tolerance_ns: the
 * bounds, in seconds, of the period holding the client's `at_ns` and of its
 * neighbours, "<previous start>:<start>:<end>:<next end>" (the script picks
 * the one holding the server's now), then its name (calendar_name). */
static void calendar_words(request *r, const cr_limit *limit, int64_t at_ns)
{
    int64_t bounds[4] = {0};
    /* at_ns is valid (cr_check_call, or the realtime clock) */
    (void)cr_period_bounds(limit->zone, limit->period, at_ns, &bounds[1], &bounds[2]);
    int64_t unused;
    /* an empty neighbour at the ends of time (never within a store's clock) */
    if (bounds[1] <= 0 ||
        cr_period_bounds(limit->zone, limit->period, bounds[1] - 1, &bounds[0], &unused) != CR_OK)
        bounds[0] = bounds[1];
    if (cr_period_bounds(limit->zone, limit->period, bounds[2], &unused, &bounds[3]) != CR_OK)
        bounds[3] = bounds[2];
    char text[4 * (DECIMAL_MAX + 1)];
    size_t len = 0;
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            text[len++] = ':';
        len += decimal(text + len, bounds[i] / 1000000000); /* whole seconds */
    }
    word_bytes(r, text, len);
    char name[CALENDAR_NAME_MAX];
    word_bytes(r, name, calendar_name(name, limit));
}

/* The ARGV words of one request (after its keys); how many: argv_words. A
 * calendar's periods are those around now_ns, or the realtime clock's
 * (`*clock_ns`, read once, at the first calendar) for the server's clock. */
static void request_argv(request *r, cr_redis_mode mode, int64_t cost, int64_t now_ns,
                         const cr_redis_item *items, size_t nitems, int64_t *clock_ns)
{
    const bool penalty = penalized(mode, items, nitems);
    word_number(r, (int64_t)mode + (penalty ? CR_REDIS_PENALTY : 0));
    word_number(r, cost);
    for (size_t i = 0; i < nitems; i++) {
        const cr_limit *limit = items[i].limit;
        const char *algorithm = cr_algorithm_name(limit->algorithm);
        word_bytes(r, algorithm, strlen(algorithm));
        if (limit->algorithm == CR_ALGORITHM_CALENDAR) {
            if (now_ns == CR_CLOCK && *clock_ns == CR_CLOCK)
                *clock_ns = cr_realtime_ns();
            calendar_words(r, limit, now_ns != CR_CLOCK ? now_ns : *clock_ns);
        } else {
            word_number(r, limit->emission_ns);
            word_number(r, limit->tolerance_ns);
        }
        word_number(r, limit->burst);
    }
    if (mode == CR_REDIS_CHARGE)
        word_number(r, items[0].limit->max_debt);
    if (mode >= CR_REDIS_PEEK_CLASS)
        word_number(r, items[0].limit->priorities[items[0].priority].reserve_ns);
    if (penalty) /* one word: each more costs every admission the script's Lua string */
        word_penalty(r, items[0].penalty);
    if (now_ns != CR_CLOCK)
        word_number(r, now_ns);
}

static size_t argv_words(cr_redis_mode mode, int64_t now_ns, const cr_redis_item *items,
                         size_t nitems)
{
    return 2 + 4 * nitems + (mode == CR_REDIS_CHARGE) + (mode >= CR_REDIS_PEEK_CLASS) +
           (size_t)penalized(mode, items, nitems) + (now_ns != CR_CLOCK);
}

/* A penalized request's last key: its item's penalty key. */
static void word_penalty_key(request *r, const cr_redis_item *item)
{
    word_key_by(r, item, cr_redis_penalty_key);
}

cr_status cr_redis_request(cr_redis_mode mode, int64_t cost, int64_t now_ns,
                           const cr_redis_item *items, size_t nitems, char *buf, size_t size,
                           cr_redis_word *words, size_t *count)
{
    const bool marked = is_marked(mode);
    mode = plain_mode(mode);
    const cr_status checked = check_request(mode, cost, now_ns, items, nitems);
    if (checked != CR_OK)
        return checked;
    const bool penalty = penalized(mode, items, nitems);
    request r = {buf, size, 0, words, 0, false};
    word_number(&r, (int64_t)nitems + (marked ? 1 : 0) + (penalty ? 1 : 0));
    for (size_t i = 0; i < nitems; i++)
        word_key(&r, &items[i]);
    if (marked)
        word_marker(&r, 1);
    if (penalty)
        word_penalty_key(&r, &items[0]);
    int64_t clock_ns = CR_CLOCK;
    request_argv(&r, mode, cost, now_ns, items, nitems, &clock_ns);
    if (r.short_of_room)
        return CR_E_NOMEM;
    *count = r.count;
    return CR_OK;
}

size_t cr_redis_batch_size(const cr_redis_call *calls, size_t ncalls)
{
    size_t total = 0;
    /* each call's counts and the batch's fit DECIMAL_MAX bytes each */
    if (ncalls > SIZE_MAX / 8 || !add_size(&total, 2 + 2 * ncalls, DECIMAL_MAX))
        return SIZE_MAX;
    for (size_t i = 0; i < ncalls; i++) {
        const size_t size = cr_redis_request_size(calls[i].items, calls[i].nitems);
        if (size == SIZE_MAX || !add_size(&total, 1, size))
            return SIZE_MAX;
    }
    return total;
}

cr_status cr_redis_batch(const cr_redis_call *calls, size_t ncalls, int64_t now_ns, char *buf,
                         size_t size, cr_redis_word *words, size_t *count, size_t *failed)
{
    size_t unused;
    if (failed == NULL)
        failed = &unused;
    *failed = ncalls;
    if (ncalls == 0)
        return CR_E_ITEMS;
    if (ncalls > CR_REDIS_BATCH_MAX)
        return CR_E_REDIS_BATCH;
    size_t nkeys = 0;
    for (size_t i = 0; i < ncalls; i++) {
        const cr_redis_call *call = &calls[i];
        const cr_status checked = check_request(plain_mode(call->mode), call->cost, now_ns,
                                                call->items, call->nitems);
        if (checked != CR_OK) {
            *failed = i;
            return checked;
        }
        nkeys += call->nitems + (is_marked(call->mode) ? 1 : 0) +
                 (size_t)penalized(plain_mode(call->mode), call->items, call->nitems);
    }
    request r = {buf, size, 0, words, 0, false};
    word_number(&r, (int64_t)nkeys);
    for (size_t i = 0; i < ncalls; i++) {
        const cr_redis_mode mode = plain_mode(calls[i].mode);
        const size_t first = r.count;
        for (size_t j = 0; j < calls[i].nitems; j++)
            word_key(&r, &calls[i].items[j]);
        if (is_marked(calls[i].mode))
            word_marker(&r, first);
        if (penalized(mode, calls[i].items, calls[i].nitems))
            word_penalty_key(&r, &calls[i].items[0]);
    }
    word_number(&r, (int64_t)ncalls);
    int64_t clock_ns = CR_CLOCK; /* one reading for every calendar of the batch */
    for (size_t i = 0; i < ncalls; i++) {
        const cr_redis_call *call = &calls[i];
        const cr_redis_mode mode = plain_mode(call->mode);
        word_number(&r, (int64_t)(call->nitems + (is_marked(call->mode) ? 1 : 0) +
                                  (size_t)penalized(mode, call->items, call->nitems)));
        word_number(&r, (int64_t)argv_words(mode, now_ns, call->items, call->nitems));
        request_argv(&r, mode, call->cost, now_ns, call->items, call->nitems, &clock_ns);
    }
    if (r.short_of_room)
        return CR_E_NOMEM;
    *count = r.count;
    return CR_OK;
}

/* RESP's header of an array or a bulk string: `kind`, the decimal `n`, CRLF. */
static size_t resp_header(char *out, size_t size, size_t at, char kind, size_t n)
{
    char digits[24];
    size_t len = 0;
    do {
        digits[len++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    if (at <= size && size - at >= len + 3) {
        out[at] = kind;
        for (size_t i = 0; i < len; i++)
            out[at + 1 + i] = digits[len - 1 - i];
        out[at + 1 + len] = '\r';
        out[at + 2 + len] = '\n';
    }
    return len + 3;
}

/* A bulk string: its header, its bytes, CRLF (written where they fit). */
static size_t resp_bulk(char *out, size_t size, size_t at, const char *bytes, size_t len)
{
    const size_t header = resp_header(out, size, at, '$', len);
    if (at <= size && size - at >= header + len + 2) {
        if (len > 0)
            memcpy(out + at + header, bytes, len);
        out[at + header + len] = '\r';
        out[at + header + len + 1] = '\n';
    }
    return header + len + 2;
}

size_t cr_redis_command(const char *const *head, const size_t *head_len, size_t nhead,
                        const char *buf, const cr_redis_word *words, size_t count, char *out,
                        size_t size)
{
    if (nhead > SIZE_MAX - count)
        return SIZE_MAX;
    size_t at = resp_header(out, size, 0, '*', nhead + count);
    for (size_t i = 0; i < nhead + count; i++) {
        const char *bytes = i < nhead ? head[i] : buf + words[i - nhead].offset;
        const size_t len = i < nhead ? head_len[i] : words[i - nhead].len;
        if (len > SIZE_MAX - 64 - at)
            return SIZE_MAX;
        at += resp_bulk(out, size, at, bytes, len);
    }
    return at;
}

cr_status cr_redis_batch_reply(size_t ncalls, bool is_list, size_t nelements)
{
    return is_list && ncalls > 0 && nelements == ncalls ? CR_OK : CR_E_REDIS_REPLY;
}

cr_status cr_redis_parse_integer(const char *text, size_t len, int64_t *value)
{
    size_t i = 0;
    const bool negative = len > 0 && text[0] == '-';
    if (negative)
        i = 1;
    if (i == len)
        return CR_E_REDIS_REPLY;
    /* accumulated negatively: INT64_MIN has no positive twin */
    int64_t total = 0;
    for (; i < len; i++) {
        const int digit = text[i] - '0';
        if (digit < 0 || digit > 9 || total < (INT64_MIN + digit) / 10)
            return CR_E_REDIS_REPLY;
        total = total * 10 - digit;
    }
    if (!negative && total == INT64_MIN)
        return CR_E_REDIS_REPLY;
    *value = negative ? total : -total;
    return CR_OK;
}

/* The decision of the fields {allowed, remaining, retry_after_ns (-1: never),
 * reset_after_ns} for `limit`. */
static bool read_decision(const int64_t *fields, const cr_limit *limit, cr_decision *out)
{
    const int64_t allowed = fields[0], remaining = fields[1], retry = fields[2], reset = fields[3];
    if ((allowed != 0 && allowed != 1) || remaining < 0 || retry < -1 || reset < 0 ||
        (allowed == 1 && retry != 0))
        return false;
    *out = (cr_decision){
        .allowed = allowed == 1,
        .limit = limit->burst,
        .remaining = remaining,
        .retry_after_ns = retry == -1 ? CR_NEVER : retry,
        .reset_after_ns = reset,
    };
    return true;
}

cr_redis_mode cr_redis_plain_mode(cr_redis_mode mode)
{
    return mode >= CR_REDIS_PEEK_CLASS && mode <= CR_REDIS_ALLOW_CLASS
               ? (cr_redis_mode)(mode - CR_REDIS_PEEK_CLASS)
               : mode;
}

cr_status cr_redis_read_reply(cr_redis_mode mode, bool is_list, const int64_t *fields,
                              size_t nfields, const cr_limit *const *limits, size_t nlimits,
                              cr_redis_answer *out)
{
    memset(out, 0, sizeof *out);
    mode = cr_redis_plain_mode(mode); /* a class's reply is its plain mode's */
    if (nlimits == 0 || (unsigned)mode > CR_REDIS_TAKE)
        return CR_E_REDIS_REPLY;
    if (!is_list) {
        if (nfields != 1)
            return CR_E_REDIS_REPLY;
        const int64_t integer = fields[0];
        switch (mode) {
        case CR_REDIS_ALLOW: /* an admission, the verdict alone */
            if (integer != 1)
                return CR_E_REDIS_REPLY;
            out->decision = (cr_decision){.allowed = true, .limit = limits[0]->burst};
            return CR_OK;
        case CR_REDIS_REFUND:
            if (integer != 0 && integer != 1)
                return CR_E_REDIS_REPLY;
            out->count = integer;
            return CR_OK;
        case CR_REDIS_TAKE:
            if (integer < 0)
                return CR_E_REDIS_REPLY;
            out->count = integer;
            return CR_OK;
        default:
            return CR_E_REDIS_REPLY;
        }
    }
    /* {allowed, remaining, retry_after_ns, reset_after_ns, index[, clipped]} */
    const size_t expected = mode == CR_REDIS_CHARGE ? 6 : 5;
    if (mode == CR_REDIS_REFUND || mode == CR_REDIS_TAKE || nfields != expected)
        return CR_E_REDIS_REPLY;
    const int64_t index = fields[4];
    if (index < 1 || (uint64_t)index > nlimits)
        return CR_E_REDIS_REPLY;
    if (!read_decision(fields, limits[index - 1], &out->decision))
        return CR_E_REDIS_REPLY;
    if (mode == CR_REDIS_ALLOW && out->decision.allowed)
        return CR_E_REDIS_REPLY; /* allow answers an admission by 1 alone */
    if (mode == CR_REDIS_CHARGE) {
        if (fields[5] != 0 && fields[5] != 1)
            return CR_E_REDIS_REPLY;
        out->decision.clipped = fields[5] == 1;
    }
    out->index = (size_t)(index - 1);
    return CR_OK;
}

/* NULL-terminated: the words a face lists and cr_redis_classify reads. */
static const char *const unavailable_replies[] = {
    "OOM",        /* full at maxmemory */
    "BUSY",       /* another script running */
    "LOADING",    /* a restart loading its data */
    "READONLY",   /* a replica, after a failover */
    "MASTERDOWN", /* a replica that lost its master */
    "NOREPLICAS", /* a master short of the replicas min-replicas-to-write asks for */
    "TRYAGAIN",   /* a cluster moving the slot */
    "CLUSTERDOWN", NULL,
};

const char *cr_redis_unavailable_reply(size_t i)
{
    return i < sizeof unavailable_replies / sizeof unavailable_replies[0] - 1
               ? unavailable_replies[i]
               : NULL;
}

static bool word_is(const char *word, size_t word_len, const char *name)
{
    return strlen(name) == word_len && memcmp(word, name, word_len) == 0;
}

/* The offset of `needle` in `text`, or len when it is not there. */
static size_t find(const char *text, size_t len, const char *needle)
{
    const size_t needle_len = strlen(needle);
    for (size_t at = 0; needle_len <= len && at <= len - needle_len; at++)
        if (memcmp(text + at, needle, needle_len) == 0)
            return at;
    return len;
}

cr_redis_failure cr_redis_classify(const char *word, size_t word_len, const char *text,
                                   size_t text_len, size_t *message_at)
{
    /* the script's own reply first: it starts with ERR, a mistake's word */
    const size_t at = text != NULL ? find(text, text_len, CR_REDIS_ALGORITHM_REPLY) : text_len;
    if (at < text_len) {
        if (message_at != NULL)
            *message_at = at + strlen("cellrate: ");
        return CR_REDIS_WRONG_ALGORITHM;
    }
    if (word == NULL || word_len == 0)
        return CR_REDIS_CANNOT_DECIDE; /* no reply: no connection, no answer in time */
    for (size_t i = 0; unavailable_replies[i] != NULL; i++)
        if (word_is(word, word_len, unavailable_replies[i]))
            return CR_REDIS_CANNOT_DECIDE;
    if (word_is(word, word_len, "CROSSSLOT"))
        return CR_REDIS_CROSS_SLOT;
    if (word_is(word, word_len, "NOSCRIPT"))
        return CR_REDIS_NO_SCRIPT;
    return CR_REDIS_MISTAKE;
}

size_t cr_redis_slots_message(char *buf, size_t size, const char *const *keys,
                              const size_t *key_lens, const int64_t *slots, size_t nkeys)
{
    const char *words = cr_strerror(CR_E_REDIS_SLOTS);
    size_t at = text_put(buf, size, 0, words, strlen(words));
    bool first = true;
    for (size_t i = 0; i < nkeys; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = key_lens[j] == key_lens[i] && memcmp(keys[j], keys[i], key_lens[i]) == 0;
        if (seen)
            continue;
        at = text_put(buf, size, at, first ? " '" : ", '", first ? 2 : 3);
        first = false;
        for (size_t k = 0; k < key_lens[i]; k++) {
            const unsigned char byte = (unsigned char)keys[i][k];
            if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
                at = text_put(buf, size, at, (const char *)&byte, 1);
            } else {
                static const char hex[] = "0123456789abcdef";
                const char escaped[4] = {'\\', 'x', hex[byte >> 4], hex[byte & 15]};
                at = text_put(buf, size, at, escaped, 4);
            }
        }
        char slot[DECIMAL_MAX + 2] = "' ";
        const size_t slot_len = slots[i] < 0 ? 1 : decimal(slot + 2, slots[i]);
        if (slots[i] < 0)
            slot[2] = '?';
        at = text_put(buf, size, at, slot, 2 + slot_len);
    }
    return at;
}

bool cr_redis_remember(cr_redis_mode mode, size_t nlimits, int64_t now_ns, int64_t cost,
                       const cr_decision *decision, int64_t asked_ns, cr_redis_refusal *refusal)
{
    /* a charge commits whatever the state, a take, a refund and several
     * limits answer no one key's refusal, an explicit now is not the
     * server's clock; a refusal with no wait (never) implies nothing */
    if (mode > CR_REDIS_ALLOW || nlimits != 1 || now_ns != CR_CLOCK || decision->allowed ||
        decision->retry_after_ns <= 0 || decision->retry_after_ns == CR_NEVER)
        return false;
    *refusal = (cr_redis_refusal){
        .asked_ns = asked_ns,
        .cost = cost,
        .remaining = decision->remaining,
        .retry_after_ns = decision->retry_after_ns,
        .reset_after_ns = decision->reset_after_ns,
    };
    return true;
}

cr_redis_recall cr_redis_recall_refusal(const cr_limit *limit, const cr_redis_refusal *refusal,
                                        cr_redis_mode mode, size_t nlimits, int64_t now_ns,
                                        int64_t cost, int64_t clock_ns, cr_decision *out)
{
    if (mode > CR_REDIS_ALLOW || nlimits != 1 || now_ns != CR_CLOCK)
        return CR_REDIS_ASK;
    /* the instant Redis decided came after asked_ns: the refusal holds at
     * least until asked_ns + retry_after (both below 2^63: a retry_after
     * below CR_NEVER and a monotonic clock) */
    const int64_t aged = clock_ns - refusal->asked_ns;
    if (aged >= refusal->retry_after_ns || aged >= CR_REDIS_DENY_CACHE_MAX_NS)
        return CR_REDIS_EXPIRED;
    int64_t later = 0; /* the wait of the units above the refused cost */
    if (cost != refusal->cost) {
        /* a smaller cost may fit; one above the burst never fits (gcra: cost
         * * T > tau = burst * T; a window admits burst units): no wait */
        if (cost < refusal->cost || cost > limit->burst)
            return CR_REDIS_ASK;
        switch (limit->algorithm) {
        case CR_ALGORITHM_GCRA:
        case CR_ALGORITHM_TOKEN_BUCKET:
            later = (cost - refusal->cost) * limit->emission_ns; /* <= tau: no overflow */
            break;
        case CR_ALGORITHM_FIXED_WINDOW:
            break; /* refused until the window's end, whatever the cost */
        default:
            return CR_REDIS_ASK; /* a sliding window's decay: not known here */
        }
    }
    const int64_t reset = refusal->reset_after_ns - aged;
    *out = (cr_decision){
        .allowed = false,
        .limit = limit->burst,
        .remaining = refusal->remaining,
        .retry_after_ns = refusal->retry_after_ns - aged + later,
        .reset_after_ns = reset > 0 ? reset : 0,
    };
    return CR_REDIS_RECALLED;
}

int64_t cr_redis_unavailable(const cr_limit *limit, bool allow, int64_t cost, int64_t probe_in_ns,
                             cr_decision *out)
{
    if (allow) {
        *out = (cr_decision){.allowed = true, .limit = limit->burst};
        return cost;
    }
    const int64_t wait = probe_in_ns > CR_REDIS_FIRST_BACKOFF_NS ? probe_in_ns
                                                                 : CR_REDIS_FIRST_BACKOFF_NS;
    *out = (cr_decision){
        .allowed = false,
        .limit = limit->burst,
        .retry_after_ns = wait,
        .reset_after_ns = wait,
    };
    return 0;
}

int64_t cr_redis_backoff(int64_t previous_ns)
{
    if (previous_ns <= 0)
        return CR_REDIS_FIRST_BACKOFF_NS;
    return previous_ns >= CR_REDIS_MAX_BACKOFF_NS / 2 ? CR_REDIS_MAX_BACKOFF_NS : 2 * previous_ns;
}

cr_status cr_redis_check_items(const uintptr_t *clients, size_t nitems)
{
    if (nitems == 0)
        return CR_E_REDIS_ITEMS;
    for (size_t i = 0; i < nitems; i++) {
        if (clients[i] == 0)
            return CR_E_REDIS_ITEMS;
        if (clients[i] != clients[0])
            return CR_E_REDIS_CLIENT;
    }
    return CR_OK;
}

cr_status cr_redis_check_change(bool named, const char *algorithm, size_t algorithm_len,
                                const char *given, size_t given_len)
{
    if (!named)
        return CR_E_REDIS_NAME_NEEDED;
    if (given != NULL && (given_len != algorithm_len || memcmp(given, algorithm, given_len) != 0))
        return CR_E_REDIS_ALGORITHM_KEPT;
    return CR_OK;
}

cr_status cr_redis_check_plans(bool named, const cr_plan_table *table)
{
    if (!named)
        return CR_E_REDIS_PLANS_NAME;
    for (int32_t i = 0; i < table->count; i++) {
        const cr_status status = cr_redis_check_limit(&table->limits[i]);
        if (status != CR_OK)
            return status;
    }
    return CR_OK;
}

cr_status cr_redis_fallback_check(const char *on_error, size_t len, bool has_fallback)
{
    const bool fallback = len == 8 && memcmp(on_error, "fallback", 8) == 0;
    return has_fallback && !fallback ? CR_E_REDIS_FALLBACK_UNUSED : CR_OK;
}

cr_status cr_redis_nginx_items(size_t count, bool redis, bool client)
{
    if (redis && count != 1)
        return CR_E_NGINX_REDIS_SEVERAL;
    if (redis != client)
        return redis ? CR_E_NGINX_CLIENT : CR_E_NGINX_CLIENT_UNUSED;
    return CR_OK;
}

cr_status cr_redis_fallback_limit(const cr_limit *limit, double share, cr_limit *out)
{
    if (!(share > 0 && share <= 1))
        return CR_E_REDIS_FALLBACK;
    if (limit->algorithm == CR_ALGORITHM_CALENDAR)
        return CR_E_REDIS_CALENDAR_FALLBACK;
    const char *algorithm = cr_algorithm_name(limit->algorithm);
    cr_limit_args args = {
        .period_s = limit->period_s,
        .has_period = true,
        .algorithm = algorithm,
        .algorithm_len = strlen(algorithm),
    };
    if (cr_algorithm_takes_burst(limit->algorithm)) {
        const double burst = (double)limit->burst * share;
        args.rate = limit->rate * share;
        args.burst = burst >= 1 ? (int64_t)burst : 1;
        args.has_burst = true;
    } else {
        const double rate = limit->rate * share;
        args.rate = rate >= 1 ? (double)(int64_t)rate : 1;
    }
    return cr_limit_init(out, &args) == CR_OK ? CR_OK : CR_E_REDIS_FALLBACK;
}

int64_t cr_redis_going_back(cr_redis_mode mode, int64_t cost, const cr_limit *fallback,
                            int64_t held_remaining, cr_redis_mode *send, bool *settled)
{
    /* a class's check or allow goes back as the plain one: a charge takes no class */
    const cr_redis_mode plain = cr_redis_plain_mode(mode);
    *send = mode;
    *settled = plain != CR_REDIS_PEEK;
    if (!*settled)
        return cost;
    const int64_t remaining = held_remaining < 0                 ? 0
                              : held_remaining > fallback->burst ? fallback->burst
                                                                 : held_remaining;
    const int64_t owed = fallback->burst - remaining;
    if (plain == CR_REDIS_TAKE || plain == CR_REDIS_REFUND) {
        /* they cannot carry the units: the charge of them alone goes first */
        *send = CR_REDIS_CHARGE;
        return owed;
    }
    if (owed == 0)
        return cost;
    *send = CR_REDIS_CHARGE;
    return cost > INT64_MAX - owed ? INT64_MAX : cost + owed;
}
