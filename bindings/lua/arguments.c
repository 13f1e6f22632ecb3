/*
 * Arguments (a part of bindings/cellrate_lua.c): the errors every function
 * raises or returns, by the class of the core's status, and the readers of
 * the arguments many functions take (integers, the rate, a key, cost, now, a
 * longest wait). A reader checks the Lua type and converts; the core judges
 * the value.
 */

/* The one raiser of argument mistakes: the core's message for `status`,
 * after the caller's position. */
static int raise_status(lua_State *L, cr_status status)
{
    return luaL_error(L, "%s", cr_strerror(status));
}

/* A runtime failure or a region refusal: nil, the core's message (with the
 * region's path and the system's reason where there is one), the code. */
static int push_failure(lua_State *L, cr_status status, const char *path)
{
    const int saved_errno = errno;
    lua_pushnil(L);
    if (status == CR_E_SHARED_IO || status == CR_E_SHARED_ACCESS)
        lua_pushfstring(L, "%s: %s (%s)", cr_strerror(status), path, strerror(saved_errno));
    else if (path != NULL)
        lua_pushfstring(L, "%s: %s", cr_strerror(status), path);
    else
        lua_pushstring(L, cr_strerror(status));
    lua_pushstring(L, cr_status_name(status));
    return 3;
}

/* A status other than CR_OK, by its class: an argument mistake raises; a
 * runtime failure or a region refusal returns nil, message, code. `path`: the
 * region's, or NULL. */
static int report_status(lua_State *L, cr_status status, const char *path)
{
    if (cr_status_class_of(status) == CR_STATUS_ARGUMENT)
        return raise_status(L, status);
    return push_failure(L, status, path);
}

/* A float with an integral value as int64, saturating beyond its range;
 * false for NaN or a fractional value. */
static bool number_to_int64(lua_Number value, int64_t *out)
{
    if (value != value)
        return false;
    if (value >= 0x1p63) {
        *out = INT64_MAX;
        return true;
    }
    if (value < -0x1p63) {
        *out = INT64_MIN;
        return true;
    }
    const int64_t truncated = (int64_t)value;
    if ((lua_Number)truncated != value)
        return false;
    *out = truncated;
    return true;
}

/*
 * An integer argument: the integer subtype (5.3+), or a float with an integral
 * value (the only kind LuaJIT has). Integral values beyond int64 saturate so
 * that the core, not the binding, decides what they mean. False for a
 * non-number, NaN or a fractional value.
 */
static bool to_int64(lua_State *L, int idx, int64_t *out)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        return false;
    if (compat_isinteger(L, idx)) {
        *out = (int64_t)lua_tointeger(L, idx);
        return true;
    }
    return number_to_int64(lua_tonumber(L, idx), out);
}

static void read_rate(lua_State *L, int idx, cr_limit_args *args)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        args->rate = lua_tonumber(L, idx);
        break;
    case LUA_TSTRING:
        /* Stays on the stack, hence valid, until cr_limit_init has read it. */
        args->rate_text = lua_tolstring(L, idx, &args->rate_text_len);
        break;
    default:
        raise_status(L, CR_E_RATE);
    }
}

/* The optional arguments are read only when the call passed them (`top`
 * is lua_gettop): most calls pass none, and each API call costs. */

/* cost: nil is CR_DEFAULT_COST. */
static int64_t read_cost(lua_State *L, int idx, int top)
{
    int64_t cost = CR_DEFAULT_COST;
    if (idx <= top && !lua_isnil(L, idx) && !to_int64(L, idx, &cost))
        raise_status(L, CR_E_COST);
    return cost;
}

/* A required count of units (charge's cost, take's max_cost: `status`
 * names it); nil or absent is a mistake too. */
static int64_t read_units(lua_State *L, int idx, int top, cr_status status)
{
    int64_t units;
    if (idx > top || !to_int64(L, idx, &units))
        raise_status(L, status);
    return units;
}

/* now: nil lets the core read its clock. */
static int64_t read_now(lua_State *L, int idx, int top)
{
    int64_t now_ns = CR_CLOCK;
    if (idx > top || lua_isnil(L, idx))
        return now_ns;
    if (lua_type(L, idx) != LUA_TNUMBER)
        raise_status(L, CR_E_NOW);
    const cr_status status = cr_seconds_to_ns(lua_tonumber(L, idx), &now_ns);
    if (status != CR_OK)
        raise_status(L, status);
    return now_ns;
}

/* The core's words and the type given: Lua has one kind of string. */
static const char *check_key(lua_State *L, int idx, size_t *len)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "%s, not %s", cr_strerror(CR_E_KEY),
                   lua_isnone(L, idx) ? "nil" : luaL_typename(L, idx));
    return lua_tolstring(L, idx, len);
}

/* A longest wait (the timeout of reserve and wait): nil is any wait;
 * else seconds, as cr_wait_from_seconds takes them. `invalid` names the
 * parameter. */
static int64_t read_wait_limit(lua_State *L, int idx, int top, cr_status invalid)
{
    int64_t max_wait_ns = CR_NEVER;
    if (idx > top || lua_isnil(L, idx))
        return max_wait_ns;
    if (lua_type(L, idx) != LUA_TNUMBER)
        raise_status(L, invalid);
    if (cr_wait_from_seconds(lua_tonumber(L, idx), invalid, &max_wait_ns) != CR_OK)
        raise_status(L, invalid);
    return max_wait_ns;
}

/* The key of a call: nil for a limit without capacity (NULL to the core). */
static const char *optional_key(lua_State *L, int idx, size_t *len)
{
    *len = 0;
    return lua_isnoneornil(L, idx) ? NULL : check_key(L, idx, len);
}
