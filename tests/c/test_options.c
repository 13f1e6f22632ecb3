/*
 * The options table and the rate lists (tests/vectors/, written by the
 * reference model) through the core's own functions:
 *   options.txt  cr_constructor_find, cr_option_find (every row, both faces),
 *                cr_options_check (every check), cr_option_suggest (every
 *                unknown name), cr_algorithm_takes_burst
 *   rates.txt    cr_parse_rates
 *
 * usage: test_options [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static void encode(const char *text, size_t len, char *out, size_t room)
{
    static const char
        keep[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./@";
    size_t at = 0;
    if (len == 0) {
        snprintf(out, room, "%%");
        return;
    }
    for (size_t i = 0; i < len && at + 4 < room; i++) {
        const unsigned char byte = (unsigned char)text[i];
        if (byte != 0 && strchr(keep, byte) != NULL)
            out[at++] = (char)byte;
        else
            at += (size_t)snprintf(out + at, room - at, "%%%02X", byte);
    }
    out[at] = '\0';
}

static void number_text(double value, char *out, size_t room)
{
    if (isnan(value))
        snprintf(out, room, "nan");
    else if (isinf(value))
        snprintf(out, room, value > 0 ? "inf" : "-inf");
    else
        snprintf(out, room, "%.17g", value);
}

/* <type>:<literal> of a normalised value, as the model writes it; "given:-"
 * for what a face passes through (a function, a table, a path). */
static void value_text(const cr_option *option, const cr_value *value, char *out, size_t room)
{
    char literal[512];
    switch (value->type) {
    case CR_VALUE_ABSENT:
        snprintf(out, room, "absent:-");
        return;
    case CR_VALUE_BOOLEAN:
        snprintf(out, room, "boolean:%s", value->boolean ? "true" : "false");
        return;
    case CR_VALUE_INTEGER:
        snprintf(out, room, "integer:%" PRId64, value->integer);
        return;
    case CR_VALUE_NUMBER:
        number_text(value->number, literal, sizeof literal);
        snprintf(out, room, "number:%s", literal);
        return;
    case CR_VALUE_STRING:
        if (option->kind == CR_OPTION_PATH) {
            snprintf(out, room, "given:-");
            return;
        }
        encode(value->text, value->text_len, literal, sizeof literal);
        snprintf(out, room, "string:%s", literal);
        return;
    default:
        snprintf(out, room, "given:-");
    }
}

