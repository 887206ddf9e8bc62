/*
 * A retry budget's shared store in an nginx lua_shared_dict (rf.retry_budget(policy, {shared_dict = "NAME"})): the
 * workers of one nginx share the lock's retryBudget through the dict's shared memory, as a fleet shares it through
 * Redis (retry_budget_redis.h). The store is the engine's (rf_retry_budget_set_store): the engine keeps the rule (a
 * token bucket's throttle at maxTokens / 2, its clamped arithmetic; a ratio's allowance), the dict only holds the
 * counts, changed by lua-nginx-module's atomic increment (ngx_http_lua_ffi_shdict_incr: the dict's own shared-memory
 * mutex, no yield, so it runs in the balancer phase too). The functions are looked up in the nginx process
 * (dlsym), the zone from nginx's own ngx.shared[NAME]: nothing a caller passes is taken as a pointer.
 *
 * Token bucket: add(delta) increments the count (a dict that has not seen it starts full: maxTokens × 1000), then
 * takes back the part of its own delta that went past 0 or maxTokens × 1000, so that one worker's sequence gives the
 * engine's local_add results exactly, and concurrent ones can never leave the count outside 0..max.
 * Ratio: a request increments its slot's request count, a retry its slot's retry count and then reads the window's
 * sums (the slot of now and the 9 before it, slots of ttlMs / 10 ms on CLOCK_MONOTONIC, each key expiring after
 * 2 × ttlMs): allowed when retries × 1000 <= retryRatio × 1000 × requests + reserve, this retry included, as the
 * engine's window; a refused retry takes its count back. Two workers deciding at once may both be refused at the edge
 * of the allowance, never both allowed past it.
 * A change the dict refuses (full, or a key of the budget's holding something other than a number) makes the decision
 * fall back to the worker's own budget, and is said on stderr (nginx's error log) once per worker and kind, as the
 * Redis store says its failures.
 */
#include "lua_retryfreeze.h"

#include "../core/src/util/clock_ms.h"
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* lua-nginx-module's (0.10.x) C functions behind resty.core.shdict, as resty.core declares them. */
typedef int (*shdict_incr_fn)(void *zone, const unsigned char *key, size_t key_len, double *value, char **err,
                              int has_init, double init, long init_ttl, int *forcible);
typedef void *(*shdict_udata_to_zone_fn)(void *zone_udata);

/* Longest key: the prefix, the digest ("sha256:" and 64 hex digits), a slot number and a suffix. */
#define KEY_MAX 160

typedef struct shdict_store {
    shdict_incr_fn incr;
    void *zone;
    char prefix[112];           /* "rf:budget:" and the lock's digest */
    char dict[64];              /* the lua_shared_dict's name, for messages */
    bool said_full, said_other; /* the kinds of refusal already said: the dict full, anything else */
} shdict_store;

/* Says on stderr (in nginx, its error log), once per store and kind, that the dict refused to change key with err
 * (lua-nginx-module's words), so the decision falls back to the worker's own budget. Returns false. */
static bool refused(shdict_store *s, const char *key, const char *err) {
    const bool full = err != NULL && strcmp(err, "no memory") == 0;
    bool *said = full ? &s->said_full : &s->said_other;
    if (*said) return false;
    *said = true;
    fprintf(stderr,
            "retryfreeze: retry budget in lua_shared_dict %s falls back to the worker's own budget: the dict "
            "refused to change %s: %s%s (said once per worker for this kind of failure)\n",
            s->dict, key, err ? err : "unknown error",
            full ? " (make the dict larger)"
                 : " (a key under rf:budget: is the budget's own: nothing else may set it)");
    return false;
}

/* Adds delta to key (init: the value a key the dict does not hold starts from, before delta; ttl_ms its expiry,
 * 0 none); *value the result. False when the dict could not (no memory, not a number), which is said. */
static bool incr(shdict_store *s, const char *key, double delta, double init, long ttl_ms, double *value) {
    char *err = NULL;
    int forcible = 0;
    *value = delta;
    if (s->incr(s->zone, (const unsigned char *)key, strlen(key), value, &err, 1, init, ttl_ms, &forcible) == 0)
        return true;
    return refused(s, key, err);
}

/* The value of key, 0 when the dict does not hold it; false when it could not be read, which is said. */
static bool read_count(shdict_store *s, const char *key, double *value) {
    char *err = NULL;
    int forcible = 0;
    *value = 0;
    if (s->incr(s->zone, (const unsigned char *)key, strlen(key), value, &err, 0, 0, 0, &forcible) == 0) return true;
    *value = 0;
    return (err != NULL && strcmp(err, "not found") == 0) || refused(s, key, err);
}

