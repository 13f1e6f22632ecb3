/* The options of every constructor of both faces (cellrate/options.h): the
 * table, the judge of a value and of a set of values, the near name of an
 * unknown one. The reference model (tests/model/options_model.py) writes the
 * table a second time, independently; tests/vectors/options.txt holds the
 * two to each other, row for row, and every face to both. */
#include "cellrate/options.h"
#include "cellrate/concurrency.h"
#include "cellrate/http.h"
#include "cellrate/limit.h"
#include "cellrate/stores.h"
#include "cellrate/web.h"

#include <math.h>
#include <string.h>

/* Rows of the table, by kind. A number's bounds are excluded with
 * CR_OPTION_LOW_OPEN / CR_OPTION_HIGH_OPEN; an integer's are included. */
#define NUMBER_(n, st, lo, hi, fl, fc)                                                    \
    {                                                                                     \
        .name = (n), .kind = CR_OPTION_NUMBER, .status = (st), .low = (lo), .high = (hi), \
        .flags = (fl), .faces = (fc)                                                      \
    }
#define SECONDS_(n, st, lo, hi, fl, fc, ...)                                               \
    {                                                                                      \
        .name = (n), .kind = CR_OPTION_SECONDS, .status = (st), .low = (lo), .high = (hi), \
        .flags = (fl), .faces = (fc), .default_value = __VA_ARGS__                         \
    }
#define INTEGER_(n, st, lo, hi, fl, fc, ...)                                             \
    {                                                                                    \
        .name = (n), .kind = CR_OPTION_INTEGER, .status = (st), .low_integer = (lo),     \
        .high_integer = (hi), .flags = (fl), .faces = (fc), .default_value = __VA_ARGS__ \
    }
#define BOOLEAN_(n, st, fc, ...)                                               \
    {                                                                          \
        .name = (n), .kind = CR_OPTION_BOOLEAN, .status = (st), .faces = (fc), \
        .default_value = __VA_ARGS__                                           \
    }
#define WORD_(n, st, w, fl, fc, ...)                                                      \
    {                                                                                     \
        .name = (n), .kind = CR_OPTION_WORD, .status = (st), .words = (w), .flags = (fl), \
        .faces = (fc), .default_value = __VA_ARGS__                                       \
    }
#define STRING_(n, st, refused, shortest, fl, fc, ...)                                    \
    {                                                                                     \
        .name = (n), .kind = CR_OPTION_STRING, .status = (st), .refuses = (refused),      \
        .min_len = (shortest), .flags = (fl), .faces = (fc), .default_value = __VA_ARGS__ \
    }
#define NAME_(n, st, refused, fl, fc)                                                             \
    {                                                                                             \
        .name = (n), .kind = CR_OPTION_NAME, .status = (st), .refuses = (refused), .flags = (fl), \
        .faces = (fc)                                                                             \
    }
#define OF_KIND_(n, k, st, fc)                                  \
    {                                                           \
        .name = (n), .kind = (k), .status = (st), .faces = (fc) \
    }

#define NONE_                   \
    {                           \
        .type = CR_VALUE_ABSENT \
    }
#define INT_(v)                                  \
    {                                            \
        .type = CR_VALUE_INTEGER, .integer = (v) \
    }
#define NUM_(v)                                \
    {                                          \
        .type = CR_VALUE_NUMBER, .number = (v) \
    }
#define BOOL_(v)                                 \
    {                                            \
        .type = CR_VALUE_BOOLEAN, .boolean = (v) \
    }
#define TEXT_(v)                                                        \
    {                                                                   \
        .type = CR_VALUE_STRING, .text = (v), .text_len = sizeof(v) - 1 \
    }

#define BOTH CR_FACE_BOTH
#define PYTHON CR_FACE_PYTHON
#define LUA CR_FACE_LUA
#define ABOVE CR_OPTION_LOW_OPEN
#define FINITE CR_OPTION_HIGH_OPEN
#define ANY_INTEGER INT64_MAX

