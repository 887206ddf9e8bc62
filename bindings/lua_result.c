/* The one shape of an expected failure from the binding's functions: nil, message[, code] (rfl_fail, as
 * luaL_fileresult gives io's). Misuse (a bad argument, a closed object) raises instead: docs/lua.md, "Conventions". */
#include "lua_retryfreeze.h"

int rfl_fail(lua_State *L, const char *message, const char *code) {
    lua_pushnil(L);
    lua_pushstring(L, message);
    if (code == NULL) return 2;
    lua_pushstring(L, code);
    return 3;
}
