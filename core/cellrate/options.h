/*
 * cellrate/options.h: the options of every constructor of both faces, one
 * table: each option's name, kind, range or words, default, and the status
 * whose message a refusal carries; the judge of a value, of a set of values,
 * and the near name of an unknown one.
 *
 * A part of cellrate.h (include <cellrate.h>). The table is static data;
 * every function here is pure and thread-safe. A face translates its values
 * into cr_value (Python's None and Lua's nil are absent; a Python int and a
 * Lua number with an integral value are integers; a Python callable and a
 * Lua function are functions; what is none of these is a table), asks, and
 * raises the status it gets (docs/design.md §3).
 */
#ifndef CELLRATE_OPTIONS_H
#define CELLRATE_OPTIONS_H

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

/* What an option takes. */
typedef enum cr_option_kind {
    CR_OPTION_NUMBER = 1,   /* a number within [low, high] (flags: excluded bounds) */
    CR_OPTION_INTEGER = 2,  /* a whole number within [low_integer, high_integer] */
    CR_OPTION_BOOLEAN = 3,  /* true or false */
    CR_OPTION_STRING = 4,   /* text of at least min_len bytes, none of `refuses` */
    CR_OPTION_WORD = 5,     /* one of `words` */
    CR_OPTION_SECONDS = 6,  /* a number of seconds within [low, high] */
    CR_OPTION_PATH = 7,     /* a file path: text without NUL (Python: os.PathLike too) */
    CR_OPTION_NAME = 8,     /* a policy name (cr_headers_check_name), none of `refuses` */
    CR_OPTION_FUNCTION = 9, /* a function of the face */
    CR_OPTION_OBJECT = 10,  /* a value of the face's own (a store, a list): the face judges */
    CR_OPTION_REFUSED = 11  /* a name the constructor refuses, with words that say why */
} cr_option_kind;

/* The faces that take an option (cr_option.faces). */
#define CR_FACE_PYTHON 1u
#define CR_FACE_LUA 2u
#define CR_FACE_BOTH (CR_FACE_PYTHON | CR_FACE_LUA)

/* cr_option.flags */
#define CR_OPTION_LOW_OPEN 1u    /* numbers, seconds: `low` itself is refused */
#define CR_OPTION_HIGH_OPEN 2u   /* numbers, seconds: `high` itself is refused */
#define CR_OPTION_OR_FUNCTION 4u /* a function is taken too */
#define CR_OPTION_REQUIRED 8u    /* absent is refused (as a type the option never takes) */
#define CR_OPTION_BINARY 16u     /* strings: any bytes (Python: bytes-like objects too) */
#define CR_OPTION_ANY_CASE 32u   /* words: compared without case (ASCII) */
#define CR_OPTION_NS \
    64u /* seconds: at least 1 ns and below CR_HORIZON_NS once
                                     rounded to ns as cr_seconds_to_ns rounds */

/* A value as a face gives it. */
typedef enum cr_value_type {
    CR_VALUE_ABSENT = 0, /* None, nil: the option's default */
    CR_VALUE_BOOLEAN = 1,
    CR_VALUE_INTEGER = 2, /* a whole number: `integer` (beyond int64, saturated), and
                             `number`, its value as a double (a number option reads it) */
    CR_VALUE_NUMBER = 3,  /* any other number (NaN and infinities included) */
    CR_VALUE_STRING = 4,  /* text or bytes, `text`/`text_len` (no NUL needed) */
    CR_VALUE_FUNCTION = 5,
    CR_VALUE_TABLE = 6 /* anything else */
} cr_value_type;

typedef struct cr_value {
    cr_value_type type;
    bool boolean;
    int64_t integer;
    double number;
    const char *text;
    size_t text_len;
} cr_value;

typedef struct cr_option {
    const char *name;
    cr_option_kind kind;
    unsigned faces;                    /* CR_FACE_* */
    unsigned flags;                    /* CR_OPTION_* */
    cr_status status;                  /* the refusal's (CR_OK: an object the face judges) */
    double low, high;                  /* numbers and seconds */
    int64_t low_integer, high_integer; /* integers */
    const char *words;                 /* words: the words taken, separated by one space */
    const char *refuses;               /* strings and names: the characters refused */
    size_t min_len;                    /* strings: the fewest bytes */
    cr_value default_value;            /* CR_VALUE_ABSENT: none (the constructor's own) */
} cr_option;

/* A constructor's relations between options, checked after each option. */
#define CR_RELATE_SHARED_MODE 1u /* shared_mode without shared: CR_E_SHARED_MODE_ALONE */
#define CR_RELATE_TTL \
    2u /* ttl absent: CR_SHARE_TTL_INTERVALS intervals; ttl must be
                                    longer than interval: CR_E_TTL_SHORT */

/* A fleet share's ttl when absent, in intervals. */
#define CR_SHARE_TTL_INTERVALS 3

typedef struct cr_constructor {
    const char *name; /* the Python name: "Limiter", "RedisLimiter", "Policy", "limit" ... */
    const cr_option *options;
    size_t count;
    unsigned relations; /* CR_RELATE_* */
} cr_constructor;

/* The constructors, for a face or a test that lists them: the count, and
 * each by index (NULL past the count). */
size_t cr_constructor_count(void);
const cr_constructor *cr_constructor_at(size_t index);

/* The constructor named `name` (need not be NUL-terminated), or NULL. */
const cr_constructor *cr_constructor_find(const char *name, size_t len);

/* The option `name` of `constructor` that `face` (CR_FACE_PYTHON or
 * CR_FACE_LUA) takes, or NULL. */
const cr_option *cr_option_find(const cr_constructor *constructor, unsigned face, const char *name,
                                size_t len);

/* The name of the option of `constructor` that `face` takes nearest `name`,
 * at most CR_OPTION_SUGGEST_EDITS edits away (Levenshtein; the first in the
 * table among equals), for "did you mean": NULL when none is. */
#define CR_OPTION_SUGGEST_EDITS 2
const char *cr_option_suggest(const cr_constructor *constructor, unsigned face, const char *name,
                              size_t len);

/*
 * Judges one value of `option`: CR_OK and the value normalised in
 * `normalised` (an absent one: the default, or absent; a number option's
 * integer: a number; a CR_OPTION_NS seconds option's: a number, and in
 * `integer` its ns as cr_seconds_to_ns rounds them; a word: the table's word,
 * or the text given for CR_OPTION_ANY_CASE; anything else as given), or the
 * option's status with
 * `*wrong_type` true for a type the option never takes (Python:
 * InvalidArgumentType) and false for a value it refuses (InvalidArgument).
 */
cr_status cr_option_check(const cr_option *option, const cr_value *given, cr_value *normalised,
                          bool *wrong_type);

/*
 * Judges the options of one call together: `values` holds one entry per
 * option of `constructor`, in the table's order (those `face` does not take:
 * absent), and is normalised in place. Each option in order, then the
 * constructor's relations. CR_OK, or the first refusal's status with the
 * index of the option refused in `*failed` and `*wrong_type` as above.
 */
cr_status cr_options_check(const cr_constructor *constructor, unsigned face, cr_value *values,
                           size_t *failed, bool *wrong_type);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_OPTIONS_H */