/* The options many constructors share, alike. */
#define PERIOD_(fc) NUMBER_("period", CR_E_PERIOD, 0, INFINITY, ABOVE | FINITE, fc)
#define BURST_(fc) INTEGER_("burst", CR_E_BURST, 1, ANY_INTEGER, 0, fc, NONE_)
#define ALGORITHMS_ "gcra token_bucket fixed_window sliding_window"
#define ALGORITHM_(fc) WORD_("algorithm", CR_E_ALGORITHM, ALGORITHMS_, 0, fc, TEXT_("gcra"))
/* In process and through Redis, a calendar quota too (docs/design.md §19), with its zone. */
#define LOCAL_ALGORITHMS_ ALGORITHMS_ " calendar"
#define LOCAL_ALGORITHM_ \
    WORD_("algorithm", CR_E_ALGORITHM, LOCAL_ALGORITHMS_, 0, BOTH, TEXT_("gcra"))
#define TZ_ STRING_("tz", CR_E_TZ, "", 1, 0, BOTH, NONE_)
#define CLOCK_ WORD_("clock", CR_E_CLOCK, "fast monotonic realtime", 0, BOTH, NONE_)
#define SHARED_(fc) OF_KIND_("shared", CR_OPTION_PATH, CR_E_SHARED_PATH, fc)
#define SHARED_MODE_                                                          \
    INTEGER_("shared_mode", CR_E_SHARED_MODE, 0, CR_SHARED_MAX_MODE, 0, BOTH, \
             INT_(CR_SHARED_DEFAULT_MODE))
#define ON_CHANGE_ WORD_("on_change", CR_E_ON_CHANGE, "apply refuse", 0, BOTH, TEXT_("apply"))
#define MAX_COST_(fc) INTEGER_("max_cost", CR_E_MAX_COST, 0, ANY_INTEGER, 0, fc, NONE_)
#define MAX_DEBT_(fc) INTEGER_("max_debt", CR_E_MAX_DEBT, 0, ANY_INTEGER, 0, fc, NONE_)
#define CAPACITY_(fc, ...) \
    INTEGER_("capacity", CR_E_CAPACITY, 1, CR_KEYED_MAX_CAPACITY, 0, fc, __VA_ARGS__)
#define LEASE_(fc, st, fl) \
    SECONDS_("lease", st, 0, INFINITY, ABOVE | FINITE | CR_OPTION_NS | (fl), fc, NONE_)
#define STORE_NAME_ NAME_("name", CR_E_STORE_NAME, "{}:", 0, BOTH)
#define PREFIX_ STRING_("prefix", CR_E_PREFIX, "{}", 0, 0, BOTH, TEXT_("cellrate:"))
#define ON_ERROR_ WORD_("on_error", CR_E_ON_ERROR, "allow deny raise", 0, BOTH, TEXT_("allow"))
#define LIMIT_ON_ERROR_ \
    WORD_("on_error", CR_E_REDIS_ON_ERROR, "allow deny raise fallback", 0, BOTH, TEXT_("allow"))
#define STORE_TIMEOUT_(fc) \
    SECONDS_("timeout", CR_E_STORE_TIMEOUT, 0, INFINITY, ABOVE | FINITE, fc, NUM_(0.25))
#define WAIT_TIMEOUT_ SECONDS_("timeout", CR_E_TIMEOUT, 0, INFINITY, 0, PYTHON, NONE_)
#define KEY_FUNCTION_ OF_KIND_("key", CR_OPTION_FUNCTION, CR_E_KEY_FUNCTION, PYTHON)
#define BLOCK_ BOOLEAN_("block", CR_E_BLOCK, PYTHON, BOOL_(true))
#define OBJECT_(n, fc) OF_KIND_(n, CR_OPTION_OBJECT, CR_OK, fc)

#define LIMITER_FIRST_ PERIOD_(BOTH), BURST_(BOTH)
#define LIMITER_REST_                                                                   \
    CLOCK_, LOCAL_ALGORITHM_, SHARED_(BOTH), SHARED_MODE_, ON_CHANGE_, MAX_COST_(BOTH), \
        MAX_DEBT_(BOTH), TZ_, OBJECT_("priorities", BOTH), OBJECT_("penalty", BOTH)

