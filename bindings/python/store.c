/*
 * Limiter and KeyedLimiter (docs/design.md §4, §6): construction (a region
 * opened or made), the decisions (allow, check, peek: the hot path),
 * reservations, costs after the fact, live changes, counters, the fields and
 * the method tables of both types.
 * Part of module.c's unity build.
 */

/* plans (None: not given): a mapping of plan names (str) to limits (a rate
 * as the positional rate takes it, with the table's other options, or a
 * Limit), made into `table` with `limit` its default. */
static int convert_plans(module_state *state, PyObject *plans, const cr_limit *limit,
                         PyObject *clock, PyObject *algorithm, PyObject *max_cost,
                         PyObject *max_debt, PyObject *tz, cr_plan_table *table)
{
    if (!PyMapping_Check(plans) || PyUnicode_Check(plans) || PyBytes_Check(plans) ||
        PySequence_Check(plans)) {
        raise_wrong_type(state, CR_E_PLANS);
        return -1;
    }
    PyObject *items = PyMapping_Items(plans);
    if (items == NULL)
        return -1;
    const Py_ssize_t count = PyList_GET_SIZE(items);
    cr_plan_arg args[CR_PLANS_MAX];
    cr_limit limits[CR_PLANS_MAX];
    int failed = 0;
    for (Py_ssize_t i = 0; !failed && i < count && i < CR_PLANS_MAX; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        PyObject *name = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_Check(name)) {
            raise_wrong_type(state, CR_E_PLANS);
            failed = 1;
            break;
        }
        args[i].name = utf8_of(state, name, CR_E_PLANS, &args[i].name_len);
        args[i].limit = &limits[i];
        if (args[i].name == NULL) {
            failed = 1;
        } else if (PyObject_TypeCheck(value, state->limit_type)) {
            limits[i] = ((LimitObject *)value)->limit;
        } else if (PyUnicode_Check(value) || PyNumber_Check(value)) {
            failed = convert_limit(state, value, Py_None, Py_None, clock, algorithm, max_cost,
                                   max_debt, tz, NULL, Py_None, &limits[i]) < 0;
        } else {
            raise_wrong_type(state, CR_E_PLANS);
            failed = 1;
        }
    }
    if (!failed) {
        cr_status status = count > CR_PLANS_MAX ? CR_E_PLANS
                                                : cr_plans_set(table, limit, args, (size_t)count);
        if (status != CR_OK) {
            raise_status(state, status);
            failed = 1;
        }
    }
    Py_DECREF(items);
    return failed ? -1 : 0;
}

/* Limiter(rate, period=None, *, burst=None, shared=None, shared_mode=None,
 * clock=None, algorithm=None); a KeyedLimiter also takes capacity=None. */
