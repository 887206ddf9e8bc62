/*
 * Lua binding of retry budgets (gRPC A6 retryThrottling): rf.retry_budget(policy [, {redis=, timeout_ms=,
 * idle_ttl_ms=}]) → "retryfreeze.RetryBudget", a bucket several clients (and rf.flow) can share, kept in the
 * process or, with redis, in a Redis server shared by a fleet (retryfreeze/retry_budget_redis.h).
 * core.retry_budget_peek(url, name [, timeout_ms]) reads a shared bucket for `retryfreeze budget show`.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/retry_budget_redis.h"
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
static int64_t opt_ms(lua_State *L, int t, const char *key, int64_t lo, int64_t hi) {
    lua_getfield(L, t, key);
    int64_t v = 0;
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < lo || lua_tointeger(L, -1) > hi)
            rfl_error(L, "rf.retry_budget: %s must be an integer number of milliseconds in %d..%d", key, (int)lo,
                      (int)hi);
        v = (int64_t)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/*
 * rf.retry_budget(policy [, opts]) → budget. The policy's lock must have retryBudget (docs/lock.md).
 * opts.redis = "redis://host:port/db" keeps the bucket in Redis under the lock's retryBudget.shared.name;
 * opts.timeout_ms (1..10000, default 20) bounds each decision's whole exchange with Redis (one deadline for
 * connect, send and the whole reply), after which it uses the local bucket ("local-fallback");
 * opts.idle_ttl_ms (default 1 hour) expires an idle bucket. Raises on a bad argument or a lock without
 * retryBudget (or, with redis, without retryBudget.shared). Nothing is sent yet.
 */
static int budget_new(lua_State *L, rfl_call *call) {
    const rf_policy *p = rfl_check_policy(L, 1);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    if (!rf_policy_retry_budget(p, NULL, NULL))
        return rfl_error(L, "rf.retry_budget: the lock has no retryBudget {maxTokens, tokenRatio}");
    const char *url = NULL;
    rf_redis_budget_options o = {0};
    if (lua_istable(L, 2)) {
        lua_pushnil(L);
        while (lua_next(L, 2) != 0) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            if (k == NULL || (strcmp(k, "redis") != 0 && strcmp(k, "timeout_ms") != 0 && strcmp(k, "idle_ttl_ms") != 0))
                return rfl_error(L, "rf.retry_budget: unknown option '%s'", k ? k : luaL_typename(L, -2));
            lua_pop(L, 1);
        }
        lua_getfield(L, 2, "redis"); /* at 3, kept on the stack (anchored) until the budget has copied it */
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
            return rfl_error(L, "rf.retry_budget: redis must be a URL string (redis://host:port/db)");
        url = rfl_tostring_nonul(L, -1, "rf.retry_budget: redis");
        o.timeout_ms = opt_ms(L, 2, "timeout_ms", 1, RF_REDIS_BUDGET_TIMEOUT_MAX_MS);
        o.idle_ttl_ms = opt_ms(L, 2, "idle_ttl_ms", 1, 2147483647);
        if (url == NULL && (o.timeout_ms || o.idle_ttl_ms))
            return rfl_error(L, "rf.retry_budget: timeout_ms and idle_ttl_ms need redis");
    }
    lbudget *lb = rfl_make(L, call, RFL_BUDGET, sizeof *lb, budget_release);
    rfl_take_policy(L, 1, &lb->taken[0]);
    lb->shared = url != NULL;
    lua_pushvalue(L, 1);
    rfl_hold(L, lb, 1);
    if (url == NULL) {
        lb->b = rf_retry_budget_new(p);
        if (lb->b == NULL) return rfl_error(L, "rf.retry_budget: out of memory");
    } else {
        o.url = url;
        rf_error err;
        rf_status st = rf_retry_budget_redis_new(p, &o, &lb->b, &err);
        if (st == RF_ENOMEM) return rfl_error(L, "rf.retry_budget: out of memory");
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
 * core.retry_budget_peek(url, name [, timeout_ms = 1000]) → tokens (number, or nil for a bucket Redis does
 * not hold), ttl_ms (integer, or nil) | nil, message when Redis cannot be reached or has not answered whole
 * within timeout_ms (one deadline for the connection and both commands). Raises on a bad name or URL.
 */
static int l_retry_budget_peek(lua_State *L) {
    luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    const char *url = rfl_tostring_nonul(L, 1, "retry_budget_peek: url");
    const char *name = rfl_tostring_nonul(L, 2, "retry_budget_peek: name");
    lua_Integer timeout = luaL_optinteger(L, 3, 1000);
    int64_t tokens = -1, ttl = -1;
    rf_error err;
    rf_status st = rf_retry_budget_redis_peek(url, name, (int64_t)timeout, &tokens, &ttl, &err);
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

void rfl_open_retry_budget(lua_State *L) {
    static const luaL_Reg methods[] = {{"tokens", l_retry_budget_tokens},
                                       {"is_shared", l_retry_budget_is_shared},
                                       {"close", l_retry_budget_close},
                                       {NULL, NULL}};
    rfl_new_metatable(L, RFL_BUDGET, methods);
    lua_pushcfunction(L, l_retry_budget_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_retry_budget_close);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
    lua_pushcfunction(L, rfl_retry_budget_new);
    lua_setfield(L, -2, "retry_budget");
    lua_pushcfunction(L, l_retry_budget_peek);
    lua_setfield(L, -2, "retry_budget_peek");
}
