/*
 * The Redis store's protocol (core/cellrate/redis.h), lent to cellrate.redis,
 * which does the transport (redis-py, its connections, the probe): a
 * request's words, the reading of a reply and of an error reply, the deny
 * cache's answers, on_error's answers, the back-off, a key's name. Each
 * function converts, calls the core and converts back (docs/design.md §11).
 * Part of module.c's unity build.
 */

/* Requests of up to this many bytes are built on the stack. */
#define REDIS_STACK_BYTES 1024
/* The most limits one request decides (check_all's items). */
#define REDIS_LIMITS_MAX 256

/* The cr_limit of a cellrate.Limit (the face holds the limits it sends as
 * Limit values), or NULL with TypeError. */
static const cr_limit *redis_limit_of(module_state *state, PyObject *obj)
{
    if (Py_TYPE(obj) != state->limit_type) {
        PyErr_Format(PyExc_TypeError, "a cellrate.Limit, not %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return &((LimitObject *)obj)->limit;
}

/* The mode of a request (an int, the script's digit), or -1 with TypeError. */
static int redis_mode_of(PyObject *obj)
{
    const long mode = PyLong_Check(obj) ? PyLong_AsLong(obj) : -1;
    if (mode < CR_REDIS_PEEK || mode > CR_REDIS_ALLOW_CLASS) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a mode of the script: an int from 0 to 8");
        return -1;
    }
    return (int)mode;
}

/* A request's mode: a mode of the script, or one with CR_REDIS_WIPE_MARKER
 * (on_wipe="refuse") or CR_REDIS_PENALTY (a penalty: the request's last
 * argument) or'ed in; -1 with TypeError. */
static int redis_request_mode_of(PyObject *obj, bool *marked, bool *penalized)
{
    const long raw = PyLong_Check(obj) ? PyLong_AsLong(obj) : -1;
    *marked = raw >= 0 && (raw & CR_REDIS_WIPE_MARKER) != 0;
    *penalized = raw >= 0 && (raw & CR_REDIS_PENALTY) != 0;
    if (raw < 0 ||
        (raw & ~(long)(CR_REDIS_WIPE_MARKER | CR_REDIS_PENALTY | CR_REDIS_MODE_BITS)) != 0 ||
        (raw & CR_REDIS_MODE_BITS) > CR_REDIS_ALLOW_CLASS) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a mode of the script: an int from 0 to 8, or it "
                                             "with WIPE_MARKER or PENALTY");
        return -1;
    }
    return (int)(raw & CR_REDIS_MODE_BITS);
}

/* A penalty as _redis_penalty made it, (after, within_ns, strike_ns, ban_ns,
 * max_ban_ns), into `out`; -1 with TypeError. */
static int redis_penalty_of(PyObject *obj, cr_penalty *out)
{
    int64_t *fields[5] = {&out->after, &out->within_ns, &out->strike_ns, &out->ban_ns,
                          &out->max_ban_ns};
    if (!PyTuple_CheckExact(obj) || PyTuple_GET_SIZE(obj) != 5) {
        PyErr_SetString(PyExc_TypeError, "a penalty of _redis_penalty");
        return -1;
    }
    for (Py_ssize_t i = 0; i < 5; i++)
        if (to_int64(PyTuple_GET_ITEM(obj, i), fields[i]) != CONVERTED) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a penalty of _redis_penalty");
            return -1;
        }
    return 0;
}

/* bytes of a str (UTF-8) or bytes: a prefix or a name, which the face checked. */
static const char *redis_text_of(module_state *state, PyObject *obj, size_t *len)
{
    if (PyBytes_Check(obj)) {
        *len = (size_t)PyBytes_GET_SIZE(obj);
        return PyBytes_AS_STRING(obj);
    }
    if (PyUnicode_Check(obj))
        return utf8_of(state, obj, CR_E_KEY, len);
    PyErr_Format(PyExc_TypeError, "a str or bytes, not %s", Py_TYPE(obj)->tp_name);
    return NULL;
}

