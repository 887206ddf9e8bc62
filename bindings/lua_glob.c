/* Path globs for the Lua library (retryfreeze.glob) through POSIX glob(3), without a shell: `*`, `?`, `[…]`
 * and `\` escapes; a wildcard never matches `/`, and a leading `.` only when the pattern spells it
 * (POSIX.1-2017, glob() and "Pattern Matching Notation" §2.13). */
#include "lua_retryfreeze.h"
#include <errno.h>
#include <glob.h>
#include <string.h>

/* The glob_t lives in a userdata with a __gc, so a Lua error while copying the names frees it. */
static int glob_gc(lua_State *L) {
    glob_t *g = rfl_checkobject(L, 1, RFL_GLOB);
    if (g->gl_pathv != NULL) globfree(g);
    g->gl_pathv = NULL;
    return 0;
}

static int glob_errfunc(const char *path, int err) {
    (void)path;
    (void)err;
    return 0; /* an unreadable directory matches nothing; glob goes on with the others */
}

/* glob(pattern) → array of the existing paths that match (glob's own order; empty when none), or
 * nil, message when glob fails (out of memory). A pattern holding a NUL byte raises. */
static int l_glob(lua_State *L) {
    size_t len;
    const char *pattern = luaL_checklstring(L, 1, &len);
    luaL_argcheck(L, strlen(pattern) == len, 1, "pattern holds a NUL byte");
    glob_t *g = rfl_newobject(L, RFL_GLOB, sizeof *g);
    int rc = glob(pattern, 0, glob_errfunc, g);
    if (rc == GLOB_NOMATCH) {
        lua_newtable(L);
        return 1;
    }
    if (rc != 0)
        return rfl_fail(
            L, lua_pushfstring(L, "glob '%s': %s", pattern, rc == GLOB_NOSPACE ? "out of memory" : "read error"), NULL);
    lua_createtable(L, (int)g->gl_pathc, 0);
    for (size_t i = 0; i < g->gl_pathc; i++) {
        lua_pushstring(L, g->gl_pathv[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

void rfl_open_glob(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", glob_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"glob", l_glob}, {NULL, NULL}};
    rfl_new_type(L, RFL_GLOB, NULL, meta);
    luaL_setfuncs(L, funcs, 0);
}
