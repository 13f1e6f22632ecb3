/*
 * The web policy's rules (cellrate/web.h; docs/design.md §10): ClientKeys,
 * the client's address as a key behind trusted proxies, and the checks and
 * settlement cellrate.web calls. Translation only: the rules are the core's.
 * Part of module.c's unity build.
 */

/* `status`'s error, with ", got <repr(value)>" after the core's words. */
static void raise_got(PyObject *exc_type, cr_status status, PyObject *value)
{
    PyObject *detail = PyUnicode_FromFormat(", got %R", value);
    if (detail != NULL) {
        raise_with_param(exc_type, status, detail);
        Py_DECREF(detail);
    }
}

/* An integer option judged by `check` (the core's rule): its value, or -1 with
 * InvalidArgumentType (not an int) or InvalidArgument (out of range) raised. */
static int64_t checked_integer(module_state *state, PyObject *value, cr_status wrong,
                               cr_status (*check)(int64_t))
{
    int64_t number;
    switch (to_int64(value, &number)) {
    case CONVERTED:
        break;
    case WRONG_TYPE:
        raise_got(state->invalid_argument_type, wrong, value);
        return -1;
    default:
        return -1;
    }
    const cr_status status = check(number);
    if (status != CR_OK) {
        raise_got(state->invalid_argument, status, value);
        return -1;
    }
    return number;
}

/* A prefix length (ipv6: of IPv6, else of IPv4), or -1 with its error raised. */
static int64_t checked_prefix(module_state *state, PyObject *value, bool ipv6)
{
    return checked_integer(state, value, ipv6 ? CR_E_IPV6_PREFIX : CR_E_IPV4_PREFIX,
                           ipv6 ? cr_ipv6_prefix_check : cr_ipv4_prefix_check);
}

/* _check_refusal_status(status): `status` as a refusal's status (an int from
 * 400 to 599), or the core's error naming status. */
static PyObject *module_check_refusal_status(PyObject *module, PyObject *value)
{
    const int64_t status = checked_integer((module_state *)PyModule_GetState(module), value,
                                           CR_E_STATUS, cr_refusal_status_check);
    return status < 0 ? NULL : PyLong_FromLongLong(status);
}

/* _check_address_prefix(name, prefix): `prefix` as the prefix length `name`
 * ("ipv4_prefix" or "ipv6_prefix") takes, or the core's error naming it. */
static PyObject *module_check_address_prefix(PyObject *module, PyObject *const *args,
                                             Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_check_address_prefix(name, prefix)");
        return NULL;
    }
    const bool ipv6 = PyUnicode_CompareWithASCIIString(args[0], "ipv6_prefix") == 0;
    if (!ipv6 && PyUnicode_CompareWithASCIIString(args[0], "ipv4_prefix") != 0) {
        PyErr_SetString(PyExc_ValueError, "name must be 'ipv4_prefix' or 'ipv6_prefix'");
        return NULL;
    }
    const int64_t prefix = checked_prefix((module_state *)PyModule_GetState(module), args[1], ipv6);
    return prefix < 0 ? NULL : PyLong_FromLongLong(prefix);
}

/* Whether `name` (a str) is one of the fields a dry run leaves out. */
static bool dry_run_removes(PyObject *name)
{
    size_t count = 0;
    const char *const *names = cr_dry_run_removed(&count);
    for (size_t i = 0; i < count; i++)
        if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0)
            return true;
    return false;
}

/* _dry_run_fields(fields): the (name, value) pairs of the dict `fields` (a
 * refusal's, from Decision.headers) that a dry run sends: without those the
 * core leaves out. One call on the path of every dry-run refusal. */
static PyObject *module_dry_run_fields(PyObject *Py_UNUSED(module), PyObject *fields)
{
    if (!PyDict_Check(fields)) {
        PyErr_Format(PyExc_TypeError, "fields must be a dict, not %s", Py_TYPE(fields)->tp_name);
        return NULL;
    }
    PyObject *list = PyList_New(0);
    PyObject *name, *value;
    Py_ssize_t at = 0;
    while (list != NULL && PyDict_Next(fields, &at, &name, &value)) {
        if (PyUnicode_Check(name) && dry_run_removes(name))
            continue;
        PyObject *pair = PyTuple_Pack(2, name, value);
        if (pair == NULL || PyList_Append(list, pair) < 0)
            Py_CLEAR(list);
        Py_XDECREF(pair);
    }
    return list;
}

/* A tuple of three new references (Py_BuildValue parses its format on every
 * call: this is on the path of every settled response), or NULL. */