/* The cost of a request: a take's is its max_cost, named so in a mistake. */
static int redis_cost_of(module_state *state, PyObject *obj, int mode, int64_t *cost)
{
    return convert_units(state, obj, mode == CR_REDIS_TAKE ? CR_E_MAX_COST : CR_E_COST, cost);
}

/* A status of the protocol: E_REDIS_REPLY, a reply no script of ours gives,
 * is CellrateError (the face reports it as Redis refusing the decision);
 * the rest by their class. */
static void redis_raise(module_state *state, cr_status status)
{
    if (status == CR_E_REDIS_REPLY)
        PyErr_SetString(state->error, cr_strerror(status));
    else
        raise_status(state, status);
}

/*
 * _redis_request(mode, cost, now, limit, prefix, name, key, ...): the words
 * after EVALSHA and the SHA (a list of bytes) of a request of `mode`, one
 * (limit, prefix, name, key) group per limit decided; a class's mode
 * (PEEK_CLASS, CHECK_CLASS, ALLOW_CLASS) ends with the class's name
 * (priority=); a mode with PENALTY ends with the limit's penalty
 * (_redis_penalty's), which the core sends where it applies.
 */
static PyObject *module_redis_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    bool marked = false, penalized = false;
    const int mode = nargs > 0 ? redis_request_mode_of(args[0], &marked, &penalized) : -1;
    if (mode < 0)
        return NULL;
    const bool in_class = mode >= CR_REDIS_PEEK_CLASS;
    const Py_ssize_t ngroups = nargs - 3 - (in_class ? 1 : 0) - (penalized ? 1 : 0);
    if (ngroups < 4 || ngroups % 4 != 0 || ngroups / 4 > REDIS_LIMITS_MAX) {
        PyErr_SetString(PyExc_TypeError, "_redis_request(mode, cost, now, limit, prefix, name, "
                                         "key, ...[, priority][, penalty])");
        return NULL;
    }
    int64_t cost, now_ns;
    const size_t nitems = (size_t)ngroups / 4;
    cr_redis_item items[REDIS_LIMITS_MAX];
    for (size_t i = 0; i < nitems; i++) {
        PyObject *const *group = args + 3 + 4 * i;
        Py_ssize_t key_len;
        items[i].limit = redis_limit_of(state, group[0]);
        if (items[i].limit == NULL ||
            (items[i].prefix = redis_text_of(state, group[1], &items[i].prefix_len)) == NULL ||
            (items[i].name = redis_text_of(state, group[2], &items[i].name_len)) == NULL ||
            convert_key(state, group[3], &items[i].key, &key_len) < 0)
            return NULL;
        items[i].key_len = (size_t)key_len;
        items[i].priority = -1;
        items[i].penalty = NULL;
    }
    cr_penalty penalty;
    if (penalized) {
        if (redis_penalty_of(args[nargs - 1], &penalty) < 0)
            return NULL;
        items[0].penalty = &penalty;
    }
    if (in_class && nitems == 1 &&
        convert_priority(state, args[nargs - 1 - (penalized ? 1 : 0)], items[0].limit,
                         &items[0].priority) < 0)
        return NULL;
    /* the keys, then the cost, then now: a decision's order (_check_request) */
    if (redis_cost_of(state, args[1], mode, &cost) < 0 || convert_now(state, args[2], &now_ns) < 0)
        return NULL;
    char stack[REDIS_STACK_BYTES];
    cr_redis_word words[CR_REDIS_REQUEST_WORDS(REDIS_LIMITS_MAX)];
    const size_t size = cr_redis_request_size(items, nitems);
    char *buf = size <= sizeof stack ? stack : PyMem_Malloc(size);
    if (buf == NULL)
        return PyErr_NoMemory();
    size_t count = 0;
    const cr_status status = cr_redis_request(
        (cr_redis_mode)(mode | (marked ? CR_REDIS_WIPE_MARKER : 0)), cost, now_ns, items, nitems,
        buf, size, words, &count);
    PyObject *list = NULL;
    if (status != CR_OK) {
        redis_raise(state, status);
    } else if ((list = PyList_New((Py_ssize_t)count)) != NULL) {
        for (size_t i = 0; i < count; i++) {
            PyObject *word = PyBytes_FromStringAndSize(buf + words[i].offset,
                                                       (Py_ssize_t)words[i].len);
            if (word == NULL) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)i, word);
        }
    }
    if (buf != stack)
        PyMem_Free(buf);
    return list;
}

