/*
 * The rules of the web faces (cellrate/web.h; docs/design.md §10): one copy
 * for the Python web policy and the nginx helper, which only read a request
 * and call these.
 *
 * The address grammar is Python's ipaddress's (the reference model's,
 * tests/model/web_model.py), not inet_pton's: the two differ at the edges
 * (the text of an IPv4-compatible address, some network forms), and a key
 * must be the same bytes in both faces.
 */
#include "cellrate.h"

#include <string.h>

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static void no_address(cr_address *out) { memset(out, 0, sizeof *out); }

/* Four decimal octets, each 1 to 3 digits, no leading zero, at most 255. */
static bool parse_ipv4(const char *text, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int octet = 0; octet < 4; octet++) {
        if (octet > 0) {
            if (i >= len || text[i] != '.')
                return false;
            i++;
        }
        const size_t start = i;
        unsigned value = 0;
        while (i < len && is_digit(text[i])) {
            if (i - start == 3)
                return false;
            value = value * 10 + (unsigned)(text[i] - '0');
            i++;
        }
        if (i == start || (i - start > 1 && text[start] == '0') || value > 255)
            return false;
        out[octet] = (uint8_t)value;
    }
    return i == len;
}

/* ipaddress's IPv6 grammar (_ip_int_from_string), step by step: the text
 * split at every ':'; an IPv4 tail made two groups; at most one empty part
 * inside ("::"), which must stand for at least one group; an empty first or
 * last part only as the end of a "::"; every other part 1 to 4 hex digits. */
#define IPV6_GROUPS 8
#define IPV6_MOST_PARTS (IPV6_GROUPS + 1)

static bool parse_ipv6(const char *text, size_t len, uint8_t out[16])
{
    /* Each part: its group's value, or -1 for an empty part. */
    int32_t part[IPV6_MOST_PARTS + 1];
    size_t count = 0, start = 0, colons = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != ':')
            continue;
        colons += i < len;
        const char *piece = text + start;
        const size_t piece_len = i - start;
        start = i + 1;
        if (i == len && memchr(piece, '.', piece_len) != NULL) {
            uint8_t v4[4];
            if (!parse_ipv4(piece, piece_len, v4) || count + 2 > IPV6_MOST_PARTS)
                return false;
            part[count++] = v4[0] << 8 | v4[1];
            part[count++] = v4[2] << 8 | v4[3];
            break;
        }
        if (count == IPV6_MOST_PARTS)
            return false;
        if (piece_len == 0) {
            part[count++] = -1;
            continue;
        }
        if (piece_len > 4)
            return false;
        int32_t value = 0;
        for (size_t k = 0; k < piece_len; k++) {
            const int digit = hex_value(piece[k]);
            if (digit < 0)
                return false;
            value = value << 4 | digit;
        }
        part[count++] = value;
    }
    if (colons < 2) /* at least three parts, an IPv4 tail counted as one */
        return false;
    size_t skip = 0; /* the empty part inside, 0 for none */
    for (size_t i = 1; i + 1 < count; i++) {
        if (part[i] < 0) {
            if (skip != 0)
                return false;
            skip = i;
        }
    }
    size_t high, low;
    if (skip != 0) {
        high = skip;
        low = count - skip - 1;
        if (part[0] < 0 && --high != 0)
            return false;
        if (part[count - 1] < 0 && --low != 0)
            return false;
        if (high + low >= IPV6_GROUPS)
            return false;
    } else {
        if (count != IPV6_GROUPS)
            return false;
        high = count;
        low = 0;
    }
    if (high > IPV6_GROUPS || low > IPV6_GROUPS) /* never: said for the compiler's bounds */
        return false;
    memset(out, 0, 16);
    for (size_t i = 0; i < high; i++) {
        if (part[i] < 0)
            return false;
        out[2 * i] = (uint8_t)(part[i] >> 8);
        out[2 * i + 1] = (uint8_t)part[i];
    }
    for (size_t i = 0; i < low; i++) {
        const int32_t value = part[count - low + i];
        if (value < 0)
            return false;
        const size_t group = IPV6_GROUPS - low + i;
        out[2 * group] = (uint8_t)(value >> 8);
        out[2 * group + 1] = (uint8_t)value;
    }
    return true;
}

