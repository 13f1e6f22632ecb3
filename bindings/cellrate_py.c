/*
 * cellrate._cellrate: the CPython face of the core (docs/design.md §6).
 *
 * Each function converts Python objects to the core's types, calls the core,
 * and converts the result or status back. Validation, defaults, rate parsing
 * and every message come from the core, so Python and Lua reject the same
 * inputs with the same words.
 *
 * Multi-phase init (PEP 489) with heap types and exceptions in module state.
 * The objects hold no Python references and never change after construction,
 * and the core is thread-safe on its own, so the module declares that it does
 * not need the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cellrate.h"

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_BOOL T_BOOL
#define Py_T_LONGLONG T_LONGLONG
#define Py_T_DOUBLE T_DOUBLE
#define Py_READONLY READONLY
#endif

/*
 * The GIL stays held around one decision: releasing and re-taking it costs
 * more than the decision (docs/design.md §6). The benchmark builds a second
 * copy with -DCELLRATE_RELEASE_GIL to measure that choice.
 */
#ifdef CELLRATE_RELEASE_GIL
#define CR_PY_BEGIN_DECISION Py_BEGIN_ALLOW_THREADS
#define CR_PY_END_DECISION Py_END_ALLOW_THREADS
#else
#define CR_PY_BEGIN_DECISION
#define CR_PY_END_DECISION
#endif

typedef struct {
    PyTypeObject *decision_type;
    PyTypeObject *limit_type;
    PyTypeObject *limiter_type;
    PyTypeObject *keyed_type;
    PyTypeObject *concurrency_type;
    PyTypeObject *slot_type;
    PyObject *error;                 /* CellrateError */
    PyObject *invalid_argument;      /* InvalidArgument(CellrateError, ValueError) */
    PyObject *invalid_argument_type; /* InvalidArgumentType(CellrateError, TypeError) */
} module_state;

typedef struct {
    PyObject_HEAD
    double retry_after;
    double reset_after;
    double window;
    long long remaining;
    long long limit;
    char allowed;
    char clipped; /* a charge that met the debt bound */
} DecisionObject;

/*
 * A Limiter or a KeyedLimiter: one object layout, one decision path, the key
 * the only difference. The limit is the store's (store_limit): a live
 * change, made here or by another process sharing its region, is the core's.
 */
typedef struct {
    PyObject_HEAD
    cr_limiter *limiter; /* a Limiter's store; NULL in a KeyedLimiter */
    cr_keyed *keyed;     /* a KeyedLimiter's store; NULL in a Limiter */
    int64_t capacity;    /* a KeyedLimiter's */
    PyObject *max_cost;  /* an int, or NULL: checked again by each reconfigure */
} StoreObject;

static const cr_limit *store_limit(const StoreObject *store)
{
    return store->keyed ? cr_keyed_limit(store->keyed) : cr_limiter_limit(store->limiter);
}

/* A Concurrency: units held at once (docs/design.md §15). */
typedef struct {
    PyObject_HEAD
    cr_gauge *gauge;
    int64_t limit;
    int64_t capacity; /* 0: no keys */
} ConcurrencyObject;

/* A Slot: a holding of a Concurrency, the receipt its release() hands back. */
typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the Concurrency */
    cr_holding holding;
} SlotObject;

/* A Limit: the core's validated limit, immutable. */
typedef struct {
    PyObject_HEAD
    cr_limit limit;
} LimitObject;

_Static_assert(sizeof(int64_t) == sizeof(long long), "int64_t members read as T_LONGLONG");

#ifndef Py_ALWAYS_INLINE /* CPython < 3.11 */
#if defined(__GNUC__)
#define Py_ALWAYS_INLINE __attribute__((always_inline))
#else
#define Py_ALWAYS_INLINE
#endif
#endif

/* The types are final, so an instance's own type leads to the module state. */
static module_state *state_of(PyObject *self)
{
    return (module_state *)PyType_GetModuleState(Py_TYPE(self));
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

/* Raises `exc_type` with the core's message for `status` followed by
 * `detail` (NULL: nothing more), `.param` naming the parameter. */
static void raise_with_param(PyObject *exc_type, cr_status status, PyObject *detail)
{
    PyObject *message = detail != NULL ? PyUnicode_FromFormat("%s%U", cr_strerror(status), detail)
                                       : PyUnicode_FromString(cr_strerror(status));
    if (message == NULL)
        return;
    PyObject *exc = PyObject_CallOneArg(exc_type, message);
    Py_DECREF(message);
    if (exc == NULL)
        return;
    PyObject *param = PyUnicode_FromString(cr_status_param(status));
    if (param != NULL && PyObject_SetAttrString(exc, "param", param) == 0)
        PyErr_SetObject(exc_type, exc);
    Py_XDECREF(param);
    Py_DECREF(exc);
}

/* A status the core returned, by its class (cr_status_class_of): an
 * argument mistake is InvalidArgument; a runtime failure is MemoryError for
 * memory, else (a region's lock held past its bound) TimeoutError. */
static void raise_status(module_state *state, cr_status status)
{
    if (cr_status_class_of(status) != CR_STATUS_RUNTIME)
        raise_with_param(state->invalid_argument, status, NULL);
    else if (status == CR_E_NOMEM)
        PyErr_NoMemory();
    else
        raise_with_param(PyExc_TimeoutError, status, NULL);
}

/* An argument of a type the parameter never takes; `status` names it. */
static void raise_wrong_type(module_state *state, cr_status status)
{
    raise_with_param(state->invalid_argument_type, status, NULL);
}

/* Replaces the pending error (the system's words for a str it cannot
 * encode, or a path it cannot take) by InvalidArgument for `status`, with the
 * original as its __cause__. */
static PyObject *take_error(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value != NULL && traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

static void raise_instead(module_state *state, cr_status status)
{
    PyObject *cause = take_error();
    PyObject *detail = PyUnicode_FromFormat(" (%S)", cause);
    if (detail != NULL) {
        raise_with_param(state->invalid_argument, status, detail);
        Py_DECREF(detail);
        PyObject *exc = take_error();
        if (exc != NULL) {
            PyException_SetCause(exc, cause); /* steals the reference */
            cause = NULL;
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    }
    Py_XDECREF(cause);
}

/* The UTF-8 bytes of a str, or InvalidArgument for `status` when it has none
 * (a lone surrogate). An ASCII str's bytes are its own, read in place: a
 * keyed decision's key costs no call. */
static const char *utf8_of(module_state *state, PyObject *text, cr_status status, size_t *len)
{
    *len = 0; /* set on every path: some compilers cannot see it through the macros */
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *len = (size_t)PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    Py_ssize_t size;
    const char *bytes = PyUnicode_AsUTF8AndSize(text, &size);
    if (bytes == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeError))
            raise_instead(state, status);
        return NULL;
    }
    *len = (size_t)size;
    return bytes;
}

/* ------------------------------------------------------------------------ */
/* Argument conversion                                                       */

/* An optional name (clock, algorithm): None leaves *name NULL; else a str,
 * or the error of `status`. */
static int convert_optional_name(module_state *state, PyObject *obj, cr_status status,
                                 const char **name, size_t *len)
{
    if (obj == Py_None)
        return 0;
    if (!PyUnicode_Check(obj)) {
        raise_wrong_type(state, status);
        return -1;
    }
    *name = utf8_of(state, obj, status, len);
    return *name == NULL ? -1 : 0;
}

enum conversion { CONVERTED = 0, WRONG_TYPE = 1, CONVERSION_FAILED = -1 };

/* int64 of a Python int (or an object with __index__), bool excluded. Values
 * beyond int64 saturate, so that the core reports them as out of range. */
static enum conversion to_int64(PyObject *obj, int64_t *out)
{
    PyObject *integer;
    if (PyLong_CheckExact(obj)) {
        integer = obj;
        Py_INCREF(integer);
    } else if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        return WRONG_TYPE;
    } else {
        integer = PyNumber_Index(obj);
        if (integer == NULL)
            return CONVERSION_FAILED;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(integer, &overflow);
    Py_DECREF(integer);
    if (overflow != 0)
        value = overflow > 0 ? INT64_MAX : INT64_MIN;
    else if (value == -1 && PyErr_Occurred())
        return CONVERSION_FAILED;
    *out = (int64_t)value;
    return CONVERTED;
}

/* double of a Python float or int (or an object with __index__), bool
 * excluded. An int too large for a double becomes +-infinity, which the core
 * reports as out of range. */
static enum conversion to_double(PyObject *obj, double *out)
{
    if (PyFloat_Check(obj)) {
        *out = PyFloat_AS_DOUBLE(obj);
        return CONVERTED;
    }
    PyObject *integer;
    if (PyLong_CheckExact(obj)) {
        integer = obj;
        Py_INCREF(integer);
    } else if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        return WRONG_TYPE;
    } else {
        integer = PyNumber_Index(obj);
        if (integer == NULL)
            return CONVERSION_FAILED;
    }
    double value = PyLong_AsDouble(integer);
    if (value == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            Py_DECREF(integer);
            return CONVERSION_FAILED;
        }
        PyErr_Clear();
        int overflow;
        (void)PyLong_AsLongLongAndOverflow(integer, &overflow);
        value = overflow < 0 ? -HUGE_VAL : HUGE_VAL;
    }
    Py_DECREF(integer);
    *out = value;
    return CONVERTED;
}

/* A key is str (hashed as its UTF-8 bytes) or bytes; the core's message
 * says "a string", these are Python's types for it. */