/* A reply's field: an int, or a decimal string (bytes, or str from a client
 * that decodes its replies). CR_E_REDIS_REPLY for anything else. */
static cr_status redis_field_of(PyObject *obj, int64_t *value)
{
    if (PyLong_Check(obj)) {
        int overflow;
        const long long integer = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow != 0 || (integer == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return CR_E_REDIS_REPLY;
        }
        *value = integer;
        return CR_OK;
    }
    const char *text;
    Py_ssize_t len;
    if (PyBytes_Check(obj)) {
        text = PyBytes_AS_STRING(obj);
        len = PyBytes_GET_SIZE(obj);
    } else if (PyUnicode_Check(obj)) {
        if ((text = PyUnicode_AsUTF8AndSize(obj, &len)) == NULL) {
            PyErr_Clear();
            return CR_E_REDIS_REPLY;
        }
    } else {
        return CR_E_REDIS_REPLY;
    }
    return cr_redis_parse_integer(text, (size_t)len, value);
}

/* The limits of args[from..nargs): each a cellrate.Limit. */
static int redis_limits_of(module_state *state, PyObject *const *args, Py_ssize_t from,
                           Py_ssize_t nargs, const cr_limit **limits, size_t *nlimits)
{
    if (nargs <= from || nargs - from > REDIS_LIMITS_MAX) {
        PyErr_SetString(PyExc_TypeError, "one limit or more");
        return -1;
    }
    for (Py_ssize_t i = from; i < nargs; i++)
        if ((limits[i - from] = redis_limit_of(state, args[i])) == NULL)
            return -1;
    *nlimits = (size_t)(nargs - from);
    return 0;
}

/* The script's reply read by the core: CR_E_REDIS_REPLY for one it never gives. */
static cr_status redis_read(PyObject *reply, int mode, const cr_limit *const *limits,
                            size_t nlimits, cr_redis_answer *answer)
{
    int64_t fields[8];
    size_t nfields = 0;
    const bool is_list = PyList_Check(reply);
    if (is_list) {
        nfields = (size_t)PyList_GET_SIZE(reply);
        if (nfields > sizeof fields / sizeof fields[0])
            return CR_E_REDIS_REPLY;
        for (size_t i = 0; i < nfields; i++) {
            const cr_status status = redis_field_of(PyList_GET_ITEM(reply, (Py_ssize_t)i),
                                                    &fields[i]);
            if (status != CR_OK)
                return status;
        }
    } else {
        const cr_status status = redis_field_of(reply, &fields[0]);
        if (status != CR_OK || !PyLong_Check(reply))
            return CR_E_REDIS_REPLY;
        nfields = 1;
    }
    return cr_redis_read_reply((cr_redis_mode)mode, is_list, fields, nfields, limits, nlimits,
                               answer);
}

/*
 * _redis_reply(mode, reply, limit, ...): the script's reply to a request of
 * `mode` for these limits (in the request's order): a Decision, or the count
 * of a take (units taken) or of a refund (1: the state changed).
 */
static PyObject *module_redis_reply(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limits[REDIS_LIMITS_MAX];
    size_t nlimits;
    const int mode = nargs >= 3 ? redis_mode_of(args[0]) : -1;
    if (mode < 0 || redis_limits_of(state, args, 2, nargs, limits, &nlimits) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_reply(mode, reply, limit, ...)");
        return NULL;
    }
    cr_redis_answer answer;
    const cr_status status = redis_read(args[1], mode, limits, nlimits, &answer);
    if (status != CR_OK) {
        redis_raise(state, status);
        return NULL;
    }
    if (mode == CR_REDIS_TAKE || mode == CR_REDIS_REFUND)
        return PyLong_FromLongLong(answer.count);
    return decision_from(state, &answer.decision, limits[answer.index]);
}

