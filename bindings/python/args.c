/*
 * Arguments: Python objects to the core's types (numbers, costs, times, keys,
 * names, limits, region paths), and the hand-written parser of the decision
 * methods' arguments (the hot path). A value of a type the parameter never
 * takes is InvalidArgumentType naming it; the core judges the rest.
 * Part of module.c's unity build.
 */

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

/* The TZif bytes of the zone `name` in the tzdata package (importlib.resources
 * "tzdata.zoneinfo"; `name` valid, cr_zone_name_valid): a new bytes object,
 * or NULL without an exception when the package or the zone is absent. */
static PyObject *tzdata_zone_bytes(const char *name, size_t len)
{
    PyObject *resources = PyImport_ImportModule("importlib.resources");
    PyObject *path = resources ? PyObject_CallMethod(resources, "files", "s", "tzdata.zoneinfo")
                               : NULL;
    Py_XDECREF(resources);
    for (size_t start = 0; path && start < len;) {
        size_t end = start;
        while (end < len && name[end] != '/')
            end++;
        PyObject *component = PyUnicode_FromStringAndSize(name + start, (Py_ssize_t)(end - start));
        PyObject *next = component ? PyNumber_TrueDivide(path, component) : NULL;
        Py_XDECREF(component);
        Py_DECREF(path);
        path = next;
        start = end + 1;
    }
    PyObject *bytes = path ? PyObject_CallMethod(path, "read_bytes", NULL) : NULL;
    Py_XDECREF(path);
    if (bytes && !PyBytes_Check(bytes))
        Py_CLEAR(bytes);
    if (!bytes &&
        (PyErr_ExceptionMatches(PyExc_ImportError) || PyErr_ExceptionMatches(PyExc_OSError)))
        PyErr_Clear(); /* no tzdata package, or no such zone in it */
    return bytes;
}

/* tz (None: not given) to the process's zone of that name (cr_zone_open:
 * the system's zoneinfo or TZDIR, else the tzdata package's bytes when it
 * is installed), into *zone; None leaves *zone as it is. */
static int convert_zone(module_state *state, PyObject *tz, const cr_zone **zone)
{
    const char *name = NULL;
    size_t len = 0;
    if (convert_optional_name(state, tz, CR_E_TZ, &name, &len) < 0)
        return -1;
    if (name == NULL)
        return 0;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* reads the zone's file, once per process */
        status = cr_zone_open(name, len, NULL, 0, zone);
    Py_END_ALLOW_THREADS if (status == CR_E_TZ && cr_zone_name_valid(name, len))
    {
        PyObject *bytes = tzdata_zone_bytes(name, len);
        if (bytes == NULL && PyErr_Occurred())
            return -1;
        if (bytes) {
            status = cr_zone_open(name, len, (const uint8_t *)PyBytes_AS_STRING(bytes),
                                  (size_t)PyBytes_GET_SIZE(bytes), zone);
            Py_DECREF(bytes);
        }
    }
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* priorities (None: not given): a mapping of class names (str) to reserves
 * (numbers), as the core's classes in `args`. *items holds the names (the
 * caller releases it, and *classes with PyMem_Free, after cr_limit_init).
 * The core checks the table (count, names, reserves). */
static int convert_priorities(module_state *state, PyObject *priorities, cr_limit_args *args,
                              PyObject **items, cr_priority_arg **classes)
{
    *items = NULL;
    *classes = NULL;
    if (priorities == Py_None)
        return 0;
    if (!PyMapping_Check(priorities) || PyUnicode_Check(priorities) || PyBytes_Check(priorities) ||
        PySequence_Check(priorities)) {
        raise_wrong_type(state, CR_E_PRIORITIES);
        return -1;
    }
    if ((*items = PyMapping_Items(priorities)) == NULL)
        return -1;
    const Py_ssize_t count = PyList_GET_SIZE(*items);
    if ((*classes = PyMem_Calloc((size_t)count + 1, sizeof **classes)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(*items, i);
        PyObject *name = PyTuple_GET_ITEM(item, 0), *reserve = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_Check(name)) {
            raise_wrong_type(state, CR_E_PRIORITIES);
            return -1;
        }
        if (((*classes)[i].name = utf8_of(state, name, CR_E_PRIORITIES, &(*classes)[i].name_len)) ==
                NULL ||
            convert_number(state, reserve, CR_E_PRIORITIES_RESERVE, &(*classes)[i].reserve) < 0)
            return -1;
    }
    args->priorities = *classes;
    args->npriorities = (size_t)count;
    args->has_priorities = true;
    return 0;
}

/* rate (number or rate string), period (None: not given), burst (None: not
 * given), clock, algorithm, max_cost and max_debt (None: not given), tz
 * (None: `zone`, NULL for none) and priorities (None: not given) to a
 * validated limit. */