static int convert_key(module_state *state, PyObject *obj, const char **key, Py_ssize_t *key_len)
{
    if (PyUnicode_Check(obj)) {
        size_t len = 0;
        *key = utf8_of(state, obj, CR_E_KEY, &len);
        *key_len = (Py_ssize_t)len;
        return *key == NULL ? -1 : 0;
    }
    if (PyBytes_Check(obj)) {
        *key = PyBytes_AS_STRING(obj);
        *key_len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    PyObject *python_words = PyUnicode_FromFormat(": str or bytes, not %s", Py_TYPE(obj)->tp_name);
    if (python_words != NULL) {
        raise_with_param(state->invalid_argument_type, CR_E_KEY, python_words);
        Py_DECREF(python_words);
    }
    return -1;
}

/* A cost (or take's max_cost: `status` names the parameter); absent: 1. */
static int convert_units(module_state *state, PyObject *obj, cr_status status, int64_t *cost)
{
    if (obj == NULL) {
        *cost = CR_DEFAULT_COST;
        return 0;
    }
    switch (to_int64(obj, cost)) {
    case CONVERTED:
        return 0;
    case WRONG_TYPE:
        raise_wrong_type(state, status);
        return -1;
    default:
        return -1;
    }
}

static int convert_cost(module_state *state, PyObject *obj, int64_t *cost)
{
    return convert_units(state, obj, CR_E_COST, cost);
}

/* A float of a Python number, or the error of `status` (naming its
 * parameter) for another type. */
static int convert_number(module_state *state, PyObject *obj, cr_status status, double *out)
{
    switch (to_double(obj, out)) {
    case CONVERTED:
        return 0;
    case WRONG_TYPE:
        raise_wrong_type(state, status);
        return -1;
    default:
        return -1;
    }
}

/* now=None (or absent) asks the core to read its clock. */
static int convert_now(module_state *state, PyObject *obj, int64_t *now_ns)
{
    if (obj == NULL || obj == Py_None) {
        *now_ns = CR_CLOCK;
        return 0;
    }
    double seconds;
    if (convert_number(state, obj, CR_E_NOW, &seconds) < 0)
        return -1;
    cr_status status = cr_seconds_to_ns(seconds, now_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* An int parameter where None means "not given". */
static int convert_optional_int(module_state *state, PyObject *obj, cr_status wrong_type,
                                int64_t *value, bool *given)
{
    *given = obj != Py_None;
    if (!*given)
        return 0;
    switch (to_int64(obj, value)) {
    case CONVERTED:
        return 0;
    case WRONG_TYPE:
        raise_wrong_type(state, wrong_type);
        return -1;
    default:
        return -1;
    }
}

/* rate (number or rate string), period (None: not given), burst (None: not
 * given), clock, algorithm and max_cost (None: not given) to a validated limit. */
static int convert_limit(module_state *state, PyObject *rate, PyObject *period, PyObject *burst,
                         PyObject *clock, PyObject *algorithm, PyObject *max_cost, cr_limit *limit)
{
    cr_limit_args args;
    memset(&args, 0, sizeof args);

    if (PyUnicode_Check(rate)) {
        args.rate_text = utf8_of(state, rate, CR_E_RATE_SYNTAX, &args.rate_text_len);
        if (args.rate_text == NULL)
            return -1;
    } else if (convert_number(state, rate, CR_E_RATE, &args.rate) < 0) {
        return -1;
    }

    args.has_period = period != Py_None;
    if (args.has_period && convert_number(state, period, CR_E_PERIOD, &args.period_s) < 0)
        return -1;

    if (convert_optional_int(state, burst, CR_E_BURST, &args.burst, &args.has_burst) < 0 ||
        convert_optional_int(state, max_cost, CR_E_MAX_COST, &args.max_cost, &args.has_max_cost) <
            0)
        return -1;

    if (convert_optional_name(state, clock, CR_E_CLOCK, &args.clock, &args.clock_len) < 0 ||
        convert_optional_name(state, algorithm, CR_E_ALGORITHM, &args.algorithm,
                              &args.algorithm_len) < 0)
        return -1;

    cr_status status = cr_limit_init(limit, &args);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* A dict of counters: the fields of CR_STATS_LIST or CR_GAUGE_STATS_LIST,
 * each an int. */
static int stats_set(PyObject *dict, const char *name, long long value)
{
    PyObject *number = PyLong_FromLongLong(value);
    int status = number ? PyDict_SetItemString(dict, name, number) : -1;
    Py_XDECREF(number);
    return status;
}

#define STATS_SET_(name)                                            \
    if (dict && stats_set(dict, #name, (long long)stats->name) < 0) \
        Py_CLEAR(dict);

static PyObject *rate_stats_dict(const cr_stats *stats)
{
    PyObject *dict = PyDict_New();
    CR_STATS_LIST(STATS_SET_)
    return dict;
}

/* peak None when the limit does not track it */
static PyObject *gauge_stats_dict(const cr_gauge_stats *stats)
{
    PyObject *dict = PyDict_New();
    CR_GAUGE_STATS_LIST(STATS_SET_)
    if (dict && !stats->peak_tracked && PyDict_SetItemString(dict, "peak", Py_None) < 0)
        Py_CLEAR(dict);
    return dict;
}

/* The shared= and shared_mode= arguments. `path` is NULL when shared is None;
 * otherwise a bytes object (the file system encoding) the caller releases. */
static int convert_shared(module_state *state, PyObject *shared, PyObject *mode_obj,
                          PyObject **path, int64_t *mode)
{
    bool mode_given;
    *path = NULL;
    if (convert_optional_int(state, mode_obj, CR_E_SHARED_MODE, mode, &mode_given) < 0)
        return -1;
    if (!mode_given)
        *mode = CR_SHARED_DEFAULT_MODE;
    if (shared == Py_None) {
        if (mode_given) {
            raise_status(state, CR_E_SHARED_MODE_ALONE);
            return -1;
        }
        return 0;
    }
    if (!PyUnicode_Check(shared) && !PyBytes_Check(shared) &&
        !PyObject_HasAttrString(shared, "__fspath__")) {
        raise_wrong_type(state, CR_E_SHARED_PATH);
        return -1;
    }
    if (PyUnicode_FSConverter(shared, path))
        return 0;
    /* A NUL, or a str the file system encoding cannot take: not a path. */
    if (PyErr_ExceptionMatches(PyExc_ValueError))
        raise_instead(state, CR_E_SHARED_PATH);
    return -1;
}

/* on_change=None | 'apply' | 'refuse'. */
static int convert_on_change(module_state *state, PyObject *obj, cr_on_change *out)
{
    *out = CR_CHANGE_APPLY;
    if (obj == Py_None)
        return 0;
    if (!PyUnicode_Check(obj)) {
        raise_wrong_type(state, CR_E_ON_CHANGE);
        return -1;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(obj, &len);
    if (name == NULL)
        return -1;
    const cr_status status = cr_parse_on_change(name, (size_t)len, out);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* Opening `path` changed its region's limit from `old`: a RuntimeWarning in
 * the core's words (-1 when warnings are errors and it was raised). */
static int warn_change(PyTypeObject *type, const char *path, const cr_limit *old,
                       const cr_limit *new_limit, int64_t capacity)
{
    const size_t size = CR_CHANGE_DESCRIPTION_MAX + strlen(path);
    char *text = PyMem_Malloc(size);
    if (text == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    cr_change_describe(text, size, type->tp_name, path, old, new_limit, capacity);
    const int result = PyErr_WarnEx(PyExc_RuntimeWarning, text, 1);
    PyMem_Free(text);
    return result;
}

/* A failed construction, by the status's class. With `path` (the shared=
 * argument): a runtime failure other than memory is the system's refusal of
 * the file, OSError (errno and path); a region refusal (the file is not the
 * region wanted) is InvalidArgument naming the path. Anything else (capacity,
 * shared_mode, memory) as raise_status. */
static void raise_construction(module_state *state, cr_status status, PyObject *path)
{
    const cr_status_class status_class = cr_status_class_of(status);
    if (path != NULL && status_class == CR_STATUS_RUNTIME && status != CR_E_NOMEM) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        return;
    }
    if (path == NULL || status_class != CR_STATUS_REGION) {
        raise_status(state, status);
        return;
    }
    PyObject *detail = PyUnicode_FromFormat(": %S", path);
    if (detail == NULL)
        return;
    raise_with_param(state->invalid_argument, status, detail);
    Py_DECREF(detail);
}

/* The arguments of allow/check/peek: ([key,] cost=1, *, now=None), by hand
 * because this is the hot path. Absent ones are left NULL. */
typedef struct {
    PyObject *key;
    PyObject *cost; /* take(): max_cost */
    PyObject *now;
    PyObject *timeout; /* reserve() only */
} call_args;

/* As parse_call, the cost's keyword `cost_name` (take's max_cost). */
static int parse_call_named(const char *name, bool keyed, bool takes_timeout, const char *cost_name,
                            PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            call_args *call)
{
    const Py_ssize_t max_positional = keyed ? 2 : 1;
    call->key = call->cost = call->now = call->timeout = NULL;
    if (nargs > max_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional argument%s (%zd given)",
                     name, max_positional, max_positional == 1 ? "" : "s", nargs);
        return -1;
    }
    if (keyed) {
        if (nargs > 0)
            call->key = args[0];
        if (nargs > 1)
            call->cost = args[1];
    } else if (nargs > 0) {
        call->cost = args[0];
    }
    if (kwnames != NULL) {
        const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nkw; i++) {
            PyObject *keyword = PyTuple_GET_ITEM(kwnames, i);
            PyObject **slot;
            if (keyed && PyUnicode_CompareWithASCIIString(keyword, "key") == 0)
                slot = &call->key;
            else if (PyUnicode_CompareWithASCIIString(keyword, cost_name) == 0)
                slot = &call->cost;
            else if (PyUnicode_CompareWithASCIIString(keyword, "now") == 0)
                slot = &call->now;
            else if (takes_timeout && PyUnicode_CompareWithASCIIString(keyword, "timeout") == 0)
                slot = &call->timeout;
            else {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", name,
                             keyword);
                return -1;
            }
            if (*slot != NULL) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", name,
                             keyword);
                return -1;
            }
            *slot = args[nargs + i];
        }
    }
    if (keyed && call->key == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'key' (pos 1)", name);
        return -1;
    }
    return 0;
}

/* The arguments of allow/check/peek/reserve/refund/anchor. */
static int parse_call(const char *name, bool keyed, bool takes_timeout, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames, call_args *call)
{
    return parse_call_named(name, keyed, takes_timeout, "cost", args, nargs, kwnames, call);
}

/* ------------------------------------------------------------------------ */
/* Decision                                                                  */

static PyObject *decision_from(module_state *state, const cr_decision *decision,
                               const cr_limit *limit)
{
    DecisionObject *self = PyObject_New(DecisionObject, state->decision_type);
    if (self == NULL)
        return NULL;
    self->allowed = decision->allowed;
    self->remaining = decision->remaining;
    self->limit = decision->limit;
    self->retry_after = cr_ns_to_seconds(decision->retry_after_ns);
    self->reset_after = cr_ns_to_seconds(decision->reset_after_ns);
    self->window = cr_ns_to_seconds(cr_limit_window_ns(limit));
    self->clipped = decision->clipped;
    return (PyObject *)self;
}

/* A Decision field out of its range: the face's own words (no core status
 * describes a Decision built by hand), with .param naming the field. */
static PyObject *raise_field(PyObject *exc_type, const char *param, const char *message)
{
    PyObject *exc = PyObject_CallFunction(exc_type, "s", message);
    if (exc == NULL)
        return NULL;
    PyObject *name = PyUnicode_FromString(param);
    if (name != NULL && PyObject_SetAttrString(exc, "param", name) == 0)
        PyErr_SetObject(exc_type, exc);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

/* For code that builds a Decision from another source (a remote store). */
static PyObject *decision_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"allowed", "remaining", "retry_after", "reset_after",
                               "limit",   "window",    "clipped",     NULL};
    PyObject *allowed_obj, *clipped_obj = Py_False;
    long long remaining, limit;
    double retry_after, reset_after, window = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLddL|dO:Decision", keywords, &allowed_obj,
                                     &remaining, &retry_after, &reset_after, &limit, &window,
                                     &clipped_obj))
        return NULL;
    module_state *state = PyType_GetModuleState(type);
    if (!PyBool_Check(allowed_obj))
        return raise_field(state->invalid_argument_type, "allowed", "allowed must be a bool");
    if (!PyBool_Check(clipped_obj))
        return raise_field(state->invalid_argument_type, "clipped", "clipped must be a bool");
    if (remaining < 0)
        return raise_field(state->invalid_argument, "remaining",
                           "remaining must be an integer >= 0");
    if (limit < 0)
        return raise_field(state->invalid_argument, "limit", "limit must be an integer >= 0");
    if (!(retry_after >= 0))
        return raise_field(state->invalid_argument, "retry_after",
                           "retry_after must be a number of seconds >= 0 (inf: never)");
    if (!(reset_after >= 0) || isinf(reset_after))
        return raise_field(state->invalid_argument, "reset_after",
                           "reset_after must be a finite number of seconds >= 0");
    if (!(window >= 0) || isinf(window))
        return raise_field(state->invalid_argument, "window",
                           "window must be a finite number of seconds >= 0");
    const int allowed = allowed_obj == Py_True;
    DecisionObject *self = (DecisionObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->allowed = (char)allowed;
    self->remaining = remaining;
    self->limit = limit;
    self->retry_after = retry_after;
    self->reset_after = reset_after;
    self->window = window;
    self->clipped = (char)(clipped_obj == Py_True);
    return (PyObject *)self;
}

static void decision_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* (allowed, remaining, retry_after, reset_after, limit, window, clipped) */
static PyObject *decision_fields(PyObject *self)
{
    const DecisionObject *decision = (const DecisionObject *)self;
    return Py_BuildValue("(OLddLdO)", decision->allowed ? Py_True : Py_False, decision->remaining,
                         decision->retry_after, decision->reset_after, decision->limit,
                         decision->window, decision->clipped ? Py_True : Py_False);
}

static PyObject *decision_repr(PyObject *self)
{
    PyObject *fields = decision_fields(self);
    if (fields == NULL)
        return NULL;
    /* clipped only when set: it is a charge's, and rare */
    PyObject *repr = PyUnicode_FromFormat(
        "Decision(allowed=%R, remaining=%R, retry_after=%R, reset_after=%R, limit=%R, "
        "window=%R%s)",
        PyTuple_GET_ITEM(fields, 0), PyTuple_GET_ITEM(fields, 1), PyTuple_GET_ITEM(fields, 2),
        PyTuple_GET_ITEM(fields, 3), PyTuple_GET_ITEM(fields, 4), PyTuple_GET_ITEM(fields, 5),
        ((const DecisionObject *)self)->clipped ? ", clipped=True" : "");
    Py_DECREF(fields);
    return repr;
}

static PyObject *decision_richcompare(PyObject *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(other) != Py_TYPE(self))
        Py_RETURN_NOTIMPLEMENTED;
    const DecisionObject *a = (const DecisionObject *)self;
    const DecisionObject *b = (const DecisionObject *)other;
    const bool equal = a->allowed == b->allowed && a->remaining == b->remaining &&
                       a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
                       a->limit == b->limit && a->window == b->window && a->clipped == b->clipped;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

static Py_hash_t decision_hash(PyObject *self)
{
    PyObject *fields = decision_fields(self);
    if (fields == NULL)
        return -1;
    Py_hash_t hash = PyObject_Hash(fields);
    Py_DECREF(fields);
    return hash;
}

static PyObject *decision_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *fields = decision_fields(self);
    if (fields == NULL)
        return NULL;
    return Py_BuildValue("(ON)", (PyObject *)Py_TYPE(self), fields);
}

static PyMemberDef decision_members[] = {
    {"allowed", Py_T_BOOL, offsetof(DecisionObject, allowed), Py_READONLY,
     "True when the request was admitted."},
    {"remaining", Py_T_LONGLONG, offsetof(DecisionObject, remaining), Py_READONLY,
     "Units that would still be admitted right after this decision."},
    {"retry_after", Py_T_DOUBLE, offsetof(DecisionObject, retry_after), Py_READONLY,
     "Seconds until the same request would be admitted: 0.0 when admitted, "
     "inf when the cost can never fit."},
    {"reset_after", Py_T_DOUBLE, offsetof(DecisionObject, reset_after), Py_READONLY,
     "Seconds until the key is back to a full burst."},
    {"limit", Py_T_LONGLONG, offsetof(DecisionObject, limit), Py_READONLY,
     "The burst: units an idle key may spend at once (not the rate)."},
    {"window", Py_T_DOUBLE, offsetof(DecisionObject, window), Py_READONLY,
     "Seconds in which the limit restores `limit` units (GCRA: burst * period / rate)."},
    {"clipped", Py_T_BOOL, offsetof(DecisionObject, clipped), Py_READONLY,
     "True for a charge that met the debt bound: committed up to it, the rest dropped."},
    {NULL, 0, 0, 0, NULL},
};

