/*
 * Limit: the core's validated limit alone, with no store (docs/design.md §3),
 * and limit_text, the description that repr() of Limit, Limiter and
 * KeyedLimiter shows.
 * Part of module.c's unity build.
 */

/* A Limit: the core's validated limit, immutable. */
typedef struct {
    PyObject_HEAD
    cr_limit limit;
} LimitObject;

/* cr_limit_describe's text under the type's name, the same as Lua's
 * __tostring. `capacity` < 0: none. */
static PyObject *limit_text(PyObject *self, const cr_limit *limit, int64_t capacity)
{
    char text[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit_describe(text, sizeof text, Py_TYPE(self)->tp_name, limit, capacity);
    return PyUnicode_FromString(text);
}

/* A limit's priority classes: {name: reserve} (empty without classes). */
static PyObject *priorities_of(const cr_limit *limit)
{
    PyObject *classes = PyDict_New();
    for (int32_t i = 0; classes != NULL && i < limit->npriorities; i++) {
        PyObject *reserve = PyFloat_FromDouble(limit->priorities[i].reserve);
        if (reserve == NULL ||
            PyDict_SetItemString(classes, limit->priorities[i].name, reserve) < 0)
            Py_CLEAR(classes);
        Py_XDECREF(reserve);
    }
    return classes;
}

/* Limit(rate, period=None, *, burst=None, algorithm="gcra", max_debt=None, tz=None,
 * priorities=None): what a Limiter of these arguments would decide by, validated
 * by the core, no store made. */
static PyObject *limit_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rate",     "period", "burst",      "algorithm",
                               "max_debt", "tz",     "priorities", NULL};
    PyObject *rate, *period = Py_None, *burst = Py_None, *algorithm = Py_None, *max_debt = Py_None,
                    *tz = Py_None, *priorities = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOOOO:Limit", keywords, &rate, &period,
                                     &burst, &algorithm, &max_debt, &tz, &priorities))
        return NULL;
    cr_limit limit;
    if (convert_limit((module_state *)PyType_GetModuleState(type), rate, period, burst, Py_None,
                      algorithm, Py_None, max_debt, tz, NULL, priorities, &limit) < 0)
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

/* The parameters equality and the hash go by: the algorithm, rate, period,
 * burst, max_debt and the priority classes, and what the core derived from
 * them. */
static PyObject *limit_key(const cr_limit *limit)
{
    PyObject *classes = PyTuple_New(limit->npriorities);
    for (int32_t i = 0; classes != NULL && i < limit->npriorities; i++) {
        PyObject *one = Py_BuildValue("(sd)", limit->priorities[i].name,
                                      limit->priorities[i].reserve);
        if (one == NULL) {
            Py_CLEAR(classes);
            break;
        }
        PyTuple_SET_ITEM(classes, i, one);
    }
    if (classes == NULL)
        return NULL;
    return Py_BuildValue("(sddLLLLN)", cr_algorithm_name(limit->algorithm), limit->rate,
                         limit->period_s, (long long)limit->burst, (long long)limit->emission_ns,
                         (long long)limit->tolerance_ns, (long long)limit->max_debt, classes);
}

static PyObject *limit_get_priorities(PyObject *self, void *Py_UNUSED(closure))
{
    return priorities_of(&((LimitObject *)self)->limit);
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
    LIMIT_VALUE_MEMBER("max_debt", Py_T_LONGLONG, max_debt,
                       "Units a charge may leave a key owing beyond the limit (default: the "
                       "burst; a window: its rate)."),
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef limit_getset[] = {
    {"algorithm", limit_get_algorithm, NULL,
     "'gcra', 'token_bucket', 'fixed_window' or 'sliding_window'.", NULL},
    {"window", limit_get_window, NULL,
     "Seconds in which the limit restores `burst` units, as Decision.window.", NULL},
    {"priorities", limit_get_priorities, NULL,
     "The priority classes, {name: reserve} (empty: none).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

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

#pragma GCC diagnostic pop

static PyType_Spec limit_spec = {
    .name = "cellrate.Limit",
    .basicsize = sizeof(LimitObject),
    .flags = FINAL_TYPE_FLAGS,
    .slots = limit_slots,
};
