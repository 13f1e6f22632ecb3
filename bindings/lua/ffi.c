/*
 * LuaJIT's FFI (a part of bindings/cellrate_lua.c; docs/design.md §6, §12):
 * the C side of lua/cellrate/ffi.lua, a table of function pointers.
 */

/*
 * check and check_headers without the Lua API, for lua/cellrate/ffi.lua:
 * LuaJIT compiles an FFI call into the trace of its caller, where a Lua C
 * function ends the trace; in nginx's access phase that is most of the cost
 * of the call (docs/design.md §12). The same conversions and core calls as
 * store_check and store_check_headers. `payload` is a Limiter's or
 * KeyedLimiter's (LuaJIT passes a userdata's payload to a void * parameter),
 * its metatable checked by the caller; `key` NULL for a Limiter; `name` NULL
 * for the core's default. CR_OK, or the status of a mistake (the name, the cost, the
 * time: nothing decided) or of a region's lock; FFI_CLOSED for a closed store.
 */
#define FFI_CLOSED (-1)

static int ffi_check(void *payload, const char *key, size_t key_len, double cost, bool has_now,
                     double now, cr_decision *decision)
{
    const store_box *box = payload;
    if (box->limiter == NULL && box->keyed == NULL)
        return FFI_CLOSED;
    int64_t cost_units = 0;
    if (!number_to_int64(cost, &cost_units))
        return CR_E_COST;
    int64_t now_ns = CR_CLOCK;
    if (has_now) {
        const cr_status status = cr_seconds_to_ns(now, &now_ns);
        if (status != CR_OK)
            return status;
    }
    return is_keyed(box)
               ? cr_keyed_check(box->keyed, key, key_len, now_ns, cost_units, true, decision)
               : cr_limiter_check(box->limiter, now_ns, cost_units, true, decision);
}

/* `every`: the fields of every decision, as check_headers gives them; false:
 * of a refusal only (count 0 for an admission), as cellrate.nginx sets them
 * by default. A name is checked before deciding when an admission will be
 * formatted; otherwise a bad one can only fail a refusal, which spent
 * nothing. */
static int ffi_check_headers(void *payload, const char *key, size_t key_len, double cost,
                             bool has_now, double now, const char *name, size_t name_len,
                             bool legacy, bool every, cr_decision *decision, cr_headers *fields)
{
    if (every && cr_headers_check_name(name, name_len) != CR_OK)
        return CR_E_HEADER_NAME;
    const int status = ffi_check(payload, key, key_len, cost, has_now, now, decision);
    if (status != CR_OK)
        return status;
    if (decision->allowed && !every) {
        fields->count = 0;
        return CR_OK;
    }
    const store_box *box = payload;
    return cr_headers_format(fields, decision, cr_limit_window_ns(box_limit(box)), name, name_len,
                             legacy);
}

/* The key of a client's address given as 4 or 16 bytes (nginx's
 * $binary_remote_addr; anything else is no address), into `out`
 * (CR_ADDRESS_KEY_MAX bytes); its length, or 0 for a prefix the core refuses
 * (cellrate.binary_address_key then raises its words). A prefix not given
 * (has_ false) is the default. For cellrate.nginx's default key, once per
 * request: an FFI call stays in the trace. */
static size_t ffi_address_key(const char *bytes, size_t len, bool has_ipv4, double ipv4,
                              bool has_ipv6, double ipv6, char *out)
{
    int64_t ipv4_prefix = CR_IPV4_PREFIX_DEFAULT, ipv6_prefix = CR_IPV6_PREFIX_DEFAULT;
    if ((has_ipv4 &&
         (!number_to_int64(ipv4, &ipv4_prefix) || cr_ipv4_prefix_check(ipv4_prefix) != CR_OK)) ||
        (has_ipv6 &&
         (!number_to_int64(ipv6, &ipv6_prefix) || cr_ipv6_prefix_check(ipv6_prefix) != CR_OK)))
        return 0;
    cr_address address;
    cr_address_from_bytes(&address, bytes, len); /* family 0 when it is none */
    return cr_address_key(out, &address, (int)ipv4_prefix, (int)ipv6_prefix);
}

/* The layout of ffi_api: bumped on any change to its members, their order or
 * their types, and to what a function takes or returns. lua/cellrate/ffi.lua
 * carries the number of the layout it declares and refuses another, so a
 * stale copy never calls through a pointer of another type. */
#define FFI_API_LAYOUT 2

/* What lua/cellrate/ffi.lua declares with ffi.cdef, in this order; the sizes
 * let it check its declarations of the core's structs against these. The
 * layout number comes first, where every layout has it. */
typedef struct {
    int layout;
    int (*check)(void *payload, const char *key, size_t key_len, double cost, bool has_now,
                 double now, cr_decision *decision);
    int (*check_headers)(void *payload, const char *key, size_t key_len, double cost, bool has_now,
                         double now, const char *name, size_t name_len, bool legacy, bool every,
                         cr_decision *decision, cr_headers *fields);
    double (*ns_to_seconds)(int64_t ns);
    const char *(*strerror)(cr_status status);
    const char *(*status_name)(cr_status status);
    size_t decision_size;
    size_t headers_size;
    int closed;
    size_t (*address_key)(const char *bytes, size_t len, bool has_ipv4, double ipv4, bool has_ipv6,
                          double ipv6, char *out);
    size_t address_key_max;
} ffi_api;

static const ffi_api the_ffi_api = {
    FFI_API_LAYOUT, ffi_check,       ffi_check_headers,   cr_ns_to_seconds,
    cr_strerror,    cr_status_name,  sizeof(cr_decision), sizeof(cr_headers),
    FFI_CLOSED,     ffi_address_key, CR_ADDRESS_KEY_MAX,
};