/* sync: the core's cr_limiter_set_sync judges (a region's, seconds > 0) */
static const cr_option limiter_options[] = {LIMITER_FIRST_, LIMITER_REST_, OBJECT_("sync", BOTH)};
static const cr_option keyed_options[] = {
    LIMITER_FIRST_, CAPACITY_(BOTH, INT_(CR_KEYED_DEFAULT_CAPACITY)), LIMITER_REST_,
    OBJECT_("plans", BOTH), OBJECT_("sync", BOTH)};
static const cr_option limit_options[] = {
    PERIOD_(BOTH),   BURST_(BOTH), LOCAL_ALGORITHM_,
    MAX_DEBT_(BOTH), TZ_,          OBJECT_("priorities", BOTH)};
static const cr_option reconfigure_options[] = {
    PERIOD_(BOTH),
    BURST_(BOTH),
    WORD_("algorithm", CR_E_ALGORITHM, LOCAL_ALGORITHMS_, 0, BOTH, NONE_),
    MAX_DEBT_(BOTH),
    TZ_,
    OBJECT_("plan", BOTH)};
static const cr_option concurrency_options[] = {CAPACITY_(BOTH, NONE_), SHARED_(BOTH), SHARED_MODE_,
                                                LEASE_(BOTH, CR_E_LEASE, 0),
                                                BOOLEAN_("peak", CR_E_PEAK, BOTH, BOOL_(false))};

/* The Redis stores (cellrate.redis; Lua require "cellrate.redis"). */
static const cr_option redis_limiter_options[] = {
    PERIOD_(BOTH),
    BURST_(BOTH),
    LOCAL_ALGORITHM_,
    STORE_NAME_,
    PREFIX_,
    LIMIT_ON_ERROR_,
    OBJECT_("fallback", BOTH),
    BOOLEAN_("deny_cache", CR_E_DENY_CACHE, PYTHON, BOOL_(true)),
    STORE_TIMEOUT_(PYTHON),
    MAX_COST_(BOTH),
    MAX_DEBT_(BOTH),
    BOOLEAN_("coalesce", CR_E_REDIS_COALESCE, PYTHON, BOOL_(false)),
    OBJECT_("priorities", BOTH),
    WORD_("on_wipe", CR_E_REDIS_ON_WIPE, "refuse allow", 0, BOTH, TEXT_("refuse")),
    OBJECT_("plans", BOTH),
    OBJECT_("penalty", BOTH),
    TZ_};
static const cr_option redis_concurrency_options[] = {
    LEASE_(BOTH, CR_E_STORE_LEASE, CR_OPTION_REQUIRED), STORE_NAME_, PREFIX_, ON_ERROR_,
    STORE_TIMEOUT_(PYTHON)};

/* The fleet shares (cellrate.share): the fleet's limit and heartbeats, then
 * the local limiter's own options; what would undo the share is refused. */
#define SHARE_FIRST_                                                                               \
    PERIOD_(BOTH), BURST_(BOTH), NAME_("name", CR_E_FLEET_NAME, "{}:", CR_OPTION_REQUIRED, BOTH),  \
        SECONDS_("interval", CR_E_INTERVAL, 0, INFINITY, ABOVE | FINITE, BOTH, NUM_(1.0)),         \
        SECONDS_("ttl", CR_E_TTL, 0, INFINITY, ABOVE | FINITE, BOTH, NONE_),                       \
        STRING_("member", CR_E_MEMBER, ":", 1, 0, BOTH, NONE_), PREFIX_, STORE_TIMEOUT_(BOTH),     \
        BOOLEAN_("background", CR_E_BACKGROUND, PYTHON, BOOL_(true)), SHARED_(BOTH), SHARED_MODE_, \
        CLOCK_, MAX_DEBT_(BOTH)
#define SHARE_REFUSED_                                                        \
    OF_KIND_("max_cost", CR_OPTION_REFUSED, CR_E_SHARE_MAX_COST, BOTH),       \
        OF_KIND_("algorithm", CR_OPTION_REFUSED, CR_E_SHARE_ALGORITHM, BOTH), \
        OF_KIND_("on_change", CR_OPTION_REFUSED, CR_E_SHARE_ON_CHANGE, BOTH), \
        OF_KIND_("plans", CR_OPTION_REFUSED, CR_E_PLANS_STORE, BOTH)
