/* See lua_object.h: object identity by a secret tag in a hidden header, and the lifetime rules every object
 * follows (open, busy, users, holdings; rfl_method and rfl_function). */
#define _GNU_SOURCE
#include "lua_object.h"
#include "lua_state.h"
#include "../core/src/util/os_random.h"
#include "../core/src/util/suggest.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The header before every object: 32 bytes, which keeps the object at the userdata's alignment. */
typedef struct header {
    uint64_t tag;
    int32_t holdings; /* registry reference of the holdings table; 0: none (luaL_ref never returns 0) */
    uint32_t users;   /* 32 bits: a policy may have a decider per request in flight, and more awaiting collection */
    uint8_t open, busy;
    uint8_t pad[14];
} header;
_Static_assert(sizeof(header) == 32, "the header keeps objects 16-byte aligned");

#define RFL_X_NAME(e, name, closed, busy) name,
#define RFL_X_CLOSED(e, name, closed, busy) closed,
#define RFL_X_BUSY(e, name, closed, busy) busy,
static const char *const type_names[] = {RFL_OBJECT_TYPES(RFL_X_NAME)};
static const char *const closed_messages[] = {RFL_OBJECT_TYPES(RFL_X_CLOSED)};
static const char *const busy_messages[] = {RFL_OBJECT_TYPES(RFL_X_BUSY)};

static uint64_t tags[RFL_TYPE_COUNT]; /* written once by init_tags (pthread_once); read-only after */
static int tags_errno;                /* likewise: the errno when the OS gave no secret (then no object is made) */
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

static void init_tags(void) {
    uint64_t secret = 0;
    tags_errno = rfi_os_random(&secret, sizeof secret);
    if (tags_errno != 0) return; /* tags stay 0: no userdata is taken for an object */
    for (int t = 0; t < RFL_TYPE_COUNT; t++) {
        uint64_t h = 0xcbf29ce484222325u; /* FNV-1a, 64-bit */
        for (const unsigned char *s = (const unsigned char *)type_names[t]; *s != '\0'; s++)
            h = (h ^ *s) * 0x100000001b3u;
        tags[t] = (secret ^ h) | 1; /* never 0, which zeroed memory would carry */
    }
}

const char *rfl_type_name(rfl_type t) { return type_names[t]; }

uint64_t rfl_object_tag(rfl_type t) {
    pthread_once(&tags_once, init_tags);
    return tags[t];
}

void rfl_new_metatable(lua_State *L, rfl_type t, const luaL_Reg *methods, const luaL_Reg *meta) {
    luaL_newmetatable(L, type_names[t]);
    if (methods != NULL) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
    }
    if (meta != NULL) luaL_setfuncs(L, meta, 0);
    lua_pushstring(L, type_names[t]);
    lua_setfield(L, -2, "__metatable");
}

void rfl_new_type(lua_State *L, rfl_type t, const luaL_Reg *methods, const luaL_Reg *meta) {
    rfl_new_metatable(L, t, methods, meta);
    lua_pop(L, 1);
}

static header *header_of(const void *obj) { return (header *)(void *)((char *)(uintptr_t)obj - sizeof(header)); }

void *rfl_newobject(lua_State *L, rfl_type t, size_t size) {
    uint64_t tag = rfl_object_tag(t);
    if (tags_errno != 0) /* fail closed: a guessable tag would let a forged userdata pass for an object */
        rfl_error(L, "retryfreeze: no randomness from the OS for the objects' tags (getrandom: %s)",
                  strerror(tags_errno));
    char *u = lua_newuserdatauv(L, sizeof(header) + size, 0);
    memset(u, 0, sizeof(header) + size);
    memcpy(u, &tag, sizeof tag);
    /* The registry's metatable, read raw and type-checked: through debug.getregistry a script can put any value
     * there, or a metatable on the registry itself, and lua_setmetatable must get a table. */
    lua_pushstring(L, type_names[t]);
    if (lua_rawget(L, LUA_REGISTRYINDEX) != LUA_TTABLE)
        rfl_error(L, "retryfreeze: the registry's metatable %s was replaced (debug.getregistry)", type_names[t]);
    lua_setmetatable(L, -2);
    return u + sizeof(header);
}

