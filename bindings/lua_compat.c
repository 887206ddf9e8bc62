/* See lua_compat.h: the few Lua 5.4 functions the binding uses, on Lua 5.1–5.3; exact integers. */
#include "lua_compat.h"

#include <inttypes.h>
#include <stdio.h>

#if LUA_VERSION_NUM < 504
void *rfl_newuserdatauv(lua_State *L, size_t size, int nuv) {
    void *p = lua_newuserdata(L, size);
    if (nuv > 0) {
        lua_createtable(L, nuv, 0);
        lua_setuservalue(L, -2);
    }
    return p;
}

int rfl_getiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    lua_getuservalue(L, idx);
    if (lua_type(L, -1) != LUA_TTABLE) { /* no user values (or debug.setuservalue replaced them) */
        lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNONE;
    }
    lua_rawgeti(L, -1, n);
    lua_remove(L, -2);
    return lua_type(L, -1);
}

int rfl_setiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    lua_getuservalue(L, idx);
    if (lua_type(L, -1) != LUA_TTABLE) {
        lua_pop(L, 2);
        return 0;
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, n);
    lua_pop(L, 1);
    return 1;
}
#endif

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