/*
 * _redis_remember(mode, now, cost, asked_ns, reply, limit): what the deny
 * cache keeps of the reply to a request of one limit, asked at `asked_ns`
 * (the face's monotonic ns): a tuple (asked_ns, cost, remaining,
 * retry_after_ns, reset_after_ns), or None when it keeps nothing.
 */
static PyObject *module_redis_remember(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limits[1];
    size_t nlimits;
    int64_t now_ns, cost, asked_ns;
    /* a request under a penalty (PENALTY or'ed in), whose refusals the core keeps not */
    bool marked = false, penalized = false;
    const int mode = nargs == 6 ? redis_request_mode_of(args[0], &marked, &penalized) : -1;
    if (mode < 0 || marked || convert_now(state, args[1], &now_ns) < 0 ||
        convert_cost(state, args[2], &cost) < 0 || to_int64(args[3], &asked_ns) != CONVERTED ||
        redis_limits_of(state, args, 5, nargs, limits, &nlimits) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "_redis_remember(mode, now, cost, asked_ns, reply, limit)");
        return NULL;
    }
    cr_redis_answer answer;
    cr_redis_refusal refusal;
    if (redis_read(args[4], mode, limits, nlimits, &answer) != CR_OK ||
        !cr_redis_remember((cr_redis_mode)(mode | (penalized ? CR_REDIS_PENALTY : 0)), nlimits,
                           now_ns, cost, &answer.decision, asked_ns, &refusal))
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLLL)", (long long)refusal.asked_ns, (long long)refusal.cost,
                         (long long)refusal.remaining, (long long)refusal.retry_after_ns,
                         (long long)refusal.reset_after_ns);
}

/*
 * _redis_recall(mode, now, cost, clock_ns, refusal, limit): what a refusal
 * the deny cache kept (_redis_remember's tuple, under `limit`) answers to a
 * request of one limit at `clock_ns`: a Decision, None (ask Redis) or False
 * (ask Redis; the refusal has passed: forget it).
 */
static PyObject *module_redis_recall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limits[1];
    size_t nlimits;
    int64_t now_ns, cost, clock_ns;
    cr_redis_refusal refusal;
    const int mode = nargs == 6 ? redis_mode_of(args[0]) : -1;
    if (mode < 0 || convert_now(state, args[1], &now_ns) < 0 ||
        convert_cost(state, args[2], &cost) < 0 || to_int64(args[3], &clock_ns) != CONVERTED ||
        !PyArg_ParseTuple(args[4], "LLLLL", &refusal.asked_ns, &refusal.cost, &refusal.remaining,
                          &refusal.retry_after_ns, &refusal.reset_after_ns) ||
        redis_limits_of(state, args, 5, nargs, limits, &nlimits) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "_redis_recall(mode, now, cost, clock_ns, refusal, limit)");
        return NULL;
    }
    cr_decision decision;
    switch (cr_redis_recall_refusal(limits[0], &refusal, (cr_redis_mode)mode, nlimits, now_ns, cost,
                                    clock_ns, &decision)) {
    case CR_REDIS_RECALLED:
        return decision_from(state, &decision, limits[0]);
    case CR_REDIS_EXPIRED:
        Py_RETURN_FALSE;
    default:
        Py_RETURN_NONE;
    }
}

/*
 * _redis_unavailable(mode, limit, allow, cost, probe_in_ns): on_error's
 * answer while Redis cannot decide (allow: True for "allow"): a Decision, or
 * a take's count.
 */
static PyObject *module_redis_unavailable(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limit = NULL;
    int64_t cost, probe_in_ns;
    const int mode = nargs == 5 ? redis_mode_of(args[0]) : -1;
    if (mode < 0 || (limit = redis_limit_of(state, args[1])) == NULL ||
        convert_units(state, args[3], CR_E_COST, &cost) < 0 ||
        to_int64(args[4], &probe_in_ns) != CONVERTED) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "_redis_unavailable(mode, limit, allow, cost, probe_in_ns)");
        return NULL;
    }
    cr_decision decision;
    const int64_t taken = cr_redis_unavailable(limit, PyObject_IsTrue(args[2]) == 1, cost,
                                               probe_in_ns, &decision);
    if (mode == CR_REDIS_TAKE)
        return PyLong_FromLongLong(taken);
    return decision_from(state, &decision, limit);
}

