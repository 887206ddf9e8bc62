/*
 * Lua binding of retry budgets (gRPC A6 retryThrottling): rf.retry_budget(policy [, {redis=, timeout_ms=,
 * idle_ttl_ms=}]) → "retryfreeze.RetryBudget", a bucket several clients (and rf.flow) can share, kept in the
 * process or, with redis, in a Redis server shared by a fleet (retryfreeze/retry_budget_redis.h).
 * core.retry_budget_peek(url, name [, timeout_ms]) reads a shared bucket for `retryfreeze budget show`.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/retry_budget_redis.h"
#include <string.h>

#define BUDGET_MT "retryfreeze.RetryBudget"

/* Uservalue 1: the policy, which the budget's parameters come from and which must outlive it. */
struct lbudget {
    rf_retry_budget *b; /* NULL until created, and after close */
    bool shared;        /* kept in Redis */
    int users;          /* open clients and running flows using it: budget:close() is refused while > 0 */
};
typedef struct lbudget lbudget;

/* The open retry budget at idx, or raises: not a budget, or closed. */
static lbudget *check_open_lbudget(lua_State *L, int idx) {
    lbudget *lb = rfl_checkudata(L, idx, BUDGET_MT);
    if (lb->b == NULL) luaL_error(L, "attempt to use a closed retry budget");
    return lb;
}

static rf_retry_budget *check_open(lua_State *L, int idx) { return check_open_lbudget(L, idx)->b; }

lbudget *rfl_retry_budget_acquire(lua_State *L, int idx, rf_retry_budget **out) {
    lbudget *lb = check_open_lbudget(L, idx);
    *out = lb->b;
    lb->users++;
    return lb;
}

void rfl_retry_budget_release(lbudget *lb) {
    if (lb != NULL && lb->users > 0) lb->users--;
}

static int64_t opt_ms(lua_State *L, int t, const char *key, int64_t lo, int64_t hi) {
    lua_getfield(L, t, key);
    int64_t v = 0;
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < lo || lua_tointeger(L, -1) > hi)
            luaL_error(L, "rf.retry_budget: %s must be an integer number of milliseconds in %d..%d", key, (int)lo,
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
int rfl_retry_budget_new(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    if (!rf_policy_retry_budget(p, NULL, NULL))
        return luaL_error(L, "rf.retry_budget: the lock has no retryBudget {maxTokens, tokenRatio}");
    const char *url = NULL;
    rf_redis_budget_options o = {0};
    if (lua_istable(L, 2)) {
        lua_pushnil(L);
        while (lua_next(L, 2) != 0) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            if (k == NULL || (strcmp(k, "redis") != 0 && strcmp(k, "timeout_ms") != 0 && strcmp(k, "idle_ttl_ms") != 0))
                return luaL_error(L, "rf.retry_budget: unknown option '%s'", k ? k : luaL_typename(L, -2));
            lua_pop(L, 1);
        }
        lua_getfield(L, 2, "redis");
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
            return luaL_error(L, "rf.retry_budget: redis must be a URL string (redis://host:port/db)");
        url = rfl_tostring_nonul(L, -1, "rf.retry_budget: redis"); /* anchored by the options table during this call */
        lua_pop(L, 1);
        o.timeout_ms = opt_ms(L, 2, "timeout_ms", 1, RF_REDIS_BUDGET_TIMEOUT_MAX_MS);
        o.idle_ttl_ms = opt_ms(L, 2, "idle_ttl_ms", 1, 2147483647);
        if (url == NULL && (o.timeout_ms || o.idle_ttl_ms))
            return luaL_error(L, "rf.retry_budget: timeout_ms and idle_ttl_ms need redis");
    }
    lbudget *lb = rfl_newobject(L, sizeof *lb, 1, BUDGET_MT);
    lb->b = NULL;
    lb->shared = url != NULL;
    lb->users = 0;
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    if (url == NULL) {
        lb->b = rf_retry_budget_new(p);
        if (lb->b == NULL) return luaL_error(L, "rf.retry_budget: out of memory");
        return 1;
    }
    o.url = url;
    rf_error err;
    rf_status st = rf_retry_budget_redis_new(p, &o, &lb->b, &err);
    if (st == RF_ENOMEM) return luaL_error(L, "rf.retry_budget: out of memory");
    if (st != RF_OK) return luaL_error(L, "rf.retry_budget: %s %s", err.path, err.message);
    return 1;
}

/* budget:tokens() → the local bucket's tokens (a number with up to 3 decimals). For a shared budget this is
 * the fallback bucket; `retryfreeze budget show` reads the shared one. */
static int l_retry_budget_tokens(lua_State *L) {
    int64_t t = rf_retry_budget_tokens_milli(check_open(L, 1));
    lua_pushnumber(L, (lua_Number)t / 1000.0);
    return 1;
}

/* budget:is_shared() → true when the bucket lives in Redis. */
static int l_retry_budget_is_shared(lua_State *L) {
    lua_pushboolean(L, check_open_lbudget(L, 1)->shared);
    return 1;
}

/* budget:close() and __close: frees the bucket (and the Redis connection); safe twice. Raises while an open
 * client or a running rf.flow uses the budget (close the clients first). Both anchor the budget, so it is never
 * collected before them. */
static int l_retry_budget_close(lua_State *L) {
    lbudget *lb = rfl_checkudata(L, 1, BUDGET_MT);
    if (lb->users > 0)
        return luaL_error(L, "cannot close a retry budget that %d open clients or running flows use", lb->users);
    rf_retry_budget_free(lb->b);
    lb->b = NULL;
    return 0;
}

/* __gc: unreachable, so no open client uses it (clients anchor their budget). */
static int l_retry_budget_gc(lua_State *L) {
    lbudget *lb = rfl_checkudata(L, 1, BUDGET_MT);
    rf_retry_budget_free(lb->b);
    lb->b = NULL;
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
    if (st == RF_EINVAL) return luaL_error(L, "retry_budget_peek: %s %s", err.path, err.message);
    if (st != RF_OK) {
        lua_pushnil(L);
        lua_pushstring(L, err.message);
        return 2;
    }
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
    luaL_newmetatable(L, BUDGET_MT);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_retry_budget_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_retry_budget_close);
    lua_setfield(L, -2, "__close");
    lua_pushliteral(L, "retryfreeze.RetryBudget");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    lua_pushcfunction(L, rfl_retry_budget_new);
    lua_setfield(L, -2, "retry_budget");
    lua_pushcfunction(L, l_retry_budget_peek);
    lua_setfield(L, -2, "retry_budget_peek");
}
