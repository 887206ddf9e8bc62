/*
 * One binding for Lua 5.1 (and LuaJIT 2.1), 5.2, 5.3 and 5.4. Debian's lua-compat53 (compat-5.3.h) supplies
 * the Lua 5.3 C API on 5.1 and 5.2 (lua_absindex, luaL_setfuncs, lua_isinteger, typed lua_getfield, …); this
 * header adds only what 5.4 has beyond 5.3 that the binding uses — lua_newuserdatauv, without user values — and
 * exact integers where a Lua has only doubles.
 */
#ifndef RETRYFREEZE_LUA_COMPAT_H
#define RETRYFREEZE_LUA_COMPAT_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#if LUA_VERSION_NUM < 503
#include "compat-5.3.h"
/* 5.1 and 5.2 index tables with int; the binding's arrays stay far below INT_MAX. */
#define lua_rawseti(L, idx, n) (lua_rawseti)((L), (idx), (int)(n))
#undef lua_rawgeti
#define lua_rawgeti(L, idx, n) ((lua_rawgeti)((L), (idx), (int)(n)), lua_type((L), -1))
#endif

#if LUA_VERSION_NUM < 504
/* lua_newuserdatauv(L, size, 0): the binding's userdata carry no user values (lua_object.h holds what they borrow). */
#define lua_newuserdatauv(L, size, nuv) ((void)(nuv), lua_newuserdata((L), (size)))
#endif

#if LUA_VERSION_NUM < 503 && !defined(LUAJIT_VERSION_NUM)
/* Lua 5.1 and 5.2 have no lua_isyieldable: a coroutine (not the main thread) may yield from a C function it called. */
int rfl_isyieldable(lua_State *L);
#define lua_isyieldable rfl_isyieldable
#endif

/*
 * Lua 5.1 and 5.2 (and LuaJIT) have only doubles: an integer is exact up to ±(2^53 - 1). Integer arguments beyond
 * that are refused (RFL_INT_EXACT), never rounded. On 5.3 and 5.4 lua_Integer is 64-bit and every value passes.
 */
#if LUA_VERSION_NUM < 503
#define RFL_DOUBLES_ONLY 1
#define RFL_INT_EXACT (((lua_Integer)1 << 53) - 1)
#else
#define RFL_DOUBLES_ONLY 0
#define RFL_INT_EXACT LUA_MAXINTEGER
#endif

/* The number at idx as an exact integer: true and *out, or false (not a number, not integral, or beyond
 * ±RFL_INT_EXACT where the Lua has only doubles). Inline: policy:decide reads several per call. */
static inline bool rfl_tointeger_exact(lua_State *L, int idx, lua_Integer *out) {
    if (lua_type(L, idx) != LUA_TNUMBER) return false;
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isnum);
    if (!isnum || v > RFL_INT_EXACT || v < -RFL_INT_EXACT) return false;
#if LUA_VERSION_NUM < 503
    if ((lua_Number)v != lua_tonumber(L, idx)) return false; /* a double that is not that integer */
#endif
    *out = v;
    return true;
}
/* luaL_checkinteger that also refuses what a double cannot hold exactly (raises naming the argument). */
lua_Integer rfl_checkinteger(lua_State *L, int arg);
/* Pushes a formatted message for the integer v (lua_pushfstring has %I only from Lua 5.3). */
const char *rfl_pushint(lua_State *L, lua_Integer v);

#endif