static const cr_option share_options[] = {SHARE_FIRST_, SHARE_REFUSED_};
static const cr_option keyed_share_options[] = {
    SHARE_FIRST_, CAPACITY_(BOTH, INT_(CR_KEYED_DEFAULT_CAPACITY)), SHARE_REFUSED_};

/* The web policy: Python's cellrate.web.Policy (every adapter), Lua's
 * cellrate.nginx options (limit, hold, charge). A plan given as it is names
 * the RateLimit fields: a policy name. sync: the shared= directory's stores
 * judge it. */
static const cr_option policy_options[] = {
    OBJECT_("limit", PYTHON),
    OBJECT_("routes", PYTHON),
    KEY_FUNCTION_,
    STRING_("key", CR_E_KEY_OPTION, "", 0, CR_OPTION_OR_FUNCTION, LUA, NONE_),
    INTEGER_("cost", CR_E_COST_FUNCTION, 0, ANY_INTEGER, CR_OPTION_OR_FUNCTION, PYTHON, INT_(1)),
    INTEGER_("cost", CR_E_COST, 0, ANY_INTEGER, 0, LUA, INT_(1)),
    BURST_(PYTHON),
    MAX_COST_(PYTHON),
    MAX_DEBT_(PYTHON),
    OF_KIND_("shared", CR_OPTION_PATH, CR_E_SHARED_DIRECTORY, PYTHON),
    OBJECT_("trusted_proxies", PYTHON),
    WORD_("proxy_header", CR_E_PROXY_HEADER, "X-Forwarded-For Forwarded", CR_OPTION_ANY_CASE,
          PYTHON, TEXT_("X-Forwarded-For")),
    INTEGER_("ipv4_prefix", CR_E_IPV4_PREFIX, 0, CR_IPV4_PREFIX_MAX, 0, BOTH,
             INT_(CR_IPV4_PREFIX_DEFAULT)),
    INTEGER_("ipv6_prefix", CR_E_IPV6_PREFIX, 0, CR_IPV6_PREFIX_MAX, 0, BOTH,
             INT_(CR_IPV6_PREFIX_DEFAULT)),
    OBJECT_("exempt_paths", PYTHON),
    OBJECT_("exempt_methods", PYTHON),
    OF_KIND_("exempt", CR_OPTION_FUNCTION, CR_E_EXEMPT, PYTHON),
    INTEGER_("status", CR_E_STATUS, CR_REFUSAL_STATUS_MIN, CR_REFUSAL_STATUS_MAX, 0, BOTH,
             INT_(429)),
    STRING_("body", CR_E_BODY, "", 0, CR_OPTION_BINARY, BOTH, NONE_),
    STRING_("content_type", CR_E_CONTENT_TYPE, "", 0, 0, BOTH, NONE_),
    NAME_("name", CR_E_HEADER_NAME, "", 0, BOTH),
    BOOLEAN_("legacy_headers", CR_E_LEGACY_HEADERS, BOTH, BOOL_(false)),
    BOOLEAN_("admitted_headers", CR_E_ADMITTED_HEADERS, BOTH, BOOL_(false)),
    BOOLEAN_("dry_run", CR_E_DRY_RUN, BOTH, BOOL_(false)),
    OF_KIND_("now", CR_OPTION_FUNCTION, CR_E_NOW_FUNCTION, PYTHON),
    OF_KIND_("charge", CR_OPTION_FUNCTION, CR_E_CHARGE_FUNCTION, PYTHON),
    OBJECT_("concurrency", PYTHON),
    SECONDS_("wait", CR_E_WAIT, 0, INFINITY, 0, LUA, NONE_),
    STRING_("header", CR_E_CHARGE_HEADER, "", 0, 0, LUA, NONE_),
    STRING_("variable", CR_E_CHARGE_VARIABLE, "", 0, 0, LUA, NONE_),
    STRING_("priority", CR_E_PRIORITY, "", 0, CR_OPTION_OR_FUNCTION, BOTH, NONE_),
    OBJECT_("priorities", PYTHON),
    STRING_("tz", CR_E_TZ, "", 1, 0, PYTHON, NONE_),
    OBJECT_("plans", PYTHON),
    NAME_("plan", CR_E_PLAN, "", CR_OPTION_OR_FUNCTION, BOTH),
    OF_KIND_("client", CR_OPTION_FUNCTION, CR_E_NGINX_CLIENT, LUA),
    OBJECT_("sync", PYTHON)};