/* The HTTP fields of cr_headers_format, as a dict. */
static PyObject *decision_headers(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"name", "legacy", NULL};
    PyObject *name_obj = NULL;
    const char *name = NULL; /* the core's default */
    Py_ssize_t name_len = 0;
    int legacy = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$p:headers", keywords, &name_obj, &legacy))
        return NULL;
    if (name_obj != NULL && name_obj != Py_None) {
        if (!PyUnicode_Check(name_obj)) {
            raise_wrong_type(state_of(self), CR_E_HEADER_NAME);
            return NULL;
        }
        size_t len;
        name = utf8_of(state_of(self), name_obj, CR_E_HEADER_NAME, &len);
        if (name == NULL)
            return NULL;
        name_len = (Py_ssize_t)len;
    }
    const DecisionObject *decision = (const DecisionObject *)self;
    cr_decision fields = {
        (bool)decision->allowed, decision->limit, decision->remaining, 0, 0, false};
    int64_t window_ns = 0;
    cr_status status = cr_duration_from_seconds(decision->retry_after, &fields.retry_after_ns);
    if (status == CR_OK)
        status = cr_duration_from_seconds(decision->reset_after, &fields.reset_after_ns);
    if (status == CR_OK)
        status = cr_duration_from_seconds(decision->window, &window_ns);
    cr_headers headers;
    if (status == CR_OK)
        status = cr_headers_format(&headers, &fields, window_ns, name, (size_t)name_len,
                                   legacy != 0);
    if (status != CR_OK) {
        raise_status(state_of(self), status);
        return NULL;
    }
    PyObject *dict = PyDict_New();
    for (int i = 0; dict != NULL && i < headers.count; i++) {
        PyObject *value = PyUnicode_FromStringAndSize(headers.field[i].value,
                                                      (Py_ssize_t)headers.field[i].value_len);
        if (value == NULL || PyDict_SetItemString(dict, headers.field[i].name, value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(value);
    }
    return dict;
}

static PyMethodDef decision_methods[] = {
    {"__reduce__", decision_reduce, METH_NOARGS, NULL},
    {"headers", (PyCFunction)(void (*)(void))decision_headers, METH_VARARGS | METH_KEYWORDS,
     "headers($self, /, name=None, *, legacy=False)\n--\n\n"
     "The HTTP rate-limit fields of this decision (draft-ietf-httpapi-ratelimit-headers):\n"
     "RateLimit-Policy, RateLimit, and Retry-After (whole seconds, at least 1) when\n"
     "refused and the cost can fit; legacy=True adds X-RateLimit-Limit, -Remaining, -Reset.\n"
     "name: the policy name (None: 'default')."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------ */
/* Limiter and KeyedLimiter                                                  */

static bool is_keyed(const StoreObject *store) { return store->keyed != NULL; }

/* Limiter(rate, period=None, *, burst=None, shared=None, shared_mode=None,
 * clock=None, algorithm=None); a KeyedLimiter also takes capacity=None. */
static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *limiter_keywords[] = {"rate",  "period",    "burst",     "shared",   "shared_mode",
                                       "clock", "algorithm", "on_change", "max_cost", NULL};
    static char *keyed_keywords[] = {"rate",        "period",   "burst",     "shared",
                                     "shared_mode", "clock",    "algorithm", "on_change",
                                     "max_cost",    "capacity", NULL};
    module_state *state = (module_state *)PyType_GetModuleState(type);
    const bool keyed = type == state->keyed_type;
    PyObject *rate, *period = Py_None, *burst = Py_None, *shared = Py_None, *mode_obj = Py_None;
    PyObject *clock = Py_None, *algorithm = Py_None, *on_change_obj = Py_None;
    PyObject *max_cost = Py_None, *capacity_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, keyed ? "O|O$OOOOOOOO:KeyedLimiter" : "O|O$OOOOOOO:Limiter",
            keyed ? keyed_keywords : limiter_keywords, &rate, &period, &burst, &shared, &mode_obj,
            &clock, &algorithm, &on_change_obj, &max_cost, &capacity_obj))
        return NULL;
    cr_on_change on_change;
    if (convert_on_change(state, on_change_obj, &on_change) < 0)
        return NULL;
    cr_limit limit;
    int64_t capacity = CR_KEYED_DEFAULT_CAPACITY, mode;
    bool has_capacity;
    PyObject *path;
    if (convert_limit(state, rate, period, burst, clock, algorithm, max_cost, &limit) < 0 ||
        convert_optional_int(state, capacity_obj, CR_E_CAPACITY, &capacity, &has_capacity) < 0 ||
        convert_shared(state, shared, mode_obj, &path, &mode) < 0)
        return NULL;
    if (!has_capacity)
        capacity = CR_KEYED_DEFAULT_CAPACITY;
    cr_limiter *limiter = NULL;
    cr_keyed *keyed_store = NULL;
    const char *region = path != NULL ? PyBytes_AS_STRING(path) : NULL;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* opening a region may wait on another process's lock */
        status = keyed ? cr_keyed_open(&keyed_store, &limit, capacity, region, mode, on_change)
                       : cr_limiter_open(&limiter, &limit, region, mode, on_change);
    Py_END_ALLOW_THREADS if (status != CR_OK)
        raise_construction(state, status, path != NULL ? shared : NULL);
    const cr_limit *replaced = status != CR_OK ? NULL
                               : keyed         ? cr_keyed_replaced(keyed_store)
                                               : cr_limiter_replaced(limiter);
    if (replaced != NULL &&
        warn_change(type, region, replaced, &limit, keyed ? capacity : -1) < 0) {
        cr_limiter_free(limiter);
        cr_keyed_free(keyed_store);
        status = CR_E_NOMEM; /* the warning was made an error */
    }
    Py_XDECREF(path);
    if (status != CR_OK)
        return NULL;
    StoreObject *self = (StoreObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        cr_limiter_free(limiter);
        cr_keyed_free(keyed_store);
        return NULL;
    }
    self->limiter = limiter;
    self->keyed = keyed_store;
    self->capacity = capacity;
    if (max_cost != Py_None && (self->max_cost = PyNumber_Index(max_cost)) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void store_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    cr_limiter_free(((StoreObject *)self)->limiter);
    cr_keyed_free(((StoreObject *)self)->keyed);
    Py_XDECREF(((StoreObject *)self)->max_cost);
    type->tp_free(self);
    Py_DECREF(type);
}

/* One decision into `decision`, or, with `decision` NULL (allow), only
 * whether it is admitted, into `allowed`. A Limiter call without arguments
 * skips the parsing. */
static Py_ALWAYS_INLINE inline int decide(PyObject *self, bool keyed, const char *name, bool commit,
                                          PyObject *const *args, Py_ssize_t nargs,
                                          PyObject *kwnames, cr_decision *decision, bool *allowed)
{
    StoreObject *store = (StoreObject *)self;
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t cost = CR_DEFAULT_COST;
    int64_t now_ns = CR_CLOCK;
    if (keyed || nargs != 0 || kwnames != NULL) {
        call_args call;
        module_state *state = state_of(self);
        if (parse_call(name, keyed, false, args, nargs, kwnames, &call) < 0 ||
            (keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
            convert_cost(state, call.cost, &cost) < 0 || convert_now(state, call.now, &now_ns) < 0)
            return -1;
    }
    cr_status status;
    CR_PY_BEGIN_DECISION
    if (keyed)
        status = decision != NULL
                     ? cr_keyed_check(store->keyed, key, (size_t)key_len, now_ns, cost, commit,
                                      decision)
                     : cr_keyed_allow(store->keyed, key, (size_t)key_len, now_ns, cost, allowed);
    else
        status = decision != NULL ? cr_limiter_check(store->limiter, now_ns, cost, commit, decision)
                                  : cr_limiter_allow(store->limiter, now_ns, cost, allowed);
    CR_PY_END_DECISION
    if (status != CR_OK) {
        raise_status(state_of(self), status);
        return -1;
    }
    return 0;
}

static Py_ALWAYS_INLINE inline PyObject *
store_allow(PyObject *self, bool keyed, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bool allowed;
    if (decide(self, keyed, "allow", true, args, nargs, kwnames, NULL, &allowed) < 0)
        return NULL;
    return PyBool_FromLong(allowed);
}

static Py_ALWAYS_INLINE inline PyObject *store_check(PyObject *self, bool keyed, bool commit,
                                                     PyObject *const *args, Py_ssize_t nargs,
                                                     PyObject *kwnames)
{
    cr_decision decision;
    if (decide(self, keyed, commit ? "check" : "peek", commit, args, nargs, kwnames, &decision,
               NULL) < 0)
        return NULL;
    return decision_from(state_of(self), &decision, store_limit((StoreObject *)self));
}

/*
 * Each type's allow, check and peek: the one implementation above with
 * `keyed` a constant, so that the compiler keeps only the type's own path
 * (a run-time `keyed` measured 50 to 110 more instructions a call).
 */
#define DECIDE_ENTRY_POINTS(type, keyed)                                                   \
    static PyObject *type##_allow(PyObject *self, PyObject *const *args, Py_ssize_t nargs, \
                                  PyObject *kwnames)                                       \
    {                                                                                      \
        return store_allow(self, keyed, args, nargs, kwnames);                             \
    }                                                                                      \
    static PyObject *type##_check(PyObject *self, PyObject *const *args, Py_ssize_t nargs, \
                                  PyObject *kwnames)                                       \
    {                                                                                      \
        return store_check(self, keyed, true, args, nargs, kwnames);                       \
    }                                                                                      \
    static PyObject *type##_peek(PyObject *self, PyObject *const *args, Py_ssize_t nargs,  \
                                 PyObject *kwnames)                                        \
    {                                                                                      \
        return store_check(self, keyed, false, args, nargs, kwnames);                      \
    }

DECIDE_ENTRY_POINTS(limiter, false)
DECIDE_ENTRY_POINTS(keyed, true)

/* A longest wait (the timeout of reserve and wait): None (or absent) is
 * any wait (CR_NEVER); else seconds, as cr_wait_from_seconds takes them.
 * `invalid` names the parameter. */
static int convert_wait_limit(module_state *state, PyObject *obj, cr_status invalid,
                              int64_t *max_wait_ns)
{
    *max_wait_ns = CR_NEVER;
    if (obj == NULL || obj == Py_None)
        return 0;
    double seconds;
    if (convert_number(state, obj, invalid, &seconds) < 0)
        return -1;
    if (cr_wait_from_seconds(seconds, invalid, max_wait_ns) != CR_OK) {
        raise_status(state, invalid);
        return -1;
    }
    return 0;
}

typedef enum { RESERVE, REFUND, ANCHOR } reservation_op;

/* reserve([key,] cost=1, *, timeout=None, now=None): the delay in seconds,
 * or None when nothing was reserved; refund([key,] cost=1, *, now=None) and
 * anchor([key,] cost=1, *, now=None): None. */
static PyObject *store_reservation(PyObject *self, reservation_op which, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames)
{
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    const bool keyed = is_keyed(store);
    const bool reserve = which == RESERVE;
    const char *name = reserve ? "reserve" : which == REFUND ? "refund" : "anchor";
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t cost, now_ns, max_wait_ns;
    call_args call;
    if (parse_call(name, keyed, reserve, args, nargs, kwnames, &call) < 0 ||
        (keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
        convert_cost(state, call.cost, &cost) < 0 ||
        convert_wait_limit(state, call.timeout, CR_E_TIMEOUT, &max_wait_ns) < 0 ||
        convert_now(state, call.now, &now_ns) < 0)
        return NULL;
    bool reserved = false;
    int64_t delay_ns = 0;
    cr_status status;
    if (reserve)
        status = keyed ? cr_keyed_reserve(store->keyed, key, (size_t)key_len, now_ns, cost,
                                          max_wait_ns, &reserved, &delay_ns)
                       : cr_limiter_reserve(store->limiter, now_ns, cost, max_wait_ns, &reserved,
                                            &delay_ns);
    else if (which == REFUND)
        status = keyed ? cr_keyed_refund(store->keyed, key, (size_t)key_len, now_ns, cost)
                       : cr_limiter_refund(store->limiter, now_ns, cost);
    else
        status = keyed ? cr_keyed_anchor(store->keyed, key, (size_t)key_len, now_ns, cost)
                       : cr_limiter_anchor(store->limiter, now_ns, cost);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (!reserve || !reserved)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(cr_ns_to_seconds(delay_ns));
}

static PyObject *store_reserve(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    return store_reservation(self, RESERVE, args, nargs, kwnames);
}

static PyObject *store_refund(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return store_reservation(self, REFUND, args, nargs, kwnames);
}

static PyObject *store_anchor(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return store_reservation(self, ANCHOR, args, nargs, kwnames);
}

/* charge([key,] cost, *, now=None) -> Decision and take([key,] max_cost, *,
 * now=None) -> int (docs/design.md §9): the units are required. */
static PyObject *store_after_fact(PyObject *self, bool take, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames)
{
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    const bool keyed = is_keyed(store);
    const char *name = take ? "take" : "charge";
    const char *units_name = take ? "max_cost" : "cost";
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t units, now_ns;
    call_args call;
    if (parse_call_named(name, keyed, false, units_name, args, nargs, kwnames, &call) < 0)
        return NULL;
    if (call.cost == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", name,
                     units_name, keyed ? 2 : 1);
        return NULL;
    }
    if ((keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
        convert_units(state, call.cost, take ? CR_E_MAX_COST : CR_E_COST, &units) < 0 ||
        convert_now(state, call.now, &now_ns) < 0)
        return NULL;
    cr_decision decision;
    int64_t taken = 0;
    cr_status status;
    CR_PY_BEGIN_DECISION
    if (take)
        status = keyed ? cr_keyed_take(store->keyed, key, (size_t)key_len, now_ns, units, &taken)
                       : cr_limiter_take(store->limiter, now_ns, units, &taken);
    else
        status = keyed
                     ? cr_keyed_charge(store->keyed, key, (size_t)key_len, now_ns, units, &decision)
                     : cr_limiter_charge(store->limiter, now_ns, units, &decision);
    CR_PY_END_DECISION
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (take)
        return PyLong_FromLongLong(taken);
    return decision_from(state, &decision, store_limit(store));
}

static PyObject *store_charge(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return store_after_fact(self, false, args, nargs, kwnames);
}

static PyObject *store_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    return store_after_fact(self, true, args, nargs, kwnames);
}

/* An item of check_all: a Limiter, or a (KeyedLimiter, key) pair. The key
 * points into `item_obj`, which the caller's sequence keeps alive. */
static int convert_item(module_state *state, PyObject *item_obj, cr_item *item)
{
    memset(item, 0, sizeof *item);
    if (Py_IS_TYPE(item_obj, state->limiter_type)) {
        item->limiter = ((StoreObject *)item_obj)->limiter;
        return 0;
    }
    if (PyTuple_Check(item_obj) && PyTuple_GET_SIZE(item_obj) == 2 &&
        Py_IS_TYPE(PyTuple_GET_ITEM(item_obj, 0), state->keyed_type)) {
        const char *key;
        Py_ssize_t key_len;
        if (convert_key(state, PyTuple_GET_ITEM(item_obj, 1), &key, &key_len) < 0)
            return -1;
        item->keyed = ((StoreObject *)PyTuple_GET_ITEM(item_obj, 0))->keyed;
        item->key = key;
        item->key_len = (size_t)key_len;
        return 0;
    }
    raise_wrong_type(state, CR_E_ITEMS);
    return -1;
}

/* check_all(items, cost=1, *, now=None) -> Decision; with the private
 * _dry_run=True, a refusal is counted as would_refuse (the web policy's). */
