/*
 * Counters and metrics as Python values: a store's or a Concurrency's stats()
 * dict, and metrics(), the one list of metrics every exporter publishes.
 * Part of module.c's unity build.
 */

/* A dict of counters: the fields of CR_STATS_LIST or CR_GAUGE_STATS_LIST,
 * each an int. */
static int stats_set(PyObject *dict, const char *name, long long value)
{
    PyObject *number = PyLong_FromLongLong(value);
    int status = number ? PyDict_SetItemString(dict, name, number) : -1;
    Py_XDECREF(number);
    return status;
}

#define STATS_SET_(name)                                            \
    if (dict && stats_set(dict, #name, (long long)stats->name) < 0) \
        Py_CLEAR(dict);

static PyObject *rate_stats_dict(const cr_stats *stats)
{
    PyObject *dict = PyDict_New();
    CR_STATS_LIST(STATS_SET_)
    return dict;
}

/* peak None when the limit does not track it */
static PyObject *gauge_stats_dict(const cr_gauge_stats *stats)
{
    PyObject *dict = PyDict_New();
    CR_GAUGE_STATS_LIST(STATS_SET_)
    if (dict && !stats->peak_tracked && PyDict_SetItemString(dict, "peak", Py_None) < 0)
        Py_CLEAR(dict);
    return dict;
}

/* {name: {"admitted": n, "refused": n}} of `count` rows, in their order. */
static PyObject *stats_rows_dict(const cr_stats_row *rows, size_t count)
{
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < count; i++) {
        PyObject *row = Py_BuildValue("{s:K,s:K}", "admitted", (unsigned long long)rows[i].admitted,
                                      "refused", (unsigned long long)rows[i].refused);
        if (!row || PyDict_SetItemString(dict, rows[i].name, row) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(row);
    }
    return dict;
}

/* stats_by(): {"plan": rows, "priority": rows}, the metrics' label names. */
static PyObject *stats_by_dict(const cr_stats_by *by)
{
    PyObject *plans = stats_rows_dict(by->plans, by->nplans);
    PyObject *classes = stats_rows_dict(by->priorities, by->npriorities);
    PyObject *dict = plans && classes
                         ? Py_BuildValue("{s:O,s:O}", "plan", plans, "priority", classes)
                         : NULL;
    Py_XDECREF(plans);
    Py_XDECREF(classes);
    return dict;
}

/* dict[name] = value (a new reference, NULL for None), stealing `value`. */
static int dict_put(PyObject *dict, const char *name, PyObject *value)
{
    if (value == NULL && PyErr_Occurred())
        return -1;
    int status = PyDict_SetItemString(dict, name, value ? value : Py_None);
    Py_XDECREF(value);
    return status;
}

/* metrics() -> list: the metrics every exporter publishes (cr_metrics), each
 * a dict of the table's fields; labels as (name, attribute) pairs, samples as
 * (field, label value or None) pairs. */
static PyObject *metric_label(const cr_metric_label *label)
{
    if (label->name == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(ss)", label->name, label->attribute);
}

static PyObject *metric_dict(const cr_metric *metric)
{
    PyObject *labels = PyTuple_New((Py_ssize_t)metric->label_count);
    PyObject *samples = PyTuple_New((Py_ssize_t)metric->sample_count);
    for (size_t i = 0; labels && i < metric->label_count; i++) {
        PyObject *pair = metric_label(&metric->labels[i]);
        if (pair == NULL)
            Py_CLEAR(labels);
        else
            PyTuple_SET_ITEM(labels, (Py_ssize_t)i, pair);
    }
    for (size_t i = 0; samples && i < metric->sample_count; i++) {
        const cr_metric_sample *sample = &metric->samples[i];
        PyObject *pair = Py_BuildValue("(sz)", sample->field, sample->value);
        if (pair == NULL)
            Py_CLEAR(samples);
        else
            PyTuple_SET_ITEM(samples, (Py_ssize_t)i, pair);
    }
    PyObject *dict = labels && samples ? PyDict_New() : NULL;
    if (!dict || dict_put(dict, "name", PyUnicode_FromString(metric->name)) < 0 ||
        dict_put(dict, "prometheus_name", PyUnicode_FromString(metric->prometheus_name)) < 0 ||
        dict_put(dict, "help", PyUnicode_FromString(metric->help)) < 0 ||
        dict_put(dict, "type", PyUnicode_FromString(metric->type)) < 0 ||
        dict_put(dict, "instrument", PyUnicode_FromString(metric->instrument)) < 0 ||
        dict_put(dict, "unit", PyUnicode_FromString(metric->unit)) < 0 ||
        dict_put(dict, "stats", PyUnicode_FromString(metric->stats)) < 0 ||
        PyDict_SetItemString(dict, "labels", labels) < 0 ||
        dict_put(dict, "label", metric_label(&metric->label)) < 0 ||
        dict_put(dict, "by", metric_label(&metric->by)) < 0 ||
        PyDict_SetItemString(dict, "samples", samples) < 0)
        Py_CLEAR(dict);
    Py_XDECREF(labels);
    Py_XDECREF(samples);
    return dict;
}

static PyObject *module_metrics(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    size_t count;
    const cr_metric *metrics = cr_metrics(&count);
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        PyObject *dict = metric_dict(&metrics[i]);
        if (dict == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, dict);
    }
    return list;
}
