/* The shapes of what the binding's functions return: the fields of a result table (rfl_set_int, rfl_set_str) and
 * the one shape of an expected failure, nil, message[, code] (rfl_fail, as luaL_fileresult gives io's). Misuse (a
 * bad argument, a closed object) raises instead: docs/lua.md, "Conventions". Their doc comments are in
 * lua_retryfreeze.h. */
#include "lua_retryfreeze.h"

void rfl_set_int(lua_State *L, const char *k, int64_t v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

void rfl_set_str(lua_State *L, const char *k, const char *v) {
    if (v == NULL) return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

int rfl_fail(lua_State *L, const char *message, const char *code) {
    lua_pushnil(L);
    lua_pushstring(L, message);
    if (code == NULL) return 2;
    lua_pushstring(L, code);
    return 3;
}
