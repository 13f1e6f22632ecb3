/*
 * Shared regions: what opening one may report (a changed limit, the system's
 * refusal of the file, a file that is not the region wanted) and
 * inspect_region(), a region read without changing it (docs/design.md §5).
 * Part of module.c's unity build.
 */

/* Opening `path` changed its region's limit from `old`: a RuntimeWarning in
 * the core's words (-1 when warnings are errors and it was raised). */
static int warn_change(PyTypeObject *type, const char *path, const cr_limit *old,
                       const cr_limit *new_limit, int64_t capacity)
{
    const size_t size = CR_CHANGE_DESCRIPTION_MAX + strlen(path);
    char *text = PyMem_Malloc(size);
    if (text == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    cr_change_describe(text, size, type->tp_name, path, old, new_limit, capacity);
    const int result = PyErr_WarnEx(PyExc_RuntimeWarning, text, 1);
    PyMem_Free(text);
    return result;
}

/* A failed construction, by the status's class. With `path` (the shared=
 * argument): a runtime failure other than memory is the system's refusal of
 * the file, OSError (errno and path); a region refusal (the file is not the
 * region wanted) is InvalidArgument naming the path. Anything else (capacity,
 * shared_mode, memory) as raise_status. */
static void raise_construction(module_state *state, cr_status status, PyObject *path)
{
    const cr_status_class status_class = cr_status_class_of(status);
    if (path != NULL && status_class == CR_STATUS_RUNTIME && status != CR_E_NOMEM) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        return;
    }
    if (path == NULL || status_class != CR_STATUS_REGION) {
        raise_status(state, status);
        return;
    }
    PyObject *detail = PyUnicode_FromFormat(": %S", path);
    if (detail == NULL)
        return;
    raise_with_param(state->invalid_argument, status, detail);
    Py_DECREF(detail);
}

/* A rate region's penalty as a dict (after, within, ban, max_ban in
 * seconds), or None (NULL without an error) when it holds none. */
static PyObject *penalty_dict(const cr_region_info *info)
{
    if (!info->has_penalty)
        return NULL;
    return Py_BuildValue("{s:L,s:d,s:d,s:d}", "after", (long long)info->penalty.after, "within",
                         cr_ns_to_seconds(info->penalty.within_ns), "ban",
                         cr_ns_to_seconds(info->penalty.ban_ns), "max_ban",
                         cr_ns_to_seconds(info->penalty.max_ban_ns));
}

/* The keys banned now in the region at `path` (cr_inspect_box): a list of
 * dicts (key: its first bytes as text, key_length, ban_left in seconds,
 * level), or NULL with the error set. */
static PyObject *banned_list(module_state *state, PyObject *path_obj, const char *path)
{
    cr_penalty_entry *entries = NULL;
    size_t room = 0, count = 0;
    cr_status status;
    for (;;) { /* a ban may start between the count and the reading: read again */
        Py_BEGIN_ALLOW_THREADS status = cr_inspect_box(path, entries, room, &count);
        Py_END_ALLOW_THREADS if (status != CR_OK || count <= room) break;
        PyMem_Free(entries);
        room = count + 8;
        entries = PyMem_Malloc(room * sizeof *entries);
        if (entries == NULL)
            return PyErr_NoMemory();
    }
    if (status != CR_OK) {
        PyMem_Free(entries);
        raise_construction(state, status, path_obj);
        return NULL;
    }
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list != NULL && i < count; i++) {
        const cr_penalty_entry *e = &entries[i];
        PyObject *item = Py_BuildValue(
            "{s:N,s:n,s:d,s:L}", "key",
            PyUnicode_DecodeUTF8((const char *)e->key, (Py_ssize_t)e->key_kept, "backslashreplace"),
            "key_length", (Py_ssize_t)e->key_len, "ban_left", cr_ns_to_seconds(e->ban_left_ns),
            "level", (long long)e->level);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    PyMem_Free(entries);
    return list;
}

/* A plan's limit as inspect shows it: rate, period, burst (a dict). */
static PyObject *plan_limit_dict(const cr_limit *limit)
{
    return Py_BuildValue("{s:d,s:d,s:L}", "rate", limit->rate, "period", limit->period_s, "burst",
                         (long long)limit->burst);
}

/* A keyed region's plans (cr_region_info.plans): {name: plan_limit_dict},
 * "default" first; NULL without an error when it holds none but "default". */
static PyObject *plans_dict(const cr_region_info *info)
{
    if (info->plan_count <= 1)
        return NULL;
    PyObject *plans = PyDict_New();
    for (int32_t p = 0; plans && p < info->plan_count; p++) {
        PyObject *one = plan_limit_dict(&info->plans[p].limit);
        if (one == NULL || PyDict_SetItemString(plans, info->plans[p].name, one) < 0)
            Py_CLEAR(plans);
        Py_XDECREF(one);
    }
    return plans;
}

/* inspect_key(path, key) -> dict: `key` of the keyed region at `path`, read
 * without changing it (cr_inspect_key). */