void *rfl_testobject(lua_State *L, int idx, rfl_type t) {
    char *u = lua_touserdata(L, idx);
    if (u == NULL || lua_rawlen(L, idx) < sizeof(header)) return NULL; /* a light userdata's length is 0 */
    uint64_t have;
    memcpy(&have, u, sizeof have);
    /* tags[t] without pthread_once: this runs inside functions the module registered, so the thread opened the
     * module first (rfl_state_open made an object: rfl_object_tag ran), and the tags were written before. On the
     * path of every decision, this saves the once-check. */
    return have == tags[t] ? u + sizeof(header) : NULL;
}

void *rfl_object_at(void *payload, rfl_type t) {
    if (payload == NULL) return NULL;
    uint64_t have;
    memcpy(&have, payload, sizeof have);
    return have == tags[t] ? (char *)payload + sizeof(header) : NULL; /* tags written: see rfl_testobject */
}

void *rfl_checkobject(lua_State *L, int idx, rfl_type t) {
    void *p = rfl_testobject(L, idx, t);
    if (p != NULL) return p;
    const char *name = type_names[t];
    if (lua_type(L, idx) == LUA_TLIGHTUSERDATA)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got light userdata", name));
    if (luaL_testudata(L, idx, name) != NULL)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got a forged one", name));
    luaL_checkudata(L, idx, name); /* raises "name expected, got <type>" */
    return NULL;                   /* not reached */
}

int rfl_upvalue(lua_State *L, int i, int type) {
    int idx = lua_upvalueindex(i);
    return lua_type(L, idx) == type ? idx : 0;
}

/* ---- lifetime ------------------------------------------------------------------------------------ */

bool rfl_is_open(const void *obj) { return header_of(obj)->open != 0; }

void rfl_set_open(void *obj, bool open) { header_of(obj)->open = open ? 1 : 0; }

void *rfl_take(lua_State *L, int idx, rfl_type t) {
    void *obj = rfl_checkobject(L, idx, t);
    header *h = header_of(obj);
    if (!h->open) rfl_error(L, "%s", closed_messages[t] ? closed_messages[t] : "attempt to use a closed object");
    if (h->users == UINT32_MAX) rfl_error(L, "%s: more than 2^32 - 1 users at once", type_names[t]);
    h->users++;
    return obj;
}

void rfl_give_back(void *obj) {
    if (obj != NULL && header_of(obj)->users > 0) header_of(obj)->users--;
}

bool rfl_take_again(void *obj) {
    header *h = header_of(obj);
    if (!h->open || h->users == UINT32_MAX) return false;
    h->users++;
    return true;
}

unsigned rfl_users(const void *obj) { return header_of(obj)->users; }

bool rfl_collectable(const void *obj) { return header_of(obj)->busy == 0 && header_of(obj)->users == 0; }

bool rfl_is_idle(const void *obj) { return header_of(obj)->open != 0 && header_of(obj)->busy == 0; }

void rfl_retire(lua_State *L, void *obj, void **taken, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rfl_give_back(taken[i]); /* alive: obj's holdings hold what it took */
        taken[i] = NULL;
    }
    rfl_release_holdings(L, obj);
    rfl_set_open(obj, false);
}

void rfl_hold(lua_State *L, void *obj, int slot) {
    header *h = header_of(obj);
    if (h->holdings == 0) {
        lua_createtable(L, 5, 0); /* the most slots a type holds (a step's five): no slot lands in a hash part */
        int ref = luaL_ref(L, LUA_REGISTRYINDEX); /* raw reads and writes of the registry */
        if (h->holdings == 0) {                   /* (a finalizer run by that allocation may have held first) */
            h->holdings = ref;
        } else {
            luaL_unref(L, LUA_REGISTRYINDEX, ref);
        }
    }
    if (lua_rawgeti(L, LUA_REGISTRYINDEX, h->holdings) != LUA_TTABLE)
        rfl_error(L, "retryfreeze: an object's holdings were replaced (debug.getregistry)");
    lua_insert(L, -2);
    lua_rawseti(L, -2, slot);
    lua_pop(L, 1);
}

int rfl_held(lua_State *L, const void *obj, int slot) {
    const header *h = header_of(obj);
    if (h->holdings == 0 || lua_rawgeti(L, LUA_REGISTRYINDEX, h->holdings) != LUA_TTABLE) {
        if (h->holdings != 0) lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNIL;
    }
    int type = lua_rawgeti(L, -1, slot);
    lua_remove(L, -2);
    return type;
}

void rfl_release_holdings(lua_State *L, void *obj) {
    header *h = header_of(obj);
    if (h->holdings == 0) return;
    luaL_unref(L, LUA_REGISTRYINDEX, h->holdings);
    h->holdings = 0;
}

