/*
 * Shared by the fuzz targets of the Lua readers (fuzz_pairing_log, fuzz_decision_table): one Lua 5.4 state
 * per process with the library from the source tree (RF_LUA_DIR) and the binding linked in (package.preload),
 * a memfd for the input (the readers take a path, as the CLI gives them), and a call that must not raise.
 * It holds the targets' entry points too: a target is its Lua source, fz_lua_check, which defines the global
 * function fz_check(path, bytes) and checks its invariants there (FZ_LOCK names the lock to check against).
 * Header-only, like fuzz.h, so each target builds as a libFuzzer target and as a corpus replayer.
 */
#ifndef RF_FUZZ_LUA_H
#define RF_FUZZ_LUA_H

#define _GNU_SOURCE
#include "fuzz.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <sys/mman.h>
#include <unistd.h>

int luaopen_retryfreeze_core(lua_State *L);

static lua_State *fz_L;
static unsigned long fz_runs;

/* Opens the state once: standard libraries, package.path on the source tree, retryfreeze.core preloaded. */
static lua_State *fz_lua(void) {
    if (fz_L != NULL) return fz_L;
    fz_L = luaL_newstate();
    FZ_CHECK(fz_L != NULL, "luaL_newstate failed");
    luaL_openlibs(fz_L);
    lua_getglobal(fz_L, "package");
    lua_pushstring(fz_L, RF_LUA_DIR "/?.lua;" RF_LUA_DIR "/?/init.lua");
    lua_setfield(fz_L, -2, "path");
    lua_getfield(fz_L, -1, "preload");
    lua_pushcfunction(fz_L, luaopen_retryfreeze_core);
    lua_setfield(fz_L, -2, "retryfreeze.core");
    lua_pop(fz_L, 2);
    lua_pushstring(fz_L, RF_EXAMPLES_DIR "/retry-budget.lock.json"); /* the lock the readers are checked against */
    lua_setglobal(fz_L, "FZ_LOCK");
    return fz_L;
}

/* Runs Lua source (a chunk) once at start-up: it must not fail. */
static void fz_lua_do(const char *chunk) {
    lua_State *L = fz_lua();
    if (luaL_dostring(L, chunk) != LUA_OK) FZ_CHECK(0, "start-up chunk failed: %s", lua_tostring(L, -1));
    lua_settop(L, 0);
}

/* The input as a file: a memfd, named by its /proc path. Returns the descriptor. */
static int fz_memfile(const uint8_t *data, size_t size, char path[64]) {
    int fd = memfd_create("input", MFD_CLOEXEC);
    FZ_CHECK(fd >= 0, "memfd_create failed");
    for (size_t at = 0; at < size;) {
        ssize_t n = write(fd, data + at, size - at);
        FZ_CHECK(n > 0, "write to memfd failed");
        at += (size_t)n;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* Calls the global function `name` with the path and the input's bytes; it must return without raising
 * (its own checks use error() with "invariant violated: …", which is a finding too). */
static void fz_lua_call(const char *name, const char *path, const uint8_t *data, size_t size) {
    lua_State *L = fz_lua();
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "traceback");
    lua_remove(L, -2);
    lua_getglobal(L, name);
    lua_pushstring(L, path);
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 2, 0, 1) != LUA_OK) FZ_CHECK(0, "%s raised: %s", name, lua_tostring(L, -1));
    lua_settop(L, 0);
    /* Garbage from one input must not pile up: a step each time, a full cycle now and then. */
    lua_gc(L, ++fz_runs % 256 == 0 ? LUA_GCCOLLECT : LUA_GCSTEP, 0);
}

/* The including target's Lua source (a chunk defining fz_check); run once at start-up. */
extern const char fz_lua_check[];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (fz_L == NULL) fz_lua_do(fz_lua_check);
    return 0;
}

/* One input: written to a memfd, and fz_check(path, bytes) called on it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fz_L == NULL) LLVMFuzzerInitialize(NULL, NULL);
    char path[64];
    int fd = fz_memfile(data, size, path);
    fz_lua_call("fz_check", path, data, size);
    close(fd);
    return 0;
}

#endif
