/*
 * Concurrency and Slot: units held at once, and the receipt of a holding
 * (docs/design.md §15). hold()'s body is Python (waits.c); the blocking wait
 * (_wait) releases the GIL in the core.
 * Part of module.c's unity build.
 */

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
    if (peak_obj != Py_None && !PyBool_Check(peak_obj)) { /* None: absent, off */
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

static PyMethodDef concurrency_methods[] = {
    {"try_acquire", (PyCFunction)(void (*)(void))concurrency_try_acquire,
     METH_FASTCALL | METH_KEYWORDS, concurrency_try_acquire_doc},
    {"hold", (PyCFunction)(void (*)(void))concurrency_hold, METH_FASTCALL | METH_KEYWORDS,
     concurrency_hold_doc},
    {"_wait", (PyCFunction)(void (*)(void))concurrency_wait, METH_FASTCALL | METH_KEYWORDS,
     concurrency_wait_doc},
    {"in_flight", (PyCFunction)(void (*)(void))concurrency_in_flight, METH_FASTCALL | METH_KEYWORDS,
     concurrency_in_flight_doc},
    {"stats", concurrency_stats, METH_NOARGS, concurrency_stats_doc},
    {"_poll", (PyCFunction)(void (*)(void))concurrency_poll, METH_FASTCALL | METH_KEYWORDS,
     concurrency_poll_doc},
    {"_gave_up", concurrency_gave_up, METH_O, concurrency_gave_up_doc},
    {"reset_stats", concurrency_reset_stats, METH_NOARGS, concurrency_reset_stats_doc},
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

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

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