bool rfl_has_holdings(const void *obj) { return header_of(obj)->holdings != 0; }

/* ---- calls --------------------------------------------------------------------------------------- */

/* The body of the innermost call, run by lua_pcall. Reachable from Lua only through the debug library (a hook's
 * debug.getinfo): a call that was not set up, or was already entered, raises instead of running anything. */
static int l_body(lua_State *L) {
    rfl_state *st = rfl_state_get(L);
    rfl_call *call = st->call;
    if (call == NULL || call->entered) return rfl_error(L, "retryfreeze: a call's body was called out of turn");
    call->entered = true;
    return call->body(L, call);
}

/* The level of the Lua code a raise should name: 1 (the caller of the running C function), or 2 when the running
 * function is l_body, whose caller is rfl_method's or rfl_function's C frame. Only on the error path. */
static int caller_level(lua_State *L) {
    lua_Debug ar;
    int level = 1;
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "f", &ar)) {
        if (lua_tocfunction(L, -1) == l_body) level = 2;
        lua_pop(L, 1);
    }
    return level;
}

int rfl_error(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, caller_level(L));
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

int rfl_unknown_option(lua_State *L, const char *what, const char *key, const char *const *allowed,
                       const char *const *more) {
    char names[1024], near[64];
    size_t n = 0;
    names[0] = '\0';
    const char *const *lists[2] = {allowed, more};
    for (int l = 0; l < 2; l++)
        for (int i = 0; lists[l] && lists[l][i] && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", lists[l][i]);
    rfi_did_you_mean(key, names, near, sizeof near);
    if (near[0]) return rfl_error(L, "%s: unknown option '%s' (did you mean '%s'?)", what, key, near);
    return rfl_error(L, "%s: unknown option '%s'", what, key);
}

int rfl_pass_on(lua_State *L, rfl_call *call) {
    call->passing_on = true; /* l_on_error sees it raised by the body, but not as one of the body's own */
    return lua_error(L);
}

/* The message handler of a body's lua_pcall, run where the error is raised, before the stack unwinds: it notes
 * whether the body's own C code raised a "bad argument" error (level 1 is l_body) rather than passed one on from
 * Lua code it ran. It must not raise. */
static int l_on_error(lua_State *L) {
    lua_Debug ar;
    bool in_body = false;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "f", &ar)) {
        in_body = lua_tocfunction(L, -1) == l_body;
        lua_pop(L, 1);
    }
    static const char prefix[] = "bad argument #";
    const char *msg = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    if (in_body && msg != NULL && strncmp(msg, prefix, sizeof prefix - 1) == 0) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, rfl_state_key());
        rfl_state *st = rfl_testobject(L, -1, RFL_STATE);
        lua_pop(L, 1);
        if (st != NULL && st->call != NULL && !st->call->passing_on) st->call->argerror = true;
    }
    lua_settop(L, 1);
    return 1;
}

/* After the body raised, the error on top: a "bad argument #N to '?' (…)" the body itself raised (l_on_error: it
 * has no name of its own) is raised again by luaL_argerror here, in the caller's frame, which names the function
 * and leaves out a method's self; any other error value is raised as it is. */
static int reraise(lua_State *L, const rfl_call *call) {
    static const char prefix[] = "bad argument #";
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (call->argerror && msg != NULL && strncmp(msg, prefix, sizeof prefix - 1) == 0) {
        int arg = 0, used = 0;
        if (sscanf(msg + sizeof prefix - 1, "%d to '?' (%n", &arg, &used) == 1 && used > 0) {
            const char *extra = msg + sizeof prefix - 1 + used;
            size_t len = strlen(extra);
            if (len > 0 && extra[len - 1] == ')') {
                lua_pushlstring(L, extra, len - 1);
                return luaL_argerror(L, arg, lua_tostring(L, -1));
            }
        }
    }
    return lua_error(L);
}

/* Pushes f, one of the C functions every call pushes (l_on_error, l_body). From Lua 5.2 on that is a light C function,
 * a value; in Lua 5.1 and LuaJIT lua_pushcfunction makes a new object each time (an allocation, and garbage), so the
 * registry keeps one at key, pushed when it is still f (a script may have replaced it through debug.getregistry:
 * then that value is never called, and f is pushed anew and kept there again). */