static PyObject *module_check_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    static const char *const keywords[] = {"items", "cost", "now", "_dry_run", NULL};
    PyObject *given[4] = {NULL, NULL, NULL, NULL};
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "check_all() takes at most 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        int k = 0;
        while (keywords[k] &&
               PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), keywords[k]) != 0)
            k++;
        if (!keywords[k] || given[k] != NULL) {
            PyErr_Format(PyExc_TypeError, "check_all() got %s argument '%U'",
                         keywords[k] ? "multiple values for" : "an unexpected keyword",
                         PyTuple_GET_ITEM(kwnames, i));
            return NULL;
        }
        given[k] = args[nargs + i];
    }
    if (given[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "check_all() missing required argument 'items' (pos 1)");
        return NULL;
    }
    int64_t cost, now_ns;
    if (convert_cost(state, given[1], &cost) < 0 || convert_now(state, given[2], &now_ns) < 0)
        return NULL;
    if (!PyList_Check(given[0]) && !PyTuple_Check(given[0])) {
        raise_wrong_type(state, CR_E_ITEMS);
        return NULL;
    }
    PyObject *items = PySequence_Fast(given[0], "items");
    if (items == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    cr_item few[8], *many = count > 8 ? PyMem_Malloc((size_t)count * sizeof *many) : few;
    PyObject *result = NULL;
    if (many == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (convert_item(state, PySequence_Fast_GET_ITEM(items, i), &many[i]) < 0)
            goto done;
    cr_decision decision;
    size_t index = 0;
    cr_status status = cr_check_all(many, (size_t)count, now_ns, cost, &decision, &index);
    if (status == CR_OK && !decision.allowed && given[3] != NULL && PyObject_IsTrue(given[3]) == 1)
        cr_item_would_refuse(&many[index], cost);
    if (status != CR_OK)
        raise_status(state, status);
    else /* the window is that of the item whose decision this is */
        result = decision_from(state, &decision,
                               many[index].limiter != NULL ? cr_limiter_limit(many[index].limiter)
                                                           : cr_keyed_limit(many[index].keyed));
done:
    if (many != few)
        PyMem_Free(many);
    Py_DECREF(items);
    return result;
}

/* dict[name] = value (a new reference, NULL for None), stealing `value`. */
static int dict_put(PyObject *dict, const char *name, PyObject *value)
{
    if (value == NULL && PyErr_Occurred())
        return -1;
    int status = PyDict_SetItemString(dict, name, value ? value : Py_None);
    Py_XDECREF(value);
    return status;
}

/* inspect_region(path) -> dict: what a region file holds, read without
 * changing it (cr_inspect_region). */
static PyObject *module_inspect_region(PyObject *module, PyObject *path_obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *path;
    int64_t mode;
    if (path_obj == Py_None) {
        raise_wrong_type(state, CR_E_SHARED_PATH);
        return NULL;
    }
    if (convert_shared(state, path_obj, Py_None, &path, &mode) < 0)
        return NULL;
    cr_region_info info;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS status = cr_inspect_region(PyBytes_AS_STRING(path), &info);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_construction(state, status, path_obj);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    const bool rate = info.algorithm != NULL;
    PyObject *stats = rate ? rate_stats_dict(&info.stats) : gauge_stats_dict(&info.gauge_stats);
    PyObject *dict = PyDict_New();
    if (!stats || !dict ||
        dict_put(dict, "layout_version", PyLong_FromUnsignedLong(info.layout_version)) < 0 ||
        dict_put(dict, "kind", PyUnicode_FromString(info.kind)) < 0 ||
        dict_put(dict, "algorithm", rate ? PyUnicode_FromString(info.algorithm) : NULL) < 0 ||
        dict_put(dict, "limit", PyUnicode_FromString(info.description)) < 0 ||
        dict_put(dict, "rate", rate ? PyFloat_FromDouble(info.limit.rate) : NULL) < 0 ||
        dict_put(dict, "period", rate ? PyFloat_FromDouble(info.limit.period_s) : NULL) < 0 ||
        dict_put(dict, "burst", rate ? PyLong_FromLongLong(info.limit.burst) : NULL) < 0 ||
        dict_put(dict, "max_in_flight", rate ? NULL : PyLong_FromLongLong(info.max_in_flight)) <
            0 ||
        dict_put(dict, "lease",
                 info.lease_ns ? PyFloat_FromDouble(cr_ns_to_seconds(info.lease_ns)) : NULL) < 0 ||
        dict_put(dict, "peak", rate ? NULL : PyBool_FromLong(info.gauge_stats.peak_tracked)) < 0 ||
        dict_put(dict, "capacity", info.capacity ? PyLong_FromLongLong(info.capacity) : NULL) < 0 ||
        dict_put(dict, "live_keys", PyLong_FromUnsignedLongLong(info.live_keys)) < 0 ||
        dict_put(dict, "generation", PyLong_FromUnsignedLongLong(info.generation)) < 0 ||
        dict_put(dict, "size", PyLong_FromUnsignedLongLong(info.size)) < 0 ||
        dict_put(dict, "this_boot", PyBool_FromLong(info.this_boot)) < 0 ||
        PyDict_SetItemString(dict, "stats", stats) < 0) {
        Py_XDECREF(stats);
        Py_XDECREF(dict);
        return NULL;
    }
    Py_DECREF(stats);
    return dict;
}

PyDoc_STRVAR(inspect_region_doc,
             "inspect_region(path, /)\n--\n\n"
             "What the region file at path holds, read without changing it (a dict):\n"
             "layout_version, kind ('limiter', 'keyed', 'concurrency'), algorithm, limit\n"
             "(its description), rate, period, burst, max_in_flight, lease, peak\n"
             "(whether a concurrency limit tracks it), capacity, live_keys, generation,\n"
             "size, this_boot and stats (the counters). A path\n"
             "that is not a region raises InvalidArgument naming it.");

/* metrics() -> list: the metrics every exporter publishes (cr_metrics), each
 * a dict of the table's fields; labels as (name, attribute) pairs, samples as
 * (field, label value or None) pairs. */
static PyObject *metric_label(const cr_metric_label *label)
{
    if (label->name == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(ss)", label->name, label->attribute);
}

static PyObject *metric_dict(const cr_metric *metric)
{
    PyObject *labels = PyTuple_New((Py_ssize_t)metric->label_count);
    PyObject *samples = PyTuple_New((Py_ssize_t)metric->sample_count);
    for (size_t i = 0; labels && i < metric->label_count; i++) {
        PyObject *pair = metric_label(&metric->labels[i]);
        if (pair == NULL)
            Py_CLEAR(labels);
        else
            PyTuple_SET_ITEM(labels, (Py_ssize_t)i, pair);
    }
    for (size_t i = 0; samples && i < metric->sample_count; i++) {
        const cr_metric_sample *sample = &metric->samples[i];
        PyObject *pair = Py_BuildValue("(sz)", sample->field, sample->value);
        if (pair == NULL)
            Py_CLEAR(samples);
        else
            PyTuple_SET_ITEM(samples, (Py_ssize_t)i, pair);
    }
    PyObject *dict = labels && samples ? PyDict_New() : NULL;
    if (!dict || dict_put(dict, "name", PyUnicode_FromString(metric->name)) < 0 ||
        dict_put(dict, "prometheus_name", PyUnicode_FromString(metric->prometheus_name)) < 0 ||
        dict_put(dict, "help", PyUnicode_FromString(metric->help)) < 0 ||
        dict_put(dict, "type", PyUnicode_FromString(metric->type)) < 0 ||
        dict_put(dict, "instrument", PyUnicode_FromString(metric->instrument)) < 0 ||
        dict_put(dict, "unit", PyUnicode_FromString(metric->unit)) < 0 ||
        dict_put(dict, "stats", PyUnicode_FromString(metric->stats)) < 0 ||
        PyDict_SetItemString(dict, "labels", labels) < 0 ||
        dict_put(dict, "label", metric_label(&metric->label)) < 0 ||
        PyDict_SetItemString(dict, "samples", samples) < 0)
        Py_CLEAR(dict);
    Py_XDECREF(labels);
    Py_XDECREF(samples);
    return dict;
}

static PyObject *module_metrics(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    size_t count;
    const cr_metric *metrics = cr_metrics(&count);
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        PyObject *dict = metric_dict(&metrics[i]);
        if (dict == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, dict);
    }
    return list;
}

PyDoc_STRVAR(metrics_doc,
             "metrics($module, /)\n--\n\n"
             "The metrics every exporter publishes, in order (a list of dicts): name\n"
             "(OpenTelemetry), prometheus_name, help, type (Prometheus), instrument\n"
             "(OpenTelemetry), unit, stats ('rate' or 'concurrency': whose stats() it\n"
             "reads), labels ((name, attribute) pairs every series may carry), label\n"
             "(the pair telling its samples apart, or None) and samples ((stats field,\n"
             "label value or None) pairs).");

/* _check_timeout(timeout): a wait's `timeout` in seconds, None for any wait,
 * or the core's CR_E_TIMEOUT error (the words Lua's wait() uses). */
static PyObject *module_check_timeout(PyObject *module, PyObject *timeout)
{
    int64_t timeout_ns;
    if (convert_wait_limit((module_state *)PyModule_GetState(module), timeout, CR_E_TIMEOUT,
                           &timeout_ns) < 0)
        return NULL;
    if (timeout_ns == CR_NEVER)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(cr_ns_to_seconds(timeout_ns));
}

/* _check_request(key, cost, now): what a decision of `cost` units of `key` at
 * `now` would refuse, refused in the same words (the Redis store decides by the
 * core's rules elsewhere); the integer ns the core decides at for `now`
 * seconds (rounded by the core), or None when `now` is None. */
static PyObject *module_check_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_check_request(key, cost, now): three arguments");
        return NULL;
    }
    const char *key;
    Py_ssize_t key_len;
    int64_t cost, now_ns;
    if (convert_key(state, args[0], &key, &key_len) < 0 ||
        convert_cost(state, args[1], &cost) < 0 || convert_now(state, args[2], &now_ns) < 0)
        return NULL;
    cr_status status = cr_check_call(now_ns, cost);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (now_ns == CR_CLOCK)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(now_ns);
}

/* _check_hold(limit, key, cost, lease): what a concurrency limit refuses of
 * its limit and lease and of a holding's key (None: no key) and cost, refused
 * in the same words (the Redis store holds units elsewhere); the lease in
 * integer ns, or None when `lease` is None. */
static PyObject *module_check_hold(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_check_hold(limit, key, cost, lease): four arguments");
        return NULL;
    }
    int64_t limit, cost, lease_ns;
    const cr_status wrong_types[2] = {CR_E_LIMIT, CR_E_HOLD_COST};
    int64_t *const numbers[2] = {&limit, &cost};
    PyObject *const objects[2] = {args[0], args[2]};
    for (int i = 0; i < 2; i++)
        switch (to_int64(objects[i], numbers[i])) {
        case CONVERTED:
            break;
        case WRONG_TYPE:
            raise_wrong_type(state, wrong_types[i]);
            return NULL;
        default:
            return NULL;
        }
    const char *key;
    Py_ssize_t key_len;
    if (args[1] != Py_None && convert_key(state, args[1], &key, &key_len) < 0)
        return NULL;
    cr_status status = cr_gauge_check(limit, cost);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (args[3] == Py_None)
        Py_RETURN_NONE;
    double lease_s;
    if (convert_number(state, args[3], CR_E_LEASE, &lease_s) < 0)
        return NULL;
    status = cr_lease_from_seconds(lease_s, &lease_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return PyLong_FromLongLong(lease_ns);
}

/* _attach_method(type, function): wait() and acquire() are Python
 * (python/cellrate/_wait.py, docs/design.md §9); this puts them in the
 * compiled types' own dictionaries, so that `lim.allow()` stays a call on the
 * exact compiled type (CPython specialises method calls on the exact type of
 * `self`, so a Python subclass would slow every decision down), while
 * `lim.wait` is an ordinary method. Replacing a Python function is allowed (a
 * reloaded package); replacing a compiled method is not. */
static PyObject *module_attach_method(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2 ||
        (args[0] != (PyObject *)state->limiter_type && args[0] != (PyObject *)state->keyed_type &&
         args[0] != (PyObject *)state->concurrency_type) ||
        !PyFunction_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_attach_method(type, function): Limiter, KeyedLimiter "
                                         "or Concurrency, and a function");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *name = PyObject_GetAttrString(args[1], "__name__");
    if (name == NULL)
        return NULL;
    PyObject *present = PyDict_GetItemWithError(type->tp_dict, name); /* borrowed */
    int status = -1;
    if (present != NULL && !PyFunction_Check(present))
        PyErr_Format(PyExc_ValueError, "_attach_method: %R is a compiled method", name);
    else if (present != NULL || !PyErr_Occurred())
        status = PyDict_SetItem(type->tp_dict, name, args[1]);
    Py_DECREF(name);
    if (status < 0)
        return NULL;
    PyType_Modified(type);
    Py_RETURN_NONE;
}

static PyObject *store_get_algorithm(PyObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(cr_algorithm_name(store_limit((StoreObject *)self)->algorithm));
}

/* Limiter.reset() */
static PyObject *limiter_reset(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    cr_limiter_reset(((StoreObject *)self)->limiter);
    Py_RETURN_NONE;
}

/* reconfigure(rate, period=None, *, burst=None, algorithm=None, now=None), on
 * Limiter and KeyedLimiter: the limit changes live, keeping what was used
 * (docs/design.md §4). The algorithm, when not given, is the store's;
 * the clock and max_cost stay its (a burst below max_cost is refused). */
static PyObject *store_reconfigure(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rate", "period", "burst", "algorithm", "now", NULL};
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    PyObject *rate, *period = Py_None, *burst = Py_None, *algorithm = Py_None, *now = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOO:reconfigure", keywords, &rate, &period,
                                     &burst, &algorithm, &now))
        return NULL;
    PyObject *own = NULL;
    if (algorithm == Py_None) {
        own = PyUnicode_FromString(cr_algorithm_name(store_limit(store)->algorithm));
        if (own == NULL)
            return NULL;
    }
    cr_limit limit;
    int64_t now_ns;
    int failed = convert_limit(state, rate, period, burst, Py_None, own ? own : algorithm,
                               store->max_cost ? store->max_cost : Py_None, &limit) < 0 ||
                 convert_now(state, now, &now_ns) < 0;
    Py_XDECREF(own);
    if (failed)
        return NULL;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* a change may wait for another and sweeps part of a table */
        status = is_keyed(store) ? cr_keyed_reconfigure(store->keyed, &limit, now_ns)
                                 : cr_limiter_reconfigure(store->limiter, &limit, now_ns);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* stats() on Limiter and KeyedLimiter: the counters, a dict of ints. */
static PyObject *store_stats(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    StoreObject *store = (StoreObject *)self;
    cr_stats stats;
    if (is_keyed(store))
        cr_keyed_stats(store->keyed, &stats);
    else
        cr_limiter_stats(store->limiter, &stats);
    return rate_stats_dict(&stats);
}

/* reset_stats() on Limiter and KeyedLimiter. */
static PyObject *store_reset_stats(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    StoreObject *store = (StoreObject *)self;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* a region's change lock */
        status = is_keyed(store) ? cr_keyed_reset_stats(store->keyed)
                                 : cr_limiter_reset_stats(store->limiter);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_status(state_of(self), status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _would_refuse(cost): a dry run let a refusal of `cost` units through. */
static PyObject *store_would_refuse(PyObject *self, PyObject *cost_obj)
{
    StoreObject *store = (StoreObject *)self;
    long long cost = PyLong_AsLongLong(cost_obj);
    if (cost == -1 && PyErr_Occurred())
        return NULL;
    if (is_keyed(store))
        cr_keyed_would_refuse(store->keyed, cost);
    else
        cr_limiter_would_refuse(store->limiter, cost);
    Py_RETURN_NONE;
}

/* KeyedLimiter.reset(key) */
static PyObject *keyed_reset(PyObject *self, PyObject *key_obj)
{
    const char *key;
    Py_ssize_t key_len;
    if (convert_key(state_of(self), key_obj, &key, &key_len) < 0)
        return NULL;
    cr_keyed_reset(((StoreObject *)self)->keyed, key, (size_t)key_len);
    Py_RETURN_NONE;
}

/* KeyedLimiter.clear() */
static PyObject *keyed_clear(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    cr_keyed_clear(((StoreObject *)self)->keyed);
    Py_RETURN_NONE;
}

static Py_ssize_t keyed_len(PyObject *self)
{
    return (Py_ssize_t)cr_keyed_len(((StoreObject *)self)->keyed);
}

/* Without this, len() would make a limiter with no keys yet false, and
 * `if limiter:` would skip limiting. */
static int keyed_bool(PyObject *Py_UNUSED(self)) { return 1; }

static PyObject *store_get_clock(PyObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(cr_clock_name(store_limit((StoreObject *)self)));
}

static PyObject *keyed_get_evictions(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(cr_keyed_evictions(((StoreObject *)self)->keyed));
}

/* cr_limit_describe's text under the type's name, the same as Lua's
 * __tostring. `capacity` < 0: none. */
static PyObject *limit_text(PyObject *self, const cr_limit *limit, int64_t capacity)
{
    char text[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit_describe(text, sizeof text, Py_TYPE(self)->tp_name, limit, capacity);
    return PyUnicode_FromString(text);
}

/* "cellrate.Limiter(rate=300, period=60, burst=60)": see cr_limit_describe. */
static PyObject *store_repr(PyObject *self)
{
    const StoreObject *store = (const StoreObject *)self;
    return limit_text(self, store_limit(store), is_keyed(store) ? store->capacity : -1);
}

/* ------------------------------------------------------------------------ */
/* Limit                                                                     */

/* Limit(rate, period=None, *, burst=None, algorithm="gcra"): what a Limiter
 * of these arguments would decide by, validated by the core, no store made. */
static PyObject *limit_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rate", "period", "burst", "algorithm", NULL};
    PyObject *rate, *period = Py_None, *burst = Py_None, *algorithm = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OO:Limit", keywords, &rate, &period, &burst,
                                     &algorithm))
        return NULL;
    cr_limit limit;
    if (convert_limit((module_state *)PyType_GetModuleState(type), rate, period, burst, Py_None,
                      algorithm, Py_None, &limit) < 0)
        return NULL;
    LimitObject *self = (LimitObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->limit = limit;
    return (PyObject *)self;
}

static void limit_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *limit_repr(PyObject *self)
{
    return limit_text(self, &((LimitObject *)self)->limit, -1);
}

/* The parameters equality and the hash go by: the algorithm, rate, period
 * and burst, and what the core derived from them. */
static PyObject *limit_key(const cr_limit *limit)
{
    return Py_BuildValue("(sddLLL)", cr_algorithm_name(limit->algorithm), limit->rate,
                         limit->period_s, (long long)limit->burst, (long long)limit->emission_ns,
                         (long long)limit->tolerance_ns);
}

static PyObject *limit_richcompare(PyObject *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(other) != Py_TYPE(self))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *a = limit_key(&((LimitObject *)self)->limit);
    PyObject *b = a != NULL ? limit_key(&((LimitObject *)other)->limit) : NULL;
    PyObject *result = b != NULL ? PyObject_RichCompare(a, b, op) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return result;
}

