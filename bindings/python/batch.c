/*
 * Redis batches (core/cellrate/redis.h, cr_redis_batch): several decisions in
 * one script call, lent to cellrate.redis, which does the transport. Converts,
 * calls the core and converts back (docs/design/redis.md, "Batches"). Part of
 * module.c's unity build, after redis.c.
 */

/* The calls of `seq` (each (mode, cost, limit, prefix, name, key, ...), the
 * mode perhaps with WIPE_MARKER, and with PENALTY or'ed in the penalty last)
 * as the core's, their items in `items` and penalties in `penalties` (PyMem;
 * the caller frees). */
static int batch_calls_of(module_state *state, PyObject *seq, cr_redis_call *calls, size_t ncalls,
                          cr_redis_item **items, cr_penalty **penalties)
{
    size_t total = 0;
    for (size_t i = 0; i < ncalls; i++) {
        PyObject *call = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
        Py_ssize_t n = PyTuple_Check(call) ? PyTuple_GET_SIZE(call) : 0;
        if (n > 0 && PyLong_Check(PyTuple_GET_ITEM(call, 0)) &&
            (PyLong_AsLong(PyTuple_GET_ITEM(call, 0)) & CR_REDIS_PENALTY) != 0)
            n--; /* its penalty */
        if (n < 6 || (n - 2) % 4 != 0 || (n - 2) / 4 > REDIS_LIMITS_MAX) {
            PyErr_SetString(PyExc_TypeError, "a call: (mode, cost, limit, prefix, name, key, ...)");
            return -1;
        }
        total += (size_t)(n - 2) / 4;
    }
    if ((*items = PyMem_Calloc(total, sizeof **items)) == NULL ||
        (*penalties = PyMem_Calloc(ncalls > 0 ? ncalls : 1, sizeof **penalties)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t at = 0;
    for (size_t i = 0; i < ncalls; i++) {
        PyObject *call = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
        PyObject *const *args = &PyTuple_GET_ITEM(call, 0);
        bool marked, penalized;
        const int mode = redis_request_mode_of(args[0], &marked, &penalized);
        if (mode < 0 || redis_cost_of(state, args[1], mode, &calls[i].cost) < 0)
            return -1;
        const Py_ssize_t n = PyTuple_GET_SIZE(call) - (penalized ? 1 : 0);
        if (penalized && redis_penalty_of(args[n], &(*penalties)[i]) < 0)
            return -1;
        calls[i].mode = (cr_redis_mode)((unsigned)mode | (marked ? CR_REDIS_WIPE_MARKER : 0u));
        calls[i].items = *items + at;
        calls[i].nitems = (size_t)(n - 2) / 4;
        for (size_t j = 0; j < calls[i].nitems; j++, at++) {
            PyObject *const *group = args + 2 + 4 * j;
            cr_redis_item *item = &(*items)[at];
            Py_ssize_t key_len;
            item->limit = redis_limit_of(state, group[0]);
            if (item->limit == NULL ||
                (item->prefix = redis_text_of(state, group[1], &item->prefix_len)) == NULL ||
                (item->name = redis_text_of(state, group[2], &item->name_len)) == NULL ||
                convert_key(state, group[3], &item->key, &key_len) < 0)
                return -1;
            item->key_len = (size_t)key_len;
            item->penalty = penalized && j == 0 ? &(*penalties)[i] : NULL;
        }
    }
    return 0;
}

/* The words of a batch of `calls` at `now` (cr_redis_batch): NULL with an
 * exception, else `words` and `count` in the returned buffer (PyMem, as
 * *words; the caller frees both). */
static char *batch_words_of(module_state *state, PyObject *now, PyObject *calls_arg,
                            cr_redis_word **words, size_t *count)
{
    PyObject *seq = PySequence_Fast(calls_arg, "_redis_batch(now, calls): calls is a list");
    if (seq == NULL)
        return NULL;
    const size_t ncalls = (size_t)PySequence_Fast_GET_SIZE(seq);
    int64_t now_ns;
    cr_redis_call *calls = PyMem_Calloc(ncalls > 0 ? ncalls : 1, sizeof *calls);
    cr_redis_item *items = NULL;
    cr_penalty *penalties = NULL;
    char *buf = NULL;
    *words = NULL;
    if (calls == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (batch_calls_of(state, seq, calls, ncalls, &items, &penalties) < 0 ||
        convert_now(state, now, &now_ns) < 0)
        goto done;
    size_t nitems = 0;
    for (size_t i = 0; i < ncalls; i++)
        nitems += calls[i].nitems;
    const size_t size = cr_redis_batch_size(calls, ncalls);
    if (size == SIZE_MAX || (buf = PyMem_Malloc(size > 0 ? size : 1)) == NULL ||
        (*words = PyMem_Calloc(CR_REDIS_BATCH_WORDS(ncalls, nitems), sizeof **words)) == NULL) {
        PyErr_NoMemory();
        PyMem_Free(buf);
        buf = NULL;
        goto done;
    }
    const cr_status status = cr_redis_batch(calls, ncalls, now_ns, buf, size, *words, count, NULL);
    if (status != CR_OK) {
        redis_raise(state, status);
        PyMem_Free(buf);
        buf = NULL;
    }
done:
    if (buf == NULL) {
        PyMem_Free(*words);
        *words = NULL;
    }
    PyMem_Free(items);
    PyMem_Free(penalties);
    PyMem_Free(calls);
    Py_DECREF(seq);
    return buf;
}

/*
 * _redis_batch(now, calls): the words after EVALSHA and the batch script's SHA
 * of the decisions `calls` (a list of (mode, cost, limit, prefix, name, key,
 * ...) tuples, as _redis_request's arguments), each at `now`: a list of bytes.
 */
static PyObject *module_redis_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_redis_batch(now, calls)");
        return NULL;
    }
    cr_redis_word *words;
    size_t count = 0;
    char *buf = batch_words_of(state, args[0], args[1], &words, &count);
    if (buf == NULL)
        return NULL;
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list != NULL && i < count; i++) {
        PyObject *word = PyBytes_FromStringAndSize(buf + words[i].offset, (Py_ssize_t)words[i].len);
        if (word == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, word);
    }
    PyMem_Free(buf);
    PyMem_Free(words);
    return list;
}

