/*
 * Priorities inside one limit (cellrate/priority.h): what the pure-Python
 * faces (the web policy, the decorator) ask of the core. The classes of a
 * store and a decision's class are read in args.c and store.c.
 * Part of module.c's unity build.
 */

/* _check_priority_items(count): None, or InvalidArgument naming priority
 * when `count` limits decided as one would take a class. */
static PyObject *module_check_priority_items(PyObject *module, PyObject *value)
{
    module_state *state = PyModule_GetState(module);
    int64_t count;
    if (to_int64(value, &count) != CONVERTED || count < 0) {
        raise_wrong_type(state, CR_E_PRIORITY_SEVERAL);
        return NULL;
    }
    const cr_status status = cr_priority_items((size_t)count);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(check_priority_items_doc,
             "_check_priority_items(count, /)\n--\n\n"
             "None, or InvalidArgument naming priority when `count` limits decided as\n"
             "one would take a priority class (they take none).");
