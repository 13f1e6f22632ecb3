/*
 * Errors: a core status becomes the exception of its class, with `.param`
 * naming the parameter and the core's message (docs/design.md §6).
 * Part of module.c's unity build.
 */

/* Raises `exc_type` with the core's message for `status` followed by
 * `detail` (NULL: nothing more), `.param` naming the parameter. */
static void raise_with_param(PyObject *exc_type, cr_status status, PyObject *detail)
{
    PyObject *message = detail != NULL ? PyUnicode_FromFormat("%s%U", cr_strerror(status), detail)
                                       : PyUnicode_FromString(cr_strerror(status));
    if (message == NULL)
        return;
    PyObject *exc = PyObject_CallOneArg(exc_type, message);
    Py_DECREF(message);
    if (exc == NULL)
        return;
    PyObject *param = PyUnicode_FromString(cr_status_param(status));
    if (param != NULL && PyObject_SetAttrString(exc, "param", param) == 0)
        PyErr_SetObject(exc_type, exc);
    Py_XDECREF(param);
    Py_DECREF(exc);
}

/* A status the core returned, by its class (cr_status_class_of): an
 * argument mistake is InvalidArgument; a runtime failure is MemoryError for
 * memory, else (a region's lock held past its bound) TimeoutError. */
static void raise_status(module_state *state, cr_status status)
{
    if (cr_status_class_of(status) != CR_STATUS_RUNTIME)
        raise_with_param(state->invalid_argument, status, NULL);
    else if (status == CR_E_NOMEM)
        PyErr_NoMemory();
    else
        raise_with_param(PyExc_TimeoutError, status, NULL);
}

/* An argument of a type the parameter never takes; `status` names it. */
static void raise_wrong_type(module_state *state, cr_status status)
{
    raise_with_param(state->invalid_argument_type, status, NULL);
}

/* Replaces the pending error (the system's words for a str it cannot
 * encode, or a path it cannot take) by InvalidArgument for `status`, with the
 * original as its __cause__. */
static PyObject *take_error(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value != NULL && traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

static void raise_instead(module_state *state, cr_status status)
{
    PyObject *cause = take_error();
    PyObject *detail = PyUnicode_FromFormat(" (%S)", cause);
    if (detail != NULL) {
        raise_with_param(state->invalid_argument, status, detail);
        Py_DECREF(detail);
        PyObject *exc = take_error();
        if (exc != NULL) {
            PyException_SetCause(exc, cause); /* steals the reference */
            cause = NULL;
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    }
    Py_XDECREF(cause);
}