static Py_hash_t limit_hash(PyObject *self)
{
    PyObject *key = limit_key(&((LimitObject *)self)->limit);
    if (key == NULL)
        return -1;
    Py_hash_t hash = PyObject_Hash(key);
    Py_DECREF(key);
    return hash;
}

static PyObject *limit_get_algorithm(PyObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(cr_algorithm_name(((LimitObject *)self)->limit.algorithm));
}

static PyObject *limit_get_window(PyObject *self, void *Py_UNUSED(closure))
{
    return PyFloat_FromDouble(cr_ns_to_seconds(cr_limit_window_ns(&((LimitObject *)self)->limit)));
}

/* check_policy_name(name): None when cr_headers_format takes `name` (a str,
 * or None: the core's default) as a policy name, else the core's error naming
 * `name`. */
static PyObject *module_check_policy_name(PyObject *module, PyObject *name_obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (name_obj == Py_None)
        Py_RETURN_NONE;
    if (!PyUnicode_Check(name_obj)) {
        raise_wrong_type(state, CR_E_HEADER_NAME);
        return NULL;
    }
    size_t name_len;
    const char *name = utf8_of(state, name_obj, CR_E_HEADER_NAME, &name_len);
    if (name == NULL)
        return NULL;
    if (cr_headers_check_name(name, name_len) != CR_OK) {
        raise_status(state, CR_E_HEADER_NAME);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Following a provider (docs/design.md §18): a response's fields to the      */
/* core's cr_field list, read by cr_signal_read and followed by the store.    */

/* The fields of a response: a mapping (its multi_items() when it has them,
 * as httpx.Headers does, else its items()) or an iterable of (name, value)
 * pairs, each a str or bytes. `keep` holds what the pointers point into. */
typedef struct {
    cr_field *fields;
    size_t count;
    PyObject *keep;
} field_list;

static void field_list_clear(field_list *list)
{
    PyMem_Free(list->fields);
    Py_CLEAR(list->keep);
    list->fields = NULL;
    list->count = 0;
}

static int field_text(module_state *state, PyObject *text, const char **bytes, size_t *len)
{
    if (PyBytes_Check(text)) {
        *bytes = PyBytes_AS_STRING(text);
        *len = (size_t)PyBytes_GET_SIZE(text);
        return 0;
    }
    if (PyUnicode_Check(text)) {
        *bytes = utf8_of(state, text, CR_E_HEADERS, len);
        return *bytes == NULL ? -1 : 0;
    }
    raise_wrong_type(state, CR_E_HEADERS);
    return -1;
}

static int convert_headers(module_state *state, PyObject *headers, field_list *list)
{
    list->fields = NULL;
    list->count = 0;
    list->keep = NULL;
    PyObject *pairs = NULL;
    if (PyUnicode_Check(headers) || PyBytes_Check(headers)) {
        raise_wrong_type(state, CR_E_HEADERS);
        return -1;
    }
    if (PyObject_HasAttrString(headers, "multi_items"))
        pairs = PyObject_CallMethod(headers, "multi_items", NULL);
    else if (PyMapping_Check(headers) && PyObject_HasAttrString(headers, "items"))
        pairs = PyObject_CallMethod(headers, "items", NULL);
    else {
        Py_INCREF(headers);
        pairs = headers;
    }
    if (pairs == NULL)
        return -1;
    list->keep = PySequence_Fast(pairs, "");
    Py_DECREF(pairs);
    if (list->keep == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            raise_wrong_type(state, CR_E_HEADERS);
        }
        return -1;
    }
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(list->keep);
    list->fields = PyMem_Calloc(count > 0 ? (size_t)count : 1, sizeof *list->fields);
    if (list->fields == NULL) {
        field_list_clear(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(list->keep, i);
        cr_field *field = &list->fields[i];
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            field_list_clear(list);
            raise_wrong_type(state, CR_E_HEADERS);
            return -1;
        }
        if (field_text(state, PyTuple_GET_ITEM(pair, 0), &field->name, &field->name_len) < 0 ||
            field_text(state, PyTuple_GET_ITEM(pair, 1), &field->value, &field->value_len) < 0) {
            field_list_clear(list);
            return -1;
        }
    }
    list->count = (size_t)count;
    return 0;
}

/* What a response said of `quota`: status None is unknown (0); realtime
 * CR_CLOCK reads the clock for an absolute time. */
static int read_response(module_state *state, PyObject *headers, PyObject *status_obj,
                         PyObject *quota_obj, int64_t realtime_ns, cr_signal *signal)
{
    int64_t status = 0;
    const char *quota_name = NULL;
    size_t quota_len = 0;
    cr_quota quota;
    if (status_obj != Py_None) {
        switch (to_int64(status_obj, &status)) {
        case CONVERTED:
            break;
        case WRONG_TYPE:
            raise_wrong_type(state, CR_E_STATUS_CODE);
            return -1;
        default:
            return -1;
        }
    }
    if (convert_optional_name(state, quota_obj, CR_E_QUOTA, &quota_name, &quota_len) < 0)
        return -1;
    cr_status result = cr_parse_quota(quota_name, quota_len, &quota);
    field_list list;
    if (result == CR_OK && convert_headers(state, headers, &list) < 0)
        return -1;
    if (result == CR_OK) {
        result = cr_signal_read(signal, list.fields, list.count, status, quota, realtime_ns);
        field_list_clear(&list);
    }
    if (result != CR_OK) {
        raise_status(state, result);
        return -1;
    }
    return 0;
}

/* follow([key,] headers, status=None, *, quota=None, pending=0, share=1.0,
 * now=None) -> bool: whether the response pulled the limit into line. */
static PyObject *store_follow(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keyed_keywords[] = {"key",     "headers", "status", "quota",
                                     "pending", "share",   "now",    NULL};
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    const bool keyed = is_keyed(store);
    PyObject *key_obj = NULL, *headers, *status_obj = Py_None, *quota_obj = Py_None;
    PyObject *pending_obj = NULL, *share_obj = NULL, *now_obj = Py_None;
    const int parsed = keyed ? PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$OOOO:follow",
                                                           keyed_keywords, &key_obj, &headers,
                                                           &status_obj, &quota_obj, &pending_obj,
                                                           &share_obj, &now_obj)
                             : PyArg_ParseTupleAndKeywords(
                                   args, kwargs, "O|O$OOOO:follow", keyed_keywords + 1, &headers,
                                   &status_obj, &quota_obj, &pending_obj, &share_obj, &now_obj);
    if (!parsed)
        return NULL;
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t pending = 0, now_ns;
    double share = 1.0;
    cr_signal signal;
    if ((keyed && convert_key(state, key_obj, &key, &key_len) < 0) ||
        (pending_obj && convert_units(state, pending_obj, CR_E_PENDING, &pending) < 0) ||
        (share_obj && convert_number(state, share_obj, CR_E_SHARE, &share) < 0) ||
        convert_now(state, now_obj, &now_ns) < 0 ||
        read_response(state, headers, status_obj, quota_obj, CR_CLOCK, &signal) < 0)
        return NULL;
    bool pulled = false;
    const cr_status status = keyed ? cr_keyed_follow(store->keyed, key, (size_t)key_len, now_ns,
                                                     &signal, pending, share, &pulled)
                                   : cr_limiter_follow(store->limiter, now_ns, &signal, pending,
                                                       share, &pulled);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return PyBool_FromLong(pulled);
}

/* read_signal(headers, status=None, *, quota=None, now=None) -> a list of
 * (remaining, within seconds); now: the Unix time in seconds (None: the
 * realtime clock, read only for an absolute time). */
static PyObject *module_read_signal(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"headers", "status", "quota", "now", NULL};
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *headers, *status_obj = Py_None, *quota_obj = Py_None, *now_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OO:read_signal", keywords, &headers,
                                     &status_obj, &quota_obj, &now_obj))
        return NULL;
    int64_t realtime_ns;
    cr_signal signal;
    if (convert_now(state, now_obj, &realtime_ns) < 0 ||
        read_response(state, headers, status_obj, quota_obj, realtime_ns, &signal) < 0)
        return NULL;
    PyObject *bounds = PyList_New(signal.count);
    for (int i = 0; bounds != NULL && i < signal.count; i++) {
        PyObject *bound = Py_BuildValue("(Ld)", (long long)signal.bound[i].remaining,
                                        cr_ns_to_seconds(signal.bound[i].within_ns));
        if (bound == NULL)
            Py_CLEAR(bounds);
        else
            PyList_SET_ITEM(bounds, i, bound);
    }
    return bounds;
}

/* A retry's settings in seconds to ns: `obj` a number > 0 (else `status`). */
static int retry_seconds(module_state *state, PyObject *obj, int64_t *ns)
{
    double seconds;
    if (convert_number(state, obj, CR_E_BACKOFF, &seconds) < 0)
        return -1;
    if (cr_duration_from_seconds(seconds, ns) != CR_OK || *ns == CR_NEVER) {
        raise_status(state, CR_E_BACKOFF);
        return -1;
    }
    return 0;
}

/* _check_retry(retries, backoff, max_backoff): the settings of the outbound
 * adapters' retries (cr_retry_check), in the core's words. */
static PyObject *module_check_retry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_check_retry(retries, backoff, max_backoff)");
        return NULL;
    }
    int64_t retries, backoff_ns, max_backoff_ns;
    if (convert_units(state, args[0], CR_E_RETRIES, &retries) < 0 ||
        retry_seconds(state, args[1], &backoff_ns) < 0 ||
        retry_seconds(state, args[2], &max_backoff_ns) < 0)
        return NULL;
    const cr_status status = cr_retry_check(retries, backoff_ns, max_backoff_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _retry_wait(status, attempt, retries, backoff, max_backoff, random): the
 * seconds to wait before retrying (cr_retry_wait), or None: no retry. */
static PyObject *module_retry_wait(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "_retry_wait(status, attempt, retries, backoff, max_backoff, random)");
        return NULL;
    }
    int64_t status, attempt, retries, backoff_ns, max_backoff_ns, wait_ns;
    if (convert_units(state, args[0], CR_E_STATUS_CODE, &status) < 0 ||
        convert_units(state, args[1], CR_E_RETRIES, &attempt) < 0 ||
        convert_units(state, args[2], CR_E_RETRIES, &retries) < 0 ||
        retry_seconds(state, args[3], &backoff_ns) < 0 ||
        retry_seconds(state, args[4], &max_backoff_ns) < 0)
        return NULL;
    const unsigned long long random = PyLong_AsUnsignedLongLongMask(args[5]);
    if (random == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (!cr_retry_wait(status, attempt, retries, backoff_ns, max_backoff_ns, (uint64_t)random,
                       &wait_ns))
        Py_RETURN_NONE;
    return PyFloat_FromDouble(cr_ns_to_seconds(wait_ns));
}

PyDoc_STRVAR(check_retry_doc, "_check_retry(retries, backoff, max_backoff, /)\n--\n\n"
                              "None, or the core's error naming retries or backoff.");
PyDoc_STRVAR(retry_wait_doc,
             "_retry_wait(status, attempt, retries, backoff, max_backoff, random, /)\n--\n\n"
             "The seconds to wait before retry `attempt` of a request answered `status`\n"
             "(429 or 503), or None: not retried (the core's cr_retry_wait).");
PyDoc_STRVAR(limiter_follow_doc,
             "follow($self, headers, status=None, *, quota=None, pending=0, share=1.0,\n"
             "       now=None)\n--\n\n"
             "Pulls the limit into line with what a provider's response says of its\n"
             "own limit (Retry-After, the IETF RateLimit fields, x-ratelimit-*,\n"
             "anthropic-ratelimit-*; cellrate.read_signal). Only ever stricter: a 429's\n"
             "Retry-After holds every caller of the limit until then, a remaining\n"
             "below this limit's spends the difference, never more than this limit\n"
             "allows. Returns whether it changed the limit.\n\n"
             "headers: the response's fields, a mapping or (name, value) pairs.\n"
             "status: its status code (None: unknown; Retry-After counts on 429, 503\n"
             "        or unknown).\n"
             "quota: 'requests' (None) or 'tokens': what this limit counts.\n"
             "pending: units sent that the response cannot count yet (in flight).\n"
             "share: this member's part of the provider's limit (a fleet share).");
PyDoc_STRVAR(keyed_follow_doc,
             "follow($self, key, headers, status=None, *, quota=None, pending=0,\n"
             "       share=1.0, now=None)\n--\n\n"
             "Limiter.follow() for the limit of `key`.");
PyDoc_STRVAR(read_signal_doc,
             "read_signal(headers, status=None, *, quota=None, now=None)\n--\n\n"
             "What a provider's response says of its limit: a list of bounds\n"
             "(remaining, within), each 'at most `remaining` more units in the next\n"
             "`within` seconds' (a 429's Retry-After is (0, wait)). Waits are capped at\n"
             "one hour; values that are not numbers, negative, past or beyond 63 bits\n"
             "are ignored. now: the Unix time in seconds for HTTP-dates and other\n"
             "absolute times (None: the clock).");

/* ------------------------------------------------------------------------ */
/* A wait, one step at a time (cr_wait_step): Python's wait() and acquire()  */
/* sleep between the steps (python/cellrate/_wait.py; docs/design.md §9).   */

/* The item of a wait: a Limiter with key None, or a KeyedLimiter and a key. */
static int wait_item(module_state *state, PyObject *store, PyObject *key_obj, cr_item *item)
{
    memset(item, 0, sizeof *item);
    if (Py_IS_TYPE(store, state->limiter_type) && key_obj == Py_None) {
        item->limiter = ((StoreObject *)store)->limiter;
        return 0;
    }
    if (Py_IS_TYPE(store, state->keyed_type)) {
        const char *key;
        Py_ssize_t key_len;
        if (convert_key(state, key_obj, &key, &key_len) < 0)
            return -1;
        item->keyed = ((StoreObject *)store)->keyed;
        item->key = key;
        item->key_len = (size_t)key_len;
        return 0;
    }
    raise_wrong_type(state, CR_E_ITEMS);
    return -1;
}

/* A waiter's place: None is CR_NO_TURN, else the int the last step gave. */
static int wait_turn(PyObject *turn_obj, int64_t *turn_ns)
{
    *turn_ns = CR_NO_TURN;
    if (turn_obj == Py_None)
        return 0;
    long long turn = PyLong_AsLongLong(turn_obj);
    if (turn == -1 && PyErr_Occurred())
        return -1;
    *turn_ns = (int64_t)turn;
    return 0;
}