/* _redis_backoff(previous_ns): the probe's next back-off in ns (previous 0:
 * none yet). */
static PyObject *module_redis_backoff(PyObject *module, PyObject *previous)
{
    (void)module;
    int64_t previous_ns;
    if (to_int64(previous, &previous_ns) != CONVERTED) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_backoff(previous_ns: int)");
        return NULL;
    }
    return PyLong_FromLongLong(cr_redis_backoff(previous_ns));
}

/* A key written by `write` (cr_redis_key, cr_redis_penalty_key) of the
 * arguments (prefix, name, key) as bytes; `key` None only where `keyless`. */
typedef size_t key_writer(char *buf, size_t size, const char *prefix, size_t prefix_len,
                          const char *name, size_t name_len, const char *key, size_t key_len);

static PyObject *key_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           const char *usage, key_writer *write, bool keyless)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    size_t prefix_len, name_len;
    const char *prefix = redis_text_of(state, args[0], &prefix_len);
    const char *name = prefix != NULL ? redis_text_of(state, args[1], &name_len) : NULL;
    if (name == NULL)
        return NULL;
    const char *key = NULL;
    Py_ssize_t key_len = 0;
    if (!(keyless && args[2] == Py_None) && convert_key(state, args[2], &key, &key_len) < 0)
        return NULL;
    const size_t len = write(NULL, 0, prefix, prefix_len, name, name_len, key, (size_t)key_len);
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (bytes != NULL)
        write(PyBytes_AS_STRING(bytes), len, prefix, prefix_len, name, name_len, key,
              (size_t)key_len);
    return bytes;
}

/* _redis_key(prefix, name, key): the Redis key of `key` (None: a concurrency
 * limit's one key), the key checked as every decision checks it. */
static PyObject *module_redis_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return key_bytes(module, args, nargs, "_redis_key(prefix, name, key)", cr_redis_key, true);
}

/* _redis_penalty_key(prefix, name, key): the penalty key of `key`'s Redis
 * key (its strikes, in the key's Cluster slot). */
static PyObject *module_redis_penalty_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return key_bytes(module, args, nargs, "_redis_penalty_key(prefix, name, key)",
                     cr_redis_penalty_key, false);
}

/* _redis_penalty(penalty): a cellrate.Penalty judged by the core
 * (cr_penalty_init, then cr_redis_check_penalty: what the script carries),
 * as the tuple _redis_request takes. */
static PyObject *module_redis_penalty(PyObject *module, PyObject *obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    cr_penalty penalty;
    if (convert_penalty(state, obj, &penalty) < 0)
        return NULL;
    const cr_status status = cr_redis_check_penalty(&penalty);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return Py_BuildValue("(LLLLL)", (long long)penalty.after, (long long)penalty.within_ns,
                         (long long)penalty.strike_ns, (long long)penalty.ban_ns,
                         (long long)penalty.max_ban_ns);
}

/* _redis_signature(limit): the signature the script writes with each value,
 * an unnamed limit's name. */
static PyObject *module_redis_signature(PyObject *module, PyObject *limit_obj)
{
    const cr_limit *limit = redis_limit_of((module_state *)PyModule_GetState(module), limit_obj);
    if (limit == NULL)
        return NULL;
    char signature[64]; /* an algorithm's name and two int64 */
    const size_t len = cr_redis_signature(signature, sizeof signature, limit);
    return PyUnicode_FromStringAndSize(signature, (Py_ssize_t)len);
}

/* _redis_check_limit(limit): None when the script carries `limit` exactly,
 * else the core's error naming burst. */
static PyObject *module_redis_check_limit(PyObject *module, PyObject *limit_obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limit = redis_limit_of(state, limit_obj);
    if (limit == NULL)
        return NULL;
    const cr_status status = cr_redis_check_limit(limit);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _redis_plans(limit, plans, named, max_cost, max_debt): the plans of a Redis
 * rate limit as {name: Limit}, "default" (`limit`) first, then by name: the
 * core's table (cr_plans_set: a rate takes the limit's algorithm, max_cost
 * and max_debt), each limit one the script carries, the limit named
 * (cr_redis_check_plans). */