static void push_call_function(lua_State *L, const void *key, lua_CFunction f) {
#if LUA_VERSION_NUM == 501
    lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    if (lua_tocfunction(L, -1) == f) return;
    lua_pop(L, 1);
    lua_pushcfunction(L, f);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
#else
    (void)key;
    lua_pushcfunction(L, f);
#endif
}
static const char on_error_key = 0, body_key = 0; /* the registry keys of l_on_error and l_body (Lua 5.1, LuaJIT) */

/* rfl_method and rfl_function: self (NULL for a function) is pinned already. Runs body under lua_pcall with the
 * caller's arguments, then leaves (self unpinned, the call unlinked) on success and on error alike. */
static int run(lua_State *L, rfl_state *st, header *self, rfl_body body) {
    /* Stack: the arguments 1..n, then the state (n + 1), and self's object (n + 2, or nil), which stay anchored
     * below the results: [state, object, handler, body, arguments…] → pcall → [state, object, handler, results…]. */
    int n = lua_gettop(L) - 2;
    lua_insert(L, 1);
    lua_insert(L, 1);
    push_call_function(L, &on_error_key, l_on_error);
    lua_insert(L, 3);
    push_call_function(L, &body_key, l_body);
    lua_insert(L, 4);
    rfl_call call = {.state = st,
                     .self = self ? (char *)self + sizeof(header) : NULL,
                     .yieldable = lua_isyieldable(L),
                     .outer = st->call,
                     .body = body};
    st->call = &call;
    int rc = lua_pcall(L, n, LUA_MULTRET, 3);
    st->call = call.outer;
    if (self != NULL) self->busy = 0;
    if (rc != LUA_OK) {
        if (call.made != NULL && call.made_release != NULL) call.made_release(L, call.made);
        return reraise(L, &call);
    }
    lua_remove(L, 1);
    lua_remove(L, 1);
    lua_remove(L, 1);
    if (call.yield_n > 0) {
#if LUA_VERSION_NUM >= 503
        return lua_yieldk(L, call.yield_n, call.yield_ctx, call.yield_k);
#else
        return lua_yield(L, call.yield_n);
#endif
    }
    return lua_gettop(L);
}

int rfl_method(lua_State *L, int idx, rfl_type t, unsigned flags, rfl_body body) {
    /* Nothing before the pin may run Lua: the checks read the header, and the error paths raise. */
    idx = lua_absindex(L, idx);
    void *obj = rfl_checkobject(L, idx, t);
    header *h = header_of(obj);
    if ((flags & RFL_OPEN) && !h->open)
        return rfl_error(L, "%s", closed_messages[t] ? closed_messages[t] : "attempt to use a closed object");
    if (h->busy) return rfl_error(L, "%s", busy_messages[t] ? busy_messages[t] : "object is busy");
    rfl_state *st = rfl_state_push(L); /* raw registry read; raises before the pin if replaced */
    h->busy = 1;
    lua_pushvalue(L, idx);
    return run(L, st, h, body);
}

int rfl_function(lua_State *L, rfl_body body) {
    rfl_state *st = rfl_state_push(L);
    lua_pushnil(L);
    return run(L, st, NULL, body);
}

void *rfl_make(lua_State *L, rfl_call *call, rfl_type t, size_t size, rfl_release release) {
    void *obj = rfl_newobject(L, t, size);
    call->made = obj;
    call->made_release = release;
    return obj;
}

/* rfl_pcall's function, run by lua_pcall: runs the innermost call's protected function once. */
static int l_protected(lua_State *L) {
    rfl_call *call = rfl_state_get(L)->call;
    if (call == NULL || call->protected_fn == NULL)
        return rfl_error(L, "retryfreeze: a protected part was called out of turn");
    int (*fn)(lua_State *, void *) = call->protected_fn;
    call->protected_fn = NULL; /* once */
    return fn(L, call->protected_ud);
}

int rfl_pcall(lua_State *L, rfl_call *call, int (*fn)(lua_State *L, void *ud), void *ud, int nargs, int nresults) {
    int (*saved_fn)(lua_State *, void *) = call->protected_fn;
    void *saved_ud = call->protected_ud;
    call->protected_fn = fn;
    call->protected_ud = ud;
    lua_pushcfunction(L, l_protected);
    lua_insert(L, -nargs - 1);
    int rc = lua_pcall(L, nargs, nresults, 0);
    call->protected_fn = saved_fn;
    call->protected_ud = saved_ud;
    return rc;
}

void rfl_yield(rfl_call *call, int n, lua_KContext ctx, lua_KFunction k) {
    call->yield_n = n;
    call->yield_ctx = ctx;
    call->yield_k = k;
}