/* _wait_step(store, key, cost, max_wait, turn): None to start now,
 * (seconds, turn) to sleep and step again, or the Decision that refuses. */
static PyObject *module_wait_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_wait_step(store, key, cost, max_wait, turn)");
        return NULL;
    }
    cr_item item;
    int64_t cost, max_wait_ns, turn_ns, sleep_ns;
    if (wait_item(state, args[0], args[1], &item) < 0 || convert_cost(state, args[2], &cost) < 0 ||
        convert_wait_limit(state, args[3], CR_E_TIMEOUT, &max_wait_ns) < 0 ||
        wait_turn(args[4], &turn_ns) < 0)
        return NULL;
    cr_wait_action step;
    cr_decision refusal;
    const cr_status status = cr_wait_step(&item, cost, max_wait_ns, &turn_ns, &step, &sleep_ns,
                                          &refusal);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (step == CR_WAIT_GO)
        Py_RETURN_NONE;
    if (step == CR_WAIT_SLEEP)
        return Py_BuildValue("(dL)", cr_ns_to_seconds(sleep_ns), (long long)turn_ns);
    return decision_from(state, &refusal,
                         item.limiter ? cr_limiter_limit(item.limiter)
                                      : cr_keyed_limit(item.keyed));
}

/* _wait_leave(store, key, cost, turn): a waiter that stops gives its place back. */
static PyObject *module_wait_leave(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_wait_leave(store, key, cost, turn)");
        return NULL;
    }
    cr_item item;
    int64_t cost, turn_ns;
    if (wait_item(state, args[0], args[1], &item) < 0 || convert_cost(state, args[2], &cost) < 0 ||
        wait_turn(args[3], &turn_ns) < 0)
        return NULL;
    const cr_status status = cr_wait_leave(&item, cost, turn_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(wait_step_doc, "_wait_step(store, key, cost, max_wait, turn, /)\n--\n\n"
                            "A wait's next step (the core's cr_wait_step): None to start now,\n"
                            "(seconds, turn) to sleep and step again with `turn`, or the Decision\n"
                            "that refuses (not within max_wait seconds, or never).");
PyDoc_STRVAR(wait_leave_doc, "_wait_leave(store, key, cost, turn, /)\n--\n\n"
                             "A waiter that stops waiting gives its place in line back.");

/* ------------------------------------------------------------------------ */
/* Concurrency and Slot                                                      */

/* Concurrency(limit, *, capacity=None, shared=None, shared_mode=None, lease=None,
 *             peak=False) */
static PyObject *concurrency_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"limit", "capacity", "shared", "shared_mode", "lease", "peak", NULL};
    module_state *state = (module_state *)PyType_GetModuleState(type);
    PyObject *limit_obj, *capacity_obj = Py_None, *shared = Py_None, *mode_obj = Py_None;
    PyObject *lease_obj = Py_None, *peak_obj = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOOOO:Concurrency", keywords, &limit_obj,
                                     &capacity_obj, &shared, &mode_obj, &lease_obj, &peak_obj))
        return NULL;
    int64_t limit, capacity = 0, lease_ns = 0, mode;
    bool limit_given, keyed;
    double lease_s;
    PyObject *path;
    if (limit_obj == Py_None) {
        raise_wrong_type(state, CR_E_LIMIT);
        return NULL;
    }
    if (convert_optional_int(state, limit_obj, CR_E_LIMIT, &limit, &limit_given) < 0 ||
        convert_optional_int(state, capacity_obj, CR_E_CAPACITY, &capacity, &keyed) < 0)
        return NULL;
    if (lease_obj != Py_None) {
        if (convert_number(state, lease_obj, CR_E_LEASE, &lease_s) < 0)
            return NULL;
        cr_status status = cr_lease_from_seconds(lease_s, &lease_ns);
        if (status != CR_OK) {
            raise_status(state, status);
            return NULL;
        }
    }
    if (!PyBool_Check(peak_obj)) {
        raise_wrong_type(state, CR_E_PEAK);
        return NULL;
    }
    const bool peak = peak_obj == Py_True;
    if (convert_shared(state, shared, mode_obj, &path, &mode) < 0)
        return NULL;
    cr_gauge *gauge = NULL;
    const char *region = path != NULL ? PyBytes_AS_STRING(path) : NULL;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* opening a region may wait on another process's lock */
        status = cr_gauge_open(&gauge, limit, keyed, capacity, lease_ns, peak, region, mode);
    Py_END_ALLOW_THREADS if (status != CR_OK)
        raise_construction(state, status, path != NULL ? shared : NULL);
    Py_XDECREF(path);
    if (status != CR_OK)
        return NULL;
    ConcurrencyObject *self = (ConcurrencyObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        cr_gauge_free(gauge);
        return NULL;
    }
    self->gauge = gauge;
    self->limit = limit;
    self->capacity = cr_gauge_capacity(gauge);
    return (PyObject *)self;
}

static void concurrency_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    cr_gauge_free(((ConcurrencyObject *)self)->gauge);
    type->tp_free(self);
    Py_DECREF(type);
}

/* The (key=None, cost=1) of try_acquire and in_flight, and the timeout of
 * _wait: key NULL when None, so that the core tells a keyed limit's missing
 * key from an unkeyed one's extra key. */
static int parse_holding_call(PyObject *self, const char *name, bool takes_cost, bool takes_timeout,
                              PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                              const char **key, Py_ssize_t *key_len, int64_t *cost,
                              int64_t *timeout_ns)
{
    module_state *state = state_of(self);
    PyObject *slots[3] = {NULL, NULL, NULL}; /* key, cost, timeout */
    static const char *names[3] = {"key", "cost", "timeout"};
    const Py_ssize_t max_positional = takes_timeout ? 3 : takes_cost ? 2 : 1;
    if (nargs > max_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)",
                     name, max_positional, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        slots[i] = args[i];
    const Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *keyword = PyTuple_GET_ITEM(kwnames, i);
        int which = -1;
        for (int n = 0; n < max_positional; n++)
            if (PyUnicode_CompareWithASCIIString(keyword, names[n]) == 0)
                which = n;
        if (which < 0 || slots[which] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected or repeated argument '%U'", name,
                         keyword);
            return -1;
        }
        slots[which] = args[nargs + i];
    }
    *key = NULL;
    *key_len = 0;
    if (slots[0] != NULL && slots[0] != Py_None && convert_key(state, slots[0], key, key_len) < 0)
        return -1;
    if (takes_cost) {
        *cost = CR_DEFAULT_COST;
        if (slots[1] != NULL) {
            switch (to_int64(slots[1], cost)) {
            case CONVERTED:
                break;
            case WRONG_TYPE:
                raise_wrong_type(state, CR_E_HOLD_COST);
                return -1;
            default:
                return -1;
            }
        }
    }
    if (takes_timeout)
        return convert_wait_limit(state, slots[2], CR_E_TIMEOUT, timeout_ns);
    return 0;
}

static PyObject *slot_from(PyObject *self, const cr_holding *holding, bool acquired)
{
    if (!acquired)
        Py_RETURN_NONE;
    module_state *state = state_of(self);
    SlotObject *slot = PyObject_New(SlotObject, state->slot_type);
    if (slot == NULL) {
        cr_gauge_release(((ConcurrencyObject *)self)->gauge, holding);
        return NULL;
    }
    Py_INCREF(self);
    slot->owner = self;
    slot->holding = *holding;
    return (PyObject *)slot;
}

/* try_acquire(key=None, cost=1): a Slot, or None when the units are not free. */
/* try_acquire, or with `poll` (an asyncio waiter's tries, _poll) counting
 * only an acquisition. */
static PyObject *concurrency_take(PyObject *self, bool poll, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames)
{
    const char *key;
    Py_ssize_t key_len;
    int64_t cost;
    if (parse_holding_call(self, poll ? "_poll" : "try_acquire", true, false, args, nargs, kwnames,
                           &key, &key_len, &cost, NULL) < 0)
        return NULL;
    bool acquired;
    cr_holding holding;
    cr_gauge *gauge = ((ConcurrencyObject *)self)->gauge;
    cr_status status = poll ? cr_gauge_poll(gauge, key, (size_t)key_len, cost, &acquired, &holding)
                            : cr_gauge_acquire(gauge, key, (size_t)key_len, cost, &acquired,
                                               &holding);
    if (status != CR_OK) {
        raise_status(state_of(self), status);
        return NULL;
    }
    return slot_from(self, &holding, acquired);
}

static PyObject *concurrency_try_acquire(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames)
{
    return concurrency_take(self, false, args, nargs, kwnames);
}

static PyObject *concurrency_poll(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    return concurrency_take(self, true, args, nargs, kwnames);
}

/* _gave_up(cost): an asyncio waiter's one refusal, when it gives up. */
static PyObject *concurrency_gave_up(PyObject *self, PyObject *cost_obj)
{
    long long cost = PyLong_AsLongLong(cost_obj);
    if (cost == -1 && PyErr_Occurred())
        return NULL;
    cr_gauge_count_refusal(((ConcurrencyObject *)self)->gauge, cost);
    Py_RETURN_NONE;
}

/* _wait(key=None, cost=1, timeout=None): try_acquire, blocking (the GIL
 * released) up to `timeout` seconds; None when the time ran out. */
static PyObject *concurrency_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    const char *key;
    Py_ssize_t key_len;
    int64_t cost, timeout_ns;
    if (parse_holding_call(self, "_wait", true, true, args, nargs, kwnames, &key, &key_len, &cost,
                           &timeout_ns) < 0)
        return NULL;
    bool acquired;
    cr_holding holding;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS status = cr_gauge_wait(((ConcurrencyObject *)self)->gauge, key,
                                                  (size_t)key_len, cost, timeout_ns, &acquired,
                                                  &holding);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_status(state_of(self), status);
        return NULL;
    }
    return slot_from(self, &holding, acquired);
}

/* in_flight(key=None): the units held now. */
static PyObject *concurrency_in_flight(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    const char *key;
    Py_ssize_t key_len;
    if (parse_holding_call(self, "in_flight", false, false, args, nargs, kwnames, &key, &key_len,
                           NULL, NULL) < 0)
        return NULL;
    int64_t in_flight;
    cr_status status = cr_gauge_in_flight(((ConcurrencyObject *)self)->gauge, key, (size_t)key_len,
                                          &in_flight);
    if (status != CR_OK) {
        raise_status(state_of(self), status);
        return NULL;
    }
    return PyLong_FromLongLong(in_flight);
}

/* Concurrency.stats() */
static PyObject *concurrency_stats(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    cr_gauge_stats stats;
    cr_gauge_stats_read(((ConcurrencyObject *)self)->gauge, &stats);
    return gauge_stats_dict(&stats);
}

/* Concurrency.reset_stats() */
static PyObject *concurrency_reset_stats(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    cr_status status;
    Py_BEGIN_ALLOW_THREADS status = cr_gauge_reset_stats(((ConcurrencyObject *)self)->gauge);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_status(state_of(self), status);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *concurrency_repr(PyObject *self)
{
    ConcurrencyObject *c = (ConcurrencyObject *)self;
    int64_t lease_ns = cr_gauge_lease_ns(c->gauge);
    PyObject *lease = Py_None;
    if (lease_ns != 0 && (lease = PyFloat_FromDouble(cr_ns_to_seconds(lease_ns))) == NULL)
        return NULL;
    if (lease_ns == 0)
        Py_INCREF(lease);
    const char *peak = cr_gauge_tracks_peak(c->gauge) ? ", peak=True" : "";
    PyObject *text = c->capacity ? PyUnicode_FromFormat(
                                       "Concurrency(limit=%lld, capacity=%lld, lease=%R%s)",
                                       (long long)c->limit, (long long)c->capacity, lease, peak)
                                 : PyUnicode_FromFormat("Concurrency(limit=%lld, lease=%R%s)",
                                                        (long long)c->limit, lease, peak);
    Py_DECREF(lease);
    return text;
}

static PyObject *concurrency_get_lease(PyObject *self, void *Py_UNUSED(closure))
{
    int64_t lease_ns = cr_gauge_lease_ns(((ConcurrencyObject *)self)->gauge);
    if (lease_ns == 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(cr_ns_to_seconds(lease_ns));
}

static PyObject *concurrency_get_peak(PyObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(cr_gauge_tracks_peak(((ConcurrencyObject *)self)->gauge));
}

static PyObject *concurrency_get_capacity(PyObject *self, void *Py_UNUSED(closure))
{
    int64_t capacity = ((ConcurrencyObject *)self)->capacity;
    if (capacity == 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(capacity);
}

static PyObject *slot_new(PyTypeObject *Py_UNUSED(type), PyObject *Py_UNUSED(args),
                          PyObject *Py_UNUSED(kwargs))
{
    PyErr_SetString(PyExc_TypeError, "a Slot comes from Concurrency.try_acquire() or hold()");
    return NULL;
}

static void slot_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_DECREF(((SlotObject *)self)->owner);
    PyObject_Free(self);
    Py_DECREF(type);
}

/* release(): gives the units back; True if they came back, False when they
 * had already (released before, or reclaimed: the lease ran out). */
static PyObject *slot_release(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    SlotObject *slot = (SlotObject *)self;
    int64_t returned = cr_gauge_release(((ConcurrencyObject *)slot->owner)->gauge, &slot->holding);
    return PyBool_FromLong(returned > 0);
}

static PyObject *slot_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<cellrate.Slot cost=%lld>",
                                (long long)((SlotObject *)self)->holding.cost);
}

static PyObject *slot_get_cost(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(((SlotObject *)self)->holding.cost);
}

static PyObject *slot_get_concurrency(PyObject *self, void *Py_UNUSED(closure))
{
    PyObject *owner = ((SlotObject *)self)->owner;
    Py_INCREF(owner);
    return owner;
}

/* ------------------------------------------------------------------------ */
/* Type specs                                                                */

#define DECIDE_DOC(sig, what)                                                       \
    sig "\n--\n\n" what "\n\n"                                                      \
        "cost: units to spend (an int >= 0; 0 is a probe that always passes).\n"    \
        "now: seconds on the limit's clock (time.monotonic(); window algorithms:\n" \
        "time.time()); None reads the clock."

PyDoc_STRVAR(limiter_allow_doc,
             DECIDE_DOC("allow($self, /, cost=1, *, now=None)",
                        "Admit `cost` units if the limit allows; return True if admitted."));
PyDoc_STRVAR(limiter_check_doc, DECIDE_DOC("check($self, /, cost=1, *, now=None)",
                                           "As allow(), but return the whole Decision."));
PyDoc_STRVAR(limiter_peek_doc,
             DECIDE_DOC("peek($self, /, cost=1, *, now=None)",
                        "The Decision check() would return, without spending anything."));
#define RESERVE_DOC(sig)                                                              \
    sig "\n--\n\n"                                                                    \
        "Commit `cost` units at the earliest instant they fit, if that is at most\n"  \
        "`timeout` seconds away (None: any wait); return the delay in seconds\n"      \
        "until they may be used (0.0: now), or None, committing nothing, when that\n" \
        "is not possible. Window algorithms reserve only for now (delay 0)."
#define REFUND_DOC(sig)                                                           \
    sig "\n--\n\n"                                                                \
        "Give back `cost` units taken earlier (a cancelled reservation); never\n" \
        "better than idle."

