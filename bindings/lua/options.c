/*
 * Options (a part of bindings/cellrate_lua.c): the core's table of every
 * constructor's options (cellrate/options.h), read for the compiled
 * constructors (read_options) and lent to the pure-Lua ones
 * (cellrate._check_options: cellrate.redis, cellrate.share, cellrate.nginx);
 * an unknown name raises, suggesting a near one. Also the rate list grammar
 * (cellrate.parse_rates) and which algorithms take a burst.
 */

/* What an options table may hold for the compiled constructors; absent
 * fields keep their initial values. */
typedef struct {
    cr_limit_args args;
    int64_t capacity;
    bool capacity_given;
    int64_t lease_ns; /* 0: none */
    bool peak;
    const char *shared; /* path of a shared region, or NULL */
    int64_t shared_mode;
    cr_on_change on_change;
    cr_priority_arg classes[CR_PRIORITIES_MAX + 1]; /* priorities: one more is refused */
    cr_penalty penalty;                             /* with has_penalty */
    bool has_penalty;
    double sync; /* with has_sync: seconds between a region's msyncs */
    bool has_sync;
} options;

/* read_priorities (lua/priority.c): the classes of `priorities`. */
static void read_priorities(lua_State *L, int idx, options *opts);

/* read_penalty (lua/penalty.c): the penalty table. */
static void read_penalty(lua_State *L, int idx, options *opts);

/* The longest table of options of a constructor. */
#define OPTIONS_MAX 40

static const cr_constructor *constructor_named(lua_State *L, const char *name)
{
    const cr_constructor *constructor = cr_constructor_find(name, strlen(name));
    if (constructor == NULL || constructor->count > OPTIONS_MAX)
        luaL_error(L, "no constructor '%s' in the options table", name);
    return constructor;
}

/* The option the key at `key_idx` names, or an error naming it (with the
 * near name the constructor takes, if one is within two edits). */
static const cr_option *option_named(lua_State *L, int key_idx, const cr_constructor *constructor)
{
    if (lua_type(L, key_idx) != LUA_TSTRING) {
        luaL_error(L, "unknown option (a %s key)", luaL_typename(L, key_idx));
        return NULL;
    }
    size_t len;
    const char *name = lua_tolstring(L, key_idx, &len);
    const cr_option *option = cr_option_find(constructor, CR_FACE_LUA, name, len);
    if (option != NULL)
        return option;
    const char *closest = cr_option_suggest(constructor, CR_FACE_LUA, name, len);
    if (closest != NULL)
        luaL_error(L, "unknown option '%s' (did you mean '%s'?)", name, closest);
    luaL_error(L, "unknown option '%s'", name);
    return NULL;
}

/* "opts must be a table with the fields period, burst, ..." */
static int raise_options_type(lua_State *L, const cr_constructor *constructor)
{
    int pieces = 1;
    lua_pushstring(L, "opts must be a table with the fields");
    for (size_t i = 0; i < constructor->count; i++) {
        if (constructor->options[i].faces & CR_FACE_LUA) {
            lua_pushstring(L, pieces == 1 ? " " : ", ");
            lua_pushstring(L, constructor->options[i].name);
            pieces += 2;
        }
    }
    lua_concat(L, pieces);
    return luaL_error(L, "%s", lua_tostring(L, -1));
}

/* The value at `idx` as the core takes it: a number with a finite integral
 * value is an integer (the only kind of number LuaJIT has); a string's bytes
 * stay on the stack, in the options table. */
static void to_core_value(lua_State *L, int idx, cr_value *out)
{
    memset(out, 0, sizeof *out);
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        out->type = CR_VALUE_ABSENT;
        break;
    case LUA_TBOOLEAN:
        out->type = CR_VALUE_BOOLEAN;
        out->boolean = lua_toboolean(L, idx);
        break;
    case LUA_TNUMBER: {
        const lua_Number number = lua_tonumber(L, idx);
        out->number = (double)number;
        if (compat_isinteger(L, idx)) {
            out->type = CR_VALUE_INTEGER;
            out->integer = (int64_t)lua_tointeger(L, idx);
        } else if (isfinite(number) && number_to_int64(number, &out->integer)) {
            out->type = CR_VALUE_INTEGER;
        } else {
            out->type = CR_VALUE_NUMBER;
        }
        break;
    }
    case LUA_TSTRING:
        out->type = CR_VALUE_STRING;
        out->text = lua_tolstring(L, idx, &out->text_len);
        break;
    case LUA_TFUNCTION:
        out->type = CR_VALUE_FUNCTION;
        break;
    default:
        out->type = CR_VALUE_TABLE;
    }
}

