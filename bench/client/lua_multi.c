/*
 * client:all's baseline for bench/client/bench_all.lua, in the same Lua process as client:all:
 * require "rf_bench_multi".
 *   run(base_url, n, concurrency, user_agent, keep) → CPU seconds of the loop (user + system, getrusage), wall
 *     seconds, failed transfers: multi_loop.h's plain libcurl multi loop (keep: every response's status, header block
 *     and body kept until the loop ends, as client:all keeps them for its result).
 *   cpu() → the CPU seconds (user + system, getrusage) the process has used: the clock client:all is timed with, so
 *     both sides are measured alike.
 * Raises on a bad argument or when memory runs out. bench_all.lua counts instructions in l_bench_multi_run (callgrind's
 * --toggle-collect): the name is unique to this module.
 */
#include "multi_loop.h"

#include <lauxlib.h>
#include <lua.h>

static int l_bench_multi_run(lua_State *L) {
    bench_multi_opts o = {.base = luaL_checkstring(L, 1),
                          .n = (long)luaL_checkinteger(L, 2),
                          .conc = (long)luaL_checkinteger(L, 3),
                          .user_agent = luaL_optstring(L, 4, NULL),
                          .keep = lua_toboolean(L, 5)};
    luaL_argcheck(L, o.n >= 1, 2, "at least 1 request");
    luaL_argcheck(L, o.conc >= 1 && o.conc <= 4096, 3, "concurrency 1..4096");
    bench_multi_result r;
    if (!bench_multi_run(&o, &r)) return luaL_error(L, "rf_bench_multi.run: out of memory");
    lua_pushnumber(L, r.cpu_s);
    lua_pushnumber(L, r.wall_s);
    lua_pushinteger(L, r.failed);
    return 3;
}

static int l_cpu(lua_State *L) {
    lua_pushnumber(L, bench_cpu_s());
    return 1;
}

__attribute__((visibility("default"))) int luaopen_rf_bench_multi(lua_State *L);

int luaopen_rf_bench_multi(lua_State *L) {
    curl_global_init(CURL_GLOBAL_DEFAULT); /* once, here: run's own init and cleanup only count references then */
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, l_bench_multi_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, l_cpu);
    lua_setfield(L, -2, "cpu");
    return 1;
}