static PyObject *triple(PyObject *first, PyObject *second, PyObject *third)
{
    PyObject *tuple = first != NULL && second != NULL && third != NULL ? PyTuple_New(3) : NULL;
    if (tuple == NULL) {
        Py_XDECREF(first);
        Py_XDECREF(second);
        Py_XDECREF(third);
        return NULL;
    }
    PyTuple_SET_ITEM(tuple, 0, first);
    PyTuple_SET_ITEM(tuple, 1, second);
    PyTuple_SET_ITEM(tuple, 2, third);
    return tuple;
}

/* _settle(charged, count, max_cost): (total, units, clipped) of cr_settle;
 * count an int (beyond int64 it saturates) or its decimal text. Anything else,
 * a count below 0 included, is InvalidArgument naming charge, the core's words
 * and the figure: nothing settled. */
static PyObject *module_settle(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *state = (module_state *)PyModule_GetState(module);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_settle(charged, count, max_cost): three arguments");
        return NULL;
    }
    int64_t charged, count = -1, max_cost = -1;
    if (convert_cost(state, args[0], &charged) < 0 ||
        (args[2] != Py_None && convert_units(state, args[2], CR_E_MAX_COST, &max_cost) < 0))
        return NULL;
    if (charged < 0) {
        raise_status(state, CR_E_COST);
        return NULL;
    }
    if (PyUnicode_Check(args[1])) {
        Py_ssize_t len = 0;
        const char *text = PyUnicode_AsUTF8AndSize(args[1], &len);
        if (text == NULL)
            PyErr_Clear(); /* a lone surrogate: no digit */
        if (text == NULL || cr_count_parse(text, (size_t)len, &count) != CR_OK)
            count = -1;
    } else if (to_int64(args[1], &count) != CONVERTED) {
        if (PyErr_Occurred())
            return NULL;
        count = -1;
    }
    cr_settlement settled;
    if (cr_settle(&settled, charged, count, max_cost) != CR_OK) {
        raise_got(state->invalid_argument, CR_E_CHARGE_COUNT, args[1]);
        return NULL;
    }
    return triple(PyLong_FromLongLong(settled.total), PyLong_FromLongLong(settled.units),
                  PyBool_FromLong(settled.clipped));
}

/* ------------------------------------------------------------------------ */
/* ClientKeys                                                                */

typedef struct {
    PyObject_VAR_HEAD int ipv4_prefix;
    int ipv6_prefix;
    cr_proxy_field field;
    cr_network trusted[];
} ClientKeysObject;

/* _ClientKeys(ipv4_prefix=32, ipv6_prefix=64, trusted=(), forwarded=False) */
static PyObject *client_keys_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"ipv4_prefix", "ipv6_prefix", "trusted", "forwarded", NULL};
    PyObject *ipv4 = NULL, *ipv6 = NULL, *trusted = NULL;
    int forwarded = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOp:_ClientKeys", keywords, &ipv4, &ipv6,
                                     &trusted, &forwarded))
        return NULL;
    module_state *state = (module_state *)PyType_GetModuleState(type);
    int64_t ipv4_prefix = CR_IPV4_PREFIX_DEFAULT, ipv6_prefix = CR_IPV6_PREFIX_DEFAULT;
    if ((ipv4 != NULL && (ipv4_prefix = checked_prefix(state, ipv4, false)) < 0) ||
        (ipv6 != NULL && (ipv6_prefix = checked_prefix(state, ipv6, true)) < 0))
        return NULL;
    PyObject *items = trusted != NULL ? PySequence_Fast(trusted, "trusted must be a list")
                                      : PyTuple_New(0);
    if (items == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    ClientKeysObject *self = (ClientKeysObject *)type->tp_alloc(type, count);
    if (self == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    self->ipv4_prefix = (int)ipv4_prefix;
    self->ipv6_prefix = (int)ipv6_prefix;
    self->field = forwarded ? CR_FORWARDED : CR_X_FORWARDED_FOR;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        if (!PyUnicode_Check(item)) {
            PyObject *words = PyUnicode_FromFormat(", not %s", Py_TYPE(item)->tp_name);
            if (words != NULL) {
                raise_with_param(state->invalid_argument_type, CR_E_TRUSTED_PROXIES, words);
                Py_DECREF(words);
            }
            goto fail;
        }
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(item, &len);
        if (text == NULL)
            PyErr_Clear(); /* a lone surrogate: no network */
        if (text == NULL || cr_network_parse(&self->trusted[i], text, (size_t)len) != CR_OK) {
            raise_got(state->invalid_argument, CR_E_TRUSTED_PROXIES, item);
            goto fail;
        }
    }
    Py_DECREF(items);
    return (PyObject *)self;
fail:
    Py_DECREF(items);
    Py_DECREF(self);
    return NULL;
}

static void client_keys_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* The bytes of an address's text, or NULL (no error set) for a str that has
 * none (a lone surrogate), which is no address; -1 with TypeError for what is
 * not a str. */
