/*
 * The core's checks, lent to the pure-Python parts that decide elsewhere (the
 * Redis stores, the waits, the web policy): each refuses what the compiled
 * stores would, in the same words, and returns the value the core would use.
 * Part of module.c's unity build.
 */

/* _check_timeout(timeout): a wait's `timeout` in seconds, None for any wait,
 * or the core's CR_E_TIMEOUT error (the words Lua's wait() uses). */
static PyObject *module_check_timeout(PyObject *module, PyObject *timeout)
{
    int64_t timeout_ns;
    if (convert_wait_limit((module_state *)PyModule_GetState(module), timeout, CR_E_TIMEOUT,
                           &timeout_ns) < 0)
        return NULL;
    if (timeout_ns == CR_NEVER)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(cr_ns_to_seconds(timeout_ns));
}

/* _check_request(key, cost, now): what a decision of `cost` units of `key` at
 * `now` would refuse, refused in the same words (the Redis store decides by the
 * core's rules elsewhere); the integer ns the core decides at for `now`
 * seconds (rounded by the core), or None when `now` is None. */
static PyObject *module_check_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_check_request(key, cost, now): three arguments");
        return NULL;
    }
    const char *key;
    Py_ssize_t key_len;
    int64_t cost, now_ns;
    if (convert_key(state, args[0], &key, &key_len) < 0 ||
        convert_cost(state, args[1], &cost) < 0 || convert_now(state, args[2], &now_ns) < 0)
        return NULL;
    cr_status status = cr_check_call(now_ns, cost);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (now_ns == CR_CLOCK)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(now_ns);
}

/* _check_hold(limit, key, cost, lease): what a concurrency limit refuses of
 * its limit and lease and of a holding's key (None: no key) and cost, refused
 * in the same words (the Redis store holds units elsewhere); the lease in
 * integer ns, or None when `lease` is None. */
static PyObject *module_check_hold(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_check_hold(limit, key, cost, lease): four arguments");
        return NULL;
    }
    int64_t limit, cost, lease_ns;
    const cr_status wrong_types[2] = {CR_E_LIMIT, CR_E_HOLD_COST};
    int64_t *const numbers[2] = {&limit, &cost};
    PyObject *const objects[2] = {args[0], args[2]};
    for (int i = 0; i < 2; i++)
        switch (to_int64(objects[i], numbers[i])) {
        case CONVERTED:
            break;
        case WRONG_TYPE:
            raise_wrong_type(state, wrong_types[i]);
            return NULL;
        default:
            return NULL;
        }
    const char *key;
    Py_ssize_t key_len;
    if (args[1] != Py_None && convert_key(state, args[1], &key, &key_len) < 0)
        return NULL;
    cr_status status = cr_gauge_check(limit, cost);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    if (args[3] == Py_None)
        Py_RETURN_NONE;
    double lease_s;
    if (convert_number(state, args[3], CR_E_LEASE, &lease_s) < 0)
        return NULL;
    status = cr_lease_from_seconds(lease_s, &lease_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return PyLong_FromLongLong(lease_ns);
}

/* check_policy_name(name): None when cr_headers_format takes `name` (a str,
 * or None: the core's default) as a policy name, else the core's error naming
 * `name`. */
static PyObject *module_check_policy_name(PyObject *module, PyObject *name_obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (name_obj == Py_None)
        Py_RETURN_NONE;
    if (!PyUnicode_Check(name_obj)) {
        raise_wrong_type(state, CR_E_HEADER_NAME);
        return NULL;
    }
    size_t name_len;
    const char *name = utf8_of(state, name_obj, CR_E_HEADER_NAME, &name_len);
    if (name == NULL)
        return NULL;
    if (cr_headers_check_name(name, name_len) != CR_OK) {
        raise_status(state, CR_E_HEADER_NAME);
        return NULL;
    }
    Py_RETURN_NONE;
}
