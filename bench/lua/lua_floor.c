/*
 * The binding's floor for bench_lua.lua: a no-op C function that takes the same facts table as
 * policy:decide (walking it raw, as the binding does) and returns a verdict table of the same shape.
 * policy:decide's cost over this floor is what the binding and the engine add. decide_out is the floor of
 * the allocation-free form: the same walk, and the same fields written into the caller's table (argument 4).
 */
#include <lauxlib.h>
#include <lua.h>

/* The fields of a verdict (the shape policy:decide gives) set into the table on top. */
static void set_verdict_fields(lua_State *L) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "retry");
    lua_pushliteral(L, "pinned-status");
    lua_setfield(L, -2, "reason");
    lua_pushliteral(L, "HTTP_504");
    lua_setfield(L, -2, "class");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "delay_ms");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "timeout_ms");
    lua_pushliteral(L, "absent");
    lua_setfield(L, -2, "retry_after");
    lua_pushliteral(L, "POST /v1/jobs");
    lua_setfield(L, -2, "route");
}

static int l_floor_decide(lua_State *L) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) lua_pop(L, 1);
    lua_createtable(L, 0, 7);
    set_verdict_fields(L);
    return 1;
}

static int l_floor_decide_out(lua_State *L) {
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) lua_pop(L, 1);
    lua_pushvalue(L, 4);
    set_verdict_fields(L);
    return 1;
}

/* The floor of a decider's call (policy:decider): arguments in, five values out (the strings are arguments:
 * nothing interned), nothing checked or decided. */
static int l_floor_values(lua_State *L) {
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 2);
    lua_pushinteger(L, 0);
    lua_pushinteger(L, 0);
    lua_pushvalue(L, 3);
    return 5;
}

__attribute__((visibility("default"))) int luaopen_rf_bench_floor(lua_State *L);

int luaopen_rf_bench_floor(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, l_floor_decide);
    lua_setfield(L, -2, "decide");
    lua_pushcfunction(L, l_floor_decide_out);
    lua_setfield(L, -2, "decide_out");
    lua_pushcfunction(L, l_floor_values);
    lua_setfield(L, -2, "values");
    return 1;
}
