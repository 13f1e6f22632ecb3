/*
 * cellrate._cellrate: the CPython face of the core (docs/design.md §6).
 *
 * Each function converts Python objects to the core's types, calls the core,
 * and converts the result or status back. Validation, defaults, rate parsing
 * and every message come from the core, so Python and Lua reject the same
 * inputs with the same words.
 *
 * Multi-phase init (PEP 489) with heap types and exceptions in module state.
 * The objects hold no Python references and never change after construction,
 * and the core is thread-safe on its own, so the module declares that it does
 * not need the GIL.
 *
 * The face is one translation unit, built from this file (setup.py): the
 * parts below, one per concept, are included in order, each using only what
 * the ones before it define, so that the compiler sees the whole face at once
 * and the decision methods inline what they call.
 */
#include "binding.h"

#include "docs.h"

#include "errors.c"
#include "args.c"
#include "stats.c"
#include "region.c"
#include "decision.c"
#include "limit.c"
#include "calendar.c"
#include "waits.c"
#include "follow.c"
#include "penalty.c"
#include "store.c"
#include "compose.c"
#include "concurrency.c"
#include "checks.c"
#include "options.c"
#include "redis.c"
#include "batch.c"
#include "share.c"
#include "web.c"
#include "priority.c"

/* Adds `value` under `name`; the module takes its own reference. */
static int add_object(PyObject *module, const char *name, PyObject *value)
{
    Py_INCREF(value);
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}

static PyTypeObject *add_type(PyObject *module, PyType_Spec *spec)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL)
        return NULL;
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

/* A new exception class with bases `bases` and `param` defaulting to "". */
static PyObject *new_exception(const char *name, const char *doc, PyObject *bases)
{
    PyObject *dict = Py_BuildValue("{ss}", "param", "");
    if (dict == NULL)
        return NULL;
    PyObject *exc = PyErr_NewExceptionWithDoc(name, doc, bases, dict);
    Py_DECREF(dict);
    return exc;
}

static PyObject *new_exception_leaf(const char *name, const char *doc, PyObject *base,
                                    PyObject *builtin)
{
    PyObject *bases = PyTuple_Pack(2, base, builtin);
    if (bases == NULL)
        return NULL;
    PyObject *exc = new_exception(name, doc, bases);
    Py_DECREF(bases);
    return exc;
}

static int cellrate_exec(PyObject *module)
{
    module_state *state = (module_state *)PyModule_GetState(module);

    state->decision_type = add_type(module, &decision_spec);
    if (state->decision_type == NULL)
        return -1;
    state->limit_type = add_type(module, &limit_spec);
    if (state->limit_type == NULL)
        return -1;
    state->limiter_type = add_type(module, &limiter_spec);
    if (state->limiter_type == NULL)
        return -1;
    state->keyed_type = add_type(module, &keyed_spec);
    if (state->keyed_type == NULL)
        return -1;
    state->concurrency_type = add_type(module, &concurrency_spec);
    if (state->concurrency_type == NULL)
        return -1;
    state->slot_type = add_type(module, &slot_spec);
    if (state->slot_type == NULL)
        return -1;
    state->wait_plan_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &wait_plan_spec, NULL);
    if (state->wait_plan_type == NULL)
        return -1;
#if PY_VERSION_HEX < 0x030A0000
    state->wait_plan_type->tp_new = NULL; /* made by _wait_plan only */
#endif
    state->client_keys_type = add_type(module, &client_keys_spec);
    if (state->client_keys_type == NULL)
        return -1;

    state->error = new_exception("cellrate.CellrateError", error_doc, PyExc_Exception);
    if (state->error == NULL || add_object(module, "CellrateError", state->error) < 0)
        return -1;
    state->invalid_argument = new_exception_leaf("cellrate.InvalidArgument", invalid_argument_doc,
                                                 state->error, PyExc_ValueError);
    if (state->invalid_argument == NULL ||
        add_object(module, "InvalidArgument", state->invalid_argument) < 0)
        return -1;
    state->invalid_argument_type = new_exception_leaf(
        "cellrate.InvalidArgumentType", invalid_argument_type_doc, state->error, PyExc_TypeError);
    if (state->invalid_argument_type == NULL ||
        add_object(module, "InvalidArgumentType", state->invalid_argument_type) < 0)
        return -1;

    if (share_add_constants(module) < 0)
        return -1;
    return PyModule_AddStringConstant(module, "__version__", cr_version());
}

