/* See lua_state.h: the binding's data per Lua state, one struct in the registry. */
#define _GNU_SOURCE
#include "lua_state.h"

#include "../core/src/util/os_random.h"

#include <string.h>

/* The registry key of the state: this variable's address. */
static const char state_key = 0;

uint64_t rfl_random_seed(lua_State *L, const char *who) {
    uint64_t seed = 0;
    int e = rfi_os_random(&seed, sizeof seed);
    if (e != 0) rfl_error(L, "%s: no randomness from the OS to seed the jitter (getrandom: %s)", who, strerror(e));
    return seed;
}

const void *rfl_state_key(void) { return &state_key; }

rfl_state *rfl_state_push(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    rfl_state *st = rfl_testobject(L, -1, RFL_STATE);
    if (st == NULL) rfl_error(L, "retryfreeze: the binding's state was replaced (debug.getregistry)");
    return st;
}

rfl_state *rfl_state_get(lua_State *L) {
    rfl_state *st = rfl_state_push(L);
    lua_pop(L, 1);
    return st;
}

rfl_state *rfl_state_open(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    rfl_state *st = rfl_testobject(L, -1, RFL_STATE);
    lua_pop(L, 1);
    if (st != NULL) return st;
    luaL_newmetatable(L, rfl_type_name(RFL_STATE));
    lua_pushstring(L, rfl_type_name(RFL_STATE));
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    st = rfl_newobject(L, RFL_STATE, sizeof *st);
    rf_rng_seed(&st->rng, rfl_random_seed(L, "retryfreeze"));
    rfl_set_open(st, true);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
    return st;
}
