/*
 * calendar_period: the period of a zone that holds an instant (docs/design.md
 * §19), the core's cr_period_bounds in seconds of the realtime clock.
 * Part of module.c's unity build.
 */

PyDoc_STRVAR(calendar_period_doc,
             "calendar_period(tz, period, now=None)\n--\n\n"
             "The start and end, in seconds since the Unix epoch, of the calendar\n"
             "period ('day', 'week', 'month', 'year' or a multiple: '3 months') of\n"
             "the IANA zone tz that holds now (default: the realtime clock).");

static PyObject *module_calendar_period(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"tz", "period", "now", NULL};
    module_state *state = (module_state *)PyModule_GetState(module);
    PyObject *tz, *period_obj, *now = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:calendar_period", keywords, &tz,
                                     &period_obj, &now))
        return NULL;
    const cr_zone *zone = NULL;
    const char *period_text = NULL;
    size_t period_len = 0;
    if (tz == Py_None) {
        raise_wrong_type(state, CR_E_TZ);
        return NULL;
    }
    if (convert_zone(state, tz, &zone) < 0 ||
        convert_optional_name(state, period_obj, CR_E_CALENDAR_PERIOD, &period_text, &period_len) <
            0)
        return NULL;
    cr_period period;
    cr_status status = period_text ? cr_parse_period(period_text, period_len, &period)
                                   : CR_E_CALENDAR_PERIOD;
    int64_t now_ns = 0, start_ns = 0, end_ns = 0;
    if (status == CR_OK) {
        if (now == Py_None) {
            now_ns = cr_realtime_ns();
        } else {
            double seconds;
            if (convert_number(state, now, CR_E_NOW, &seconds) < 0)
                return NULL;
            status = cr_seconds_to_ns(seconds, &now_ns);
        }
    }
    if (status == CR_OK)
        status = cr_period_bounds(zone, period, now_ns, &start_ns, &end_ns);
    if (status != CR_OK) {
        raise_status(state, status);
        return NULL;
    }
    return Py_BuildValue("(dd)", cr_ns_to_seconds(start_ns), cr_ns_to_seconds(end_ns));
}