/*
 * The options table at `idx` (nil: none) judged by the core's table for
 * `constructor`: `values` gets one normalised value per option, in the
 * table's order. An unknown name or a mistyped value raises; a value refused
 * is the status returned (`values` then as given), or CR_OK.
 */
static cr_status judge_options(lua_State *L, int idx, const cr_constructor *constructor,
                               cr_value *values)
{
    memset(values, 0, constructor->count * sizeof *values);
    if (!lua_isnoneornil(L, idx)) {
        if (lua_type(L, idx) != LUA_TTABLE)
            raise_options_type(L, constructor);
        lua_pushnil(L);
        while (lua_next(L, idx) != 0) {
            const cr_option *option = option_named(L, -2, constructor);
            to_core_value(L, -1, &values[option - constructor->options]);
            lua_pop(L, 1);
        }
    }
    size_t failed;
    bool wrong_type;
    const cr_status status = cr_options_check(constructor, CR_FACE_LUA, values, &failed,
                                              &wrong_type);
    if (status != CR_OK && wrong_type)
        raise_status(L, status);
    return status;
}

/* judge_options, a refusal raised. */
static void check_options(lua_State *L, int idx, const cr_constructor *constructor,
                          cr_value *values)
{
    const cr_status status = judge_options(L, idx, constructor, values);
    if (status != CR_OK)
        raise_status(L, status);
}

/*
 * Reads the options table at `idx` (nil: none) of the compiled constructor
 * `name` into `opts`. Only the options given are set; the core applies the
 * defaults. The strings stay alive while the table is on the stack.
 */
static void read_options(lua_State *L, int idx, const char *name, options *opts)
{
    const cr_constructor *constructor = constructor_named(L, name);
    cr_value values[OPTIONS_MAX];
    const cr_status refused = judge_options(L, idx, constructor, values);
    if (lua_isnoneornil(L, idx))
        return;
    cr_limit_args *args = &opts->args;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        const cr_option *option = option_named(L, -1, constructor);
        const cr_value *value = &values[option - constructor->options];
        const char *field = option->name;
        if (strcmp(field, "period") == 0) {
            args->period_s = value->number;
            args->has_period = true;
        } else if (strcmp(field, "burst") == 0) {
            args->burst = value->integer;
            args->has_burst = true;
        } else if (strcmp(field, "capacity") == 0) {
            opts->capacity = value->integer;
            opts->capacity_given = true;
        } else if (strcmp(field, "lease") == 0) {
            (void)cr_lease_from_seconds(value->number, &opts->lease_ns); /* the table took it */
        } else if (strcmp(field, "peak") == 0) {
            opts->peak = value->boolean;
        } else if (strcmp(field, "shared") == 0) {
            opts->shared = value->text;
        } else if (strcmp(field, "shared_mode") == 0) {
            opts->shared_mode = value->integer;
        } else if (strcmp(field, "clock") == 0) {
            args->clock = value->text;
            args->clock_len = value->text_len;
        } else if (strcmp(field, "algorithm") == 0) {
            args->algorithm = value->text;
            args->algorithm_len = value->text_len;
        } else if (strcmp(field, "on_change") == 0) {
            (void)cr_parse_on_change(value->text, value->text_len, &opts->on_change);
        } else if (strcmp(field, "max_cost") == 0) {
            args->max_cost = value->integer;
            args->has_max_cost = true;
        } else if (strcmp(field, "max_debt") == 0) {
            args->max_debt = value->integer;
            args->has_max_debt = true;
        } else if (strcmp(field, "tz") == 0) { /* the process's zone of that name */
            const cr_status status = cr_zone_open(value->text, value->text_len, NULL, 0,
                                                  &args->zone);
            if (status != CR_OK)
                raise_status(L, status);
        } else if (strcmp(field, "priorities") == 0) {
            lua_getfield(L, idx, "priorities");
            read_priorities(L, lua_gettop(L), opts);
            lua_pop(L, 1); /* the table stays in the options table: its names live */
        } else if (strcmp(field, "sync") == 0) { /* the core's cr_limiter_set_sync judges */
            if (value->type != CR_VALUE_NUMBER && value->type != CR_VALUE_INTEGER)
                raise_status(L, CR_E_SYNC);
            opts->sync = value->number;
            opts->has_sync = true;
        } else if (strcmp(field, "penalty") == 0) {
            lua_getfield(L, idx, "penalty");
            read_penalty(L, lua_gettop(L), opts);
            lua_pop(L, 1);
        }
    }
    if (refused == CR_OK)
        return;
    /* A limit is judged in the core's order, its rate first (limits.txt): a
     * limit the core refuses is the refusal, else the option's. */
    cr_limit limit;
    const cr_status status = cr_option_find(constructor, CR_FACE_LUA, "period", 6) != NULL
                                 ? cr_limit_init(&limit, args)
                                 : CR_OK;
    raise_status(L, status != CR_OK ? status : refused);
}