static PyObject *module_redis_plans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limit = nargs == 5 ? redis_limit_of(state, args[0]) : NULL;
    if (limit == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "_redis_plans(limit, plans, named, max_cost, max_debt)");
        return NULL;
    }
    PyObject *algorithm = PyUnicode_FromString(cr_algorithm_name(limit->algorithm));
    if (algorithm == NULL)
        return NULL;
    cr_plan_table *table = PyMem_Malloc(sizeof *table);
    if (table == NULL) {
        Py_DECREF(algorithm);
        return PyErr_NoMemory();
    }
    PyObject *out = NULL;
    const int failed = convert_plans(state, args[1], limit, Py_None, algorithm, args[3], args[4],
                                     Py_None, table);
    Py_DECREF(algorithm);
    cr_status status = CR_OK;
    if (!failed && (status = cr_redis_check_plans(PyObject_IsTrue(args[2]) == 1, table)) != CR_OK)
        raise_status(state, status);
    if (!failed && status == CR_OK)
        out = PyDict_New();
    for (int32_t i = 0; out != NULL && i < table->count; i++) {
        LimitObject *plan = (LimitObject *)state->limit_type->tp_alloc(state->limit_type, 0);
        if (plan == NULL) {
            Py_CLEAR(out);
            break;
        }
        plan->limit = table->limits[i];
        if (PyDict_SetItemString(out, table->names[i], (PyObject *)plan) < 0)
            Py_CLEAR(out);
        Py_DECREF(plan);
    }
    PyMem_Free(table);
    return out;
}

/* _redis_plan(plans, plan): the limit of `plan` in `plans` (_redis_plans's),
 * else the core's error naming plan (a name no plan has, or not a str). */
static PyObject *module_redis_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_redis_plan(plans, plan)");
        return NULL;
    }
    if (!PyUnicode_Check(args[1])) {
        raise_wrong_type(state, CR_E_PLAN);
        return NULL;
    }
    PyObject *limit = PyDict_GetItemWithError(args[0], args[1]);
    if (limit == NULL) {
        if (!PyErr_Occurred())
            raise_status(state, CR_E_PLAN);
        return NULL;
    }
    return Py_NewRef(limit);
}

/*
 * _redis_classify(word, text): what a failure means, a str ("cannot_decide",
 * "mistake", "wrong_algorithm", "cross_slot", "no_script"), and for
 * "wrong_algorithm" the mistake's own words ("algorithm: ..."), else None.
 * `word`: the error reply's first word, None when no reply came.
 */
static PyObject *module_redis_classify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const kinds[] = {"cannot_decide", "mistake", "wrong_algorithm", "cross_slot",
                                        "no_script"};
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2 || !PyUnicode_Check(args[1]) ||
        (args[0] != Py_None && !PyUnicode_Check(args[0]))) {
        PyErr_SetString(PyExc_TypeError, "_redis_classify(word: str | None, text: str)");
        return NULL;
    }
    size_t word_len = 0, text_len, message_at = 0;
    const char *word = args[0] == Py_None ? NULL : utf8_of(state, args[0], CR_E_KEY, &word_len);
    const char *text = utf8_of(state, args[1], CR_E_KEY, &text_len);
    if ((word == NULL && args[0] != Py_None) || text == NULL)
        return NULL;
    const cr_redis_failure failure = cr_redis_classify(word, word_len, text, text_len, &message_at);
    if (failure != CR_REDIS_WRONG_ALGORITHM)
        return Py_BuildValue("(sO)", kinds[failure], Py_None);
    return Py_BuildValue("(ss#)", kinds[failure], text + message_at,
                         (Py_ssize_t)(text_len - message_at));
}

/* _redis_slots_message(keys, slots): the words of keys in several Cluster
 * hash slots, each key (bytes) with its slot (int, -1: not known). */
