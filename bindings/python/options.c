/*
 * Options: the core's table of every constructor's options (cellrate/options.h)
 * for the pure-Python constructors (the Redis stores, the fleet shares, the
 * web policy, the decorators), the rate list grammar and which algorithms take
 * a burst. Python values become the core's (cr_value) and back; the core
 * judges. Part of module.c's unity build.
 */

static PyObject *new_reference(PyObject *object)
{
    Py_INCREF(object);
    return object;
}

/* The constructor named by `name`, or ValueError. */
static const cr_constructor *constructor_named(PyObject *name)
{
    Py_ssize_t len;
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len) : NULL;
    if (text == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "the constructor is named by a str");
        return NULL;
    }
    const cr_constructor *constructor = cr_constructor_find(text, (size_t)len);
    if (constructor == NULL)
        PyErr_Format(PyExc_ValueError, "no constructor %R in the options table", name);
    return constructor;
}

/* The bytes of a path: a str (UTF-8), bytes, or an os.PathLike giving one;
 * `*holder` keeps them alive (the caller releases it). NULL with no error
 * set: not a path at all. */
static const char *path_bytes(module_state *state, const cr_option *option, PyObject *value,
                              PyObject **holder, size_t *len)
{
    *holder = NULL;
    if (!PyUnicode_Check(value) && !PyBytes_Check(value)) {
        if (!PyObject_HasAttrString(value, "__fspath__"))
            return NULL;
        value = *holder = PyOS_FSPath(value);
        if (value == NULL)
            return NULL;
    }
    if (PyBytes_Check(value)) {
        *len = (size_t)PyBytes_GET_SIZE(value);
        return PyBytes_AS_STRING(value);
    }
    return utf8_of(state, value, option->status, len);
}

/*
 * `value` as the core takes it, for `option`. -1 with an error set when
 * Python itself cannot give it (a str without UTF-8, an os.PathLike that
 * fails); `*holder` keeps a converted path alive.
 */
static int to_core_value(module_state *state, const cr_option *option, PyObject *value,
                         cr_value *out, PyObject **holder)
{
    memset(out, 0, sizeof *out);
    *holder = NULL;
    if (value == Py_None) {
        out->type = CR_VALUE_ABSENT;
    } else if (PyBool_Check(value)) {
        out->type = CR_VALUE_BOOLEAN;
        out->boolean = value == Py_True;
    } else if (PyFloat_Check(value)) {
        out->type = CR_VALUE_NUMBER;
        out->number = PyFloat_AS_DOUBLE(value);
    } else if (PyLong_Check(value) || PyIndex_Check(value)) {
        out->type = CR_VALUE_INTEGER;
        if (to_int64(value, &out->integer) == CONVERSION_FAILED ||
            to_double(value, &out->number) == CONVERSION_FAILED)
            return -1;
    } else if (option->kind == CR_OPTION_PATH) {
        out->text = path_bytes(state, option, value, holder, &out->text_len);
        if (out->text == NULL && PyErr_Occurred())
            return -1;
        out->type = out->text != NULL ? CR_VALUE_STRING : CR_VALUE_TABLE;
    } else if (PyUnicode_Check(value)) {
        out->type = CR_VALUE_STRING;
        out->text = utf8_of(state, value, option->status, &out->text_len);
        if (out->text == NULL)
            return -1;
    } else if ((option->flags & CR_OPTION_BINARY) && PyBytes_Check(value)) {
        out->type = CR_VALUE_STRING;
        out->text = PyBytes_AS_STRING(value);
        out->text_len = (size_t)PyBytes_GET_SIZE(value);
    } else if ((option->flags & CR_OPTION_BINARY) &&
               (PyByteArray_Check(value) || PyMemoryView_Check(value))) {
        PyObject *bytes = *holder = PyBytes_FromObject(value);
        if (bytes == NULL)
            return -1;
        out->type = CR_VALUE_STRING;
        out->text = PyBytes_AS_STRING(bytes);
        out->text_len = (size_t)PyBytes_GET_SIZE(bytes);
    } else if (PyCallable_Check(value)) {
        out->type = CR_VALUE_FUNCTION;
    } else {
        out->type = CR_VALUE_TABLE;
    }
    return 0;
}

