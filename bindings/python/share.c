/*
 * The fleet share's member rules (core/cellrate/share.h), lent to
 * cellrate.share, which does the heartbeat's I/O and keeps the member's state.
 * Private: each function takes what the share already holds (its fleet
 * Limit, its share, its counters' dict) and translates the core's answer.
 * Part of module.c's unity build.
 */

/* The fleet: a cellrate.Limit. */
static const cr_limit *share_fleet(module_state *state, PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, state->limit_type)) {
        PyErr_Format(PyExc_TypeError, "the fleet must be a cellrate.Limit, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return &((LimitObject *)obj)->limit;
}

/* A float of the private calls: a number, else TypeError naming `what`. */
static int share_double(PyObject *obj, const char *what, double *out)
{
    switch (to_double(obj, out)) {
    case CONVERTED:
        return 0;
    case WRONG_TYPE:
        PyErr_Format(PyExc_TypeError, "%s must be a number, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    default:
        return -1;
    }
}

static int share_args(Py_ssize_t nargs, Py_ssize_t want, const char *signature)
{
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: %zd arguments", signature, want);
    return -1;
}

/* _share_limit(fleet, share) -> (rate, period, burst): the local limit. */
static PyObject *module_share_limit(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    double share;
    if (share_args(nargs, 2, "_share_limit(fleet, share)") < 0)
        return NULL;
    const cr_limit *fleet = share_fleet(state, args[0]);
    if (fleet == NULL || share_double(args[1], "share", &share) < 0)
        return NULL;
    cr_limit local;
    const cr_status status = cr_share_local_limit(fleet, share, &local);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return Py_BuildValue("(ddL)", local.rate, local.period_s, (long long)local.burst);
}

/* _share_of(fleet, rate, period) -> the share a local limit is. */
static PyObject *module_share_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    double rate, period;
    if (share_args(nargs, 3, "_share_of(fleet, rate, period)") < 0)
        return NULL;
    const cr_limit *fleet = share_fleet(state, args[0]);
    if (fleet == NULL || share_double(args[1], "rate", &rate) < 0 ||
        share_double(args[2], "period", &period) < 0)
        return NULL;
    return PyFloat_FromDouble(cr_share_of_rate(fleet, rate, period));
}

/* An unsigned count of the private calls: an int >= 0. */
static int share_count(PyObject *obj, const char *what, uint64_t *out)
{
    int64_t value;
    switch (to_int64(obj, &value)) {
    case CONVERTED:
        if (value >= 0) {
            *out = (uint64_t)value;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "%s must be an int >= 0", what);
        return -1;
    case WRONG_TYPE:
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    default:
        return -1;
    }
}

/* _share_asked(stats, baseline) -> (asked, counted): the units asked since
 * `baseline`, from a stats() dict, and the next baseline. */
static PyObject *module_share_asked(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (share_args(nargs, 2, "_share_asked(stats, baseline)") < 0)
        return NULL;
    static const char *const fields[3] = {"units_admitted", "units_refused", "units_refunded"};
    uint64_t counts[3], baseline;
    for (int i = 0; i < 3; i++) {
        PyObject *value = PyMapping_GetItemString(args[0], fields[i]);
        const int failed = value == NULL || share_count(value, fields[i], &counts[i]) < 0;
        Py_XDECREF(value);
        if (failed)
            return NULL;
    }
    if (share_count(args[1], "baseline", &baseline) < 0)
        return NULL;
    const cr_stats stats = {
        .units_admitted = counts[0], .units_refused = counts[1], .units_refunded = counts[2]};
    uint64_t counted;
    const uint64_t asked = cr_share_asked(&stats, baseline, &counted);
    return Py_BuildValue("(KK)", (unsigned long long)asked, (unsigned long long)counted);
}

/* _share_report(fleet, asked, elapsed, known, share, joined) -> (demand, held,
 * fleet_rate): a heartbeat's numbers. */
static PyObject *module_share_report(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    double asked, elapsed, share;
    if (share_args(nargs, 6, "_share_report(fleet, asked, elapsed, known, share, joined)") < 0)
        return NULL;
    const cr_limit *fleet = share_fleet(state, args[0]);
    if (fleet == NULL || share_double(args[1], "asked", &asked) < 0 ||
        share_double(args[2], "elapsed", &elapsed) < 0 ||
        share_double(args[4], "share", &share) < 0)
        return NULL;
    const int known = PyObject_IsTrue(args[3]), joined = PyObject_IsTrue(args[5]);
    if (known < 0 || joined < 0)
        return NULL;
    const cr_share_report report = cr_share_report_of(fleet, asked, elapsed, known, share, joined);
    return Py_BuildValue("(ddd)", report.demand, report.held, report.fleet_rate);
}

/* A reply's decimal text: bytes or str, else NULL (not the script's). */
static const char *share_text(PyObject *obj, Py_ssize_t *len)
{
    if (PyBytes_Check(obj)) {
        *len = PyBytes_GET_SIZE(obj);
        return PyBytes_AS_STRING(obj);
    }
    if (PyUnicode_Check(obj)) {
        const char *text = PyUnicode_AsUTF8AndSize(obj, len);
        if (text == NULL)
            PyErr_Clear(); /* a lone surrogate: not the script's either */
        return text;
    }
    return NULL;
}

/* _share_reply(reply) -> (share, members, target): the script's reply read;
 * CellrateError with the core's words for anything else. */
static PyObject *module_share_reply(PyObject *module, PyObject *reply)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    cr_share_reply read;
    cr_status status = CR_E_SHARE_REPLY;
    if ((PyList_Check(reply) || PyTuple_Check(reply)) && PySequence_Fast_GET_SIZE(reply) == 3) {
        PyObject **items = PySequence_Fast_ITEMS(reply);
        Py_ssize_t share_len = 0, target_len = 0;
        const char *share = share_text(items[0], &share_len);
        const char *target = share_text(items[2], &target_len);
        int64_t members = 0;
        if (share != NULL && target != NULL && to_int64(items[1], &members) == CONVERTED)
            status = cr_share_read_reply(share, (size_t)share_len, members, target,
                                         (size_t)target_len, &read);
        else if (PyErr_Occurred())
            return NULL;
    }
    if (status != CR_OK) {
        raise_with_param(state->error, status, NULL);
        return NULL;
    }
    return Py_BuildValue("(dLd)", read.share, (long long)read.members, read.target);
}