static const uint8_t MAPPED_PREFIX[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* 16 bytes as an address: an IPv4-mapped one as its IPv4 address. */
static void set_ipv6(cr_address *out, const uint8_t bytes[16])
{
    memset(out, 0, sizeof *out);
    if (memcmp(bytes, MAPPED_PREFIX, sizeof MAPPED_PREFIX) == 0) {
        out->family = 4;
        memcpy(out->bytes, bytes + 12, 4);
        return;
    }
    out->family = 6;
    memcpy(out->bytes, bytes, 16);
}

bool cr_address_parse(cr_address *out, const char *text, size_t len)
{
    const char *colon = memchr(text, ':', len);
    if (colon == NULL) {
        uint8_t v4[4];
        if (!parse_ipv4(text, len, v4)) {
            no_address(out);
            return false;
        }
        memset(out, 0, sizeof *out);
        out->family = 4;
        memcpy(out->bytes, v4, 4);
        return true;
    }
    const char *zone = memchr(text, '%', len);
    uint8_t v6[16];
    if (!parse_ipv6(text, zone != NULL ? (size_t)(zone - text) : len, v6)) {
        no_address(out);
        return false;
    }
    set_ipv6(out, v6);
    return true;
}

bool cr_address_parse_hop(cr_address *out, const char *hop, size_t len)
{
    size_t start = 0, end = len;
    while (start < end && is_ows(hop[start]))
        start++;
    while (end > start && is_ows(hop[end - 1]))
        end--;
    while (start < end && hop[start] == '"')
        start++;
    while (end > start && hop[end - 1] == '"')
        end--;
    const char *text = hop + start;
    size_t text_len = end - start;
    if (text_len > 0 && text[0] == '[') {
        /* "[v6]:port", or "[v6" without its bracket */
        const char *close = memchr(text, ']', text_len);
        text++;
        text_len = close != NULL ? (size_t)(close - text) : text_len - 1;
    } else {
        /* "v4:port": one colon (a bare IPv6 address has several) */
        const char *colon = memchr(text, ':', text_len);
        if (colon != NULL && memchr(colon + 1, ':', text_len - (size_t)(colon + 1 - text)) == NULL)
            text_len = (size_t)(colon - text);
    }
    return cr_address_parse(out, text, text_len);
}

bool cr_address_from_bytes(cr_address *out, const void *bytes, size_t len)
{
    if (len == 4) {
        memset(out, 0, sizeof *out);
        out->family = 4;
        memcpy(out->bytes, bytes, 4);
        return true;
    }
    if (len == 16) {
        set_ipv6(out, bytes);
        return true;
    }
    no_address(out);
    return false;
}

cr_status cr_ipv4_prefix_check(int64_t prefix)
{
    return prefix >= 0 && prefix <= CR_IPV4_PREFIX_MAX ? CR_OK : CR_E_IPV4_PREFIX;
}

cr_status cr_ipv6_prefix_check(int64_t prefix)
{
    return prefix >= 0 && prefix <= CR_IPV6_PREFIX_MAX ? CR_OK : CR_E_IPV6_PREFIX;
}

/* `bytes` (`size` of them) with every bit after the first `prefix` cleared. */
static void mask_bytes(uint8_t *bytes, size_t size, int prefix)
{
    for (size_t i = 0; i < size; i++) {
        const int kept = prefix - (int)i * 8;
        if (kept <= 0)
            bytes[i] = 0;
        else if (kept < 8)
            bytes[i] &= (uint8_t)(0xff << (8 - kept));
    }
}

static size_t write_decimal(char *out, unsigned value)
{
    char digits[10];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    for (size_t i = 0; i < count; i++)
        out[i] = digits[count - 1 - i];
    return count;
}

static size_t write_ipv4(char *out, const uint8_t bytes[4])
{
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            out[n++] = '.';
        n += write_decimal(out + n, bytes[i]);
    }
    return n;
}

/* RFC 5952: groups in lower-case hex without leading zeros; the first
 * longest run of two or more zero groups is "::". */
static size_t write_ipv6(char *out, const uint8_t bytes[16])
{
    static const char hex[] = "0123456789abcdef";
    unsigned group[IPV6_GROUPS];
    for (int i = 0; i < IPV6_GROUPS; i++)
        group[i] = (unsigned)bytes[2 * i] << 8 | bytes[2 * i + 1];
    int best_start = -1, best_len = 0;
    for (int i = 0; i < IPV6_GROUPS;) {
        if (group[i] != 0) {
            i++;
            continue;
        }
        int j = i;
        while (j < IPV6_GROUPS && group[j] == 0)
            j++;
        if (j - i > best_len) {
            best_start = i;
            best_len = j - i;
        }
        i = j;
    }
    if (best_len < 2) {
        best_start = -1;
        best_len = 0;
    }
    size_t n = 0;
    for (int i = 0; i < IPV6_GROUPS; i++) {
        if (i == best_start) {
            out[n++] = ':';
            out[n++] = ':';
            i += best_len - 1;
            continue;
        }
        if (i > 0 && i != best_start + best_len)
            out[n++] = ':';
        bool leading = true;
        for (int shift = 12; shift >= 0; shift -= 4) {
            const unsigned digit = group[i] >> shift & 0xf;
            if (leading && digit == 0 && shift != 0)
                continue;
            leading = false;
            out[n++] = hex[digit];
        }
    }
    return n;
}

