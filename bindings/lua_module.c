/* require "retryfreeze.core": the module table of the binding. Each area adds its functions to it. */
#include "lua_retryfreeze.h"

int luaopen_retryfreeze_core(lua_State *L) {
    rfl_state_open(L); /* first: every call through rfl_method and rfl_function reads it */
    lua_newtable(L);
    rfl_open_policy(L);
    rfl_open_lock_schema(L);
    rfl_open_ffi(L); /* after the policy functions: it reads core.reasons and core.transports */
    rfl_open_ledger(L);
    rfl_open_ledger_tally(L);
    rfl_open_replay(L);
    rfl_open_retry_budget(L);
    rfl_open_client(L);
    rfl_open_step(L);
    rfl_open_input(L);
    rfl_open_output(L);
    rfl_open_json(L);
    rfl_open_glob(L);
    return 1;
}