static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *limiter_keywords[] = {"rate",        "period",   "burst",     "shared",
                                       "shared_mode", "clock",    "algorithm", "on_change",
                                       "max_cost",    "max_debt", "tz",        "priorities",
                                       "penalty",     "sync",     NULL};
    static char *keyed_keywords[] = {"rate",  "period",     "burst",     "shared",   "shared_mode",
                                     "clock", "algorithm",  "on_change", "max_cost", "max_debt",
                                     "tz",    "priorities", "penalty",   "capacity", "plans",
                                     "sync",  NULL};
    module_state *state = (module_state *)PyType_GetModuleState(type);
    const bool keyed = type == state->keyed_type;
    PyObject *rate, *period = Py_None, *burst = Py_None, *shared = Py_None, *mode_obj = Py_None;
    PyObject *clock = Py_None, *algorithm = Py_None, *on_change_obj = Py_None;
    PyObject *max_cost = Py_None, *max_debt = Py_None, *capacity_obj = Py_None, *tz = Py_None;
    PyObject *priorities = Py_None, *penalty_obj = Py_None, *plans = Py_None, *sync = Py_None;
    if (keyed ? !PyArg_ParseTupleAndKeywords(
                    args, kwargs, "O|O$OOOOOOOOOOOOOO:KeyedLimiter", keyed_keywords, &rate, &period,
                    &burst, &shared, &mode_obj, &clock, &algorithm, &on_change_obj, &max_cost,
                    &max_debt, &tz, &priorities, &penalty_obj, &capacity_obj, &plans, &sync)
              : !PyArg_ParseTupleAndKeywords(
                    args, kwargs, "O|O$OOOOOOOOOOOO:Limiter", limiter_keywords, &rate, &period,
                    &burst, &shared, &mode_obj, &clock, &algorithm, &on_change_obj, &max_cost,
                    &max_debt, &tz, &priorities, &penalty_obj, &sync))
        return NULL;
    double sync_s = 0;
    if (sync != Py_None && convert_number(state, sync, CR_E_SYNC, &sync_s) < 0)
        return NULL;
    cr_penalty penalty;
    if (penalty_obj != Py_None && convert_penalty(state, penalty_obj, &penalty) < 0)
        return NULL;
    cr_on_change on_change;
    if (convert_on_change(state, on_change_obj, &on_change) < 0)
        return NULL;
    cr_limit limit;
    int64_t capacity = CR_KEYED_DEFAULT_CAPACITY, mode;
    bool has_capacity;
    PyObject *path;
    if (convert_limit(state, rate, period, burst, clock, algorithm, max_cost, max_debt, tz, NULL,
                      priorities, &limit) < 0 ||
        convert_optional_int(state, capacity_obj, CR_E_CAPACITY, &capacity, &has_capacity) < 0 ||
        convert_shared(state, shared, mode_obj, &path, &mode) < 0)
        return NULL;
    if (!has_capacity)
        capacity = CR_KEYED_DEFAULT_CAPACITY;
    cr_plan_table *table = NULL;
    if (plans != Py_None) {
        table = PyMem_Malloc(sizeof *table);
        if (table == NULL) {
            Py_XDECREF(path);
            return PyErr_NoMemory();
        }
        if (convert_plans(state, plans, &limit, clock, algorithm, max_cost, max_debt, tz, table) <
            0) {
            PyMem_Free(table);
            Py_XDECREF(path);
            return NULL;
        }
    }
    cr_limiter *limiter = NULL;
    cr_keyed *keyed_store = NULL;
    const char *region = path != NULL ? PyBytes_AS_STRING(path) : NULL;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* opening a region may wait on another process's lock */
        status = keyed ? cr_keyed_open_plans(&keyed_store, &limit, table, capacity, region, mode,
                                             on_change)
                       : cr_limiter_open(&limiter, &limit, region, mode, on_change);
    Py_END_ALLOW_THREADS PyMem_Free(table);
    if (status == CR_OK && sync != Py_None) /* the region's msync interval */
        status = keyed ? cr_keyed_set_sync(keyed_store, sync_s)
                       : cr_limiter_set_sync(limiter, sync_s);
    if (status != CR_OK && (limiter != NULL || keyed_store != NULL)) {
        cr_limiter_free(limiter);
        cr_keyed_free(keyed_store);
        raise_status(state, status);
        Py_XDECREF(path);
        return NULL;
    }
    if (status == CR_OK && penalty_obj != Py_None) {
        status = keyed ? cr_keyed_set_penalty(keyed_store, &penalty)
                       : cr_limiter_set_penalty(limiter, &penalty);
        if (status != CR_OK) {
            cr_limiter_free(limiter);
            cr_keyed_free(keyed_store);
            raise_status(state, status);
            Py_XDECREF(path);
            return NULL;
        }
    }
    if (status != CR_OK)
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
    if ((max_cost != Py_None && (self->max_cost = PyNumber_Index(max_cost)) == NULL) ||
        (max_debt != Py_None && (self->max_debt = PyNumber_Index(max_debt)) == NULL)) {
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
    Py_XDECREF(((StoreObject *)self)->max_debt);
    type->tp_free(self);
    Py_DECREF(type);
}

/* One decision into `decision`, or, with `decision` NULL (allow), only
 * whether it is admitted, into `allowed`. A Limiter call without arguments
 * skips the parsing. */
