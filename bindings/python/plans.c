/*
 * Plans (cellrate/plans.h): what the pure-Python faces (the web policy, the
 * decorator) ask of the core. A store's plan table and a decision's plan are
 * read in args.c and store.c.
 * Part of module.c's unity build.
 */

/* _check_plan_items(count, keyed, named): None, or InvalidArgument naming
 * plan or plans where a plan is taken by what cannot take one. */
static PyObject *module_check_plan_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_check_plan_items(count, keyed, named)");
        return NULL;
    }
    module_state *state = PyModule_GetState(module);
    int64_t count;
    const int keyed = PyObject_IsTrue(args[1]);
    const int named = PyObject_IsTrue(args[2]);
    if (keyed < 0 || named < 0)
        return NULL;
    if (to_int64(args[0], &count) != CONVERTED || count < 0) {
        raise_wrong_type(state, named ? CR_E_PLAN_SEVERAL : CR_E_PLANS_KEYED);
        return NULL;
    }
    const cr_status status = cr_plan_items((size_t)count, keyed, named);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(check_plan_items_doc,
             "_check_plan_items(count, keyed, named, /)\n--\n\n"
             "None, or InvalidArgument naming plan (`named`: a request names a plan) or\n"
             "plans (a plan table is given) when `count` limits decided as one, with\n"
             "keys or not (`keyed`), cannot take it: several limits as one take no plan,\n"
             "and plans are a keyed limit's.");
