/*
 * Following a provider (docs/design.md §18): Limiter.follow and
 * KeyedLimiter.follow, cellrate.read_signal, and the outbound adapters'
 * retries (_check_retry, _retry_wait). A response's fields become the core's
 * cr_field list, read by cr_signal_read and followed by the store.
 * Part of module.c's unity build.
 */

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
    static char *keyed_keywords[] = {"key",   "headers", "status", "quota", "pending",
                                     "share", "now",     "plan",   NULL};
    static char *limiter_keywords[] = {"headers", "status", "quota", "pending",
                                       "share",   "now",    NULL};
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    const bool keyed = is_keyed(store);
    PyObject *key_obj = NULL, *headers, *status_obj = Py_None, *quota_obj = Py_None;
    PyObject *pending_obj = NULL, *share_obj = NULL, *now_obj = Py_None, *plan_obj = Py_None;
    const int parsed = keyed ? PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$OOOOO:follow",
                                                           keyed_keywords, &key_obj, &headers,
                                                           &status_obj, &quota_obj, &pending_obj,
                                                           &share_obj, &now_obj, &plan_obj)
                             : PyArg_ParseTupleAndKeywords(
                                   args, kwargs, "O|O$OOOO:follow", limiter_keywords, &headers,
                                   &status_obj, &quota_obj, &pending_obj, &share_obj, &now_obj);
    if (!parsed)
        return NULL;
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t pending = 0, now_ns;
    double share = 1.0;
    int32_t plan = CR_PLAN_DEFAULT;
    cr_signal signal;
    if ((keyed && convert_key(state, key_obj, &key, &key_len) < 0) ||
        (keyed && convert_plan(state, plan_obj, store->keyed, &plan) < 0) ||
        (pending_obj && convert_units(state, pending_obj, CR_E_PENDING, &pending) < 0) ||
        (share_obj && convert_number(state, share_obj, CR_E_SHARE, &share) < 0) ||
        convert_now(state, now_obj, &now_ns) < 0 ||
        read_response(state, headers, status_obj, quota_obj, CR_CLOCK, &signal) < 0)
        return NULL;
    bool pulled = false;
    const cr_status status = keyed ? cr_keyed_follow(store->keyed, key, (size_t)key_len, now_ns,
                                                     plan, &signal, pending, share, &pulled)
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
