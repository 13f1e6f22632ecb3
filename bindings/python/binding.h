/*
 * What every part of the CPython face shares: the includes, the shims for
 * older CPythons, the module state and the flags of the types.
 *
 * The face is one translation unit: module.c includes this header, docs.h
 * and then each part (errors.c, args.c, ... concurrency.c, checks.c) in
 * order, so that a part uses only what an earlier one defined and the
 * compiler sees the whole face at once (the hot paths inline across parts).
 */
#ifndef CELLRATE_PY_BINDING_H
#define CELLRATE_PY_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cellrate.h"

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_BOOL T_BOOL
#define Py_T_LONGLONG T_LONGLONG
#define Py_T_DOUBLE T_DOUBLE
#define Py_READONLY READONLY
#endif

#if PY_VERSION_HEX < 0x030A0000 /* CPython 3.9 */
static inline PyObject *Py_NewRef(PyObject *object)
{
    Py_INCREF(object);
    return object;
}
/* A type that Python code cannot call: tp_new cleared once the type is made
 * (module.c), as CPython did before the flag. */
#define Py_TPFLAGS_DISALLOW_INSTANTIATION 0
#endif

#ifndef Py_ALWAYS_INLINE /* CPython < 3.11 */
#if defined(__GNUC__)
#define Py_ALWAYS_INLINE __attribute__((always_inline))
#else
#define Py_ALWAYS_INLINE
#endif
#endif

_Static_assert(sizeof(int64_t) == sizeof(long long), "int64_t members read as T_LONGLONG");

/*
 * The GIL stays held around one decision: releasing and re-taking it costs
 * more than the decision (docs/design.md §6). The benchmark builds a second
 * copy with -DCELLRATE_RELEASE_GIL to measure that choice.
 */
#ifdef CELLRATE_RELEASE_GIL
#define CR_PY_BEGIN_DECISION Py_BEGIN_ALLOW_THREADS
#define CR_PY_END_DECISION Py_END_ALLOW_THREADS
#else
#define CR_PY_BEGIN_DECISION
#define CR_PY_END_DECISION
#endif

/* The compiled methods whose bodies are Python functions (waits.c). */
enum python_method {
    LIMITER_WAIT,
    LIMITER_ACQUIRE,
    KEYED_WAIT,
    KEYED_ACQUIRE,
    CONCURRENCY_HOLD,
    RATE_LIMITED,  /* the exception a wait raises (python/cellrate/_wait.py) */
    PYTHON_METHODS /* their number */
};

typedef struct {
    PyTypeObject *decision_type;
    PyTypeObject *limit_type;
    PyTypeObject *limiter_type;
    PyTypeObject *keyed_type;
    PyTypeObject *concurrency_type;
    PyTypeObject *slot_type;
    PyTypeObject *client_keys_type;
    PyTypeObject *wait_plan_type;            /* not in the module: _wait_plan() makes them */
    PyObject *error;                         /* CellrateError */
    PyObject *invalid_argument;              /* InvalidArgument(CellrateError, ValueError) */
    PyObject *invalid_argument_type;         /* InvalidArgumentType(CellrateError, TypeError) */
    PyObject *python_method[PYTHON_METHODS]; /* set once, at import, by _set_waits */
} module_state;

/* The types are final, so an instance's own type leads to the module state. */
static module_state *state_of(PyObject *self)
{
    return (module_state *)PyType_GetModuleState(Py_TYPE(self));
}

/*
 * A Limiter or a KeyedLimiter: one object layout, one decision path, the key
 * the only difference (store.c; read by the waits and the follow too). The limit is the store's (store_limit): a live
 * change, made here or by another process sharing its region, is the core's.
 */
typedef struct {
    PyObject_HEAD
    cr_limiter *limiter; /* a Limiter's store; NULL in a KeyedLimiter */
    cr_keyed *keyed;     /* a KeyedLimiter's store; NULL in a Limiter */
    int64_t capacity;    /* a KeyedLimiter's */
    PyObject *max_cost;  /* an int, or NULL: checked again by each reconfigure */
    PyObject *max_debt;  /* an int given, or NULL (the default: the burst): kept by reconfigure */
} StoreObject;

static const cr_limit *store_limit(const StoreObject *store)
{
    return store->keyed ? cr_keyed_limit(store->keyed) : cr_limiter_limit(store->limiter);
}

static bool is_keyed(const StoreObject *store) { return store->keyed != NULL; }

#ifdef Py_TPFLAGS_IMMUTABLETYPE
#define FINAL_TYPE_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE)
#else
#define FINAL_TYPE_FLAGS Py_TPFLAGS_DEFAULT
#endif

/* Each part's PyType_Slot table sits between a `#pragma GCC diagnostic`
 * push, ignored "-Wpedantic" and pop: slot tables store function pointers in
 * `void *` fields, which ISO C does not define but every platform CPython
 * supports does. */

#endif
