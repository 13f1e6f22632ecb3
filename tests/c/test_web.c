/*
 * The web faces' rules (cellrate/web.h) against tests/vectors/web.txt, the
 * reference model's answers (tests/model/web_model.py): every line, and a
 * few properties the vectors cannot state (a key always fits its buffer and
 * ends in its NUL; no read past a text's length).
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <stdlib.h>

/* A text field of web.txt: percent-decoded into `out` ("-" is empty). */
static size_t decode_text(const char *field, char *out, size_t size)
{
    size_t n = 0;
    if (strcmp(field, "-") == 0)
        return 0;
    for (size_t i = 0; field[i] != '\0' && n < size; i++) {
        if (field[i] == '%' && field[i + 1] != '\0' && field[i + 2] != '\0') {
            char hex[3] = {field[i + 1], field[i + 2], '\0'};
            out[n++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[n++] = field[i];
        }
    }
    return n;
}

static size_t decode_hex(const char *field, uint8_t *out, size_t size)
{
    size_t n = 0;
    if (strcmp(field, "-") == 0)
        return 0;
    for (size_t i = 0; field[i] != '\0' && field[i + 1] != '\0' && n < size; i += 2) {
        char hex[3] = {field[i], field[i + 1], '\0'};
        out[n++] = (uint8_t)strtol(hex, NULL, 16);
    }
    return n;
}

/* The text exactly `len` bytes long on the heap, so that ASan sees a read
 * past it. */
static char *exact_copy(const char *text, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (copy != NULL && len > 0)
        memcpy(copy, text, len);
    return copy;
}

static void key_of(char *out, const cr_address *address, int ipv4, int ipv6)
{
    memset(out, 'x', CR_ADDRESS_KEY_MAX);
    const size_t len = cr_address_key(out, address, ipv4, ipv6);
    CHECK(len < CR_ADDRESS_KEY_MAX && out[len] == '\0' && strlen(out) == len,
          "the key fits its buffer and ends in its NUL (%zu)", len);
}

static cr_status status_named(const char *name)
{
    for (int status = 0; status < CR_STATUS_COUNT; status++)
        if (strcmp(cr_status_name((cr_status)status), name) == 0)
            return (cr_status)status;
    return CR_STATUS_COUNT;
}

/* The networks of a comma-separated list ("-": none), parsed; their count. */
static size_t networks_of(const char *list, cr_network *networks, size_t most)
{
    size_t count = 0;
    if (strcmp(list, "-") == 0)
        return 0;
    char copy[512];
    if (strlen(list) >= sizeof copy)
        return 0;
    memcpy(copy, list, strlen(list) + 1);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item && count < most;
         item = strtok_r(NULL, ",", &save)) {
        CHECK_EQ_I64(cr_network_parse(&networks[count], item, strlen(item)), CR_OK,
                     "trusted network %s", item);
        count++;
    }
    return count;
}

enum { LINE_MAX_BYTES = 8192 };

