/*
 * The client's network options, read from the rf.client{…} table: redirects (max_redirects). Kept apart
 * from lua_client.c (lifetimes, requests) so the two evolve separately. Every string is copied by
 * rf_client_new; nothing here outlives the call.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/client.h"

const char *const rfl_client_network_keys[] = {"max_redirects", NULL};

/* An optional integer option in [lo, hi]; absent → false. Raises naming the option and the range. */
static bool opt_int(lua_State *L, int idx, const char *key, lua_Integer lo, lua_Integer hi, lua_Integer *out) {
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return false;
    }
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < lo || lua_tointeger(L, -1) > hi)
        luaL_error(L, "rf.client: %s must be an integer %d..%d", key, (int)lo, (int)hi);
    *out = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return true;
}

void rfl_read_client_network(lua_State *L, int idx, rf_client_options *o) {
    idx = lua_absindex(L, idx);
    lua_Integer v;
    if (opt_int(L, idx, "max_redirects", 1, RF_MAX_REDIRECTS, &v)) o->max_redirects = (int)v;
}