static PyObject *module_inspect_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "inspect_key() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (args[0] == Py_None) {
        raise_wrong_type(state, CR_E_SHARED_PATH);
        return NULL;
    }
    const char *key;
    Py_ssize_t key_len;
    PyObject *path;
    int64_t mode;
    if (convert_key(state, args[1], &key, &key_len) < 0 ||
        convert_shared(state, args[0], Py_None, &path, &mode) < 0)
        return NULL;
    cr_key_info info;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS status = cr_inspect_key(PyBytes_AS_STRING(path), key, (size_t)key_len,
                                                   &info);
    Py_END_ALLOW_THREADS Py_DECREF(path);
    if (status != CR_OK) {
        raise_construction(state, status,
                           cr_status_class_of(status) == CR_STATUS_ARGUMENT ? NULL : args[0]);
        return NULL;
    }
    if (!info.found)
        return Py_BuildValue("{s:O,s:O,s:i,s:O,s:i}", "key", args[1], "plan", Py_None, "used", 0,
                             "remaining", Py_None, "reset_after", 0);
    PyObject *limit = plan_limit_dict(&info.limit);
    if (limit == NULL)
        return NULL;
    PyObject *dict = Py_BuildValue("{s:O,s:s,s:N,s:L,s:L,s:d}", "key", args[1], "plan",
                                   info.plan_name, "limit", limit, "used", (long long)info.used,
                                   "remaining", (long long)info.remaining, "reset_after",
                                   cr_ns_to_seconds(info.reset_after_ns));
    return dict;
}

/* inspect_region(path) -> dict: what a region file holds, read without
 * changing it (cr_inspect_region). */
static PyObject *module_inspect_region(PyObject *module, PyObject *path_obj)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *path;
    int64_t mode;
    if (path_obj == Py_None) {
        raise_wrong_type(state, CR_E_SHARED_PATH);
        return NULL;
    }
    if (convert_shared(state, path_obj, Py_None, &path, &mode) < 0)
        return NULL;
    cr_region_info info;
    cr_status status;
    Py_BEGIN_ALLOW_THREADS status = cr_inspect_region(PyBytes_AS_STRING(path), &info);
    Py_END_ALLOW_THREADS if (status != CR_OK)
    {
        raise_construction(state, status, path_obj);
        Py_DECREF(path);
        return NULL;
    }
    const bool rate = info.algorithm != NULL;
    PyObject *banned = rate ? banned_list(state, path_obj, PyBytes_AS_STRING(path)) : NULL;
    Py_DECREF(path);
    if (rate && banned == NULL)
        return NULL;
    PyObject *stats = rate ? rate_stats_dict(&info.stats) : gauge_stats_dict(&info.gauge_stats);
    PyObject *dict = PyDict_New();
    if (!stats || !dict ||
        dict_put(dict, "layout_version", PyLong_FromUnsignedLong(info.layout_version)) < 0 ||
        dict_put(dict, "kind", PyUnicode_FromString(info.kind)) < 0 ||
        dict_put(dict, "algorithm", rate ? PyUnicode_FromString(info.algorithm) : NULL) < 0 ||
        dict_put(dict, "limit", PyUnicode_FromString(info.description)) < 0 ||
        dict_put(dict, "rate", rate ? PyFloat_FromDouble(info.limit.rate) : NULL) < 0 ||
        dict_put(dict, "period", rate ? PyFloat_FromDouble(info.limit.period_s) : NULL) < 0 ||
        dict_put(dict, "burst", rate ? PyLong_FromLongLong(info.limit.burst) : NULL) < 0 ||
        dict_put(dict, "max_in_flight", rate ? NULL : PyLong_FromLongLong(info.max_in_flight)) <
            0 ||
        dict_put(dict, "lease",
                 info.lease_ns ? PyFloat_FromDouble(cr_ns_to_seconds(info.lease_ns)) : NULL) < 0 ||
        dict_put(dict, "peak", rate ? NULL : PyBool_FromLong(info.gauge_stats.peak_tracked)) < 0 ||
        dict_put(dict, "capacity", info.capacity ? PyLong_FromLongLong(info.capacity) : NULL) < 0 ||
        dict_put(dict, "live_keys", PyLong_FromUnsignedLongLong(info.live_keys)) < 0 ||
        dict_put(dict, "generation", PyLong_FromUnsignedLongLong(info.generation)) < 0 ||
        dict_put(dict, "size", PyLong_FromUnsignedLongLong(info.size)) < 0 ||
        dict_put(dict, "this_boot", PyBool_FromLong(info.this_boot)) < 0 ||
        dict_put(dict, "penalty", rate ? penalty_dict(&info) : NULL) < 0 ||
        dict_put(dict, "banned", banned) < 0 || PyDict_SetItemString(dict, "stats", stats) < 0) {
        Py_XDECREF(stats);
        Py_XDECREF(dict);
        return NULL;
    }
    Py_DECREF(stats);
    PyObject *plans = plans_dict(&info);
    if (plans == NULL && PyErr_Occurred()) {
        Py_DECREF(dict);
        return NULL;
    }
    if (plans != NULL) {
        const int failed = PyDict_SetItemString(dict, "plans", plans);
        Py_DECREF(plans);
        if (failed < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}