static int convert_limit(module_state *state, PyObject *rate, PyObject *period, PyObject *burst,
                         PyObject *clock, PyObject *algorithm, PyObject *max_cost,
                         PyObject *max_debt, PyObject *tz, const cr_zone *zone,
                         PyObject *priorities, cr_limit *limit)
{
    cr_limit_args args;
    memset(&args, 0, sizeof args);
    args.zone = zone;

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
            0 ||
        convert_optional_int(state, max_debt, CR_E_MAX_DEBT, &args.max_debt, &args.has_max_debt) <
            0)
        return -1;

    if (convert_optional_name(state, clock, CR_E_CLOCK, &args.clock, &args.clock_len) < 0 ||
        convert_optional_name(state, algorithm, CR_E_ALGORITHM, &args.algorithm,
                              &args.algorithm_len) < 0)
        return -1;

    if (convert_zone(state, tz, &args.zone) < 0)
        return -1;

    PyObject *items;
    cr_priority_arg *classes;
    if (convert_priorities(state, priorities, &args, &items, &classes) < 0) {
        Py_XDECREF(items);
        PyMem_Free(classes);
        return -1;
    }
    cr_status status = cr_limit_init(limit, &args);
    Py_XDECREF(items);
    PyMem_Free(classes);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* priority=: None (or absent) for none, else the name of one of the limit's
 * classes, as its index (-1 for none). */
static int convert_priority(module_state *state, PyObject *obj, const cr_limit *limit,
                            int32_t *index)
{
    *index = -1;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (!PyUnicode_Check(obj)) {
        raise_wrong_type(state, CR_E_PRIORITY);
        return -1;
    }
    size_t len;
    const char *name = utf8_of(state, obj, CR_E_PRIORITY, &len);
    if (name == NULL)
        return -1;
    cr_status status = cr_priority_find(limit, name, len, index);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* plan=: None (or absent) for "default", else the name of one of the
 * keyed table's plans (`keyed` NULL: "default" alone), as its index. */
static int convert_plan(module_state *state, PyObject *obj, cr_keyed *keyed, int32_t *index)
{
    *index = CR_PLAN_DEFAULT;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (!PyUnicode_Check(obj)) {
        raise_wrong_type(state, CR_E_PLAN);
        return -1;
    }
    size_t len;
    const char *name = utf8_of(state, obj, CR_E_PLAN, &len);
    if (name == NULL)
        return -1;
    cr_status status = keyed ? cr_keyed_plan_find(keyed, name, len, index)
                             : cr_plan_find(NULL, name, len, index);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
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
    /* A NUL is the core's refusal (a path C would cut short), in its words alone */
    PyObject *fs_path = PyOS_FSPath(shared);
    if (fs_path == NULL)
        return -1;
    const bool has_nul = PyUnicode_Check(fs_path)
                             ? PyUnicode_FindChar(fs_path, 0, 0, PyUnicode_GET_LENGTH(fs_path),
                                                  1) >= 0
                             : PyBytes_Check(fs_path) &&
                                   memchr(PyBytes_AS_STRING(fs_path), 0,
                                          (size_t)PyBytes_GET_SIZE(fs_path)) != NULL;
    Py_DECREF(fs_path);
    if (has_nul) {
        raise_status(state, CR_E_SHARED_PATH);
        return -1;
    }
    if (PyUnicode_FSConverter(shared, path))
        return 0;
    /* A str the file system encoding cannot take: not a path. */
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

/* The arguments of allow/check/peek: ([key,] cost=1, *, now=None), by hand
 * because this is the hot path. Absent ones are left NULL. */
typedef struct {
    PyObject *key;
    PyObject *cost; /* take(): max_cost */
    PyObject *now;
    PyObject *timeout;  /* reserve() only */
    PyObject *priority; /* allow(), check(), peek() only */
    PyObject *plan;     /* a KeyedLimiter's only */
} call_args;

/* As parse_call, the cost's keyword `cost_name` (take's max_cost). */
static int parse_call_named(const char *name, bool keyed, bool takes_timeout, bool takes_priority,
                            const char *cost_name, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, call_args *call)
{
    const Py_ssize_t max_positional = keyed ? 2 : 1;
    call->key = call->cost = call->now = call->timeout = call->priority = call->plan = NULL;
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
            else if (takes_priority && PyUnicode_CompareWithASCIIString(keyword, "priority") == 0)
                slot = &call->priority;
            else if (keyed && PyUnicode_CompareWithASCIIString(keyword, "plan") == 0)
                slot = &call->plan;
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
static int parse_call(const char *name, bool keyed, bool takes_timeout, bool takes_priority,
                      PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, call_args *call)
{
    return parse_call_named(name, keyed, takes_timeout, takes_priority, "cost", args, nargs,
                            kwnames, call);
}