static const char *kind_name(cr_option_kind kind)
{
    static const char *const names[] = {"",       "number",   "integer", "boolean",
                                        "string", "word",     "seconds", "path",
                                        "name",   "function", "object",  "refused"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

static const char *faces_name(unsigned faces)
{
    return faces == CR_FACE_BOTH ? "both" : faces == CR_FACE_PYTHON ? "python" : "lua";
}

/* The row of `option` as options.txt writes it, from <faces> on. */
static void option_row(const cr_option *option, char *out, size_t room)
{
    char dflt[600], range[128] = "-", words[256] = "-", refuses[64] = "-", flags[8] = "";
    if (option->default_value.type == CR_VALUE_ABSENT)
        snprintf(dflt, sizeof dflt, "-");
    else
        value_text(option, &option->default_value, dflt, sizeof dflt);
    if (option->kind == CR_OPTION_INTEGER) {
        snprintf(range, sizeof range, "[%" PRId64 ",%" PRId64 "]", option->low_integer,
                 option->high_integer);
    } else if (option->kind == CR_OPTION_NUMBER || option->kind == CR_OPTION_SECONDS) {
        char low[40], high[40];
        number_text(option->low, low, sizeof low);
        number_text(option->high, high, sizeof high);
        snprintf(range, sizeof range, "%c%s,%s%c", (option->flags & CR_OPTION_LOW_OPEN) ? '(' : '[',
                 low, high, (option->flags & CR_OPTION_HIGH_OPEN) ? ')' : ']');
    }
    if (option->words != NULL && option->words[0] != '\0') {
        snprintf(words, sizeof words, "%s", option->words);
        for (char *space = strchr(words, ' '); space != NULL; space = strchr(space, ' '))
            *space = ',';
    }
    if (option->refuses != NULL && option->refuses[0] != '\0')
        encode(option->refuses, strlen(option->refuses), refuses, sizeof refuses);
    const struct {
        unsigned flag;
        char letter;
    } letters[] = {{CR_OPTION_OR_FUNCTION, 'f'},
                   {CR_OPTION_REQUIRED, 'r'},
                   {CR_OPTION_BINARY, 'b'},
                   {CR_OPTION_ANY_CASE, 'c'},
                   {CR_OPTION_NS, 'n'}};
    size_t at = 0;
    for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++)
        if (option->flags & letters[i].flag)
            flags[at++] = letters[i].letter;
    flags[at] = '\0';
    snprintf(out, room, "%s %s %s %s %s %s %s %zu %s", faces_name(option->faces),
             kind_name(option->kind), cr_status_name(option->status), dflt, range, words, refuses,
             option->min_len, at ? flags : "-");
}

/* ------------------------------------------------------------------------ */
/* options.txt                                                               */

#define MAX_VALUES 64
#define TEXT_ROOM 256

/* One check: the values given, in the table's order, for `face`. */
static void run_check(int lineno, const char *face_name, const cr_constructor *constructor,
                      unsigned face, const char *outcome, const char *status_text,
                      const char *expected, char *assignments)
{
    cr_value values[MAX_VALUES];
    static char texts[MAX_VALUES][TEXT_ROOM];
    size_t first = constructor->count;
    CHECK(constructor->count <= MAX_VALUES, "options.txt:%d", lineno);
    memset(values, 0, sizeof values);
    char *saved = NULL;
    for (char *word = strtok_r(assignments, " ", &saved); word != NULL;
         word = strtok_r(NULL, " ", &saved)) {
        char *equals = strchr(word, '='), *colon = equals ? strchr(equals, ':') : NULL;
        if (equals == NULL || colon == NULL)
            vectors_bad_line("options.txt", lineno, word);
        *equals = *colon = '\0';
        const char *name = word, *type = equals + 1, *literal = colon + 1;
        const cr_option *option = cr_option_find(constructor, face, name, strlen(name));
        if (!CHECK(option != NULL, "options.txt:%d: %s takes %s (%s)", lineno, constructor->name,
                   name, face_name))
            return;
        const size_t index = (size_t)(option - constructor->options);
        if (first == constructor->count)
            first = index;
        cr_value *value = &values[index];
        if (strcmp(type, "absent") == 0) {
            value->type = CR_VALUE_ABSENT;
        } else if (strcmp(type, "boolean") == 0) {
            value->type = CR_VALUE_BOOLEAN;
            value->boolean = strcmp(literal, "true") == 0;
        } else if (strcmp(type, "integer") == 0) {
            value->type = CR_VALUE_INTEGER;
            value->integer = strtoll(literal, NULL, 10);
            value->number = strtod(literal, NULL);
        } else if (strcmp(type, "number") == 0) {
            value->type = CR_VALUE_NUMBER;
            value->number = strtod(literal, NULL);
        } else if (strcmp(type, "string") == 0) {
            value->type = CR_VALUE_STRING;
            value->text_len = vectors_decode(literal, texts[index], TEXT_ROOM);
            value->text = texts[index];
        } else if (strcmp(type, "function") == 0) {
            value->type = CR_VALUE_FUNCTION;
        } else if (strcmp(type, "table") == 0) {
            value->type = CR_VALUE_TABLE;
        } else {
            vectors_bad_line("options.txt", lineno, type);
        }
    }
    size_t failed = constructor->count;
    bool wrong_type = true;
    const cr_status status = cr_options_check(constructor, face, values, &failed, &wrong_type);
    const char *got = status == CR_OK ? "OK" : wrong_type ? "TYPE" : "VALUE";
    CHECK_EQ_STR(got, outcome, "options.txt:%d (%s)", lineno, face_name);
    CHECK_EQ_STR(cr_status_name(status), status_text, "options.txt:%d (%s)", lineno, face_name);
    if (status != CR_OK) {
        CHECK(failed < constructor->count, "options.txt:%d: the option refused", lineno);
        CHECK_EQ_STR(cr_status_param(status),
                     failed < constructor->count ? constructor->options[failed].name : "",
                     "options.txt:%d: the status names the option refused", lineno);
    } else if (first < constructor->count) {
        char text[700];
        value_text(&constructor->options[first], &values[first], text, sizeof text);
        CHECK_EQ_STR(text, expected, "options.txt:%d (%s)", lineno, face_name);
    }
}

static unsigned faces_of(const char *name)
{
    return strcmp(name, "both") == 0     ? CR_FACE_BOTH
           : strcmp(name, "python") == 0 ? CR_FACE_PYTHON
                                         : CR_FACE_LUA;
}

static int run_options(const char *dir)
{
    FILE *file = vectors_open(dir, "options.txt");
    char line[4096];
    int lineno = 0, count = 0;
    size_t rows[64] = {0};
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        char kind[16], ctor[64], name[64], faces[16], rest[3000];
        int at = 0;
        if (sscanf(line, "%15s %n", kind, &at) != 1)
            vectors_bad_line("options.txt", lineno, line);
        const char *tail = line + at;
        if (strcmp(kind, "option") == 0) {
            if (sscanf(tail, "%63s %63s %n", ctor, name, &at) != 2)
                vectors_bad_line("options.txt", lineno, line);
            snprintf(rest, sizeof rest, "%s", tail + at);
            const cr_constructor *constructor = cr_constructor_find(ctor, strlen(ctor));
            if (!CHECK(constructor != NULL, "options.txt:%d: constructor %s", lineno, ctor))
                continue;
            const unsigned face = strncmp(rest, "lua ", 4) == 0 ? CR_FACE_LUA : CR_FACE_PYTHON;
            const cr_option *option = cr_option_find(constructor, face, name, strlen(name));
            if (!CHECK(option != NULL, "options.txt:%d: %s %s", lineno, ctor, name))
                continue;
            char row[1200];
            option_row(option, row, sizeof row);
            CHECK_EQ_STR(row, rest, "options.txt:%d: %s %s", lineno, ctor, name);
            /* the rows come in the table's order */
            const size_t index = (size_t)(constructor - cr_constructor_at(0));
            CHECK_EQ_I64((int64_t)(option - constructor->options), (int64_t)rows[index],
                         "options.txt:%d: %s %s in the table's order", lineno, ctor, name);
            rows[index]++;
        } else if (strcmp(kind, "check") == 0) {
            char outcome[16], status[64], expected[700];
            if (sscanf(tail, "%15s %63s %15s %63s %699s %n", faces, ctor, outcome, status, expected,
                       &at) != 5)
                vectors_bad_line("options.txt", lineno, line);
            const cr_constructor *constructor = cr_constructor_find(ctor, strlen(ctor));
            if (!CHECK(constructor != NULL, "options.txt:%d: constructor %s", lineno, ctor))
                continue;
            const unsigned face_set = faces_of(faces);
            for (unsigned face = CR_FACE_PYTHON; face <= CR_FACE_LUA; face <<= 1) {
                if (!(face_set & face))
                    continue;
                snprintf(rest, sizeof rest, "%s", tail + at);
                run_check(lineno, faces_name(face), constructor, face, outcome, status, expected,
                          rest);
            }
        } else if (strcmp(kind, "unknown") == 0) {
            char suggestion[64];
            if (sscanf(tail, "%15s %63s %63s %63s", faces, ctor, name, suggestion) != 4)
                vectors_bad_line("options.txt", lineno, line);
            const cr_constructor *constructor = cr_constructor_find(ctor, strlen(ctor));
            if (!CHECK(constructor != NULL, "options.txt:%d: constructor %s", lineno, ctor))
                continue;
            const unsigned face = faces_of(faces);
            CHECK(cr_option_find(constructor, face, name, strlen(name)) == NULL,
                  "options.txt:%d: %s does not take %s", lineno, ctor, name);
            const char *near = cr_option_suggest(constructor, face, name, strlen(name));
            CHECK_EQ_STR(near ? near : "-", suggestion, "options.txt:%d", lineno);
        } else if (strcmp(kind, "takes_burst") == 0) {
            int takes;
            if (sscanf(tail, "%63s %d", name, &takes) != 2)
                vectors_bad_line("options.txt", lineno, line);
            cr_algorithm algorithm;
            CHECK_EQ_I64(cr_algorithm_from_name(name, strlen(name), &algorithm), CR_OK,
                         "options.txt:%d", lineno);
            CHECK_EQ_I64(cr_algorithm_takes_burst(algorithm), takes, "options.txt:%d: %s", lineno,
                         name);
            /* and cr_limit_init reads the burst of exactly those */
            cr_limit limit;
            cr_limit_args args = {.rate = 10,
                                  .burst = 2,
                                  .has_burst = true,
                                  .algorithm = name,
                                  .algorithm_len = strlen(name)};
            CHECK_EQ_I64(cr_limit_init(&limit, &args), takes ? CR_OK : CR_E_BURST_WINDOW,
                         "options.txt:%d: %s", lineno, name);
        } else {
            vectors_bad_line("options.txt", lineno, line);
        }
        count++;
    }
    fclose(file);
    /* every row of the table is in the vectors */
    for (size_t i = 0; i < cr_constructor_count(); i++)
        CHECK_EQ_I64((int64_t)rows[i], (int64_t)cr_constructor_at(i)->count,
                     "options.txt lists every option of %s", cr_constructor_at(i)->name);
    CHECK(cr_constructor_at(cr_constructor_count()) == NULL, "past the count: NULL");
    CHECK(cr_constructor_find("Nothing", 7) == NULL, "an unknown constructor");
    return count;
}