static int cellrate_traverse(PyObject *module, visitproc visit, void *arg)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_VISIT(state->decision_type);
    Py_VISIT(state->limit_type);
    Py_VISIT(state->limiter_type);
    Py_VISIT(state->keyed_type);
    Py_VISIT(state->concurrency_type);
    Py_VISIT(state->slot_type);
    Py_VISIT(state->client_keys_type);
    Py_VISIT(state->wait_plan_type);
    Py_VISIT(state->error);
    Py_VISIT(state->invalid_argument);
    Py_VISIT(state->invalid_argument_type);
    for (int i = 0; i < PYTHON_METHODS; i++)
        Py_VISIT(state->python_method[i]);
    return 0;
}

static int cellrate_clear(PyObject *module)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    Py_CLEAR(state->decision_type);
    Py_CLEAR(state->limit_type);
    Py_CLEAR(state->limiter_type);
    Py_CLEAR(state->keyed_type);
    Py_CLEAR(state->concurrency_type);
    Py_CLEAR(state->slot_type);
    Py_CLEAR(state->client_keys_type);
    Py_CLEAR(state->wait_plan_type);
    Py_CLEAR(state->error);
    Py_CLEAR(state->invalid_argument);
    Py_CLEAR(state->invalid_argument_type);
    for (int i = 0; i < PYTHON_METHODS; i++)
        Py_CLEAR(state->python_method[i]);
    return 0;
}

static void cellrate_free(void *module) { (void)cellrate_clear((PyObject *)module); }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