/* The decorators (Python): @cellrate.limit and @cellrate.concurrent. */
static const cr_option limit_decorator_options[] = {
    PERIOD_(PYTHON),
    BURST_(PYTHON),
    ALGORITHM_(PYTHON),
    KEY_FUNCTION_,
    INTEGER_("cost", CR_E_COST_FUNCTION, 0, ANY_INTEGER, CR_OPTION_OR_FUNCTION, PYTHON, INT_(1)),
    BLOCK_,
    WAIT_TIMEOUT_,
    OBJECT_("limiter", PYTHON),
    STRING_("priority", CR_E_PRIORITY, "", 0, 0, PYTHON, NONE_),
    OBJECT_("priorities", PYTHON),
    OBJECT_("plans", PYTHON),
    STRING_("plan", CR_E_PLAN, "", 0, 0, PYTHON, NONE_)};
static const cr_option concurrent_decorator_options[] = {
    CAPACITY_(PYTHON, NONE_),
    KEY_FUNCTION_,
    INTEGER_("cost", CR_E_HOLD_COST, 1, ANY_INTEGER, 0, PYTHON, INT_(1)),
    BLOCK_,
    WAIT_TIMEOUT_,
    SHARED_(PYTHON),
    LEASE_(PYTHON, CR_E_LEASE, 0),
    OBJECT_("concurrency", PYTHON)};

#define CONSTRUCTOR_(name, options, relations)                           \
    {                                                                    \
        name, options, sizeof(options) / sizeof((options)[0]), relations \
    }
static const cr_constructor constructors[] = {
    CONSTRUCTOR_("Limiter", limiter_options, CR_RELATE_SHARED_MODE),
    CONSTRUCTOR_("KeyedLimiter", keyed_options, CR_RELATE_SHARED_MODE),
    CONSTRUCTOR_("Limit", limit_options, 0),
    CONSTRUCTOR_("reconfigure", reconfigure_options, 0),
    CONSTRUCTOR_("Concurrency", concurrency_options, CR_RELATE_SHARED_MODE),
    CONSTRUCTOR_("RedisLimiter", redis_limiter_options, 0),
    CONSTRUCTOR_("RedisConcurrency", redis_concurrency_options, 0),
    CONSTRUCTOR_("ShareLimiter", share_options, CR_RELATE_SHARED_MODE | CR_RELATE_TTL),
    CONSTRUCTOR_("KeyedShareLimiter", keyed_share_options, CR_RELATE_SHARED_MODE | CR_RELATE_TTL),
    CONSTRUCTOR_("Policy", policy_options, 0),
    CONSTRUCTOR_("limit", limit_decorator_options, 0),
    CONSTRUCTOR_("concurrent", concurrent_decorator_options, 0),
};
#define CONSTRUCTOR_COUNT (sizeof constructors / sizeof constructors[0])

size_t cr_constructor_count(void) { return CONSTRUCTOR_COUNT; }

const cr_constructor *cr_constructor_at(size_t index)
{
    return index < CONSTRUCTOR_COUNT ? &constructors[index] : NULL;
}

static bool same(const char *name, const char *text, size_t len)
{
    return strlen(name) == len && memcmp(name, text, len) == 0;
}

const cr_constructor *cr_constructor_find(const char *name, size_t len)
{
    for (size_t i = 0; i < CONSTRUCTOR_COUNT; i++)
        if (same(constructors[i].name, name, len))
            return &constructors[i];
    return NULL;
}