static Py_ALWAYS_INLINE inline int decide(PyObject *self, bool keyed, const char *name, bool commit,
                                          PyObject *const *args, Py_ssize_t nargs,
                                          PyObject *kwnames, cr_decision *decision, bool *allowed,
                                          int32_t *plan)
{
    StoreObject *store = (StoreObject *)self;
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    int64_t cost = CR_DEFAULT_COST;
    int64_t now_ns = CR_CLOCK;
    int32_t priority = -1;
    *plan = CR_PLAN_DEFAULT;
    if (keyed || nargs != 0 || kwnames != NULL) {
        call_args call;
        module_state *state = state_of(self);
        if (parse_call(name, keyed, false, true, args, nargs, kwnames, &call) < 0 ||
            (keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
            convert_cost(state, call.cost, &cost) < 0 || convert_now(state, call.now, &now_ns) < 0)
            return -1;
        if (__builtin_expect(call.priority != NULL, 0) &&
            convert_priority(state, call.priority, store_limit(store), &priority) < 0)
            return -1;
        if (keyed && __builtin_expect(call.plan != NULL, 0) &&
            convert_plan(state, call.plan, store->keyed, plan) < 0)
            return -1;
    }
    cr_status status;
    CR_PY_BEGIN_DECISION
    if (keyed && __builtin_expect(*plan != CR_PLAN_DEFAULT, 0))
        status = cr_keyed_check_plan(store->keyed, key, (size_t)key_len, now_ns, cost, *plan,
                                     priority, commit, decision, allowed);
    else if (__builtin_expect(priority >= 0, 0))
        status = keyed ? cr_keyed_check_priority(store->keyed, key, (size_t)key_len, now_ns, cost,
                                                 priority, commit, decision, allowed)
                 : decision != NULL
                     ? cr_limiter_check_priority(store->limiter, now_ns, cost, priority, commit,
                                                 decision, allowed)
                     : cr_limiter_allow_priority(store->limiter, now_ns, cost, priority, allowed);
    else if (keyed)
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
    int32_t plan;
    if (decide(self, keyed, "allow", true, args, nargs, kwnames, NULL, &allowed, &plan) < 0)
        return NULL;
    return PyBool_FromLong(allowed);
}

static Py_ALWAYS_INLINE inline PyObject *store_check(PyObject *self, bool keyed, bool commit,
                                                     PyObject *const *args, Py_ssize_t nargs,
                                                     PyObject *kwnames)
{
    cr_decision decision;
    int32_t plan;
    if (decide(self, keyed, commit ? "check" : "peek", commit, args, nargs, kwnames, &decision,
               NULL, &plan) < 0)
        return NULL;
    const StoreObject *store = (const StoreObject *)self;
    return decision_from(state_of(self), &decision,
                         keyed && plan != CR_PLAN_DEFAULT ? cr_keyed_plan_limit(store->keyed, plan)
                                                          : store_limit(store));
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
    int32_t plan = CR_PLAN_DEFAULT;
    call_args call;
    if (parse_call(name, keyed, reserve, false, args, nargs, kwnames, &call) < 0 ||
        (keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
        convert_cost(state, call.cost, &cost) < 0 ||
        convert_wait_limit(state, call.timeout, CR_E_TIMEOUT, &max_wait_ns) < 0 ||
        convert_now(state, call.now, &now_ns) < 0 ||
        (keyed && convert_plan(state, call.plan, store->keyed, &plan) < 0))
        return NULL;
    bool reserved = false;
    int64_t delay_ns = 0;
    cr_status status;
    if (reserve)
        status = keyed ? cr_keyed_reserve(store->keyed, key, (size_t)key_len, now_ns, plan, cost,
                                          max_wait_ns, &reserved, &delay_ns)
                       : cr_limiter_reserve(store->limiter, now_ns, cost, max_wait_ns, &reserved,
                                            &delay_ns);
    else if (which == REFUND)
        status = keyed ? cr_keyed_refund(store->keyed, key, (size_t)key_len, now_ns, plan, cost)
                       : cr_limiter_refund(store->limiter, now_ns, cost);
    else
        status = keyed ? cr_keyed_anchor(store->keyed, key, (size_t)key_len, now_ns, plan, cost)
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
    int32_t plan = CR_PLAN_DEFAULT;
    call_args call;
    if (parse_call_named(name, keyed, false, false, units_name, args, nargs, kwnames, &call) < 0)
        return NULL;
    if (call.cost == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", name,
                     units_name, keyed ? 2 : 1);
        return NULL;
    }
    if ((keyed && convert_key(state, call.key, &key, &key_len) < 0) ||
        convert_units(state, call.cost, take ? CR_E_MAX_COST : CR_E_COST, &units) < 0 ||
        convert_now(state, call.now, &now_ns) < 0 ||
        (keyed && convert_plan(state, call.plan, store->keyed, &plan) < 0))
        return NULL;
    cr_decision decision;
    int64_t taken = 0;
    cr_status status;
    CR_PY_BEGIN_DECISION
    if (take)
        status = keyed ? cr_keyed_take(store->keyed, key, (size_t)key_len, now_ns, plan, units,
                                       &taken)
                       : cr_limiter_take(store->limiter, now_ns, units, &taken);
    else
        status = keyed ? cr_keyed_charge(store->keyed, key, (size_t)key_len, now_ns, plan, units,
                                         &decision)
                       : cr_limiter_charge(store->limiter, now_ns, units, &decision);
    CR_PY_END_DECISION
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (take)
        return PyLong_FromLongLong(taken);
    return decision_from(state, &decision,
                         plan != CR_PLAN_DEFAULT ? cr_keyed_plan_limit(store->keyed, plan)
                                                 : store_limit(store));
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

/* The classes, {name: reserve} (empty: none), in the order the limit keeps them. */
static PyObject *store_get_priorities(PyObject *self, void *Py_UNUSED(closure))
{
    return priorities_of(store_limit((StoreObject *)self));
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

/* reconfigure(rate, period=None, *, burst=None, algorithm=None, max_debt=None,
 * tz=None, now=None), on Limiter and KeyedLimiter: the limit changes live, keeping
 * what was used (docs/design.md §4). The algorithm, when not given, is the
 * store's; the clock and max_cost stay its (a burst below max_cost is
 * refused), and max_debt when not given (the default follows the burst). */
static PyObject *store_reconfigure(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rate", "period", "burst", "algorithm", "max_debt",
                               "tz",   "now",    "plan",  NULL};
    StoreObject *store = (StoreObject *)self;
    module_state *state = state_of(self);
    PyObject *rate, *period = Py_None, *burst = Py_None, *algorithm = Py_None, *now = Py_None;
    PyObject *max_debt = Py_None, *tz = Py_None, *plan_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOOOOO:reconfigure", keywords, &rate,
                                     &period, &burst, &algorithm, &max_debt, &tz, &now, &plan_obj))
        return NULL;
    int32_t plan;
    if (convert_plan(state, plan_obj, is_keyed(store) ? store->keyed : NULL, &plan) < 0)
        return NULL;
    if (max_debt == Py_None && store->max_debt)
        max_debt = store->max_debt;
    PyObject *own = NULL;
    if (algorithm == Py_None) {
        own = PyUnicode_FromString(cr_algorithm_name(store_limit(store)->algorithm));
        if (own == NULL)
            return NULL;
    }
    cr_limit limit;
    int64_t now_ns;
    /* a calendar quota keeps its zone unless another is given */
    int failed = convert_limit(state, rate, period, burst, Py_None, own ? own : algorithm,
                               store->max_cost ? store->max_cost : Py_None, max_debt, tz,
                               store_limit(store)->zone, Py_None, &limit) < 0 ||
                 convert_now(state, now, &now_ns) < 0;
    Py_XDECREF(own);
    if (failed)
        return NULL;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS /* a change may wait for another and sweeps part of a table */
        status = is_keyed(store) ? cr_keyed_reconfigure_plan(store->keyed, plan, &limit, now_ns)
                                 : cr_limiter_reconfigure(store->limiter, &limit, now_ns);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_status(state, status);
        return NULL;
    }
    if (max_debt != Py_None && max_debt != store->max_debt) { /* given now: kept from now on */
        PyObject *kept = PyNumber_Index(max_debt);
        if (kept == NULL)
            return NULL;
        Py_XDECREF(store->max_debt);
        store->max_debt = kept;
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

/* stats_by() on Limiter and KeyedLimiter: the requests by plan and by class. */
static PyObject *store_stats_by(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    StoreObject *store = (StoreObject *)self;
    cr_stats_by by;
    if (is_keyed(store))
        cr_keyed_stats_by(store->keyed, &by);
    else
        cr_limiter_stats_by(store->limiter, &by);
    return stats_by_dict(&by);
}

/* _would_refuse(cost, plan=None, priority=None): a dry run let a refusal of
 * `cost` units through, decided under `plan` in class `priority`. */
static PyObject *store_would_refuse(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    StoreObject *store = (StoreObject *)self;
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "_would_refuse(cost, plan=None, priority=None)");
        return NULL;
    }
    long long cost = PyLong_AsLongLong(args[0]);
    if (cost == -1 && PyErr_Occurred())
        return NULL;
    module_state *state = state_of(self);
    int32_t plan = CR_PLAN_DEFAULT, priority = -1;
    if ((is_keyed(store) && nargs > 1 && convert_plan(state, args[1], store->keyed, &plan) < 0) ||
        (nargs > 2 && convert_priority(state, args[2], store_limit(store), &priority) < 0))
        return NULL;
    if (is_keyed(store))
        cr_keyed_would_refuse(store->keyed, cost, plan, priority);
    else
        cr_limiter_would_refuse(store->limiter, cost, priority);
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

