/*
 * The penalty box (docs/design.md §15): a Penalty's values read into the
 * core's cr_penalty, judged by cr_penalty_init; _penalty_check for the
 * Python Penalty's constructor. Part of module.c's unity build.
 */

/* after (a rate string), ban (seconds), max_ban (seconds or None) into
 * `out`, by cr_penalty_init. -1 with the error set. */
static int convert_penalty_parts(module_state *state, PyObject *after, PyObject *ban,
                                 PyObject *max_ban, cr_penalty *out)
{
    if (!PyUnicode_Check(after)) {
        raise_wrong_type(state, CR_E_PENALTY_AFTER);
        return -1;
    }
    size_t len;
    const char *text = utf8_of(state, after, CR_E_PENALTY_AFTER, &len);
    double ban_s, max_ban_s = 0;
    if (text == NULL || convert_number(state, ban, CR_E_PENALTY_BAN, &ban_s) < 0 ||
        (max_ban != Py_None &&
         convert_number(state, max_ban, CR_E_PENALTY_MAX_BAN, &max_ban_s) < 0))
        return -1;
    const cr_status status = cr_penalty_init(out, text, len, ban_s, max_ban_s, max_ban != Py_None);
    if (status != CR_OK) {
        raise_status(state, status);
        return -1;
    }
    return 0;
}

/* `obj`'s after, ban and max_ban (a cellrate.Penalty, or any object with
 * those attributes) into `out`. -1 with the error set. */
static int convert_penalty(module_state *state, PyObject *obj, cr_penalty *out)
{
    PyObject *after = PyObject_GetAttrString(obj, "after");
    PyObject *ban = after ? PyObject_GetAttrString(obj, "ban") : NULL;
    PyObject *max_ban = ban ? PyObject_GetAttrString(obj, "max_ban") : NULL;
    int result = -1;
    if (max_ban == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            raise_wrong_type(state, CR_E_PENALTY);
        }
    } else {
        result = convert_penalty_parts(state, after, ban, max_ban, out);
    }
    Py_XDECREF(after);
    Py_XDECREF(ban);
    Py_XDECREF(max_ban);
    return result;
}

/* _penalty_check(after, ban, max_ban): None, or the core's refusal raised. */
static PyObject *module_penalty_check(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_penalty_check(after, ban, max_ban)");
        return NULL;
    }
    cr_penalty penalty;
    if (convert_penalty_parts(state, args[0], args[1], args[2], &penalty) < 0)
        return NULL;
    Py_RETURN_NONE;
}
