/* See lua_object.h: object identity by a secret tag in a hidden header, not by metatable. */
#define _GNU_SOURCE
#include "lua_object.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* The header before every object: the tag, then padding that keeps the object at the userdata's alignment. */
#define HEADER_SIZE 16

static uint64_t object_secret; /* written once by init_secret (pthread_once); read-only after */
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;

static void init_secret(void) {
    uint64_t secret = 0;
    if (getrandom(&secret, sizeof secret, 0) != (ssize_t)sizeof secret) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        secret = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&secret;
    }
    object_secret = secret;
}

uint64_t rfl_object_tag(const char *tname) {
    pthread_once(&secret_once, init_secret);
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a, 64-bit */
    for (const unsigned char *s = (const unsigned char *)tname; *s != '\0'; s++) h = (h ^ *s) * 0x100000001b3u;
    return (object_secret ^ h) | 1; /* never 0, which zeroed memory would carry */
}

void *rfl_newobject(lua_State *L, size_t size, int nuv, const char *tname) {
    uint64_t tag = rfl_object_tag(tname);
    char *u = lua_newuserdatauv(L, HEADER_SIZE + size, nuv);
    memset(u, 0, HEADER_SIZE + size);
    memcpy(u, &tag, sizeof tag);
    /* The registry's metatable, read raw and type-checked: through debug.getregistry a script can put any value
     * there, or a metatable on the registry itself, and lua_setmetatable must get a table. */
    lua_pushstring(L, tname);
    if (lua_rawget(L, LUA_REGISTRYINDEX) != LUA_TTABLE)
        luaL_error(L, "retryfreeze: the registry's metatable %s was replaced (debug.getregistry)", tname);
    lua_setmetatable(L, -2);
    return u + HEADER_SIZE;
}

void *rfl_testobject(lua_State *L, int idx, uint64_t tag) {
    char *u = lua_touserdata(L, idx);
    if (u == NULL || lua_rawlen(L, idx) < HEADER_SIZE) return NULL; /* a light userdata's length is 0 */
    uint64_t have;
    memcpy(&have, u, sizeof have);
    return have == tag ? u + HEADER_SIZE : NULL;
}

void *rfl_testudata(lua_State *L, int idx, const char *tname) { return rfl_testobject(L, idx, rfl_object_tag(tname)); }

void *rfl_checkudata(lua_State *L, int idx, const char *tname) {
    void *p = rfl_testudata(L, idx, tname);
    if (p != NULL) return p;
    if (lua_type(L, idx) == LUA_TLIGHTUSERDATA)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got light userdata", tname));
    if (luaL_testudata(L, idx, tname) != NULL)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got a forged one", tname));
    luaL_checkudata(L, idx, tname); /* raises "tname expected, got <type>" */
    return NULL;                    /* not reached */
}