static PyObject *module_redis_slots_message(PyObject *module, PyObject *const *args,
                                            Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
        PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1]) ||
        PyList_GET_SIZE(args[0]) > REDIS_LIMITS_MAX) {
        PyErr_SetString(PyExc_TypeError, "_redis_slots_message(keys: list, slots: list)");
        return NULL;
    }
    const size_t nkeys = (size_t)PyList_GET_SIZE(args[0]);
    const char *keys[REDIS_LIMITS_MAX];
    size_t key_lens[REDIS_LIMITS_MAX];
    int64_t slots[REDIS_LIMITS_MAX];
    for (size_t i = 0; i < nkeys; i++) {
        PyObject *key = PyList_GET_ITEM(args[0], (Py_ssize_t)i);
        if (!PyBytes_Check(key) ||
            to_int64(PyList_GET_ITEM(args[1], (Py_ssize_t)i), &slots[i]) != CONVERTED) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "keys are bytes, slots ints");
            return NULL;
        }
        keys[i] = PyBytes_AS_STRING(key);
        key_lens[i] = (size_t)PyBytes_GET_SIZE(key);
    }
    const size_t len = cr_redis_slots_message(NULL, 0, keys, key_lens, slots, nkeys);
    char *text = PyMem_Malloc(len + 1);
    if (text == NULL)
        return PyErr_NoMemory();
    cr_redis_slots_message(text, len + 1, keys, key_lens, slots, nkeys);
    PyObject *message = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "strict");
    PyMem_Free(text);
    return message;
}

/* _redis_protocol(): the protocol's constants, for the face's names (and the
 * tests that hold the script to them). */
static PyObject *module_redis_protocol(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    size_t count = 0;
    while (cr_redis_unavailable_reply(count) != NULL)
        count++;
    PyObject *words = PyTuple_New((Py_ssize_t)count);
    if (words == NULL)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        PyObject *word = PyUnicode_FromString(cr_redis_unavailable_reply(i));
        if (word == NULL) {
            Py_DECREF(words);
            return NULL;
        }
        PyTuple_SET_ITEM(words, (Py_ssize_t)i, word);
    }
    return Py_BuildValue(
        "{sLsLsdsdsssNsisisisisisisisssssisisisisisy}", "MAX_TOLERANCE_NS",
        (long long)CR_REDIS_MAX_TOLERANCE_NS, "MAX_DEBT_NS", (long long)CR_REDIS_MAX_DEBT_NS,
        "FIRST_BACKOFF_S", cr_ns_to_seconds(CR_REDIS_FIRST_BACKOFF_NS), "MAX_BACKOFF_S",
        cr_ns_to_seconds(CR_REDIS_MAX_BACKOFF_NS), "ALGORITHM_REPLY", CR_REDIS_ALGORITHM_REPLY,
        "UNAVAILABLE_REPLIES", words, "PEEK", CR_REDIS_PEEK, "CHECK", CR_REDIS_CHECK, "ALLOW",
        CR_REDIS_ALLOW, "REFUND", CR_REDIS_REFUND, "CHARGE", CR_REDIS_CHARGE, "TAKE", CR_REDIS_TAKE,
        "BATCH_MAX", CR_REDIS_BATCH_MAX, "COALESCE_REFUSED", cr_strerror(CR_E_REDIS_COALESCE),
        "BATCH_ITEM", cr_strerror(CR_E_REDIS_BATCH_ITEM), "PEEK_CLASS", CR_REDIS_PEEK_CLASS,
        "CHECK_CLASS", CR_REDIS_CHECK_CLASS, "ALLOW_CLASS", CR_REDIS_ALLOW_CLASS, "WIPE_MARKER",
        CR_REDIS_WIPE_MARKER, "PENALTY", CR_REDIS_PENALTY, "BACK_KEY", CR_REDIS_BACK_KEY);
}

/* _redis_fallback_check(on_error, has_fallback): None, or the core's error
 * naming fallback when one is given with another on_error. */
