/*
 * Decision: the answer to one request, an immutable heap type; built from a
 * cr_decision on every decision, or by hand (a remote store) with its fields
 * checked, and turned into HTTP fields by headers() (docs/design.md §6).
 * Part of module.c's unity build.
 */

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
     decision_headers_doc},
    {NULL, NULL, 0, NULL},
};

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

#pragma GCC diagnostic pop

static PyType_Spec decision_spec = {
    .name = "cellrate.Decision",
    .basicsize = sizeof(DecisionObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = decision_slots,
};