static void test_vectors(const char *dir)
{
    FILE *file = vectors_open(dir, "web.txt");
    static char line[LINE_MAX_BYTES], text[LINE_MAX_BYTES];
    char kind[32], a[LINE_MAX_BYTES], b[LINE_MAX_BYTES], c[LINE_MAX_BYTES], d[128], e[128], f[128];
    char key[CR_ADDRESS_KEY_MAX];
    int lineno = 0, lines = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        lines++;
        const int fields = sscanf(line, "%31s %8191s %8191s %8191s %127s %127s %127s", kind, a, b,
                                  c, d, e, f);
        cr_address address;
        if (strcmp(kind, "key") == 0 && fields == 5) {
            const size_t len = decode_text(a, text, sizeof text);
            char *exact = exact_copy(text, len);
            const bool parsed = cr_address_parse(&address, exact, len);
            free(exact);
            CHECK(parsed == (address.family != 0), "web.txt:%d: true with a family", lineno);
            key_of(key, &address, atoi(b), atoi(c));
            CHECK_EQ_STR(key, d, "web.txt:%d: key", lineno);
        } else if (strcmp(kind, "bytes") == 0 && fields == 5) {
            uint8_t bytes[64];
            const size_t len = decode_hex(a, bytes, sizeof bytes);
            cr_address_from_bytes(&address, bytes, len);
            key_of(key, &address, atoi(b), atoi(c));
            CHECK_EQ_STR(key, d, "web.txt:%d: key of bytes", lineno);
        } else if (strcmp(kind, "hop") == 0 && fields == 3) {
            const size_t len = decode_text(a, text, sizeof text);
            char *exact = exact_copy(text, len);
            cr_address_parse_hop(&address, exact, len);
            free(exact);
            key_of(key, &address, 32, 128);
            CHECK_EQ_STR(key, b, "web.txt:%d: hop", lineno);
        } else if (strcmp(kind, "network") == 0 && (fields == 3 || fields == 4)) {
            const size_t len = decode_text(a, text, sizeof text);
            char *exact = exact_copy(text, len);
            cr_network network;
            const cr_status status = cr_network_parse(&network, exact, len);
            free(exact);
            if (strcmp(b, "bad") == 0) {
                CHECK_EQ_I64(status, CR_E_TRUSTED_PROXIES, "web.txt:%d: network refused", lineno);
                continue;
            }
            if (!CHECK_EQ_I64(status, CR_OK, "web.txt:%d: network", lineno))
                continue;
            key_of(key, &network.base, 32, 128);
            CHECK_EQ_STR(key, b, "web.txt:%d: network address", lineno);
            CHECK_EQ_I64(network.prefix, atoi(c), "web.txt:%d: network prefix", lineno);
        } else if (strcmp(kind, "trust") == 0 && fields == 4) {
            cr_network network;
            size_t len = decode_text(a, text, sizeof text);
            CHECK_EQ_I64(cr_network_parse(&network, text, len), CR_OK, "web.txt:%d", lineno);
            len = decode_text(b, text, sizeof text);
            cr_address_parse(&address, text, len);
            CHECK_EQ_I64(cr_network_contains(&network, 1, &address), atoi(c), "web.txt:%d: trusted",
                         lineno);
        } else if (strcmp(kind, "client") == 0 && fields == 5) {
            cr_network networks[8];
            const size_t count = networks_of(b, networks, 8);
            const size_t len = decode_text(c, text, sizeof text);
            char *exact = exact_copy(text, len);
            const bool found = cr_forwarded_client(
                &address, exact, len,
                strcmp(a, "forwarded") == 0 ? CR_FORWARDED : CR_X_FORWARDED_FOR, networks, count);
            free(exact);
            if (strcmp(d, "-") == 0) {
                CHECK(!found, "web.txt:%d: no hop", lineno);
                continue;
            }
            CHECK(found, "web.txt:%d: a hop", lineno);
            key_of(key, &address, 32, 128);
            CHECK_EQ_STR(key, d, "web.txt:%d: client", lineno);
        } else if (strcmp(kind, "refusal_status") == 0 && fields == 3) {
            CHECK_EQ_I64(cr_refusal_status_check(strtoll(a, NULL, 10)), status_named(b),
                         "web.txt:%d", lineno);
        } else if (strcmp(kind, "prefix") == 0 && fields == 4) {
            const int64_t prefix = strtoll(b, NULL, 10);
            const cr_status status = atoi(a) == 4 ? cr_ipv4_prefix_check(prefix)
                                                  : cr_ipv6_prefix_check(prefix);
            CHECK_EQ_I64(status, status_named(c), "web.txt:%d", lineno);
        } else if (strcmp(kind, "dry_run") == 0 && fields == 3) {
            size_t count = 0;
            const char *const *removed = cr_dry_run_removed(&count);
            bool found = false;
            for (size_t i = 0; i < count; i++)
                found = found || strcmp(removed[i], a) == 0;
            CHECK_EQ_I64(found, strcmp(b, "removed") == 0, "web.txt:%d: %s", lineno, a);
        } else if (strcmp(kind, "count") == 0 && fields == 3) {
            const size_t len = decode_text(a, text, sizeof text);
            char *exact = exact_copy(text, len);
            int64_t count = -1;
            const cr_status status = cr_count_parse(exact, len, &count);
            free(exact);
            if (strcmp(b, "bad") == 0) {
                CHECK_EQ_I64(status, CR_E_CHARGE_COUNT, "web.txt:%d: no count", lineno);
            } else {
                CHECK_EQ_I64(status, CR_OK, "web.txt:%d", lineno);
                CHECK_EQ_I64(count, strtoll(b, NULL, 10), "web.txt:%d: count", lineno);
            }
        } else if (strcmp(kind, "settle") == 0 && (fields == 5 || fields == 7)) {
            const int64_t charged = strtoll(a, NULL, 10);
            const int64_t max_cost = strcmp(c, "-") == 0 ? -1 : strtoll(c, NULL, 10);
            cr_settlement settled;
            const cr_status status = cr_settle(&settled, charged, strtoll(b, NULL, 10), max_cost);
            if (strcmp(d, "bad") == 0) {
                CHECK_EQ_I64(status, CR_E_CHARGE_COUNT, "web.txt:%d: no count", lineno);
                CHECK_EQ_I64(settled.total, charged, "web.txt:%d: as charged", lineno);
                CHECK_EQ_I64(settled.units, 0, "web.txt:%d: nothing settled", lineno);
            } else {
                CHECK_EQ_I64(status, CR_OK, "web.txt:%d", lineno);
                CHECK_EQ_I64(settled.total, strtoll(d, NULL, 10), "web.txt:%d: total", lineno);
                CHECK_EQ_I64(settled.units, strtoll(e, NULL, 10), "web.txt:%d: units", lineno);
                CHECK_EQ_I64(settled.clipped, atoi(f), "web.txt:%d: clipped", lineno);
            }
        } else {
            CHECK(false, "web.txt:%d: unknown line %.60s", lineno, line);
        }
    }
    fclose(file);
    CHECK(lines > 1000, "web.txt has %d lines", lines);
}