static PyObject *module_redis_fallback_check(PyObject *module, PyObject *const *args,
                                             Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_ssize_t len;
    const char *on_error = nargs == 2 ? PyUnicode_AsUTF8AndSize(args[0], &len) : NULL;
    if (on_error == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_fallback_check(on_error, has_fallback)");
        return NULL;
    }
    const cr_status status = cr_redis_fallback_check(on_error, (size_t)len,
                                                     PyObject_IsTrue(args[1]) == 1);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _redis_check_items(clients): None, or the core's error naming items; each
 * item given as its client, compared by identity (None: not a pair). A pair
 * that is not one is a type the parameter never takes. */
static PyObject *module_redis_check_items(PyObject *module, PyObject *clients)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (!PyList_Check(clients)) {
        PyErr_SetString(PyExc_TypeError, "_redis_check_items(clients): a list");
        return NULL;
    }
    const Py_ssize_t count = PyList_GET_SIZE(clients);
    uintptr_t few[8], *ids = count > 8 ? PyMem_Malloc((size_t)count * sizeof *ids) : few;
    if (ids == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *client = PyList_GET_ITEM(clients, i);
        ids[i] = client == Py_None ? 0 : (uintptr_t)client;
    }
    const cr_status status = cr_redis_check_items(ids, (size_t)count);
    if (ids != few)
        PyMem_Free(ids);
    if (status == CR_E_REDIS_ITEMS && count > 0)
        raise_wrong_type(state, status);
    else if (status != CR_OK)
        raise_status(state, status);
    if (status != CR_OK)
        return NULL;
    Py_RETURN_NONE;
}

/* _redis_check_change(named, algorithm, given): None, or the core's error
 * for a live change of a Redis rate limit (given None: no algorithm given). */
static PyObject *module_redis_check_change(PyObject *module, PyObject *const *args,
                                           Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_ssize_t len = 0, given_len = 0;
    const char *algorithm = nargs == 3 ? PyUnicode_AsUTF8AndSize(args[1], &len) : NULL;
    if (algorithm == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_check_change(named, algorithm, given)");
        return NULL;
    }
    const char *given = NULL;
    if (args[2] != Py_None) {
        if (!PyUnicode_Check(args[2])) {
            raise_wrong_type(state, CR_E_ALGORITHM);
            return NULL;
        }
        if ((given = PyUnicode_AsUTF8AndSize(args[2], &given_len)) == NULL)
            return NULL;
    }
    const cr_status status = cr_redis_check_change(PyObject_IsTrue(args[0]) == 1, algorithm,
                                                   (size_t)len, given, (size_t)given_len);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _redis_fallback_limit(limit, share): the Limit that is `share` of `limit`,
 * or the core's error naming fallback. */
static PyObject *module_redis_fallback_limit(PyObject *module, PyObject *const *args,
                                             Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *limit = nargs == 2 ? redis_limit_of(state, args[0]) : NULL;
    if (limit == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_fallback_limit(limit, share)");
        return NULL;
    }
    if (PyBool_Check(args[1]) || !(PyFloat_Check(args[1]) || PyLong_Check(args[1]))) {
        raise_wrong_type(state, CR_E_REDIS_FALLBACK);
        return NULL;
    }
    const double share = PyFloat_AsDouble(args[1]);
    if (share == -1.0 && PyErr_Occurred())
        return NULL;
    cr_limit out;
    const cr_status status = cr_redis_fallback_limit(limit, share, &out);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    LimitObject *self = (LimitObject *)state->limit_type->tp_alloc(state->limit_type, 0);
    if (self == NULL)
        return NULL;
    self->limit = out;
    return (PyObject *)self;
}

/* _redis_going_back(mode, cost, fallback, held_remaining): (mode, cost,
 * settled) to send for a key decided locally during an outage. */
static PyObject *module_redis_going_back(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const cr_limit *fallback = NULL;
    int64_t cost, held;
    const int mode = nargs == 4 ? redis_mode_of(args[0]) : -1;
    if (mode < 0 || to_int64(args[1], &cost) != CONVERTED ||
        (fallback = redis_limit_of(state, args[2])) == NULL ||
        to_int64(args[3], &held) != CONVERTED) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "_redis_going_back(mode, cost, fallback, held_remaining)");
        return NULL;
    }
    cr_redis_mode send;
    bool settled;
    const int64_t sent = cr_redis_going_back((cr_redis_mode)mode, cost, fallback, held, &send,
                                             &settled);
    return Py_BuildValue("(iLO)", (int)send, (long long)sent, settled ? Py_True : Py_False);
}