static int address_text(PyObject *text, const char **bytes, size_t *len)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "an address is a str, not %s", Py_TYPE(text)->tp_name);
        return -1;
    }
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *len = (size_t)PyUnicode_GET_LENGTH(text);
        *bytes = (const char *)PyUnicode_DATA(text);
        return 0;
    }
    Py_ssize_t size = 0;
    *bytes = PyUnicode_AsUTF8AndSize(text, &size);
    if (*bytes == NULL)
        PyErr_Clear();
    *len = (size_t)size;
    return 0;
}

static PyObject *key_object(const ClientKeysObject *self, const cr_address *address)
{
    char key[CR_ADDRESS_KEY_MAX];
    const size_t len = cr_address_key(key, address, self->ipv4_prefix, self->ipv6_prefix);
    return PyUnicode_FromStringAndSize(key, (Py_ssize_t)len);
}

/* The address of a peer's text (family 0 for none); -1 for a non-str. */
static int peer_address(PyObject *text, cr_address *address)
{
    const char *bytes;
    size_t len;
    if (address_text(text, &bytes, &len) < 0)
        return -1;
    if (bytes == NULL || !cr_address_parse(address, bytes, len))
        memset(address, 0, sizeof *address);
    return 0;
}

/* key(address): the key of a peer's address. */
static PyObject *client_keys_key(PyObject *self, PyObject *text)
{
    cr_address address;
    if (peer_address(text, &address) < 0)
        return NULL;
    return key_object((ClientKeysObject *)self, &address);
}

/* peer(address): (key, whether the address is a trusted proxy). */
static PyObject *client_keys_peer(PyObject *self, PyObject *text)
{
    const ClientKeysObject *keys = (ClientKeysObject *)self;
    cr_address address;
    if (peer_address(text, &address) < 0)
        return NULL;
    PyObject *key = key_object(keys, &address);
    if (key == NULL)
        return NULL;
    const bool trusted = cr_network_contains(keys->trusted, (size_t)Py_SIZE(keys), &address);
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, key);
    PyTuple_SET_ITEM(pair, 1, PyBool_FromLong(trusted));
    return pair;
}

/* hop(hop): the key of one hop of the proxy's field. */
static PyObject *client_keys_hop(PyObject *self, PyObject *text)
{
    const char *bytes;
    size_t len;
    cr_address address;
    if (address_text(text, &bytes, &len) < 0)
        return NULL;
    if (bytes == NULL || !cr_address_parse_hop(&address, bytes, len))
        memset(&address, 0, sizeof address);
    return key_object((ClientKeysObject *)self, &address);
}

/* client(value): the key of the client behind the trusted proxies, from the
 * value of their field; None when it names no hop. */
static PyObject *client_keys_client(PyObject *self, PyObject *text)
{
    const ClientKeysObject *keys = (ClientKeysObject *)self;
    const char *bytes;
    size_t len;
    cr_address address;
    if (address_text(text, &bytes, &len) < 0)
        return NULL;
    if (bytes == NULL) {
        memset(&address, 0, sizeof address); /* no address in a text without bytes */
        return key_object(keys, &address);
    }
    if (!cr_forwarded_client(&address, bytes, len, keys->field, keys->trusted,
                             (size_t)Py_SIZE(keys)))
        Py_RETURN_NONE;
    return key_object(keys, &address);
}

static PyObject *client_keys_get_ipv4_prefix(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((ClientKeysObject *)self)->ipv4_prefix);
}

static PyObject *client_keys_get_ipv6_prefix(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((ClientKeysObject *)self)->ipv6_prefix);
}

static PyGetSetDef client_keys_getset[] = {
    {"ipv4_prefix", client_keys_get_ipv4_prefix, NULL, "The prefix length of an IPv4 key.", NULL},
    {"ipv6_prefix", client_keys_get_ipv6_prefix, NULL, "The prefix length of an IPv6 key.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"

static PyMethodDef client_keys_methods[] = {
    {"key", client_keys_key, METH_O, client_keys_key_doc},
    {"peer", client_keys_peer, METH_O, client_keys_peer_doc},
    {"hop", client_keys_hop, METH_O, client_keys_hop_doc},
    {"client", client_keys_client, METH_O, client_keys_client_doc},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot client_keys_slots[] = {
    {Py_tp_doc, (void *)client_keys_doc}, {Py_tp_new, client_keys_new},
    {Py_tp_dealloc, client_keys_dealloc}, {Py_tp_methods, client_keys_methods},
    {Py_tp_getset, client_keys_getset},   {0, NULL},
};

#pragma GCC diagnostic pop

static PyType_Spec client_keys_spec = {
    .name = "cellrate._ClientKeys",
    .basicsize = sizeof(ClientKeysObject),
    .itemsize = sizeof(cr_network),
    .flags = FINAL_TYPE_FLAGS,
    .slots = client_keys_slots,
};
