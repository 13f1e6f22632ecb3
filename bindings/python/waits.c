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
    [CONCURRENCY_HOLD] = "Concurrency.hold", [RATE_LIMITED] = "RateLimited",
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
                                         "KeyedLimiter.acquire and Concurrency.hold, and of "
                                         "RateLimited, by name");
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
/* The wait plan (core/plan.c, cr_wait_step; docs/design/waiting.md): one     */
/* object per wait, which Python's wait(), acquire() and the decorators       */
/* iterate, sleeping each sleep it yields (time.sleep, asyncio.sleep).        */

typedef struct {
    PyObject_HEAD
    PyObject *store; /* the Limiter or KeyedLimiter; None: a store outside the core */
    PyObject *key;   /* a KeyedLimiter's key, which item.key points into; or NULL */
    cr_item item;
    cr_wait_plan plan;
} WaitPlanObject;

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

/* The clock a wait's deadline is on (CLOCK_MONOTONIC), or `now` seconds
 * given (the vectors: one stand-in clock for the deadline and the store). */
static int wait_now(module_state *state, PyObject *now_obj, int64_t *now_ns, int64_t *store_ns)
{
    if (convert_now(state, now_obj, store_ns) < 0)
        return -1;
    *now_ns = *store_ns == CR_CLOCK ? cr_clock_ns() : *store_ns;
    return 0;
}

/* The deadline's clock now, for a plan that has one (none: no read). */
static int64_t wait_plan_clock(const cr_wait_plan *plan)
{
    return plan->deadline_ns == CR_NEVER ? 0 : cr_clock_ns();
}

/* _wait_plan(store, key, cost, timeout, now=None, plan=None): a wait begun
 * now (plan: a KeyedLimiter's plan the key waits under). */
static PyObject *module_wait_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError,
                        "_wait_plan(store, key, cost, timeout, now=None, plan=None)");
        return NULL;
    }
    cr_item item = {0};
    int64_t cost, timeout_ns, now_ns, store_ns;
    if ((args[0] != Py_None && wait_item(state, args[0], args[1], &item) < 0) ||
        convert_cost(state, args[2], &cost) < 0 ||
        convert_wait_limit(state, args[3], CR_E_TIMEOUT, &timeout_ns) < 0)
        return NULL;
    if (nargs > 5 && args[5] != Py_None && args[0] != Py_None &&
        convert_plan(state, args[5], item.keyed, &item.plan) < 0)
        return NULL;
    if (nargs > 4 && args[4] != Py_None) {
        if (wait_now(state, args[4], &now_ns, &store_ns) < 0)
            return NULL;
    } else {
        now_ns = timeout_ns == CR_NEVER ? 0 : cr_clock_ns(); /* no deadline: no read */
    }
    WaitPlanObject *self = PyObject_New(WaitPlanObject, state->wait_plan_type);
    if (self == NULL)
        return NULL;
    self->store = Py_NewRef(args[0]);
    self->key = item.keyed ? Py_NewRef(args[1]) : NULL;
    self->item = item;
    const cr_status status = cr_wait_begin(&self->plan, cost, timeout_ns, now_ns);
    if (status != CR_OK) {
        Py_DECREF(self);
        raise_status(state, status);
        return NULL;
    }
    return (PyObject *)self;
}

static void wait_plan_dealloc(PyObject *self)
{
    WaitPlanObject *plan = (WaitPlanObject *)self;
    PyTypeObject *type = Py_TYPE(self);
    if (plan->store != Py_None) /* a waiter dropped mid-wait: its place given back */
        (void)cr_wait_leave(&plan->item, &plan->plan, CR_CLOCK);
    Py_DECREF(plan->store);
    Py_XDECREF(plan->key);
    PyObject_Free(self);
    Py_DECREF(type);
}

static const cr_limit *wait_plan_limit(const WaitPlanObject *plan)
{
    return plan->item.limiter ? cr_limiter_limit(plan->item.limiter)
                              : cr_keyed_limit(plan->item.keyed);
}

