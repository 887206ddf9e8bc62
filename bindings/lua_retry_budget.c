/*
 * Lua binding of retry budgets (gRPC A6 retryThrottling): rf.retry_budget(policy [, {redis=, timeout_ms=,
 * idle_ttl_ms=, ca_file=, ca_path=, cert=, key=}]) → "retryfreeze.RetryBudget", a bucket several clients (and
 * rf.flow) can share, kept in the process or, with redis, in a Redis server shared by a fleet
 * (retryfreeze/retry_budget_redis.h). core.retry_budget_peek(name, {redis=, timeout_ms=, ca_file=, …}) reads a
 * shared bucket for `retryfreeze budget show`.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/retry_budget_redis.h"
#include "../core/src/util/clock_ms.h"
#include <stdio.h>
#include <string.h>

/* A retry budget object. Holding 1: the policy, which the budget's parameters come from and which must outlive
 * it. Its users (lua_object.h: open clients and running flows) make close refuse. */
typedef struct lbudget {
    rf_retry_budget *b; /* NULL until created, and after close */
    bool shared;        /* kept in Redis */
    void *taken[1];     /* its policy, taken (rfl_take) until close */
} lbudget;

rf_retry_budget *rfl_take_retry_budget(lua_State *L, int idx, void **obj) {
    if (lua_type(L, idx) != LUA_TUSERDATA)
        rfl_error(L, "a retry budget must be an rf.retry_budget(policy), got %s", luaL_typename(L, idx));
    lbudget *lb = rfl_take(L, idx, RFL_BUDGET);
    *obj = lb;
    return lb->b;
}

/* Frees the bucket and drops the policy: close, __gc, and a constructor that raised. Never raises. */
static void budget_release(lua_State *L, void *obj) {
    lbudget *lb = obj;
    rf_retry_budget_free(lb->b);
    lb->b = NULL;
    rfl_retire(L, lb, lb->taken, 1);
}

/* An optional integer option of milliseconds in lo..hi (0 when absent), read from the options at t. */
static int64_t opt_ms(lua_State *L, int t, const char *who, const char *key, int64_t lo, int64_t hi) {
    lua_getfield(L, t, key);
    int64_t v = 0;
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < lo || lua_tointeger(L, -1) > hi)
            rfl_error(L, "%s: %s must be an integer number of milliseconds in %d..%d", who, key, (int)lo, (int)hi);
        v = (int64_t)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* An optional string option (NULL when absent), pushed and left on the stack: anchored while C reads it. */
static const char *opt_string(lua_State *L, int t, const char *who, const char *key, const char *shape) {
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) return NULL;
    if (lua_type(L, -1) != LUA_TSTRING) rfl_error(L, "%s: %s must be %s", who, key, shape);
    char what[64];
    snprintf(what, sizeof what, "%s: %s", who, key);
    return rfl_tostring_nonul(L, -1, what);
}

/* The options of a shared budget: where Redis is, how long to wait, and TLS (retry_budget_redis.h). */
static const char *const REDIS_OPTIONS[] = {"redis", "timeout_ms", "idle_ttl_ms", "ca_file", "ca_path",
                                            "cert",  "key",        "shared_dict", NULL};

/*
 * Reads the options table at t (who names the caller in errors) into *o, refusing a key not in REDIS_OPTIONS.
 * The strings stay pushed on the stack (anchored) until the caller returns: the C side reads them while it
 * makes the budget. Raises on a bad option. o->url is NULL without redis.
 */
