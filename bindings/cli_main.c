/*
 * The `retryfreeze` command: a small host that embeds Lua 5.4, preloads retryfreeze.core (linked in), points
 * package.path at the Lua library, and hands argv to retryfreeze.cli.main, whose integer result is the exit
 * status (0 ok, 1 a check failed, 2 bad usage or bad input). Subcommands are written in Lua.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RF_BUILD_LUA_DIR
#define RF_BUILD_LUA_DIR ""
#endif

/* package.path: the install tree beside the executable first (bin/../share/lua/5.4), then the source tree. */
static void set_path(lua_State *L) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dir = ".";
    if (n > 0) {
        exe[n] = '\0';
        dir = dirname(exe);
    }
    lua_pushstring(L, dir);
    lua_setfield(L, LUA_REGISTRYINDEX, "retryfreeze.bindir");
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/../share/lua/5.4/?.lua;%s/../share/lua/5.4/?/init.lua;", dir, dir);
    if (RF_BUILD_LUA_DIR[0])
        lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", RF_BUILD_LUA_DIR, RF_BUILD_LUA_DIR);
    else
        lua_pushliteral(L, "");
    lua_getfield(L, -3, "path");
    lua_concat(L, 3);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

/*
 * retryfreeze.host.exec(program, args): replaces this process with program (execv), so that signals sent to
 * `retryfreeze serve` reach the server itself. Returns nil, message only when execv fails. Only the CLI host
 * has this module; a Lua program that requires retryfreeze does not.
 */
static int l_exec(lua_State *L) {
    const char *program = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 0 && n < 256, 2, "at most 255 arguments");
    const char *argv[258];
    argv[0] = program;
    luaL_checkstack(L, (int)n + 1, "retryfreeze.host.exec: arguments");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        /* Left on the stack: a number becomes a new string here, which only this slot keeps alive. */
        argv[i] = luaL_checkstring(L, -1);
    }
    argv[n + 1] = NULL;
    fflush(NULL);
    execv(program, (char *const *)argv);
    return rfl_fail(L, lua_pushfstring(L, "cannot run %s: %s", program, strerror(errno)), NULL);
}

static int luaopen_host(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, l_exec);
    lua_setfield(L, -2, "exec");
    return 1;
}

static int traceback(lua_State *L) {
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
    return 1;
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fputs("retryfreeze: cannot create a Lua state (out of memory)\n", stderr);
        return 2;
    }
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_retryfreeze_core);
    lua_setfield(L, -2, "retryfreeze.core");
    lua_pushcfunction(L, luaopen_host);
    lua_setfield(L, -2, "retryfreeze.host");
    lua_pop(L, 1);
    set_path(L);

    lua_pushcfunction(L, traceback);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "retryfreeze.cli");
    int status = 2;
    if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
        fprintf(stderr, "retryfreeze: cannot load the CLI: %s\n", lua_tostring(L, -1));
        lua_close(L);
        return 2;
    }
    lua_getfield(L, -1, "main");
    lua_createtable(L, argc, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, "retryfreeze.bindir");
    lua_setfield(L, -2, "bindir");
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
        fprintf(stderr, "retryfreeze: internal error: %s\n", lua_tostring(L, -1));
    } else {
        status = (int)luaL_optinteger(L, -1, 0);
    }
    lua_close(L);
    return status;
}