#define ANCHOR_DOC(sig)                                                            \
    sig "\n--\n\n"                                                                 \
        "`cost` units reserved earlier start only now (a waiter woken after its\n" \
        "instant): what follows is spaced from now, never less strictly. wait()\n" \
        "and acquire() call it after their sleep; windows: nothing to do."

PyDoc_STRVAR(limiter_anchor_doc, ANCHOR_DOC("anchor($self, /, cost=1, *, now=None)"));
PyDoc_STRVAR(keyed_anchor_doc, ANCHOR_DOC("anchor($self, /, key, cost=1, *, now=None)"));
PyDoc_STRVAR(limiter_reserve_doc,
             RESERVE_DOC("reserve($self, /, cost=1, *, timeout=None, now=None)"));
PyDoc_STRVAR(limiter_refund_doc, REFUND_DOC("refund($self, /, cost=1, *, now=None)"));
PyDoc_STRVAR(keyed_reserve_doc,
             RESERVE_DOC("reserve($self, /, key, cost=1, *, timeout=None, now=None)"));
PyDoc_STRVAR(keyed_refund_doc, REFUND_DOC("refund($self, /, key, cost=1, *, now=None)"));
#define CHARGE_DOC(sig)                                                                \
    sig "\n--\n\n"                                                                     \
        "Commit `cost` units whatever the state (a cost known after the fact): the\n"  \
        "key may go into debt, refused until it drains. The Decision is check()'s\n"   \
        "when the units fit; else allowed is False and retry_after the wait for one\n" \
        "unit. clipped: the debt met its bound (now + 2**62 ns; windows: the count\n"  \
        "their state carries) and the rest was dropped. Settle an estimate with\n"     \
        "charge(actual - estimate) or refund(estimate - actual)."
#define TAKE_DOC(sig)                                                            \
    sig "\n--\n\n"                                                               \
        "Admit as many units as fit now, at most `max_cost`, in one decision;\n" \
        "return their number (0 when none fits)."
PyDoc_STRVAR(limiter_charge_doc, CHARGE_DOC("charge($self, /, cost, *, now=None)"));
PyDoc_STRVAR(keyed_charge_doc, CHARGE_DOC("charge($self, /, key, cost, *, now=None)"));
PyDoc_STRVAR(limiter_take_doc, TAKE_DOC("take($self, /, max_cost, *, now=None)"));
PyDoc_STRVAR(keyed_take_doc, TAKE_DOC("take($self, /, key, max_cost, *, now=None)"));
PyDoc_STRVAR(attach_method_doc,
             "_attach_method(type, function, /)\n--\n\n"
             "Private: adds the Python function `function` under its __name__ to\n"
             "Limiter or KeyedLimiter. The package does it once, at import, for wait()\n"
             "and acquire(); the types stay immutable to everyone else.");

PyDoc_STRVAR(check_timeout_doc,
             "_check_timeout(timeout, /)\n--\n\n"
             "Private: the seconds of a wait's `timeout` (None for any wait), or\n"
             "InvalidArgument / InvalidArgumentType naming `timeout`.");

PyDoc_STRVAR(check_request_doc,
             "_check_request(key, cost, now, /)\n--\n\n"
             "Private: refuses what a decision of `cost` units of `key` at `now` would\n"
             "(InvalidArgument / InvalidArgumentType naming the parameter); returns\n"
             "`now` as the integer ns the core decides at, or None when `now` is None.");

PyDoc_STRVAR(check_hold_doc,
             "_check_hold(limit, key, cost, lease, /)\n--\n\n"
             "Private: refuses what a concurrency limit would of its limit and lease and\n"
             "of a holding's key and cost (InvalidArgument / InvalidArgumentType naming\n"
             "the parameter); returns the lease in integer ns, or None when it is None.");

PyDoc_STRVAR(check_all_doc,
             "check_all(items, cost=1, *, now=None)\n--\n\n"
             "Decide `cost` units against several limits as one: `items` is a list of\n"
             "Limiters and (KeyedLimiter, key) pairs. Admitted only if every one admits;\n"
             "a refusal spends nothing of any. Returns the tightest Decision: on a\n"
             "refusal the longest retry_after, on an admission the fewest remaining.");

PyDoc_STRVAR(limiter_reset_doc, "reset($self, /)\n--\n\nBack to idle: a full burst.");

PyDoc_STRVAR(keyed_allow_doc,
             DECIDE_DOC("allow($self, /, key, cost=1, *, now=None)",
                        "Admit `cost` units for `key` (str or bytes; a str counts as its\n"
                        "UTF-8 bytes) if its limit allows; return True if admitted."));
PyDoc_STRVAR(keyed_check_doc, DECIDE_DOC("check($self, /, key, cost=1, *, now=None)",
                                         "As allow(), but return the whole Decision."));
PyDoc_STRVAR(keyed_peek_doc,
             DECIDE_DOC("peek($self, /, key, cost=1, *, now=None)",
                        "The Decision check() would return, without spending anything."));
PyDoc_STRVAR(store_reconfigure_doc,
             "reconfigure($self, /, rate, period=None, *, burst=None, algorithm=None, now=None)\n"
             "--\n\n"
             "Change the limit live: what was used carries (a change never hands out a\n"
             "fresh allowance); rate, period and burst as for Limiter. The algorithm\n"
             "cannot change (InvalidArgument naming algorithm); the clock stays. A\n"
             "KeyedLimiter carries each key on its next touch.");
PyDoc_STRVAR(keyed_reset_doc,
             "reset($self, key, /)\n--\n\nForget `key`: it is back to a full burst.");
PyDoc_STRVAR(keyed_clear_doc, "clear($self, /)\n--\n\n"
                              "Forget every key, as reset(key) of each: each starts again with a "
                              "full burst.\nThe limit and the counters stay.");

PyDoc_STRVAR(decision_doc,
             "Decision(allowed, remaining, retry_after, reset_after, limit, window=0.0,\n"
             "         clipped=False)\n--\n\n"
             "The answer to one request: immutable; times in seconds. `limit` is the\n"
             "burst (units an idle key may spend at once), not the rate.");

PyDoc_STRVAR(limit_doc, "Limit(rate, period=None, *, burst=None, algorithm='gcra')\n--\n\n"
                        "A validated limit, with no store: what a Limiter of the same arguments\n"
                        "decides by, refused with the same errors. Immutable; equal (and hashed)\n"
                        "by its parameters.");

PyDoc_STRVAR(check_policy_name_doc,
             "check_policy_name(name, /)\n--\n\n"
             "None when `name` can be the policy name of Decision.headers() (1 to 64\n"
             "printable ASCII characters, or None for the default); else InvalidArgument\n"
             "(InvalidArgumentType for a non-str) naming `name`.");

PyDoc_STRVAR(limiter_doc,
             "Limiter(rate, period=None, *, burst=None, shared=None, shared_mode=None,\n"
             "        clock=None, algorithm=None, on_change=None, max_cost=None)\n--\n\n"
             "A GCRA limit on one key: `rate` units per `period` seconds, sustained,\n"
             "with up to `burst` units at once.\n\n"
             "rate: a number > 0, or a string such as '300/minute', '10/s',\n"
             "      '5 per second' or '100/5m' (then period must not be given).\n"
             "period: seconds; None means 1 second.\n"
             "burst: an int >= 1; None means max(1, ceil(rate)).\n"
             "shared: the path of a region file (e.g. '/dev/shm/login-limit') that\n"
             "        every process opening it shares as one limit; None: this\n"
             "        process alone.\n"
             "shared_mode: the mode of a region file this call creates; None: 0o600.\n"
             "on_change: 'apply' (None) or 'refuse': what opening a region made for\n"
             "           another limit does: make this one the region's, a live change\n"
             "           every process follows (a RuntimeWarning names old and new), or\n"
             "           raise InvalidArgument naming shared.\n"
             "clock: the clock read when a call passes no `now`: 'fast' (None),\n"
             "       CLOCK_MONOTONIC extrapolated from the CPU's counter, or\n"
             "       'monotonic', the same read ordered after every earlier load.\n"
             "algorithm: 'gcra' (None), 'token_bucket', 'fixed_window' or\n"
             "           'sliding_window'; windows are aligned to the Unix epoch, read\n"
             "           the realtime clock, take a whole rate and no burst.\n"
             "max_cost: the largest cost a request will have (None: not checked): a\n"
             "          burst (a window's rate) below it is refused, naming burst (rate).\n\n"
             "Safe to share between threads.");

PyDoc_STRVAR(keyed_doc,
             "KeyedLimiter(rate, period=None, *, burst=None, capacity=None, shared=None,\n"
             "             shared_mode=None, clock=None, algorithm=None, on_change=None,\n"
             "             max_cost=None)\n--\n\n"
             "One GCRA limit applied to each key (str or bytes) separately, in a table\n"
             "of bounded size. rate, period and burst are as for Limiter.\n\n"
             "capacity: the number of live keys the table is sized for; None means\n"
             "          the default (100000).\n"
             "shared, shared_mode, clock, algorithm, on_change, max_cost: as for Limiter.\n\n"
             "len() is the number of keys holding a slot. Safe to share between threads.");