static void read_redis_options(lua_State *L, int t, const char *who, rf_redis_budget_options *o) {
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        size_t i = 0;
        while (k != NULL && REDIS_OPTIONS[i] != NULL && strcmp(k, REDIS_OPTIONS[i]) != 0) i++;
        if (k == NULL || REDIS_OPTIONS[i] == NULL)
            rfl_unknown_option(L, who, k ? k : luaL_typename(L, -2), REDIS_OPTIONS, NULL);
        lua_pop(L, 1);
    }
    o->url = opt_string(L, t, who, "redis", "a URL string (redis:// or rediss://[user:password@]host[:port][/db])");
    o->timeout_ms = opt_ms(L, t, who, "timeout_ms", 1, RF_REDIS_BUDGET_TIMEOUT_MAX_MS);
    o->idle_ttl_ms = opt_ms(L, t, who, "idle_ttl_ms", 1, 2147483647);
    o->ca_file = opt_string(L, t, who, "ca_file", "a path string (a PEM file of CAs to trust)");
    o->ca_path = opt_string(L, t, who, "ca_path", "a path string (a directory of CA certificates)");
    o->cert = opt_string(L, t, who, "cert", "a path string (a PEM client certificate)");
    o->key = opt_string(L, t, who, "key", "a path string (the client certificate's PEM key)");
}

/*
 * rf.retry_budget(policy [, opts]) → budget. The policy's lock must have retryBudget (docs/lock.md).
 * opts.redis = "redis://[user:password@]host[:port][/db]" (rediss:// for TLS) keeps the bucket in Redis under
 * the lock's retryBudget.shared.name; opts.timeout_ms (1..10000, default 20) bounds each decision's whole
 * exchange with Redis (one deadline for connect, TLS, send and the whole reply), after which it uses the local
 * bucket ("local-fallback"); opts.idle_ttl_ms (default 1 hour) expires an idle bucket; opts.ca_file, ca_path,
 * cert, key: TLS for rediss:// (docs/lua.md). Raises on a bad argument, a lock without retryBudget (or, with
 * redis, without retryBudget.shared), or a TLS file that cannot be read. Nothing is sent yet. Why a shared
 * budget falls back is written to stderr, once per kind of failure. opts.shared_dict = "NAME" (inside nginx,
 * instead of redis) keeps it in the lua_shared_dict NAME, shared by nginx's workers (lua_budget_shdict.c).
 */
static int budget_new(lua_State *L, rfl_call *call) {
    const rf_policy *p = rfl_check_policy(L, 1);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    if (!rf_policy_retry_budget(p, NULL, NULL))
        return rfl_error(L, "rf.retry_budget: the lock has no retryBudget {maxTokens, tokenRatio}");
    rf_redis_budget_options o = {0};
    const char *dict = NULL; /* opts.shared_dict: an nginx lua_shared_dict the workers share the budget in */
    if (lua_istable(L, 2)) {
        read_redis_options(L, 2, "rf.retry_budget", &o);
        dict = opt_string(L, 2, "rf.retry_budget", "shared_dict", "the name of an nginx lua_shared_dict");
        if (dict != NULL && o.url != NULL)
            return rfl_error(L, "rf.retry_budget: give redis or shared_dict, not both (one store holds the budget)");
        if (o.url == NULL) {
            const char *given = o.timeout_ms    ? "timeout_ms"
                                : o.idle_ttl_ms ? "idle_ttl_ms"
                                : o.ca_file     ? "ca_file"
                                : o.ca_path     ? "ca_path"
                                : o.cert        ? "cert"
                                : o.key         ? "key"
                                                : NULL;
            if (given) return rfl_error(L, "rf.retry_budget: %s needs redis", given);
        }
    }
    lbudget *lb = rfl_make(L, call, RFL_BUDGET, sizeof *lb, budget_release);
    rfl_take_policy(L, 1, &lb->taken[0]);
    lb->shared = o.url != NULL || dict != NULL;
    lua_pushvalue(L, 1);
    rfl_hold(L, lb, 1);
    if (o.url == NULL) {
        lb->b = rf_retry_budget_new(p);
        if (lb->b == NULL) return rfl_error(L, "rf.retry_budget: out of memory");
        if (dict != NULL) rfl_budget_shdict_store(L, p, lb->b, dict);
    } else {
        rf_error err;
        rf_status st = rf_retry_budget_redis_new(p, &o, &lb->b, &err);
        if (st == RF_ENOMEM) return rfl_error(L, "rf.retry_budget: %s", err.message); /* e.g. no TLS context */
        if (st != RF_OK) return rfl_error(L, "rf.retry_budget: %s %s", err.path, err.message);
    }
    rfl_set_open(lb, true);
    return 1;
}

