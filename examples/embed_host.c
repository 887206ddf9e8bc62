/*
 * embed_host.c — a C program that embeds Lua 5.4 and the retryfreeze module, as a Lua-based tool would.
 * It preloads retryfreeze.core (linked in), points package.path at the Lua library, loads a lock and asks
 * for a verdict from Lua. Build: see cmake/bindings.cmake (target embed_host), or against an install:
 *   cc embed_host.c $(pkg-config --cflags --libs retryfreeze lua5.4) -o embed_host
 * Usage: embed_host LUA_DIR LOCK
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

int luaopen_retryfreeze_core(lua_State *L);

static const char *const script =
    "local lua_dir, lock = ...\n"
    "package.path = lua_dir .. '/?.lua;' .. lua_dir .. '/?/init.lua;' .. package.path\n"
    "local rf = require 'retryfreeze'\n"
    "local policy = assert(rf.load(lock))\n"
    "local v = policy:decide({ method = 'POST', path = '/v1/jobs', status = 429, retry_after = '1',\n"
    "                          idempotency_key = 'k1', attempts = 1, elapsed_ms = 100 })\n"
    "return string.format('%s %s %s delay_ms=%d timeout_ms=%d', policy.digest:sub(1, 15), tostring(v.retry),\n"
    "                     v.reason, v.delay_ms, v.timeout_ms)\n";

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: embed_host LUA_DIR LOCK\n");
        return 2;
    }
    lua_State *L = luaL_newstate();
    if (L == NULL) return 2;
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_retryfreeze_core);
    lua_setfield(L, -2, "retryfreeze.core");
    lua_pop(L, 1);
    int status = 0;
    if (luaL_loadstring(L, script) != LUA_OK) {
        status = 1;
    } else {
        lua_pushstring(L, argv[1]);
        lua_pushstring(L, argv[2]);
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) status = 1;
    }
    printf("%s\n", lua_tostring(L, -1));
    lua_close(L);
    return status;
}