#define DECIDE_METHODS(type)                                                                   \
    {"allow", (PyCFunction)(void (*)(void))type##_allow, METH_FASTCALL | METH_KEYWORDS,        \
     type##_allow_doc},                                                                        \
        {"check", (PyCFunction)(void (*)(void))type##_check, METH_FASTCALL | METH_KEYWORDS,    \
         type##_check_doc},                                                                    \
        {"peek", (PyCFunction)(void (*)(void))type##_peek, METH_FASTCALL | METH_KEYWORDS,      \
         type##_peek_doc},                                                                     \
        {"reserve", (PyCFunction)(void (*)(void))store_reserve, METH_FASTCALL | METH_KEYWORDS, \
         type##_reserve_doc},                                                                  \
        {"refund", (PyCFunction)(void (*)(void))store_refund, METH_FASTCALL | METH_KEYWORDS,   \
         type##_refund_doc},                                                                   \
        {"charge", (PyCFunction)(void (*)(void))store_charge, METH_FASTCALL | METH_KEYWORDS,   \
         type##_charge_doc},                                                                   \
        {"take", (PyCFunction)(void (*)(void))store_take, METH_FASTCALL | METH_KEYWORDS,       \
         type##_take_doc},                                                                     \
    {                                                                                          \
        "anchor", (PyCFunction)(void (*)(void))store_anchor, METH_FASTCALL | METH_KEYWORDS,    \
            type##_anchor_doc                                                                  \
    }

PyDoc_STRVAR(store_stats_doc,
             "stats($self, /)\n--\n\n"
             "The counters since the limiter was made or reset_stats() (a dict of ints):\n"
             "admitted, refused, units_admitted, units_refused, unfittable, would_refuse,\n"
             "evicted. A shared limiter's are the region's: every process's decisions.");
PyDoc_STRVAR(store_reset_stats_doc, "reset_stats($self, /)\n--\n\nZero the counters.");
PyDoc_STRVAR(store_would_refuse_doc,
             "_would_refuse($self, cost, /)\n--\n\n"
             "A dry run let a refusal of cost units through: counted as would_refuse.");
#define STATS_METHODS                                                           \
    {"stats", store_stats, METH_NOARGS, store_stats_doc},                       \
        {"reset_stats", store_reset_stats, METH_NOARGS, store_reset_stats_doc}, \
    {                                                                           \
        "_would_refuse", store_would_refuse, METH_O, store_would_refuse_doc     \
    }

static PyMethodDef limiter_methods[] = {
    DECIDE_METHODS(limiter),
    {"follow", (PyCFunction)(void (*)(void))store_follow, METH_VARARGS | METH_KEYWORDS,
     limiter_follow_doc},
    {"reset", limiter_reset, METH_NOARGS, limiter_reset_doc},
    STATS_METHODS,
    {"reconfigure", (PyCFunction)(void (*)(void))store_reconfigure, METH_VARARGS | METH_KEYWORDS,
     store_reconfigure_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef keyed_methods[] = {
    DECIDE_METHODS(keyed),
    {"follow", (PyCFunction)(void (*)(void))store_follow, METH_VARARGS | METH_KEYWORDS,
     keyed_follow_doc},
    {"reset", keyed_reset, METH_O, keyed_reset_doc},
    {"clear", keyed_clear, METH_NOARGS, keyed_clear_doc},
    STATS_METHODS,
    {"reconfigure", (PyCFunction)(void (*)(void))store_reconfigure, METH_VARARGS | METH_KEYWORDS,
     store_reconfigure_doc},
    {NULL, NULL, 0, NULL},
};

/* The limit's fields, read-only, the same on both types: the current limit,
 * which a live change moves. */
static PyObject *store_get_rate(PyObject *self, void *Py_UNUSED(closure))
{
    return PyFloat_FromDouble(store_limit((StoreObject *)self)->rate);
}

static PyObject *store_get_period(PyObject *self, void *Py_UNUSED(closure))
{
    return PyFloat_FromDouble(store_limit((StoreObject *)self)->period_s);
}

static PyObject *store_get_burst(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->burst);
}

static PyObject *store_get_emission_ns(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->emission_ns);
}

static PyObject *store_get_tolerance_ns(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->tolerance_ns);
}

/* The same fields on a Limit, whose limit is its only member. */
#define LIMIT_VALUE_MEMBER(name, type, field, doc)                                             \
    {                                                                                          \
        name, type, offsetof(LimitObject, limit) + offsetof(cr_limit, field), Py_READONLY, doc \
    }

static PyMemberDef limit_members[] = {
    LIMIT_VALUE_MEMBER("rate", Py_T_DOUBLE, rate, "Units admitted per period, sustained."),
    LIMIT_VALUE_MEMBER("period", Py_T_DOUBLE, period_s, "The period in seconds."),
    LIMIT_VALUE_MEMBER("burst", Py_T_LONGLONG, burst,
                       "Units an idle key admits at once (a window: rate)."),
    LIMIT_VALUE_MEMBER("emission_ns", Py_T_LONGLONG, emission_ns,
                       "The emission interval T: nanoseconds per unit."),
    LIMIT_VALUE_MEMBER("tolerance_ns", Py_T_LONGLONG, tolerance_ns,
                       "The tolerance tau = T * burst (a window: the window), in nanoseconds."),
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef limit_getset[] = {
    {"algorithm", limit_get_algorithm, NULL,
     "'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'.", NULL},
    {"window", limit_get_window, NULL,
     "Seconds in which the limit restores `burst` units, as Decision.window.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef keyed_members[] = {
    {"capacity", Py_T_LONGLONG, offsetof(StoreObject, capacity), Py_READONLY,
     "The number of live keys the table is sized for."},
    {NULL, 0, 0, 0, NULL},
};

#define CLOCK_GETTER                                                                             \
    {"rate", store_get_rate, NULL, "Units admitted per period, sustained.", NULL},               \
        {"period", store_get_period, NULL, "The period in seconds.", NULL},                      \
        {"burst", store_get_burst, NULL, "Units an idle key admits at once.", NULL},             \
        {"emission_ns", store_get_emission_ns, NULL,                                             \
         "The emission interval T: nanoseconds per unit.", NULL},                                \
        {"tolerance_ns", store_get_tolerance_ns, NULL,                                           \
         "The tolerance tau = T * burst, in nanoseconds.", NULL},                                \
        {"clock", store_get_clock, NULL,                                                         \
         "The clock read when now is None: 'monotonic', 'fast' or 'realtime' (windows).", NULL}, \
    {                                                                                            \
        "algorithm", store_get_algorithm, NULL,                                                  \
            "'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'.", NULL                  \
    }

static PyGetSetDef limiter_getset[] = {
    CLOCK_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef keyed_getset[] = {
    CLOCK_GETTER,
    {"evictions", keyed_get_evictions, NULL, "Live keys evicted so far to make room.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(concurrency_doc,
             "Concurrency(limit, *, capacity=None, shared=None, shared_mode=None, lease=None,\n"
             "            peak=False)\n"
             "--\n\n"
             "At most `limit` units held at once: work in flight, not a rate.\n\n"
             "limit: an int from 1 to 65536.\n"
             "capacity: None for one limit; an int >= 1 for one limit per key, in a\n"
             "          table sized for that many keys holding units at once.\n"
             "shared, shared_mode: a region file shared by the processes that open it,\n"
             "          as for Limiter; a dead process's holdings come back.\n"
             "lease: seconds after which a holding is reclaimed (a hung holder);\n"
             "       None: held until released.\n"
             "peak: True tracks the most units held at once (stats()['peak']): one\n"
             "       total that every acquire and release updates atomically, shared\n"
             "       by every thread and process; False (the default): peak is None.\n\n"
             "Safe to share between threads.");
PyDoc_STRVAR(concurrency_try_acquire_doc,
             "try_acquire($self, /, key=None, cost=1)\n--\n\n"
             "Hold `cost` units (an int >= 1) of `key`'s limit (key: str or bytes, only\n"
             "with capacity) if they are free: a Slot to release(), or None.");
PyDoc_STRVAR(concurrency_wait_doc,
             "_wait($self, /, key=None, cost=1, timeout=None)\n--\n\n"
             "Private: try_acquire, blocking with the GIL released for up to `timeout`\n"
             "seconds (None: as long as it takes); None when the time ran out. hold()\n"
             "is the public form.");
PyDoc_STRVAR(concurrency_in_flight_doc,
             "in_flight($self, /, key=None)\n--\n\n"
             "Units of `key` held now (after reclaiming dead holders' and expired\n"
             "leases').");
PyDoc_STRVAR(slot_doc, "A holding of a Concurrency: release() gives its units back.");
PyDoc_STRVAR(slot_release_doc,
             "release($self, /)\n--\n\n"
             "Give the units back. Idempotent: True the first time, False after (or\n"
             "when the lease ran out and they were reclaimed).");

static PyMethodDef concurrency_methods[] = {
    {"try_acquire", (PyCFunction)(void (*)(void))concurrency_try_acquire,
     METH_FASTCALL | METH_KEYWORDS, concurrency_try_acquire_doc},
    {"_wait", (PyCFunction)(void (*)(void))concurrency_wait, METH_FASTCALL | METH_KEYWORDS,
     concurrency_wait_doc},
    {"in_flight", (PyCFunction)(void (*)(void))concurrency_in_flight, METH_FASTCALL | METH_KEYWORDS,
     concurrency_in_flight_doc},
    {"stats", concurrency_stats, METH_NOARGS,
     "stats($self, /)\n--\n\nThe counters (a dict of ints): acquired, refused, units_acquired,\n"
     "units_refused, released, reclaimed, in_flight (the units held now, counted in\n"
     "the holdings: a keyed limit's whole table is read), peak (None unless made\n"
     "with peak=True), evicted."},
    {"_poll", (PyCFunction)(void (*)(void))concurrency_poll, METH_FASTCALL | METH_KEYWORDS,
     "_poll($self, /, key=None, cost=1)\n--\n\n"
     "try_acquire for a waiter's tries: a refusal is counted once, by _gave_up."},
    {"_gave_up", concurrency_gave_up, METH_O,
     "_gave_up($self, cost, /)\n--\n\nA waiter gave up: one refusal of cost units."},
    {"reset_stats", concurrency_reset_stats, METH_NOARGS,
     "reset_stats($self, /)\n--\n\nZero the counters (a tracked peak becomes the units held)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef concurrency_members[] = {
    {"limit", Py_T_LONGLONG, offsetof(ConcurrencyObject, limit), Py_READONLY,
     "Units that may be held at once."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef concurrency_getset[] = {
    {"capacity", concurrency_get_capacity, NULL, "Keys the table is sized for; None: no keys.",
     NULL},
    {"lease", concurrency_get_lease, NULL, "Seconds a holding may last; None: no lease.", NULL},
    {"peak", concurrency_get_peak, NULL, "Whether stats() tracks the peak (peak=True).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef slot_methods[] = {
    {"release", slot_release, METH_NOARGS, slot_release_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef slot_getset[] = {
    {"cost", slot_get_cost, NULL, "Units held.", NULL},
    {"concurrency", slot_get_concurrency, NULL, "The Concurrency it is held of.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#ifdef Py_TPFLAGS_IMMUTABLETYPE
#define FINAL_TYPE_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE)
#else
#define FINAL_TYPE_FLAGS Py_TPFLAGS_DEFAULT
#endif

/* Slot tables store function pointers in `void *` fields, which ISO C does
 * not define but every platform CPython supports does. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

static PyType_Slot decision_slots[] = {
    {Py_tp_doc, (void *)decision_doc},
    {Py_tp_new, decision_new},
    {Py_tp_dealloc, decision_dealloc},
    {Py_tp_repr, decision_repr},
    {Py_tp_richcompare, decision_richcompare},
    {Py_tp_hash, decision_hash},
    {Py_tp_members, decision_members},
    {Py_tp_methods, decision_methods},
    {0, NULL},
};

static PyType_Slot limit_slots[] = {
    {Py_tp_doc, (void *)limit_doc},
    {Py_tp_new, limit_new},
    {Py_tp_dealloc, limit_dealloc},
    {Py_tp_repr, limit_repr},
    {Py_tp_richcompare, limit_richcompare},
    {Py_tp_hash, limit_hash},
    {Py_tp_members, limit_members},
    {Py_tp_getset, limit_getset},
    {0, NULL},
};

static PyType_Slot limiter_slots[] = {
    {Py_tp_doc, (void *)limiter_doc},
    {Py_tp_new, store_new},
    {Py_tp_dealloc, store_dealloc},
    {Py_tp_repr, store_repr},
    {Py_tp_methods, limiter_methods},
    {Py_tp_getset, limiter_getset},
    {0, NULL},
};

static PyType_Slot keyed_slots[] = {
    {Py_tp_doc, (void *)keyed_doc}, {Py_tp_new, store_new},
    {Py_tp_dealloc, store_dealloc}, {Py_tp_repr, store_repr},
    {Py_tp_methods, keyed_methods}, {Py_tp_members, keyed_members},
    {Py_tp_getset, keyed_getset},   {Py_sq_length, keyed_len},
    {Py_nb_bool, keyed_bool},       {0, NULL},
};

static PyType_Slot concurrency_slots[] = {
    {Py_tp_doc, (void *)concurrency_doc}, {Py_tp_new, concurrency_new},
    {Py_tp_dealloc, concurrency_dealloc}, {Py_tp_repr, concurrency_repr},
    {Py_tp_methods, concurrency_methods}, {Py_tp_members, concurrency_members},
    {Py_tp_getset, concurrency_getset},   {0, NULL},
};

static PyType_Slot slot_slots[] = {
    {Py_tp_doc, (void *)slot_doc},
    {Py_tp_new, slot_new},
    {Py_tp_dealloc, slot_dealloc},
    {Py_tp_repr, slot_repr},
    {Py_tp_methods, slot_methods},
    {Py_tp_getset, slot_getset},
    {0, NULL},
};

#pragma GCC diagnostic pop

static PyType_Spec decision_spec = {
    .name = "cellrate.Decision",
    .basicsize = sizeof(DecisionObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = decision_slots,
};

static PyType_Spec limit_spec = {
    .name = "cellrate.Limit",
    .basicsize = sizeof(LimitObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = limit_slots,
};

static PyType_Spec limiter_spec = {
    .name = "cellrate.Limiter",
    .basicsize = sizeof(StoreObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = limiter_slots,
};

static PyType_Spec keyed_spec = {
    .name = "cellrate.KeyedLimiter",
    .basicsize = sizeof(StoreObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = keyed_slots,
};

static PyType_Spec concurrency_spec = {
    .name = "cellrate.Concurrency",
    .basicsize = sizeof(ConcurrencyObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = concurrency_slots,
};

static PyType_Spec slot_spec = {
    .name = "cellrate.Slot",
    .basicsize = sizeof(SlotObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = slot_slots,
};

/* ------------------------------------------------------------------------ */
/* Module                                                                    */

PyDoc_STRVAR(error_doc,
             "Base of the errors cellrate raises; `param` names the parameter at fault.");
PyDoc_STRVAR(invalid_argument_doc, "An argument of the right type with a value cellrate refuses.");
PyDoc_STRVAR(invalid_argument_type_doc, "An argument of a type its parameter never takes.");

/* Adds `value` under `name`; the module takes its own reference. */
static int add_object(PyObject *module, const char *name, PyObject *value)
{
    Py_INCREF(value);
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}

static PyTypeObject *add_type(PyObject *module, PyType_Spec *spec)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL)
        return NULL;
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

/* A new exception class with bases `bases` and `param` defaulting to "". */
static PyObject *new_exception(const char *name, const char *doc, PyObject *bases)
{
    PyObject *dict = Py_BuildValue("{ss}", "param", "");
    if (dict == NULL)
        return NULL;
    PyObject *exc = PyErr_NewExceptionWithDoc(name, doc, bases, dict);
    Py_DECREF(dict);
    return exc;
}

static PyObject *new_exception_leaf(const char *name, const char *doc, PyObject *base,
                                    PyObject *builtin)
{
    PyObject *bases = PyTuple_Pack(2, base, builtin);
    if (bases == NULL)
        return NULL;
    PyObject *exc = new_exception(name, doc, bases);
    Py_DECREF(bases);
    return exc;
}

static int cellrate_exec(PyObject *module)
{
    module_state *state = (module_state *)PyModule_GetState(module);

    state->decision_type = add_type(module, &decision_spec);
    if (state->decision_type == NULL)
        return -1;
    state->limit_type = add_type(module, &limit_spec);
    if (state->limit_type == NULL)
        return -1;
    state->limiter_type = add_type(module, &limiter_spec);
    if (state->limiter_type == NULL)
        return -1;
    state->keyed_type = add_type(module, &keyed_spec);
    if (state->keyed_type == NULL)
        return -1;
    state->concurrency_type = add_type(module, &concurrency_spec);
    if (state->concurrency_type == NULL)
        return -1;
    state->slot_type = add_type(module, &slot_spec);
    if (state->slot_type == NULL)
        return -1;

    state->error = new_exception("cellrate.CellrateError", error_doc, PyExc_Exception);
    if (state->error == NULL || add_object(module, "CellrateError", state->error) < 0)
        return -1;
    state->invalid_argument = new_exception_leaf("cellrate.InvalidArgument", invalid_argument_doc,
                                                 state->error, PyExc_ValueError);
    if (state->invalid_argument == NULL ||
        add_object(module, "InvalidArgument", state->invalid_argument) < 0)
        return -1;
    state->invalid_argument_type = new_exception_leaf(
        "cellrate.InvalidArgumentType", invalid_argument_type_doc, state->error, PyExc_TypeError);
    if (state->invalid_argument_type == NULL ||
        add_object(module, "InvalidArgumentType", state->invalid_argument_type) < 0)
        return -1;

    return PyModule_AddStringConstant(module, "__version__", cr_version());
}

static int cellrate_traverse(PyObject *module, visitproc visit, void *arg)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_VISIT(state->decision_type);
    Py_VISIT(state->limit_type);
    Py_VISIT(state->limiter_type);
    Py_VISIT(state->keyed_type);
    Py_VISIT(state->concurrency_type);
    Py_VISIT(state->slot_type);
    Py_VISIT(state->error);
    Py_VISIT(state->invalid_argument);
    Py_VISIT(state->invalid_argument_type);
    return 0;
}

static int cellrate_clear(PyObject *module)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_CLEAR(state->decision_type);
    Py_CLEAR(state->limit_type);
    Py_CLEAR(state->limiter_type);
    Py_CLEAR(state->keyed_type);
    Py_CLEAR(state->concurrency_type);
    Py_CLEAR(state->slot_type);
    Py_CLEAR(state->error);
    Py_CLEAR(state->invalid_argument);
    Py_CLEAR(state->invalid_argument_type);
    return 0;
}

static void cellrate_free(void *module) { (void)cellrate_clear((PyObject *)module); }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

static PyMethodDef cellrate_methods[] = {
    {"check_all", (PyCFunction)(void (*)(void))module_check_all, METH_FASTCALL | METH_KEYWORDS,
     check_all_doc},
    {"_attach_method", (PyCFunction)(void (*)(void))module_attach_method, METH_FASTCALL,
     attach_method_doc},
    {"_check_timeout", module_check_timeout, METH_O, check_timeout_doc},
    {"_wait_step", (PyCFunction)(void (*)(void))module_wait_step, METH_FASTCALL, wait_step_doc},
    {"_wait_leave", (PyCFunction)(void (*)(void))module_wait_leave, METH_FASTCALL, wait_leave_doc},
    {"_check_request", (PyCFunction)(void (*)(void))module_check_request, METH_FASTCALL,
     check_request_doc},
    {"_check_hold", (PyCFunction)(void (*)(void))module_check_hold, METH_FASTCALL, check_hold_doc},
    {"check_policy_name", module_check_policy_name, METH_O, check_policy_name_doc},
    {"read_signal", (PyCFunction)(void (*)(void))module_read_signal, METH_VARARGS | METH_KEYWORDS,
     read_signal_doc},
    {"_check_retry", (PyCFunction)(void (*)(void))module_check_retry, METH_FASTCALL,
     check_retry_doc},
    {"_retry_wait", (PyCFunction)(void (*)(void))module_retry_wait, METH_FASTCALL, retry_wait_doc},
    {"inspect_region", module_inspect_region, METH_O, inspect_region_doc},
    {"metrics", module_metrics, METH_NOARGS, metrics_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot cellrate_slots[] = {
    {Py_mod_exec, cellrate_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

#pragma GCC diagnostic pop

PyDoc_STRVAR(cellrate_doc, "The compiled core of cellrate: GCRA rate limiting.");

static struct PyModuleDef cellrate_module = {
    PyModuleDef_HEAD_INIT,           .m_name = "cellrate._cellrate", .m_doc = cellrate_doc,
    .m_size = sizeof(module_state),  .m_methods = cellrate_methods,  .m_slots = cellrate_slots,
    .m_traverse = cellrate_traverse, .m_clear = cellrate_clear,      .m_free = cellrate_free,
};

PyMODINIT_FUNC PyInit__cellrate(void);

PyMODINIT_FUNC PyInit__cellrate(void) { return PyModuleDef_Init(&cellrate_module); }