/*
 * _redis_batch_command(sha, now, calls): the whole command EVALSHA sha and
 * _redis_batch(now, calls)'s words, as bytes a connection sends as they are
 * (the core's cr_redis_command): no word packed by the client library.
 */
static PyObject *module_redis_batch_command(PyObject *module, PyObject *const *args,
                                            Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_redis_batch_command(sha: bytes, now, calls)");
        return NULL;
    }
    cr_redis_word *words;
    size_t count = 0;
    char *buf = batch_words_of(state, args[1], args[2], &words, &count);
    if (buf == NULL)
        return NULL;
    const char *head[2] = {"EVALSHA", PyBytes_AS_STRING(args[0])};
    const size_t head_len[2] = {7, (size_t)PyBytes_GET_SIZE(args[0])};
    const size_t size = cr_redis_command(head, head_len, 2, buf, words, count, NULL, 0);
    PyObject *command = size == SIZE_MAX || size > PY_SSIZE_T_MAX
                            ? PyErr_NoMemory()
                            : PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (command != NULL)
        cr_redis_command(head, head_len, 2, buf, words, count, PyBytes_AS_STRING(command), size);
    PyMem_Free(buf);
    PyMem_Free(words);
    return command;
}

/* _redis_batch_reply(ncalls, reply): None when `reply` is a batch's reply to
 * `ncalls` decisions (a list of one element each), else CellrateError. */
static PyObject *module_redis_batch_reply(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    const Py_ssize_t ncalls = nargs == 2 ? PyLong_AsSsize_t(args[0]) : -1;
    if (ncalls < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_redis_batch_reply(ncalls, reply)");
        return NULL;
    }
    const bool is_list = PyList_Check(args[1]);
    const cr_status status = cr_redis_batch_reply((size_t)ncalls, is_list,
                                                  is_list ? (size_t)PyList_GET_SIZE(args[1]) : 0);
    if (status != CR_OK) {
        redis_raise(state, status);
        return NULL;
    }
    Py_RETURN_NONE;
}