int rfl_retry_budget_new(lua_State *L) { return rfl_function(L, budget_new); }

/* budget:tokens() → the local bucket's tokens (a number with up to 3 decimals). For a shared budget this is
 * the fallback bucket; `retryfreeze budget show` reads the shared one. */
static int budget_tokens(lua_State *L, rfl_call *call) {
    int64_t t = rf_retry_budget_tokens_milli(((lbudget *)call->self)->b);
    lua_pushnumber(L, (lua_Number)t / 1000.0);
    return 1;
}

/* Pushes a ratio window as {ttl_ms, requests, retries, allowance} (allowance: the retries it allows, a number with
 * up to 3 decimals). */
void rfl_push_budget_window(lua_State *L, const rf_budget_window *w) {
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)w->ttl_ms);
    lua_setfield(L, -2, "ttl_ms");
    lua_pushinteger(L, (lua_Integer)w->requests);
    lua_setfield(L, -2, "requests");
    lua_pushinteger(L, (lua_Integer)w->retries);
    lua_setfield(L, -2, "retries");
    lua_pushnumber(L, (lua_Number)w->allowance_milli / 1000.0);
    lua_setfield(L, -2, "allowance");
}

/* budget:window() → a ratio budget's local window now (rf_retry_budget_window on the monotonic clock the client
 * decides with): {ttl_ms, requests, retries, allowance}; nil for a token bucket. For a shared budget this is the
 * fallback window; `retryfreeze budget show` reads the shared one. */
static int budget_window(lua_State *L, rfl_call *call) {
    rf_budget_window w;
    if (!rf_retry_budget_window(((lbudget *)call->self)->b, rfi_mono_ms(), &w))
        lua_pushnil(L);
    else
        rfl_push_budget_window(L, &w);
    return 1;
}

/* budget:is_shared() → true when the bucket lives in Redis. */
static int budget_is_shared(lua_State *L, rfl_call *call) {
    lua_pushboolean(L, ((lbudget *)call->self)->shared);
    return 1;
}

/* budget:close() and __close: frees the bucket (and the Redis connection); safe twice. Raises while an open
 * client or a running rf.flow uses the budget (close the clients first). Both hold the budget, so it is never
 * collected before them. */
static int budget_close(lua_State *L, rfl_call *call) {
    lbudget *lb = call->self;
    if (rfl_users(lb) > 0)
        return rfl_error(L, "cannot close a retry budget that %d open clients or running flows use",
                         (int)rfl_users(lb));
    budget_release(L, lb);
    return 0;
}

static int l_retry_budget_tokens(lua_State *L) { return rfl_method(L, 1, RFL_BUDGET, RFL_OPEN, budget_tokens); }
static int l_retry_budget_window(lua_State *L) { return rfl_method(L, 1, RFL_BUDGET, RFL_OPEN, budget_window); }
static int l_retry_budget_is_shared(lua_State *L) { return rfl_method(L, 1, RFL_BUDGET, RFL_OPEN, budget_is_shared); }
static int l_retry_budget_close(lua_State *L) { return rfl_method(L, 1, RFL_BUDGET, 0, budget_close); }

/* __gc: unreachable, so no open client uses it (clients hold their budget); called by hand on one in use, it
 * frees nothing (rfl_collectable). */
static int l_retry_budget_gc(lua_State *L) {
    lbudget *lb = rfl_checkobject(L, 1, RFL_BUDGET);
    if (rfl_collectable(lb)) budget_release(L, lb);
    return 0;
}

