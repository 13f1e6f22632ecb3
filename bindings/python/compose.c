/*
 * check_all(): several limits decided as one (docs/design.md §8).
 * Part of module.c's unity build.
 */

/* An item of check_all: a Limiter, or a (KeyedLimiter, key) or
 * (KeyedLimiter, key, plan) tuple (plan as plan= takes it: None for
 * "default"). The key points into `item_obj`, which the caller's sequence
 * keeps alive. */
static int convert_item(module_state *state, PyObject *item_obj, cr_item *item)
{
    memset(item, 0, sizeof *item);
    if (Py_IS_TYPE(item_obj, state->limiter_type)) {
        item->limiter = ((StoreObject *)item_obj)->limiter;
        return 0;
    }
    if (PyTuple_Check(item_obj) &&
        (PyTuple_GET_SIZE(item_obj) == 2 || PyTuple_GET_SIZE(item_obj) == 3) &&
        Py_IS_TYPE(PyTuple_GET_ITEM(item_obj, 0), state->keyed_type)) {
        const char *key;
        Py_ssize_t key_len;
        item->keyed = ((StoreObject *)PyTuple_GET_ITEM(item_obj, 0))->keyed;
        if (convert_key(state, PyTuple_GET_ITEM(item_obj, 1), &key, &key_len) < 0 ||
            (PyTuple_GET_SIZE(item_obj) == 3 &&
             convert_plan(state, PyTuple_GET_ITEM(item_obj, 2), item->keyed, &item->plan) < 0))
            return -1;
        item->key = key;
        item->key_len = (size_t)key_len;
        return 0;
    }
    raise_wrong_type(state, CR_E_ITEMS);
    return -1;
}

/* check_all(items, cost=1, *, now=None) -> Decision; with the private
 * _dry_run=True, a refusal is counted as would_refuse (the web policy's). */
static PyObject *module_check_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    static const char *const keywords[] = {"items", "cost", "now", "_dry_run", NULL};
    PyObject *given[4] = {NULL, NULL, NULL, NULL};
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "check_all() takes at most 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        int k = 0;
        while (keywords[k] &&
               PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), keywords[k]) != 0)
            k++;
        if (!keywords[k] || given[k] != NULL) {
            PyErr_Format(PyExc_TypeError, "check_all() got %s argument '%U'",
                         keywords[k] ? "multiple values for" : "an unexpected keyword",
                         PyTuple_GET_ITEM(kwnames, i));
            return NULL;
        }
        given[k] = args[nargs + i];
    }
    if (given[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "check_all() missing required argument 'items' (pos 1)");
        return NULL;
    }
    int64_t cost, now_ns;
    if (convert_cost(state, given[1], &cost) < 0 || convert_now(state, given[2], &now_ns) < 0)
        return NULL;
    if (!PyList_Check(given[0]) && !PyTuple_Check(given[0])) {
        raise_wrong_type(state, CR_E_ITEMS);
        return NULL;
    }
    PyObject *items = PySequence_Fast(given[0], "items");
    if (items == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    cr_item few[8], *many = count > 8 ? PyMem_Malloc((size_t)count * sizeof *many) : few;
    PyObject *result = NULL;
    if (many == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (convert_item(state, PySequence_Fast_GET_ITEM(items, i), &many[i]) < 0)
            goto done;
    cr_decision decision;
    size_t index = 0;
    cr_status status = cr_check_all(many, (size_t)count, now_ns, cost, &decision, &index);
    if (status == CR_OK && !decision.allowed && given[3] != NULL && PyObject_IsTrue(given[3]) == 1)
        cr_item_would_refuse(&many[index], cost);
    if (status != CR_OK)
        raise_status(state, status);
    else /* the window is that of the item whose decision this is */
        result = decision_from(state, &decision,
                               many[index].limiter != NULL
                                   ? cr_limiter_limit(many[index].limiter)
                                   : cr_keyed_plan_limit(many[index].keyed, many[index].plan));
done:
    if (many != few)
        PyMem_Free(many);
    Py_DECREF(items);
    return result;
}