/* _share_after(outcome, share, joined, held, answered) -> (share, apply,
 * confirm): what the member does after a heartbeat's outcome (a name of
 * cr_share_outcome_name). */
static PyObject *module_share_after(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    double share, held, answered;
    if (share_args(nargs, 5, "_share_after(outcome, share, joined, held, answered)") < 0)
        return NULL;
    const char *name = PyUnicode_Check(args[0]) ? PyUnicode_AsUTF8(args[0]) : NULL;
    int outcome = 0;
    while (name != NULL && outcome < CR_SHARE_OUTCOMES &&
           strcmp(cr_share_outcome_name((cr_share_outcome)outcome), name) != 0)
        outcome++;
    if (name == NULL || outcome == CR_SHARE_OUTCOMES) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "outcome must be a name of an outcome, not %R", args[0]);
        return NULL;
    }
    const int joined = PyObject_IsTrue(args[2]);
    if (joined < 0 || share_double(args[1], "share", &share) < 0 ||
        share_double(args[3], "held", &held) < 0 ||
        share_double(args[4], "answered", &answered) < 0)
        return NULL;
    const cr_share_step step = cr_share_after((cr_share_outcome)outcome, share, joined, held,
                                              answered);
    return Py_BuildValue("(dOO)", step.share, step.apply ? Py_True : Py_False,
                         step.confirm ? Py_True : Py_False);
}

/* The constants of the share (cellrate.share's FLOOR_DIVISOR and start share). */
static int share_add_constants(PyObject *module)
{
    PyObject *cold_start = PyFloat_FromDouble(CR_SHARE_COLD_START);
    if (cold_start == NULL || PyModule_AddObject(module, "_SHARE_COLD_START", cold_start) < 0) {
        Py_XDECREF(cold_start);
        return -1;
    }
    return PyModule_AddIntConstant(module, "_SHARE_FLOOR_DIVISOR", CR_SHARE_FLOOR_DIVISOR);
}