static bool shdict_add(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli) {
    shdict_store *s = ctx;
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s:tokens", s->prefix);
    double v = 0;
    if (!incr(s, key, (double)delta_milli, (double)max_milli, 0, &v)) return false;
    /* this call's own part past either end, taken back: alone, exactly the engine's clamp */
    double back = 0;
    if (v > (double)max_milli && delta_milli > 0)
        back = v - (double)max_milli < (double)delta_milli ? v - (double)max_milli : (double)delta_milli;
    else if (v < 0 && delta_milli < 0)
        back = -v < (double)-delta_milli ? v : (double)delta_milli;
    if (back != 0) {
        double after = 0;
        if (!incr(s, key, -back, (double)max_milli, 0, &after)) return false;
    }
    double t = v - back;
    if (t < 0) t = 0;
    if (t > (double)max_milli) t = (double)max_milli;
    *tokens_milli = (int64_t)t;
    return true;
}

static bool shdict_window(void *ctx, bool request, bool retry, int64_t ratio_milli, int64_t reserve_milli,
                          int64_t ttl_ms, bool *allowed) {
    shdict_store *s = ctx;
    const int64_t slot_ms = ttl_ms / 10, k = rfi_mono_ms() / slot_ms;
    char key[KEY_MAX];
    double v = 0;
    *allowed = true;
    if (request) {
        snprintf(key, sizeof key, "%s:q:%" PRId64, s->prefix, k);
        if (!incr(s, key, 1, 0, (long)(2 * ttl_ms), &v)) return false;
    }
    if (!retry) return true;
    char retry_key[KEY_MAX];
    snprintf(retry_key, sizeof retry_key, "%s:r:%" PRId64, s->prefix, k);
    if (!incr(s, retry_key, 1, 0, (long)(2 * ttl_ms), &v)) return false;
    double requests = 0, retries = 0;
    for (int64_t i = k - 9; i <= k; i++) {
        double q = 0, r = 0;
        snprintf(key, sizeof key, "%s:q:%" PRId64, s->prefix, i);
        bool ok = read_count(s, key, &q);
        snprintf(key, sizeof key, "%s:r:%" PRId64, s->prefix, i);
        ok = ok && read_count(s, key, &r);
        if (!ok) { /* unread: the count taken back, the store did not answer */
            incr(s, retry_key, -1, 0, (long)(2 * ttl_ms), &v);
            return false;
        }
        requests += q;
        retries += r;
    }
    *allowed = (int64_t)retries * 1000 <= ratio_milli * (int64_t)requests + reserve_milli;
    if (!*allowed) incr(s, retry_key, -1, 0, (long)(2 * ttl_ms), &v);
    return true;
}

/* Looks up ngx.shared[name]'s zone in this nginx process: NULL, with *why, outside nginx or without the dict. */
static void *zone_of(lua_State *L, const char *name, shdict_udata_to_zone_fn to_zone, const char **why) {
    void *zone = NULL;
    *why = "nginx has no lua_shared_dict of that name (ngx.shared[NAME] is nil)";
    if (lua_getglobal(L, "ngx") == LUA_TTABLE && lua_getfield(L, -1, "shared") == LUA_TTABLE &&
        lua_getfield(L, -1, name) == LUA_TTABLE) {
        lua_rawgeti(L, -1, 1);
        if (lua_type(L, -1) == LUA_TUSERDATA) zone = to_zone(lua_touserdata(L, -1));
        lua_pop(L, 1);
    }
    return zone;
}

static void store_free(void *ctx) { free(ctx); }

int rfl_budget_shdict_store(lua_State *L, const rf_policy *p, rf_retry_budget *b, const char *name) {
    shdict_incr_fn fn_incr = NULL;
    shdict_udata_to_zone_fn fn_zone = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "ngx_http_lua_ffi_shdict_incr");
    memcpy(&fn_incr, &sym, sizeof fn_incr); /* a data pointer to a function pointer, as POSIX dlsym allows */
    sym = dlsym(RTLD_DEFAULT, "ngx_http_lua_ffi_shdict_udata_to_zone");
    memcpy(&fn_zone, &sym, sizeof fn_zone);
    if (fn_incr == NULL || fn_zone == NULL)
        return rfl_error(L, "rf.retry_budget: shared_dict needs nginx's lua-nginx-module (this process has no "
                            "ngx_http_lua_ffi_shdict_incr): run it inside nginx");
    int top = lua_gettop(L);
    const char *why = NULL;
    void *zone = zone_of(L, name, fn_zone, &why);
    lua_settop(L, top);
    if (zone == NULL) return rfl_error(L, "rf.retry_budget: shared_dict \"%s\": %s", name, why);
    shdict_store *s = calloc(1, sizeof *s);
    if (s == NULL) return rfl_error(L, "rf.retry_budget: out of memory");
    s->incr = fn_incr;
    s->zone = zone;
    snprintf(s->prefix, sizeof s->prefix, "rf:budget:%s", rf_policy_digest(p));
    snprintf(s->dict, sizeof s->dict, "%s", name);
    rf_retry_budget_store st = {.add = shdict_add, .window = shdict_window, .free = store_free, .ctx = s};
    rf_error err;
    if (rf_retry_budget_set_store(b, &st, &err) != RF_OK) {
        free(s);
        return rfl_error(L, "rf.retry_budget: shared_dict: %s %s", err.path, err.message);
    }
    return 0;
}