/*
 * core.retry_budget_peek(name, opts) → tokens (number, or nil for a bucket Redis does not hold), ttl_ms
 * (integer, or nil) | nil, message when Redis cannot be reached, refuses TLS, AUTH or a command, or has not
 * answered whole within opts.timeout_ms (one deadline for the connection and both commands). opts: redis (the
 * URL, required), timeout_ms (1..10000, default 20), ca_file, ca_path, cert, key (rediss://), as rf.retry_budget
 * takes them. Raises on a bad name, URL or option.
 */
/* The arguments of a peek (fn: its name in errors; what: "bucket" or "window"): the budget's name, and the options in
 * *o (the URL required, idle_ttl_ms refused). Raises on a bad one. */
static const char *peek_args(lua_State *L, const char *fn, const char *what, rf_redis_budget_options *o) {
    luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    char where[64];
    snprintf(where, sizeof where, "%s: name", fn);
    const char *name = rfl_tostring_nonul(L, 1, where);
    *o = (rf_redis_budget_options){0};
    read_redis_options(L, 2, fn, o);
    lua_getfield(L, 2, "shared_dict");
    if (!lua_isnil(L, -1)) rfl_error(L, "%s: shared_dict is not read here (the dict lives in nginx)", fn);
    lua_pop(L, 1);
    if (o->url == NULL) rfl_error(L, "%s: redis (the URL) is required", fn);
    if (o->idle_ttl_ms) rfl_error(L, "%s: idle_ttl_ms does not apply to reading a %s", fn, what);
    return name;
}

static int l_retry_budget_peek(lua_State *L) {
    rf_redis_budget_options o;
    const char *name = peek_args(L, "retry_budget_peek", "bucket", &o);
    int64_t tokens = -1, ttl = -1;
    rf_error err;
    rf_status st = rf_retry_budget_redis_peek(&o, name, &tokens, &ttl, &err);
    if (st == RF_EINVAL) return rfl_error(L, "retry_budget_peek: %s %s", err.path, err.message);
    if (st != RF_OK) return rfl_fail(L, err.message, NULL);
    if (tokens < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, (lua_Number)tokens / 1000.0);
    if (ttl < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)ttl);
    return 2;
}

/*
 * core.retry_budget_peek_window(name, opts) → {ttl_ms, requests, retries, allowance} (or nil for a window Redis does
 * not hold), idle_ms (integer, or nil) | nil, message when Redis cannot be reached or refuses: a ratio budget's
 * shared window (Redis key retryfreeze:budget:NAME:window) as it stands on Redis' clock, unchanged. opts and errors
 * as core.retry_budget_peek's.
 */
static int l_retry_budget_peek_window(lua_State *L) {
    rf_redis_budget_options o;
    const char *name = peek_args(L, "retry_budget_peek_window", "window", &o);
    bool found = false;
    rf_budget_window w;
    int64_t idle = -1;
    rf_error err;
    rf_status st = rf_retry_budget_redis_peek_window(&o, name, &found, &w, &idle, &err);
    if (st == RF_EINVAL) return rfl_error(L, "retry_budget_peek_window: %s %s", err.path, err.message);
    if (st != RF_OK) return rfl_fail(L, err.message, NULL);
    if (!found)
        lua_pushnil(L);
    else
        rfl_push_budget_window(L, &w);
    if (idle < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)idle);
    return 2;
}

void rfl_open_retry_budget(lua_State *L) {
    static const luaL_Reg methods[] = {{"tokens", l_retry_budget_tokens},
                                       {"window", l_retry_budget_window},
                                       {"is_shared", l_retry_budget_is_shared},
                                       {"close", l_retry_budget_close},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_retry_budget_gc}, {"__close", l_retry_budget_close}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"retry_budget", rfl_retry_budget_new},
                                     {"retry_budget_peek", l_retry_budget_peek},
                                     {"retry_budget_peek_window", l_retry_budget_peek_window},
                                     {NULL, NULL}};
    rfl_new_type(L, RFL_BUDGET, methods, meta);
    luaL_setfuncs(L, funcs, 0);
}