/* A normalised value as Python gives it back: `given` itself where the core
 * kept it (a string, a path, a function, an object), else a new object. */
static PyObject *from_core_value(const cr_option *option, const cr_value *value, PyObject *given)
{
    switch (value->type) {
    case CR_VALUE_ABSENT:
        Py_RETURN_NONE;
    case CR_VALUE_BOOLEAN:
        return PyBool_FromLong(value->boolean);
    case CR_VALUE_INTEGER:
        if (given != NULL && PyLong_CheckExact(given))
            return new_reference(given);
        return PyLong_FromLongLong(value->integer);
    case CR_VALUE_NUMBER:
        return PyFloat_FromDouble(value->number);
    case CR_VALUE_STRING:
        if (given == NULL || given == Py_None ||
            (option->kind == CR_OPTION_WORD && !(option->flags & CR_OPTION_ANY_CASE)))
            return PyUnicode_FromStringAndSize(value->text, (Py_ssize_t)value->text_len);
        return new_reference(given);
    default:
        return new_reference(given != NULL ? given : Py_None);
    }
}

/* _check_options(constructor, options): the options given to a constructor
 * (a dict of keyword arguments; None is absent), judged by the core's table:
 * a dict of every option the Python face takes, normalised (absent ones: the
 * default, or None); for a seconds option counted in ns (a lease), also
 * "<name>_ns", its integer ns. A name the constructor does not take is Python's own
 * TypeError; a value refused is InvalidArgumentType / InvalidArgument with
 * the core's words. */
static PyObject *module_check_options(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_check_options(constructor, options): a name, a dict");
        return NULL;
    }
    const cr_constructor *constructor = constructor_named(args[0]);
    if (constructor == NULL)
        return NULL;
    cr_value *values = PyMem_Calloc(constructor->count, sizeof *values);
    PyObject **given = PyMem_Calloc(constructor->count, sizeof *given);
    PyObject **holders = PyMem_Calloc(constructor->count, sizeof *holders);
    PyObject *result = NULL;
    if (values == NULL || given == NULL || holders == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *name, *value;
    Py_ssize_t at = 0;
    while (PyDict_Next(args[1], &at, &name, &value)) {
        Py_ssize_t len;
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len) : NULL;
        if (text == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "keywords must be strings");
            goto done;
        }
        const cr_option *option = cr_option_find(constructor, CR_FACE_PYTHON, text, (size_t)len);
        if (option == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'",
                         constructor->name, name);
            goto done;
        }
        const size_t index = (size_t)(option - constructor->options);
        given[index] = value;
        if (to_core_value(state, option, value, &values[index], &holders[index]) < 0)
            goto done;
    }
    size_t failed;
    bool wrong_type;
    const cr_status status = cr_options_check(constructor, CR_FACE_PYTHON, values, &failed,
                                              &wrong_type);
    if (status != CR_OK) {
        if (wrong_type)
            raise_wrong_type(state, status);
        else
            raise_status(state, status);
        goto done;
    }
    result = PyDict_New();
    for (size_t i = 0; result != NULL && i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if (!(option->faces & CR_FACE_PYTHON))
            continue;
        PyObject *normalised = from_core_value(option, &values[i], given[i]);
        if (normalised == NULL || PyDict_SetItemString(result, option->name, normalised) < 0)
            Py_CLEAR(result);
        Py_XDECREF(normalised);
        if (result != NULL && (option->flags & CR_OPTION_NS) &&
            values[i].type == CR_VALUE_NUMBER) { /* and "<name>_ns", the core's ns */
            char key[64];
            snprintf(key, sizeof key, "%s_ns", option->name);
            PyObject *ns = PyLong_FromLongLong(values[i].integer);
            if (ns == NULL || PyDict_SetItemString(result, key, ns) < 0)
                Py_CLEAR(result);
            Py_XDECREF(ns);
        }
    }
done:
    for (size_t i = 0; holders != NULL && i < constructor->count; i++)
        Py_XDECREF(holders[i]);
    PyMem_Free(values);
    PyMem_Free(given);
    PyMem_Free(holders);
    return result;
}

static const char *const kind_names[] = {"",       "number",   "integer", "boolean",
                                         "string", "word",     "seconds", "path",
                                         "name",   "function", "object",  "refused"};