/* RateLimited(decision), raised. */
static PyObject *raise_rate_limited(module_state *state, PyObject *decision)
{
    if (decision == NULL)
        return NULL;
    PyObject *error = PyObject_CallOneArg(state->python_method[RATE_LIMITED], decision);
    Py_DECREF(decision);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* One step at now_ns (store_ns on the store's clock); the action in *action. */
static int wait_plan_step(WaitPlanObject *plan, module_state *state, int64_t now_ns,
                          int64_t store_ns, cr_wait_action *action, int64_t *sleep_ns,
                          cr_decision *refusal)
{
    if (plan->store == Py_None) {
        raise_wrong_type(state, CR_E_ITEMS);
        return -1;
    }
    const cr_status status = cr_wait_step(&plan->item, &plan->plan, now_ns, store_ns, action,
                                          sleep_ns, refusal);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* next(plan): the seconds to sleep before the next step; stops once the
 * units are admitted; raises RateLimited when they cannot be in time. */
static PyObject *wait_plan_next(PyObject *self)
{
    WaitPlanObject *plan = (WaitPlanObject *)self;
    module_state *state = state_of(self);
    cr_wait_action action;
    int64_t sleep_ns;
    cr_decision refusal;
    if (wait_plan_step(plan, state, wait_plan_clock(&plan->plan), CR_CLOCK, &action, &sleep_ns,
                       &refusal) < 0)
        return NULL;
    if (action == CR_WAIT_GO)
        return NULL; /* the end of the iteration, no exception set */
    if (action == CR_WAIT_SLEEP)
        return PyFloat_FromDouble(cr_ns_to_seconds(sleep_ns));
    return raise_rate_limited(state, decision_from(state, &refusal, wait_plan_limit(plan)));
}

static const char *const wait_action_names[] = {"go", "sleep", "refused", "timeout"};

/* step(now=None): (action, sleep seconds, retry_after seconds or None). */
static PyObject *wait_plan_step_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    WaitPlanObject *plan = (WaitPlanObject *)self;
    module_state *state = state_of(self);
    int64_t now_ns, store_ns, sleep_ns;
    cr_wait_action action;
    cr_decision refusal;
    if (wait_now(state, nargs > 0 ? args[0] : NULL, &now_ns, &store_ns) < 0 ||
        wait_plan_step(plan, state, now_ns, store_ns, &action, &sleep_ns, &refusal) < 0)
        return NULL;
    if (action == CR_WAIT_GO || action == CR_WAIT_SLEEP)
        return Py_BuildValue("(sdO)", wait_action_names[action], cr_ns_to_seconds(sleep_ns),
                             Py_None);
    return Py_BuildValue("(sdd)", wait_action_names[action], 0.0,
                         cr_ns_to_seconds(refusal.retry_after_ns));
}

/* leave(now=None): a waiter that stops gives its place back. */
static PyObject *wait_plan_leave(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    WaitPlanObject *plan = (WaitPlanObject *)self;
    module_state *state = state_of(self);
    int64_t now_ns, store_ns;
    if (wait_now(state, nargs > 0 ? args[0] : NULL, &now_ns, &store_ns) < 0)
        return NULL;
    if (plan->store != Py_None)
        (void)cr_wait_leave(&plan->item, &plan->plan, store_ns);
    Py_RETURN_NONE;
}

/* retry(decision, now=None): a store outside the core refused; the seconds
 * to sleep before trying it again (cr_wait_answer on decision.retry_after),
 * or RateLimited(decision) when never or not in time. */
static PyObject *wait_plan_retry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    WaitPlanObject *plan = (WaitPlanObject *)self;
    module_state *state = state_of(self);
    int64_t now_ns, store_ns, wait_ns, sleep_ns;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "retry(decision, now=None)");
        return NULL;
    }
    PyObject *retry_after = PyObject_GetAttrString(args[0], "retry_after");
    if (retry_after == NULL)
        return NULL;
    const double seconds = PyFloat_AsDouble(retry_after);
    Py_DECREF(retry_after);
    if ((seconds == -1.0 && PyErr_Occurred()) ||
        wait_now(state, nargs > 1 ? args[1] : NULL, &now_ns, &store_ns) < 0)
        return NULL;
    if (cr_wait_from_seconds(seconds > 0 ? seconds : 0, CR_E_TIMEOUT, &wait_ns) != CR_OK)
        wait_ns = CR_NEVER; /* nan */
    if (cr_wait_answer(&plan->plan, now_ns, wait_ns, &sleep_ns) == CR_WAIT_SLEEP)
        return PyFloat_FromDouble(cr_ns_to_seconds(sleep_ns));
    return raise_rate_limited(state, Py_NewRef(args[0]));
}

/* turn: the waiter's place in its process's line (ns on the store's clock),
 * None for none. */
static PyObject *wait_plan_turn(PyObject *self, void *Py_UNUSED(closure))
{
    const int64_t turn_ns = ((WaitPlanObject *)self)->plan.turn_ns;
    if (turn_ns == CR_NO_TURN)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)turn_ns);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

static PyGetSetDef wait_plan_getset[] = {
    {"turn", wait_plan_turn, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef wait_plan_methods[] = {
    {"step", (PyCFunction)(void (*)(void))wait_plan_step_method, METH_FASTCALL, NULL},
    {"leave", (PyCFunction)(void (*)(void))wait_plan_leave, METH_FASTCALL, NULL},
    {"retry", (PyCFunction)(void (*)(void))wait_plan_retry, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot wait_plan_slots[] = {
    {Py_tp_doc, (void *)wait_plan_doc},
    {Py_tp_dealloc, wait_plan_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, wait_plan_next},
    {Py_tp_methods, wait_plan_methods},
    {Py_tp_getset, wait_plan_getset},
    {0, NULL},
};

#pragma GCC diagnostic pop

static PyType_Spec wait_plan_spec = {
    .name = "cellrate._WaitPlan",
    .basicsize = sizeof(WaitPlanObject),
    .flags = FINAL_TYPE_FLAGS | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = wait_plan_slots,
};