size_t cr_address_key(char *out, const cr_address *address, int ipv4_prefix, int ipv6_prefix)
{
    size_t n;
    int prefix, bits;
    uint8_t bytes[16];
    if (address->family == 4) {
        prefix = ipv4_prefix;
        bits = 32;
        memcpy(bytes, address->bytes, 4);
        mask_bytes(bytes, 4, prefix);
        n = write_ipv4(out, bytes);
    } else if (address->family == 6) {
        prefix = ipv6_prefix;
        bits = 128;
        memcpy(bytes, address->bytes, 16);
        mask_bytes(bytes, 16, prefix);
        n = write_ipv6(out, bytes);
    } else {
        n = sizeof CR_ADDRESS_UNKNOWN - 1;
        memcpy(out, CR_ADDRESS_UNKNOWN, n + 1);
        return n;
    }
    if (prefix != bits) {
        out[n++] = '/';
        n += write_decimal(out + n, (unsigned)prefix);
    }
    out[n] = '\0';
    return n;
}

/* ipaddress's prefix length text: ASCII digits (leading zeros allowed), at
 * most `bits`. */
static bool parse_prefix_digits(const char *text, size_t len, int bits, int *prefix)
{
    if (len == 0)
        return false;
    int value = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(text[i]))
            return false;
        value = value * 10 + (text[i] - '0');
        if (value > bits)
            return false;
    }
    *prefix = value;
    return true;
}

/* The prefix of a netmask (ones, then zeros), or of a hostmask (zeros, then
 * ones); all ones and all zeros are netmasks, as ipaddress takes them. */
static bool prefix_of_mask(uint32_t mask, int *prefix)
{
    for (int pass = 0; pass < 2; pass++) {
        const uint32_t ones = pass == 0 ? mask : ~mask;
        int leading = 0;
        while (leading < 32 && (ones >> (31 - leading) & 1) != 0)
            leading++;
        const uint32_t expected = leading == 0 ? 0 : UINT32_MAX << (32 - leading);
        if (ones == expected) {
            *prefix = leading;
            return true;
        }
    }
    return false;
}

cr_status cr_network_parse(cr_network *out, const char *text, size_t len)
{
    memset(out, 0, sizeof *out);
    const char *slash = memchr(text, '/', len);
    const size_t address_len = slash != NULL ? (size_t)(slash - text) : len;
    const char *mask = slash != NULL ? slash + 1 : NULL;
    const size_t mask_len = slash != NULL ? len - address_len - 1 : 0;
    if (mask != NULL && memchr(mask, '/', mask_len) != NULL)
        return CR_E_TRUSTED_PROXIES;
    uint8_t bytes[16];
    if (memchr(text, ':', address_len) == NULL) {
        int prefix = 32;
        if (!parse_ipv4(text, address_len, bytes))
            return CR_E_TRUSTED_PROXIES;
        if (mask != NULL && !parse_prefix_digits(mask, mask_len, 32, &prefix)) {
            uint8_t mask_bytes4[4];
            if (!parse_ipv4(mask, mask_len, mask_bytes4) ||
                !prefix_of_mask((uint32_t)mask_bytes4[0] << 24 | (uint32_t)mask_bytes4[1] << 16 |
                                    (uint32_t)mask_bytes4[2] << 8 | mask_bytes4[3],
                                &prefix))
                return CR_E_TRUSTED_PROXIES;
        }
        out->base.family = 4;
        memcpy(out->base.bytes, bytes, 4);
        mask_bytes(out->base.bytes, 4, prefix);
        out->prefix = prefix;
        return CR_OK;
    }
    /* A zone, as ipaddress takes one: not empty, one '%' */
    size_t v6_len = address_len;
    const char *zone = memchr(text, '%', address_len);
    if (zone != NULL) {
        v6_len = (size_t)(zone - text);
        const size_t zone_len = address_len - v6_len - 1;
        if (zone_len == 0 || memchr(zone + 1, '%', zone_len) != NULL)
            return CR_E_TRUSTED_PROXIES;
    }
    int prefix = 128;
    if (!parse_ipv6(text, v6_len, bytes) ||
        (mask != NULL && !parse_prefix_digits(mask, mask_len, 128, &prefix)))
        return CR_E_TRUSTED_PROXIES;
    mask_bytes(bytes, 16, prefix);
    if (prefix >= 96 && memcmp(bytes, MAPPED_PREFIX, sizeof MAPPED_PREFIX) == 0) {
        out->base.family = 4;
        memcpy(out->base.bytes, bytes + 12, 4);
        out->prefix = prefix - 96;
        return CR_OK;
    }
    out->base.family = 6;
    memcpy(out->base.bytes, bytes, 16);
    out->prefix = prefix;
    return CR_OK;
}