/* The rules' messages start with the option's name, as every status's do. */
static void test_statuses_name_their_options(void)
{
    CHECK_EQ_STR(cr_status_param(CR_E_STATUS), "status", "E_STATUS");
    CHECK_EQ_STR(cr_status_param(CR_E_IPV4_PREFIX), "ipv4_prefix", "E_IPV4_PREFIX");
    CHECK_EQ_STR(cr_status_param(CR_E_IPV6_PREFIX), "ipv6_prefix", "E_IPV6_PREFIX");
    CHECK_EQ_STR(cr_status_param(CR_E_TRUSTED_PROXIES), "trusted_proxies", "E_TRUSTED_PROXIES");
    CHECK_EQ_STR(cr_status_param(CR_E_CHARGE_COUNT), "charge", "E_CHARGE_COUNT");
}

/* Every 16-byte address at every IPv6 prefix fits the key buffer; a few
 * hundred thousand pseudo-random addresses, their keys parsed back. */
static void test_keys_fit_and_parse_back(void)
{
    uint64_t state = 0x9e3779b97f4a7c15u;
    char key[CR_ADDRESS_KEY_MAX];
    for (int i = 0; i < 200000; i++) {
        uint8_t bytes[16];
        for (int k = 0; k < 16; k++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            /* zero groups often, so that "::" is written in every position */
            bytes[k] = (state >> 60) < 6 ? 0 : (uint8_t)(state >> 33);
        }
        cr_address address;
        cr_address_from_bytes(&address, bytes, 16);
        const int prefix = (int)((state >> 20) % 129);
        const size_t len = cr_address_key(key, &address, 32, 128);
        cr_address back;
        if (!CHECK(cr_address_parse(&back, key, len), "parses back: %s", key) ||
            !CHECK(back.family == address.family &&
                       memcmp(back.bytes, address.bytes, address.family == 4 ? 4 : 16) == 0,
                   "the same address: %s", key))
            break;
        cr_address_key(key, &address, prefix, prefix);
        CHECK(strlen(key) < CR_ADDRESS_KEY_MAX, "fits: %s", key);
    }
}

int main(int argc, char **argv)
{
    test_vectors(argc > 1 ? argv[1] : "tests/vectors");
    test_statuses_name_their_options();
    test_keys_fit_and_parse_back();
    return check_summary("test_web");
}
