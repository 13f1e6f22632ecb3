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