static PyMethodDef cellrate_methods[] = {
    {"check_all", (PyCFunction)(void (*)(void))module_check_all, METH_FASTCALL | METH_KEYWORDS,
     check_all_doc},
    {"_set_waits", module_set_waits, METH_O, set_waits_doc},
    {"_check_timeout", module_check_timeout, METH_O, check_timeout_doc},
    {"_wait_plan", (PyCFunction)(void (*)(void))module_wait_plan, METH_FASTCALL, wait_plan_doc},
    {"_check_request", (PyCFunction)(void (*)(void))module_check_request, METH_FASTCALL,
     check_request_doc},
    {"_check_hold", (PyCFunction)(void (*)(void))module_check_hold, METH_FASTCALL, check_hold_doc},
    {"_check_options", (PyCFunction)(void (*)(void))module_check_options, METH_FASTCALL,
     check_options_doc},
    {"_options", module_options, METH_O, options_doc},
    {"_parse_rates", module_parse_rates, METH_VARARGS, parse_rates_doc},
    {"_check_zoned", module_check_zoned, METH_VARARGS, check_zoned_doc},
    {"_algorithm_takes_burst", module_algorithm_takes_burst, METH_O, algorithm_takes_burst_doc},
    {"_penalty_check", (PyCFunction)(void (*)(void))module_penalty_check, METH_FASTCALL,
     penalty_check_doc},
    {"check_policy_name", module_check_policy_name, METH_O, check_policy_name_doc},
    {"read_signal", (PyCFunction)(void (*)(void))module_read_signal, METH_VARARGS | METH_KEYWORDS,
     read_signal_doc},
    {"_check_retry", (PyCFunction)(void (*)(void))module_check_retry, METH_FASTCALL,
     check_retry_doc},
    {"_retry_wait", (PyCFunction)(void (*)(void))module_retry_wait, METH_FASTCALL, retry_wait_doc},
    {"_redis_request", (PyCFunction)(void (*)(void))module_redis_request, METH_FASTCALL,
     redis_request_doc},
    {"_redis_reply", (PyCFunction)(void (*)(void))module_redis_reply, METH_FASTCALL,
     redis_reply_doc},
    {"_redis_remember", (PyCFunction)(void (*)(void))module_redis_remember, METH_FASTCALL,
     redis_remember_doc},
    {"_redis_recall", (PyCFunction)(void (*)(void))module_redis_recall, METH_FASTCALL,
     redis_recall_doc},
    {"_redis_unavailable", (PyCFunction)(void (*)(void))module_redis_unavailable, METH_FASTCALL,
     redis_unavailable_doc},
    {"_redis_backoff", module_redis_backoff, METH_O, redis_backoff_doc},
    {"_redis_fallback_check", (PyCFunction)(void (*)(void))module_redis_fallback_check,
     METH_FASTCALL, redis_fallback_check_doc},
    {"_redis_check_items", module_redis_check_items, METH_O, redis_check_items_doc},
    {"_redis_check_change", (PyCFunction)(void (*)(void))module_redis_check_change, METH_FASTCALL,
     redis_check_change_doc},
    {"_redis_fallback_limit", (PyCFunction)(void (*)(void))module_redis_fallback_limit,
     METH_FASTCALL, redis_fallback_limit_doc},
    {"_redis_going_back", (PyCFunction)(void (*)(void))module_redis_going_back, METH_FASTCALL,
     redis_going_back_doc},
    {"_redis_key", (PyCFunction)(void (*)(void))module_redis_key, METH_FASTCALL, redis_key_doc},
    {"_redis_check_limit", module_redis_check_limit, METH_O, redis_check_limit_doc},
    {"_redis_plans", (PyCFunction)(void (*)(void))module_redis_plans, METH_FASTCALL,
     redis_plans_doc},
    {"_redis_plan", (PyCFunction)(void (*)(void))module_redis_plan, METH_FASTCALL, redis_plan_doc},
    {"_redis_penalty", module_redis_penalty, METH_O, redis_penalty_doc},
    {"_redis_penalty_key", (PyCFunction)(void (*)(void))module_redis_penalty_key, METH_FASTCALL,
     redis_penalty_key_doc},
    {"_redis_signature", module_redis_signature, METH_O, redis_signature_doc},
    {"_redis_classify", (PyCFunction)(void (*)(void))module_redis_classify, METH_FASTCALL,
     redis_classify_doc},
    {"_redis_slots_message", (PyCFunction)(void (*)(void))module_redis_slots_message, METH_FASTCALL,
     redis_slots_message_doc},
    {"_redis_protocol", module_redis_protocol, METH_NOARGS, redis_protocol_doc},
    {"_redis_batch", (PyCFunction)(void (*)(void))module_redis_batch, METH_FASTCALL,
     redis_batch_doc},
    {"_redis_batch_command", (PyCFunction)(void (*)(void))module_redis_batch_command, METH_FASTCALL,
     redis_batch_command_doc},
    {"_redis_batch_reply", (PyCFunction)(void (*)(void))module_redis_batch_reply, METH_FASTCALL,
     redis_batch_reply_doc},
    {"inspect_region", module_inspect_region, METH_O, inspect_region_doc},
    {"calendar_period", (PyCFunction)(void (*)(void))module_calendar_period,
     METH_VARARGS | METH_KEYWORDS, calendar_period_doc},
    {"metrics", module_metrics, METH_NOARGS, metrics_doc},
    {"_share_limit", (PyCFunction)(void (*)(void))module_share_limit, METH_FASTCALL,
     share_limit_doc},
    {"_share_of", (PyCFunction)(void (*)(void))module_share_of, METH_FASTCALL, share_of_doc},
    {"_share_asked", (PyCFunction)(void (*)(void))module_share_asked, METH_FASTCALL,
     share_asked_doc},
    {"_share_report", (PyCFunction)(void (*)(void))module_share_report, METH_FASTCALL,
     share_report_doc},
    {"_share_reply", module_share_reply, METH_O, share_reply_doc},
    {"_share_after", (PyCFunction)(void (*)(void))module_share_after, METH_FASTCALL,
     share_after_doc},
    {"_check_refusal_status", module_check_refusal_status, METH_O, check_refusal_status_doc},
    {"_check_priority_items", module_check_priority_items, METH_O, check_priority_items_doc},
    {"_check_address_prefix", (PyCFunction)(void (*)(void))module_check_address_prefix,
     METH_FASTCALL, check_address_prefix_doc},
    {"_dry_run_fields", module_dry_run_fields, METH_O, dry_run_fields_doc},
    {"_settle", (PyCFunction)(void (*)(void))module_settle, METH_FASTCALL, settle_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot cellrate_slots[] = {
    {Py_mod_exec, cellrate_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

#pragma GCC diagnostic pop

static struct PyModuleDef cellrate_module = {
    PyModuleDef_HEAD_INIT,           .m_name = "cellrate._cellrate", .m_doc = cellrate_doc,
    .m_size = sizeof(module_state),  .m_methods = cellrate_methods,  .m_slots = cellrate_slots,
    .m_traverse = cellrate_traverse, .m_clear = cellrate_clear,      .m_free = cellrate_free,
};

PyMODINIT_FUNC PyInit__cellrate(void);

PyMODINIT_FUNC PyInit__cellrate(void) { return PyModuleDef_Init(&cellrate_module); }
