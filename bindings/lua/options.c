/*
 * Options (a part of bindings/cellrate_lua.c): the one reader of the options
 * table of every constructor, `option_named` the one reader of an option's
 * name (an unknown one raises, suggesting a near name).
 */

enum option {
    OPTION_PERIOD = 1,
    OPTION_BURST = 2,
    OPTION_CAPACITY = 4,
    OPTION_SHARED = 8,
    OPTION_SHARED_MODE = 16,
    OPTION_CLOCK = 32,
    OPTION_ALGORITHM = 64,
    OPTION_ON_CHANGE = 128,
    OPTION_MAX_COST = 256,
    OPTION_LEASE = 512,
    OPTION_PEAK = 1024,
    OPTION_MAX_DEBT = 2048,
};

/* What an options table may hold; absent fields keep their initial values. */
typedef struct {
    cr_limit_args args;
    int64_t capacity;
    bool capacity_given;
    int64_t lease_ns; /* 0: none */
    bool peak;
    const char *shared; /* path of a shared region, or NULL */
    int64_t shared_mode;
    bool shared_mode_given;
    cr_on_change on_change;
} options;

static const struct {
    const char *name;
    enum option option;
} option_names[] = {
    {"period", OPTION_PERIOD},
    {"burst", OPTION_BURST},
    {"capacity", OPTION_CAPACITY},
    {"shared", OPTION_SHARED},
    {"shared_mode", OPTION_SHARED_MODE},
    {"clock", OPTION_CLOCK},
    {"algorithm", OPTION_ALGORITHM},
    {"on_change", OPTION_ON_CHANGE},
    {"max_cost", OPTION_MAX_COST},
    {"max_debt", OPTION_MAX_DEBT},
    {"lease", OPTION_LEASE},
    {"peak", OPTION_PEAK},
};

/* Levenshtein distance between `a` and `b` (a name of option_names), or
 * OPTION_NAME_MAX when `a` is longer than any name could be misspelt to. */
#define OPTION_NAME_MAX 16
static size_t edit_distance(const char *a, const char *b)
{
    const size_t a_len = strlen(a), b_len = strlen(b);
    if (a_len >= OPTION_NAME_MAX || b_len >= OPTION_NAME_MAX)
        return OPTION_NAME_MAX;
    size_t row[OPTION_NAME_MAX];
    for (size_t j = 0; j <= b_len; j++)
        row[j] = j;
    for (size_t i = 1; i <= a_len; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b_len; j++) {
            const size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[b_len];
}

static enum option option_named(lua_State *L, int key_idx, unsigned accepted)
{
    if (lua_type(L, key_idx) == LUA_TSTRING) {
        const char *name = lua_tostring(L, key_idx);
        const char *closest = NULL;
        size_t closest_distance = 3; /* a suggestion is at most 2 edits away */
        for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
            if (!(accepted & option_names[i].option))
                continue;
            if (strcmp(name, option_names[i].name) == 0)
                return option_names[i].option;
            const size_t distance = edit_distance(name, option_names[i].name);
            if (distance < closest_distance) {
                closest = option_names[i].name;
                closest_distance = distance;
            }
        }
        if (closest != NULL)
            luaL_error(L, "unknown option '%s' (did you mean '%s'?)", name, closest);
        luaL_error(L, "unknown option '%s'", name);
    } else {
        luaL_error(L, "unknown option (a %s key)", luaL_typename(L, key_idx));
    }
    return 0;
}

/* "opts must be a table with the fields period, burst, ..." for `accepted`. */
static int raise_options_type(lua_State *L, unsigned accepted)
{
    int pieces = 1;
    lua_pushstring(L, "opts must be a table with the fields");
    for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
        if (accepted & option_names[i].option) {
            lua_pushstring(L, pieces == 1 ? " " : ", ");
            lua_pushstring(L, option_names[i].name);
            pieces += 2;
        }
    }
    lua_concat(L, pieces);
    return luaL_error(L, "%s", lua_tostring(L, -1));
}

/*
 * Reads the options table at `idx` (nil: none) into `opts`. An absent option
 * stays absent; the core applies the defaults. The `shared` string stays
 * alive while the table is on the stack.
 */
static void read_options(lua_State *L, int idx, unsigned accepted, options *opts)
{
    cr_limit_args *args = &opts->args;
    if (lua_isnoneornil(L, idx))
        return;
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_options_type(L, accepted);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        switch (option_named(L, -2, accepted)) {
        case OPTION_PERIOD:
            if (lua_type(L, -1) != LUA_TNUMBER)
                raise_status(L, CR_E_PERIOD);
            args->period_s = lua_tonumber(L, -1);
            args->has_period = true;
            break;
        case OPTION_BURST:
            if (!to_int64(L, -1, &args->burst))
                raise_status(L, CR_E_BURST);
            args->has_burst = true;
            break;
        case OPTION_CAPACITY:
            if (!to_int64(L, -1, &opts->capacity))
                raise_status(L, CR_E_CAPACITY);
            opts->capacity_given = true;
            break;
        case OPTION_LEASE:
            if (lua_type(L, -1) != LUA_TNUMBER ||
                cr_lease_from_seconds(lua_tonumber(L, -1), &opts->lease_ns) != CR_OK)
                raise_status(L, CR_E_LEASE);
            break;
        case OPTION_PEAK:
            if (lua_type(L, -1) != LUA_TBOOLEAN)
                raise_status(L, CR_E_PEAK);
            opts->peak = lua_toboolean(L, -1);
            break;
        case OPTION_SHARED: {
            size_t path_len;
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_SHARED_PATH);
            opts->shared = lua_tolstring(L, -1, &path_len);
            if (strlen(opts->shared) != path_len) /* a NUL would cut the path short */
                raise_status(L, CR_E_SHARED_PATH);
            break;
        }
        case OPTION_SHARED_MODE:
            if (!to_int64(L, -1, &opts->shared_mode))
                raise_status(L, CR_E_SHARED_MODE);
            opts->shared_mode_given = true;
            break;
        case OPTION_CLOCK:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_CLOCK);
            args->clock = lua_tolstring(L, -1, &args->clock_len);
            break;
        case OPTION_ALGORITHM:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_ALGORITHM);
            args->algorithm = lua_tolstring(L, -1, &args->algorithm_len);
            break;
        case OPTION_ON_CHANGE: {
            size_t len;
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_ON_CHANGE);
            const char *name = lua_tolstring(L, -1, &len);
            if (cr_parse_on_change(name, len, &opts->on_change) != CR_OK)
                raise_status(L, CR_E_ON_CHANGE);
            break;
        }
        case OPTION_MAX_COST:
            if (!to_int64(L, -1, &args->max_cost))
                raise_status(L, CR_E_MAX_COST);
            args->has_max_cost = true;
            break;
        case OPTION_MAX_DEBT:
            if (!to_int64(L, -1, &args->max_debt))
                raise_status(L, CR_E_MAX_DEBT);
            args->has_max_debt = true;
            break;
        }
        lua_pop(L, 1);
    }
}