/* ------------------------------------------------------------------------ */
/* rates.txt                                                                 */

static int run_rates(const char *dir)
{
    FILE *file = vectors_open(dir, "rates.txt");
    char line[4096];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        char *bar = strchr(line, '|');
        char status[64];
        int days, parts, at;
        if (bar == NULL || sscanf(line, "rates %63s %d %d %n", status, &days, &parts, &at) != 3)
            vectors_bad_line("rates.txt", lineno, line);
        const char *text = bar + 1;
        cr_rate rates[CR_RATES_MAX];
        size_t found = 99;
        const cr_status got = cr_parse_rates(text, strlen(text), days == 1, rates, &found);
        CHECK_EQ_STR(cr_status_name(got), status, "rates.txt:%d", lineno);
        CHECK_EQ_I64((int64_t)found, parts, "rates.txt:%d", lineno);
        const char *cursor = line + at;
        for (int i = 0; i < parts && i < (int)found; i++) {
            double rate, period;
            size_t start, len;
            char calendar[32], made[32] = "-";
            int used;
            if (sscanf(cursor, "%lf %lf %zu %zu %31s %n", &rate, &period, &start, &len, calendar,
                       &used) != 5)
                vectors_bad_line("rates.txt", lineno, line);
            cursor += used;
            if (rates[i].period.count > 0)
                snprintf(made, sizeof made, "%d%s", (int)rates[i].period.count,
                         cr_period_unit_name(rates[i].period.unit));
            CHECK_EQ_STR(made, calendar, "rates.txt:%d part %d", lineno, i);
            CHECK(rates[i].rate == rate && rates[i].period_s == period,
                  "rates.txt:%d part %d: %.17g/%.17g s", lineno, i, rates[i].rate,
                  rates[i].period_s);
            CHECK(rates[i].start == start && rates[i].len == len, "rates.txt:%d part %d", lineno,
                  i);
        }
        count++;
    }
    fclose(file);
    return count;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    const int options = run_options(dir);
    const int rates = run_rates(dir);
    CHECK(options > 1000, "options.txt holds %d lines", options);
    CHECK(rates > 20, "rates.txt holds %d lines", rates);
    printf("options: %d lines; rates: %d strings\n", options, rates);
    return check_summary("test_options");
}
