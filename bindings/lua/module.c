/*
 * The module (a part of bindings/cellrate_lua.c, the last): the metatables of
 * the types, the module's functions, luaopen_cellrate.
 */

static void register_type(lua_State *L, const char *tag, const luaL_Reg *methods,
                          const luaL_Reg *metamethods)
{
    luaL_newmetatable(L, tag);
    compat_setfuncs(L, metamethods, 0);
    lua_newtable(L);
    compat_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
}

static const luaL_Reg module_functions[] = {
    {"limiter", limiter_new},
    {"keyed", keyed_new},
    {"concurrency", concurrency_new},
    {"check_all", module_check_all},
    {"limit_spec", limit_spec_new},
    {"calendar_period", calendar_period},
    {"check_policy_name", check_policy_name},
    {"headers", headers},
    {"inspect_region", inspect_region},
    {"inspect_key", inspect_key},
    {"metrics", metrics},
    {"header_fields", header_fields},
    {"read_signal", read_signal},
    {"_check_request", check_request},
    {"_check_hold", check_hold},
    {"_check_priority_items", check_priority_items},
    {"_check_plan_items", check_plan_items},
    {"_check_options", module_check_options},
    {"_algorithm_takes_burst", module_algorithm_takes_burst},
    {"parse_rates", module_parse_rates},
    {"_check_zoned", module_check_zoned},
    {"_redis_request", redis_request},
    {"_redis_batch", redis_batch},
    {"_redis_batch_reply", redis_batch_reply},
    {"_redis_reply", redis_reply},
    {"_redis_unavailable", redis_unavailable},
    {"_redis_backoff", redis_backoff},
    {"_redis_fallback_check", redis_fallback_check},
    {"_redis_nginx_items", redis_nginx_items},
    {"_redis_check_items", redis_check_items},
    {"_redis_check_change", redis_check_change},
    {"_redis_fallback_limit", redis_fallback_limit},
    {"_redis_going_back", redis_going_back},
    {"_redis_key", redis_key},
    {"_redis_penalty", redis_penalty},
    {"_redis_penalty_key", redis_penalty_key},
    {"_redis_signature", redis_signature},
    {"_redis_check_limit", redis_check_limit},
    {"_redis_plans", redis_plans},
    {"_redis_plan", redis_plan},
    {"_redis_classify", redis_classify},
    {"_redis_slots_message", redis_slots_message},
    {"_redis_protocol", redis_protocol},
    {"_share_limit", share_limit},
    {"_share_of", share_of},
    {"_share_asked", share_asked},
    {"_share_report", share_report},
    {"_share_reply", share_reply},
    {"_share_after", share_after},
    {"address_key", address_key},
    {"binary_address_key", binary_address_key},
    {"check_refusal_status", check_refusal_status},
    {"check_address_prefix", check_address_prefix},
    {"dry_run_removed", dry_run_removed},
    {"settle", settle},
    {NULL, NULL},
};

CELLRATE_LUA_EXPORT int luaopen_cellrate(lua_State *L);

int luaopen_cellrate(lua_State *L)
{
    register_type(L, limiter_tag, limiter_methods, limiter_metamethods);
    lua_pop(L, 1);
    register_type(L, keyed_tag, keyed_methods, keyed_metamethods);
    compat_setfuncs(L, keyed_length, 0);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, keyed_clear);
    lua_setfield(L, -2, "clear");
    lua_pushcfunction(L, keyed_follow);
    lua_setfield(L, -2, "follow");
    lua_pop(L, 1);
    lua_pop(L, 1);
    luaL_getmetatable(L, limiter_tag);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, limiter_follow);
    lua_setfield(L, -2, "follow");
    lua_pop(L, 2);
    luaL_newmetatable(L, limit_tag);
    compat_setfuncs(L, limit_metamethods, 0);
    lua_pop(L, 1);
    register_wait_plans(L);
    register_type(L, concurrency_tag, concurrency_methods, concurrency_metamethods);
    lua_pop(L, 1);
    luaL_newmetatable(L, slot_tag);
    compat_setfuncs(L, slot_metamethods, 0);
    lua_pop(L, 1);
    lua_newtable(L);
    compat_setfuncs(L, module_functions, 0);
    lua_pushstring(L, cr_version());
    lua_setfield(L, -2, "_VERSION");
    share_set_constants(L);
    /* A pointer, not a symbol: the module exports luaopen_cellrate alone. */
    lua_pushlightuserdata(L, (void *)&the_ffi_api);
    lua_setfield(L, -2, "_ffi_api");
    return 1;
}
