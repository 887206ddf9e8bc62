/*
 * The binding's data per Lua state, in one struct (as lua-cjson keeps its configuration): made once when the
 * module is opened, kept in the registry under one key (the address of a static), read raw (a metatable a script
 * puts on the registry runs no Lua code here) and known by its object tag, so that a value debug.getregistry put
 * in its place is refused rather than read.
 */
#ifndef RETRYFREEZE_LUA_STATE_H
#define RETRYFREEZE_LUA_STATE_H

#include "retryfreeze/decide.h"
#include "lua_object.h"

/* The number of fact names a facts table may hold (lua_policy.c's fact_keys). */
#define RFL_N_FACTS 16

struct rfl_state {
    rfl_call *call;      /* the innermost call running through rfl_method or rfl_function (lua_object.c) */
    lua_Integer nesting; /* blocking requests running, nested in on_attempt hooks (lua_client.c) */
    rf_rng rng;          /* the RNG of decisions given none, seeded once from the OS (lua_policy.c) */
    const void *fact_ids[RFL_N_FACTS]; /* the identities of the fact names' strings, compared, never read
                                          (lua_policy.c); the strings are held at RFL_STATE_FACT_NAMES */
};

/* The state's holdings (rfl_hold): the verdict string cache (a table, lua_policy.c), the fact name strings, and the
 * FFI path's wrap function when the path is on (lua_ffi.c). */
enum { RFL_STATE_STRINGS = 1, RFL_STATE_FACT_NAMES = 2, RFL_STATE_FFI = 3 };

/* The registry key of the state (for a reader that must not raise: lua_rawgetp, then rfl_testobject). */
const void *rfl_state_key(void);
/* Makes the state of L, or finds the one an earlier luaopen made; leaves nothing on the stack. */
rfl_state *rfl_state_open(lua_State *L);
/* Pushes the state of L and returns it; raises when the registry holds something else (debug.getregistry). */
rfl_state *rfl_state_push(lua_State *L);
/* The state of L, pushing nothing (the registry keeps it alive); raises as rfl_state_push. */
rfl_state *rfl_state_get(lua_State *L);
/* A 64-bit jitter seed from the OS CSPRNG (rfi_os_random): the seed of the per-state RNG and of a client's or
 * step's RNG when the script gives none. Raises "WHO: no randomness from the OS to seed the jitter (getrandom: …)"
 * when the OS gives none: fail closed, never a predictable seed (core/src/util/os_random.h says why). */
uint64_t rfl_random_seed(lua_State *L, const char *who);

#endif