bool cr_network_contains(const cr_network *networks, size_t count, const cr_address *address)
{
    if (address->family == 0)
        return false;
    const size_t size = address->family == 4 ? 4 : 16;
    for (size_t i = 0; i < count; i++) {
        const cr_network *network = &networks[i];
        if (network->base.family != address->family)
            continue;
        uint8_t masked[16];
        memcpy(masked, address->bytes, size);
        mask_bytes(masked, size, network->prefix);
        if (memcmp(masked, network->base.bytes, size) == 0)
            return true;
    }
    return false;
}

/* ASCII "for", in any case, with whitespace (SP, HTAB) around it. */
static bool names_for(const char *name, size_t len)
{
    while (len > 0 && is_ows(name[0])) {
        name++;
        len--;
    }
    while (len > 0 && is_ows(name[len - 1]))
        len--;
    return len == 3 && (name[0] | 0x20) == 'f' && (name[1] | 0x20) == 'o' &&
           (name[2] | 0x20) == 'r';
}

bool cr_forwarded_client(cr_address *client, const char *value, size_t len, cr_proxy_field field,
                         const cr_network *trusted, size_t count)
{
    bool found = false;
    no_address(client);
    if (len == 0)
        return false;
    /* From the right: each piece between separators (Forwarded: its pairs,
     * split at ',' and at ';' alike, keep their order). */
    size_t end = len;
    for (;;) {
        size_t start = end;
        while (start > 0 && value[start - 1] != ',' &&
               !(field == CR_FORWARDED && value[start - 1] == ';'))
            start--;
        const char *piece = value + start;
        size_t piece_len = end - start;
        bool is_hop = true;
        if (field == CR_FORWARDED) {
            const char *equals = memchr(piece, '=', piece_len);
            const size_t name_len = equals != NULL ? (size_t)(equals - piece) : piece_len;
            is_hop = names_for(piece, name_len);
            piece = equals != NULL ? equals + 1 : piece + piece_len;
            piece_len = equals != NULL ? piece_len - name_len - 1 : 0;
        }
        if (is_hop) {
            found = true;
            if (!cr_address_parse_hop(client, piece, piece_len) ||
                !cr_network_contains(trusted, count, client))
                return true;
        }
        if (start == 0)
            return found;
        end = start - 1;
    }
}

cr_status cr_refusal_status_check(int64_t status)
{
    return status >= CR_REFUSAL_STATUS_MIN && status <= CR_REFUSAL_STATUS_MAX ? CR_OK : CR_E_STATUS;
}

static const char *const DRY_RUN_REMOVED[] = {"Retry-After"};

const char *const *cr_dry_run_removed(size_t *count)
{
    *count = sizeof DRY_RUN_REMOVED / sizeof DRY_RUN_REMOVED[0];
    return DRY_RUN_REMOVED;
}

cr_status cr_count_parse(const char *text, size_t len, int64_t *count)
{
    size_t start = 0, end = len;
    while (start < end && is_ows(text[start]))
        start++;
    while (end > start && is_ows(text[end - 1]))
        end--;
    if (start == end)
        return CR_E_CHARGE_COUNT;
    int64_t value = 0;
    for (size_t i = start; i < end; i++) {
        if (!is_digit(text[i]))
            return CR_E_CHARGE_COUNT;
        const int digit = text[i] - '0';
        value = value > (INT64_MAX - digit) / 10 ? INT64_MAX : value * 10 + digit;
    }
    *count = value;
    return CR_OK;
}

cr_status cr_settle(cr_settlement *out, int64_t charged, int64_t count, int64_t max_cost)
{
    out->total = charged;
    out->units = 0;
    out->clipped = false;
    if (count < 0)
        return CR_E_CHARGE_COUNT;
    out->clipped = max_cost >= 0 && count > max_cost;
    out->total = out->clipped ? max_cost : count;
    out->units = out->total - charged;
    return CR_OK;
}