/* "cellrate.Limiter(rate=300, period=60, burst=60)": see cr_limit_describe. */
static PyObject *store_repr(PyObject *self)
{
    const StoreObject *store = (const StoreObject *)self;
    return limit_text(self, store_limit(store), is_keyed(store) ? store->capacity : -1);
}

#define DECIDE_METHODS(type)                                                                    \
    {"allow", (PyCFunction)(void (*)(void))type##_allow, METH_FASTCALL | METH_KEYWORDS,         \
     type##_allow_doc},                                                                         \
        {"check", (PyCFunction)(void (*)(void))type##_check, METH_FASTCALL | METH_KEYWORDS,     \
         type##_check_doc},                                                                     \
        {"peek", (PyCFunction)(void (*)(void))type##_peek, METH_FASTCALL | METH_KEYWORDS,       \
         type##_peek_doc},                                                                      \
        {"reserve", (PyCFunction)(void (*)(void))store_reserve, METH_FASTCALL | METH_KEYWORDS,  \
         type##_reserve_doc},                                                                   \
        {"refund", (PyCFunction)(void (*)(void))store_refund, METH_FASTCALL | METH_KEYWORDS,    \
         type##_refund_doc},                                                                    \
        {"charge", (PyCFunction)(void (*)(void))store_charge, METH_FASTCALL | METH_KEYWORDS,    \
         type##_charge_doc},                                                                    \
        {"take", (PyCFunction)(void (*)(void))store_take, METH_FASTCALL | METH_KEYWORDS,        \
         type##_take_doc},                                                                      \
        {"wait", (PyCFunction)(void (*)(void))type##_wait, METH_FASTCALL | METH_KEYWORDS,       \
         type##_wait_doc},                                                                      \
        {"acquire", (PyCFunction)(void (*)(void))type##_acquire, METH_FASTCALL | METH_KEYWORDS, \
         type##_acquire_doc},                                                                   \
    {                                                                                           \
        "anchor", (PyCFunction)(void (*)(void))store_anchor, METH_FASTCALL | METH_KEYWORDS,     \
            type##_anchor_doc                                                                   \
    }

#define STATS_METHODS                                                                    \
    {"stats", store_stats, METH_NOARGS, store_stats_doc},                                \
        {"stats_by", store_stats_by, METH_NOARGS, store_stats_by_doc},                   \
        {"reset_stats", store_reset_stats, METH_NOARGS, store_reset_stats_doc},          \
    {                                                                                    \
        "_would_refuse", (PyCFunction)(void (*)(void))store_would_refuse, METH_FASTCALL, \
            store_would_refuse_doc                                                       \
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

static PyObject *store_get_max_debt(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->max_debt);
}

static PyObject *store_get_max_cost(PyObject *self, void *Py_UNUSED(closure))
{
    PyObject *max_cost = ((StoreObject *)self)->max_cost;
    if (max_cost == NULL)
        Py_RETURN_NONE;
    Py_INCREF(max_cost);
    return max_cost;
}

static PyObject *store_get_emission_ns(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->emission_ns);
}

static PyObject *store_get_tolerance_ns(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(store_limit((StoreObject *)self)->tolerance_ns);
}

static PyMemberDef keyed_members[] = {
    {"capacity", Py_T_LONGLONG, offsetof(StoreObject, capacity), Py_READONLY,
     "The number of live keys the table is sized for."},
    {NULL, 0, 0, 0, NULL},
};

#define CLOCK_GETTER                                                                             \
    {"rate", store_get_rate, NULL, "Units admitted per period, sustained.", NULL},               \
        {"period", store_get_period, NULL, "The period in seconds.", NULL},                      \
        {"burst", store_get_burst, NULL, "Units an idle key admits at once.", NULL},             \
        {"max_debt", store_get_max_debt, NULL,                                                   \
         "Units a charge may leave a key owing beyond the limit (default: the burst).", NULL},   \
        {"max_cost", store_get_max_cost, NULL,                                                   \
         "The largest cost a request will have, as given (None: not checked).", NULL},           \
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

#define PRIORITIES_GETTER                                                                         \
    {                                                                                             \
        "priorities", store_get_priorities, NULL,                                                 \
            "The priority classes, {name: reserve} (the share of the burst each may not spend); " \
            "empty for none.",                                                                    \
            NULL                                                                                  \
    }

static PyGetSetDef limiter_getset[] = {
    CLOCK_GETTER,
    PRIORITIES_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef keyed_getset[] = {
    CLOCK_GETTER,
    PRIORITIES_GETTER,
    {"evictions", keyed_get_evictions, NULL, "Live keys evicted so far to make room.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

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

#pragma GCC diagnostic pop

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