/* _options(constructor): the table's rows the Python face takes, in order:
 * {name: {"kind", "default", "words", "status"}} (words: a tuple, empty but
 * for words; default: None for none). */
static PyObject *module_options(PyObject *module, PyObject *name)
{
    (void)module;
    const cr_constructor *constructor = constructor_named(name);
    if (constructor == NULL)
        return NULL;
    PyObject *result = PyDict_New();
    for (size_t i = 0; result != NULL && i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if (!(option->faces & CR_FACE_PYTHON))
            continue;
        PyObject *dflt = from_core_value(option, &option->default_value, NULL);
        PyObject *words = PyUnicode_FromString(option->words != NULL ? option->words : "");
        PyObject *list = words != NULL ? PyUnicode_Split(words, NULL, -1) : NULL;
        Py_XDECREF(words);
        words = list != NULL ? PySequence_Tuple(list) : NULL;
        Py_XDECREF(list);
        PyObject *row = words == NULL || dflt == NULL
                            ? NULL
                            : Py_BuildValue("{sssOsOss}", "kind", kind_names[option->kind],
                                            "default", dflt, "words", words, "status",
                                            cr_status_name(option->status));
        if (row == NULL || PyDict_SetItemString(result, option->name, row) < 0)
            Py_CLEAR(result);
        Py_XDECREF(row);
        Py_XDECREF(words);
        Py_XDECREF(dflt);
    }
    return result;
}

/* _parse_rates(text, zoned=False): the limits a rate string names,
 * "100/day;10/hour", "100/minute;1000000/month": a list of (rate, period,
 * part's text, calendar period) (the period "<count><unit>", "1month", for a
 * calendar quota's part, else None), or the core's refusal. */
static PyObject *module_parse_rates(PyObject *module, PyObject *args)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *text, *days = Py_False;
    if (!PyArg_UnpackTuple(args, "_parse_rates", 1, 2, &text, &days))
        return NULL;
    if (!PyUnicode_Check(text)) {
        raise_wrong_type(state, CR_E_RATE);
        return NULL;
    }
    const int zoned = PyObject_IsTrue(days);
    if (zoned < 0)
        return NULL;
    size_t len;
    const char *bytes = utf8_of(state, text, CR_E_RATE_SYNTAX, &len);
    if (bytes == NULL)
        return NULL;
    cr_rate rates[CR_RATES_MAX];
    size_t count;
    const cr_status status = cr_parse_rates(bytes, len, zoned, rates, &count);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    PyObject *result = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; result != NULL && i < count; i++) {
        char period[32];
        if (rates[i].period.count > 0)
            snprintf(period, sizeof period, "%" PRId32 "%s", rates[i].period.count,
                     cr_period_unit_name(rates[i].period.unit));
        PyObject *part = Py_BuildValue("(dds#z)", rates[i].rate, rates[i].period_s,
                                       bytes + rates[i].start, (Py_ssize_t)rates[i].len,
                                       rates[i].period.count > 0 ? period : NULL);
        if (part == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)i, part);
    }
    return result;
}

/* _check_zoned(zoned, calendars): None, or the core's refusal of a zone
 * given for rate strings with no calendar part (cr_rates_zoned). */
static PyObject *module_check_zoned(PyObject *module, PyObject *args)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    int zoned;
    Py_ssize_t calendars;
    if (!PyArg_ParseTuple(args, "pn:_check_zoned", &zoned, &calendars))
        return NULL;
    const cr_status status = cr_rates_zoned(zoned, calendars < 0 ? 0 : (size_t)calendars);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _algorithm_takes_burst(name): whether the algorithm reads a burst (gcra,
 * token_bucket), or the core's refusal of the name. */
static PyObject *module_algorithm_takes_burst(PyObject *module, PyObject *name)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const char *text;
    size_t len = 0;
    if (convert_optional_name(state, name, CR_E_ALGORITHM, &text, &len) < 0)
        return NULL;
    cr_algorithm algorithm;
    if (name == Py_None || cr_algorithm_from_name(text, len, &algorithm) != CR_OK) {
        raise_status(state, CR_E_ALGORITHM);
        return NULL;
    }
    return PyBool_FromLong(cr_algorithm_takes_burst(algorithm));
}