/* A normalised value: the value given (at `given` in the options table,
 * 0: none) where the core kept it, else the core's. */
static void push_core_value(lua_State *L, const cr_option *option, const cr_value *value, int given)
{
    switch (value->type) {
    case CR_VALUE_ABSENT:
        lua_pushnil(L);
        break;
    case CR_VALUE_BOOLEAN:
        lua_pushboolean(L, value->boolean);
        break;
    case CR_VALUE_INTEGER:
        compat_pushint64(L, value->integer);
        break;
    case CR_VALUE_NUMBER:
        lua_pushnumber(L, (lua_Number)value->number);
        break;
    case CR_VALUE_STRING:
        lua_pushlstring(L, value->text, value->text_len);
        break;
    default:
        if (given != 0)
            lua_getfield(L, given, option->name);
        else
            lua_pushnil(L);
    }
}

/* cellrate._check_options(constructor, opts): the options of a pure-Lua
 * constructor (cellrate.redis, cellrate.share, cellrate.nginx) judged by the
 * core's table: a table of every option the Lua face takes, normalised
 * (absent ones: the default, or nil); for a seconds option counted in ns (a
 * lease), also <name>_ns, its ns in decimal. An unknown name or a refused value
 * raises in the core's words. */
static int module_check_options(lua_State *L)
{
    const cr_constructor *constructor = constructor_named(L, luaL_checkstring(L, 1));
    cr_value values[OPTIONS_MAX];
    check_options(L, 2, constructor, values);
    const int given = lua_istable(L, 2) ? 2 : 0;
    lua_createtable(L, 0, (int)constructor->count);
    for (size_t i = 0; i < constructor->count; i++) {
        const cr_option *option = &constructor->options[i];
        if (!(option->faces & CR_FACE_LUA))
            continue;
        push_core_value(L, option, &values[i], given);
        lua_setfield(L, -2, option->name);
        if ((option->flags & CR_OPTION_NS) && values[i].type == CR_VALUE_NUMBER) {
            char key[64], ns[24];
            snprintf(key, sizeof key, "%s_ns", option->name);
            snprintf(ns, sizeof ns, "%" PRId64, values[i].integer);
            lua_pushstring(L, ns); /* decimal: exact under LuaJIT too */
            lua_setfield(L, -2, key);
        }
    }
    return 1;
}

/* cellrate.parse_rates(text, zoned): the limits a rate string names,
 * "100/day;10/hour", "100/minute;1000000/month": a list of { rate = ,
 * period = , text = , calendar = } (calendar: "<count><unit>", "1month", for
 * a calendar quota's part), or the core's refusal, raised. */
static int module_parse_rates(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        return raise_status(L, CR_E_RATE);
    size_t len;
    const char *text = lua_tolstring(L, 1, &len);
    cr_rate rates[CR_RATES_MAX];
    size_t count;
    const cr_status status = cr_parse_rates(text, len, lua_toboolean(L, 2), rates, &count);
    if (status != CR_OK)
        return raise_status(L, status);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_createtable(L, 0, 4);
        lua_pushnumber(L, (lua_Number)rates[i].rate);
        lua_setfield(L, -2, "rate");
        lua_pushnumber(L, (lua_Number)rates[i].period_s);
        lua_setfield(L, -2, "period");
        lua_pushlstring(L, text + rates[i].start, rates[i].len);
        lua_setfield(L, -2, "text");
        if (rates[i].period.count > 0) {
            lua_pushfstring(L, "%d%s", (int)rates[i].period.count,
                            cr_period_unit_name(rates[i].period.unit));
            lua_setfield(L, -2, "calendar");
        }
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

/* cellrate._check_zoned(zoned, calendars): nothing, or the core's refusal
 * of a zone given for rate strings with no calendar part, raised. */
static int module_check_zoned(lua_State *L)
{
    const lua_Integer calendars = luaL_checkinteger(L, 2);
    const cr_status status = cr_rates_zoned(lua_toboolean(L, 1),
                                            calendars < 0 ? 0 : (size_t)calendars);
    if (status != CR_OK)
        return raise_status(L, status);
    return 0;
}

/* cellrate._algorithm_takes_burst(name): whether the algorithm reads a burst
 * (gcra, token_bucket), or the core's refusal of the name, raised. */
static int module_algorithm_takes_burst(lua_State *L)
{
    size_t len;
    const char *name = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    cr_algorithm algorithm;
    if (name == NULL || cr_algorithm_from_name(name, len, &algorithm) != CR_OK)
        return raise_status(L, CR_E_ALGORITHM);
    lua_pushboolean(L, cr_algorithm_takes_burst(algorithm));
    return 1;
}
