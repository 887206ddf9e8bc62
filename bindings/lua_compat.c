/* See lua_compat.h: lua_isyieldable on Lua 5.1 and 5.2; exact integers. */
#include "lua_compat.h"

#include <inttypes.h>
#include <stdio.h>

#if LUA_VERSION_NUM < 503 && !defined(LUAJIT_VERSION_NUM)
int rfl_isyieldable(lua_State *L) {
    int main = lua_pushthread(L);
    lua_pop(L, 1);
    return !main;
}
#endif

lua_Integer rfl_checkinteger(lua_State *L, int arg) {
    lua_Integer v = 0;
    if (rfl_tointeger_exact(L, arg, &v)) return v;
#if LUA_VERSION_NUM < 503
    if (lua_type(L, arg) == LUA_TNUMBER)
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "integer expected in -(2^53-1)..2^53-1 (exact in a double), got %f",
                                      lua_tonumber(L, arg)));
#endif
    return luaL_checkinteger(L, arg); /* raises the standard type error */
}

const char *rfl_pushint(lua_State *L, lua_Integer v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, (int64_t)v);
    lua_pushstring(L, buf);
    return lua_tostring(L, -1);
}
