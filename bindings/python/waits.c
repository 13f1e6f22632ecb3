/*
 * The methods whose bodies are Python: Limiter.wait and .acquire,
 * KeyedLimiter.wait and .acquire, Concurrency.hold (python/cellrate/_wait.py
 * and _concurrency.py; docs/design.md §9). They are compiled methods, in the
 * types' method tables with the others, so the types stay as their specs made
 * them (immutable, nothing written into their dictionaries) and `lim.allow()`
 * stays a call on the exact compiled type, which CPython specialises. Each
 * passes its arguments, `self` first, to the Python function the package set
 * in the module state at import (_set_waits), once.
 * Part of module.c's unity build.
 */

static const char *const python_method_names[PYTHON_METHODS] = {
    [LIMITER_WAIT] = "Limiter.wait",         [LIMITER_ACQUIRE] = "Limiter.acquire",
    [KEYED_WAIT] = "KeyedLimiter.wait",      [KEYED_ACQUIRE] = "KeyedLimiter.acquire",
    [CONCURRENCY_HOLD] = "Concurrency.hold",
};

static PyObject *call_python_method(PyObject *self, enum python_method which, PyObject *const *args,
                                    Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *function = state_of(self)->python_method[which];
    if (function == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s() comes with the cellrate package: import cellrate",
                     python_method_names[which]);
        return NULL;
    }
    /* `self` before the caller's arguments, keyword values included */
    const Py_ssize_t given = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *few[8];
    PyObject **all = given < 8 ? few : PyMem_Malloc(((size_t)given + 1) * sizeof *all);
    if (all == NULL)
        return PyErr_NoMemory();
    all[0] = self;
    for (Py_ssize_t i = 0; i < given; i++)
        all[i + 1] = args[i];
    PyObject *result = PyObject_Vectorcall(function, all, (size_t)nargs + 1, kwnames);
    if (all != few)
        PyMem_Free(all);
    return result;
}

#define PYTHON_METHOD(function, which)                                                 \
    static PyObject *function(PyObject *self, PyObject *const *args, Py_ssize_t nargs, \
                              PyObject *kwnames)                                       \
    {                                                                                  \
        return call_python_method(self, which, args, nargs, kwnames);                  \
    }

PYTHON_METHOD(limiter_wait, LIMITER_WAIT)
PYTHON_METHOD(limiter_acquire, LIMITER_ACQUIRE)
PYTHON_METHOD(keyed_wait, KEYED_WAIT)
PYTHON_METHOD(keyed_acquire, KEYED_ACQUIRE)
PYTHON_METHOD(concurrency_hold, CONCURRENCY_HOLD)

/* _set_waits(methods): `methods` maps each name of python_method_names to a
 * callable. Set once: a second call may only repeat the same functions (the
 * package imported again), so that no call in flight loses its function. */
static PyObject *module_set_waits(PyObject *module, PyObject *methods)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *given[PYTHON_METHODS];
    if (!PyDict_Check(methods) || PyDict_GET_SIZE(methods) != PYTHON_METHODS) {
        PyErr_SetString(PyExc_TypeError, "_set_waits(methods): a dict of the functions of "
                                         "Limiter.wait, Limiter.acquire, KeyedLimiter.wait, "
                                         "KeyedLimiter.acquire and Concurrency.hold, by name");
        return NULL;
    }
    for (int i = 0; i < PYTHON_METHODS; i++) {
        given[i] = PyDict_GetItemString(methods, python_method_names[i]); /* borrowed */
        if (given[i] == NULL || !PyCallable_Check(given[i])) {
            PyErr_Format(PyExc_TypeError, "_set_waits(methods): %s: no function",
                         python_method_names[i]);
            return NULL;
        }
        if (state->python_method[i] != NULL && state->python_method[i] != given[i]) {
            PyErr_Format(PyExc_ValueError, "_set_waits(methods): %s is set already",
                         python_method_names[i]);
            return NULL;
        }
    }
    for (int i = 0; i < PYTHON_METHODS; i++)
        if (state->python_method[i] == NULL) {
            Py_INCREF(given[i]);
            state->python_method[i] = given[i];
        }
    Py_RETURN_NONE;
}

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