const cr_option *cr_option_find(const cr_constructor *constructor, unsigned face, const char *name,
                                size_t len)
{
    for (size_t i = 0; i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if ((option->faces & face) && same(option->name, name, len))
            return option;
    }
    return NULL;
}

/* Levenshtein distance of `a` (len bytes) and `b`, or more than
 * CR_OPTION_SUGGEST_EDITS when either is too long to be compared here. */
#define NAME_ROOM 32
static size_t edit_distance(const char *a, size_t a_len, const char *b)
{
    const size_t b_len = strlen(b);
    if (a_len >= NAME_ROOM || b_len >= NAME_ROOM)
        return NAME_ROOM;
    size_t row[NAME_ROOM];
    for (size_t j = 0; j <= b_len; j++)
        row[j] = j;
    for (size_t i = 1; i <= a_len; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b_len; j++) {
            const size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[b_len];
}

const char *cr_option_suggest(const cr_constructor *constructor, unsigned face, const char *name,
                              size_t len)
{
    const char *closest = NULL;
    size_t closest_distance = CR_OPTION_SUGGEST_EDITS + 1;
    for (size_t i = 0; i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if (!(option->faces & face))
            continue;
        const size_t distance = edit_distance(name, len, option->name);
        if (distance < closest_distance) {
            closest = option->name;
            closest_distance = distance;
        }
    }
    return closest;
}

/* ------------------------------------------------------------------------ */
/* Judging                                                                    */

static bool in_range(const cr_option *option, double value)
{
    if (isnan(value))
        return false;
    const bool low_ok = (option->flags & CR_OPTION_LOW_OPEN) ? value > option->low
                                                             : value >= option->low;
    const bool high_ok = (option->flags & CR_OPTION_HIGH_OPEN) ? value < option->high
                                                               : value <= option->high;
    return low_ok && high_ok;
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static bool same_word(const char *word, size_t word_len, const cr_value *given, bool any_case)
{
    if (word_len != given->text_len)
        return false;
    for (size_t i = 0; i < word_len; i++) {
        const char a = word[i], b = given->text[i];
        if (a != b && !(any_case && lower(a) == lower(b)))
            return false;
    }
    return true;
}

/* The word of `option`'s words that `given` names, as `normalised`. */
static bool find_word(const cr_option *option, const cr_value *given, cr_value *normalised)
{
    const bool any_case = (option->flags & CR_OPTION_ANY_CASE) != 0;
    for (const char *word = option->words; *word != '\0';) {
        size_t word_len = strcspn(word, " ");
        if (same_word(word, word_len, given, any_case)) {
            if (!any_case) {
                normalised->text = word;
                normalised->text_len = word_len;
            }
            return true;
        }
        word += word_len;
        word += *word == ' ';
    }
    return false;
}

static bool refuses_a_byte(const cr_option *option, const cr_value *given)
{
    for (size_t i = 0; i < given->text_len; i++)
        if (given->text[i] != '\0' && strchr(option->refuses, given->text[i]) != NULL)
            return true;
    return false;
}

/* A string of a string, word, path or name option. */
static bool text_taken(const cr_option *option, const cr_value *given, cr_value *normalised)
{
    if (given->text == NULL) /* an empty string given without its bytes */
        return given->text_len == 0 && option->kind == CR_OPTION_STRING && option->min_len == 0;
    switch (option->kind) {
    case CR_OPTION_WORD:
        return find_word(option, given, normalised);
    case CR_OPTION_PATH:
        return memchr(given->text, '\0', given->text_len) == NULL;
    case CR_OPTION_NAME:
        return cr_headers_check_name(given->text, given->text_len) == CR_OK &&
               !refuses_a_byte(option, given);
    default:
        return given->text_len >= option->min_len && !refuses_a_byte(option, given);
    }
}

cr_status cr_option_check(const cr_option *option, const cr_value *given, cr_value *normalised,
                          bool *wrong_type)
{
    *normalised = *given;
    *wrong_type = false;
    if (given->type == CR_VALUE_ABSENT) {
        if (option->flags & CR_OPTION_REQUIRED) {
            *wrong_type = true;
            return option->status;
        }
        *normalised = option->default_value;
        return CR_OK;
    }
    bool type_taken = false, value_taken = false;
    switch (option->kind) {
    case CR_OPTION_OBJECT:
        return CR_OK;
    case CR_OPTION_REFUSED:
        return option->status;
    case CR_OPTION_FUNCTION:
        type_taken = value_taken = given->type == CR_VALUE_FUNCTION;
        break;
    case CR_OPTION_NUMBER:
    case CR_OPTION_SECONDS: {
        type_taken = given->type == CR_VALUE_NUMBER || given->type == CR_VALUE_INTEGER;
        if (!type_taken)
            break;
        const double number = given->number;
        normalised->type = CR_VALUE_NUMBER;
        normalised->number = number;
        int64_t ns;
        value_taken = in_range(option, number) &&
                      (!(option->flags & CR_OPTION_NS) ||
                       (cr_seconds_to_ns(number, &ns) == CR_OK && ns >= 1));
        if (value_taken && (option->flags & CR_OPTION_NS))
            normalised->integer = ns; /* the value in ns, judged and rounded once */
        break;
    }
    case CR_OPTION_INTEGER:
        type_taken = given->type == CR_VALUE_INTEGER;
        value_taken = type_taken && given->integer >= option->low_integer &&
                      given->integer <= option->high_integer;
        break;
    case CR_OPTION_BOOLEAN:
        type_taken = value_taken = given->type == CR_VALUE_BOOLEAN;
        break;
    case CR_OPTION_STRING:
    case CR_OPTION_WORD:
    case CR_OPTION_PATH:
    case CR_OPTION_NAME:
        type_taken = given->type == CR_VALUE_STRING;
        value_taken = type_taken && text_taken(option, given, normalised);
        break;
    }
    if (!type_taken && given->type == CR_VALUE_FUNCTION &&
        (option->flags & CR_OPTION_OR_FUNCTION)) {
        *normalised = *given;
        return CR_OK;
    }
    if (value_taken)
        return CR_OK;
    *normalised = *given;
    *wrong_type = !type_taken;
    return option->status;
}

/* The index of the option named `name` in `constructor`'s table, or its count. */
static size_t index_of(const cr_constructor *constructor, unsigned face, const char *name)
{
    for (size_t i = 0; i < constructor->count; i++)
        if ((constructor->options[i].faces & face) &&
            strcmp(constructor->options[i].name, name) == 0)
            return i;
    return constructor->count;
}

cr_status cr_options_check(const cr_constructor *constructor, unsigned face, cr_value *values,
                           size_t *failed, bool *wrong_type)
{
    *wrong_type = false;
    bool mode_given = false;
    for (size_t i = 0; i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if (!(option->faces & face)) {
            values[i].type = CR_VALUE_ABSENT;
            continue;
        }
        if (strcmp(option->name, "shared_mode") == 0)
            mode_given = values[i].type != CR_VALUE_ABSENT;
        const cr_value given = values[i];
        const cr_status status = cr_option_check(option, &given, &values[i], wrong_type);
        if (status != CR_OK) {
            *failed = i;
            return status;
        }
    }
    if (constructor->relations & CR_RELATE_SHARED_MODE) {
        const size_t shared = index_of(constructor, face, "shared");
        if (mode_given && shared < constructor->count && values[shared].type == CR_VALUE_ABSENT) {
            *failed = index_of(constructor, face, "shared_mode");
            return CR_E_SHARED_MODE_ALONE;
        }
    }
    if (constructor->relations & CR_RELATE_TTL) {
        const size_t ttl = index_of(constructor, face, "ttl");
        const size_t interval = index_of(constructor, face, "interval");
        const double every = values[interval].number;
        if (values[ttl].type == CR_VALUE_ABSENT) {
            values[ttl].type = CR_VALUE_NUMBER;
            values[ttl].number = CR_SHARE_TTL_INTERVALS * every;
        }
        if (!(values[ttl].number > every)) {
            *failed = ttl;
            return CR_E_TTL_SHORT;
        }
    }
    return CR_OK;
}
