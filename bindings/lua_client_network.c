/*
 * The client's network options, read from the rf.client{…} table: redirects (max_redirects), TLS (tls =
 * {ca_file, ca_path, cert, key, key_password, verify}), proxy, connect_timeout_ms, user_agent and
 * http_version. Kept apart from lua_client.c (lifetimes, requests) so the two evolve separately. Every string
 * is kept in rf.client's keeper table until rf_client_new has copied it: not in the options table, which a
 * metamethod or finalizer may change while the other options are read.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/client.h"
#include <string.h>

const char *const rfl_client_network_keys[] = {"max_redirects", "tls",          "proxy", "connect_timeout_ms",
                                               "user_agent",    "http_version", NULL};

static const char *const tls_keys[] = {"ca_file", "ca_path", "cert", "key", "key_password", "verify", NULL};

/* An optional integer option in [lo, hi]; absent → false. Raises naming the option and the range. */
static bool opt_int(lua_State *L, int idx, const char *key, lua_Integer lo, lua_Integer hi, lua_Integer *out) {
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return false;
    }
    lua_Integer v = 0;
    if (!rfl_tointeger_exact(L, -1, &v) || v < lo || v > hi)
        rfl_error(L, "rf.client: %s must be an integer %d..%d", key, (int)lo, (int)hi);
    *out = v;
    lua_pop(L, 1);
    return true;
}

/* An optional string option without NUL bytes; NULL when absent. The keeper table at keep keeps it alive. */
static const char *opt_string(lua_State *L, int idx, int keep, const char *key, const char *what) {
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    if (t != LUA_TSTRING) rfl_error(L, "rf.client: %s%s must be a string, got %s", what, key, luaL_typename(L, -1));
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (strlen(s) != len) rfl_error(L, "rf.client: %s%s must not contain a NUL byte", what, key);
    lua_rawseti(L, keep, (lua_Integer)lua_rawlen(L, keep) + 1);
    return s;
}

static void read_tls(lua_State *L, int idx, int keep, rf_client_network *n) {
    if (lua_getfield(L, idx, "tls") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (!lua_istable(L, -1)) rfl_error(L, "rf.client: tls must be a table, got %s", luaL_typename(L, -1));
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        bool ok = false;
        for (int i = 0; k && tls_keys[i]; i++)
            if (strcmp(k, tls_keys[i]) == 0) ok = true;
        if (!ok) rfl_unknown_option(L, "rf.client: tls", k ? k : luaL_typename(L, -2), tls_keys, NULL);
        lua_pop(L, 1);
    }
    n->tls_ca_file = opt_string(L, t, keep, "ca_file", "tls.");
    n->tls_ca_path = opt_string(L, t, keep, "ca_path", "tls.");
    n->tls_cert = opt_string(L, t, keep, "cert", "tls.");
    n->tls_key = opt_string(L, t, keep, "key", "tls.");
    n->tls_key_password = opt_string(L, t, keep, "key_password", "tls.");
    int v = lua_getfield(L, t, "verify");
    if (v != LUA_TNIL && v != LUA_TBOOLEAN)
        rfl_error(L, "rf.client: tls.verify must be a boolean, got %s", luaL_typename(L, -1));
    n->tls_no_verify = v == LUA_TBOOLEAN && !lua_toboolean(L, -1); /* only an explicit false turns it off */
    lua_pop(L, 2);
}

void rfl_read_client_network(lua_State *L, int idx, int keep, rf_client_options *o) {
    idx = lua_absindex(L, idx);
    keep = lua_absindex(L, keep);
    lua_Integer v;
    if (opt_int(L, idx, "max_redirects", 1, RF_MAX_REDIRECTS, &v)) o->max_redirects = (int)v;
    if (opt_int(L, idx, "connect_timeout_ms", 1, 600000, &v)) o->network.connect_timeout_ms = v;
    read_tls(L, idx, keep, &o->network);
    o->network.proxy = opt_string(L, idx, keep, "proxy", "");
    o->network.user_agent = opt_string(L, idx, keep, "user_agent", "");
    const char *hv = opt_string(L, idx, keep, "http_version", "");
    if (hv == NULL || strcmp(hv, "1.1") == 0)
        o->network.http_version = RF_HTTP_1_1;
    else if (strcmp(hv, "2") == 0)
        o->network.http_version = RF_HTTP_2;
    else
        rfl_error(L, "rf.client: http_version must be \"1.1\" or \"2\", got \"%s\"", hv);
}

void rfl_read_request_limits(lua_State *L, int idx, rf_request *req) {
    static const char *const keys[] = {"deadline_ms", "timeout_ms"};
    for (int i = 0; i < 2; i++) {
        if (lua_getfield(L, idx, keys[i]) != LUA_TNIL) {
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > 3600000)
                rfl_error(L, "request.%s must be an integer 1..3600000 (ms)", keys[i]);
            if (i == 0)
                req->deadline_ms = lua_tointeger(L, -1);
            else
                req->timeout_ms = lua_tointeger(L, -1);
        }
        lua_pop(L, 1);
    }
}

/* One inbound header line "name: value" appended to the array at lines (its value a string; anything else raises:
 * a script's mistake, unlike a caller's bad value, which only fails to narrow). */
static void inbound_line(lua_State *L, int lines, const char *name, size_t nlen, int value) {
    if (lua_type(L, value) != LUA_TSTRING)
        rfl_error(L, "request.inbound_headers must map names to a string or an array of strings, got %s for %s",
                  luaL_typename(L, value), name);
    size_t vlen = 0;
    const char *v = lua_tolstring(L, value, &vlen);
    if (memchr(name, '\0', nlen) != NULL || memchr(v, '\0', vlen) != NULL) return; /* C would cut it: no such header */
    lua_pushfstring(L, "%s: %s", name, v);
    lua_rawseti(L, lines, (lua_Integer)lua_rawlen(L, lines) + 1);
}

void rfl_read_inbound(lua_State *L, int idx, const rfl_keeper *k, rf_request *req) {
    req->inbound_headers = NULL;
    req->n_inbound_headers = 0;
    lua_getfield(L, idx, "inbound_headers");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (k->slot != NULL) return;
        lua_pushnil(L);
        lua_setfield(L, k->idx, "inbound_headers"); /* a reused keeper holds nothing of an earlier request */
        return;
    }
    if (lua_type(L, -1) != LUA_TTABLE)
        rfl_error(L, "request.inbound_headers must be a table {name = value or {values}}, got %s",
                  luaL_typename(L, -1));
    int in = lua_gettop(L);
    lua_newtable(L); /* the lines, then the pointers to them: both kept by the keeper */
    int lines = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, in) != 0) { /* raw: no metamethod runs */
        if (lua_type(L, -2) != LUA_TSTRING)
            rfl_error(L, "request.inbound_headers has a non-string key (%s)", luaL_typename(L, -2));
        size_t nlen = 0;
        const char *name = lua_tolstring(L, -2, &nlen);
        if (lua_type(L, -1) == LUA_TTABLE) { /* a repeated header, as ngx.req.get_headers() gives it */
            int vals = lua_gettop(L);
            for (lua_Integer i = 1; lua_rawgeti(L, vals, i) != LUA_TNIL; i++) {
                inbound_line(L, lines, name, nlen, lua_gettop(L));
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        } else {
            inbound_line(L, lines, name, nlen, lua_gettop(L));
        }
        lua_pop(L, 1);
    }
    const size_t n = (size_t)lua_rawlen(L, lines);
    const char **ptrs = n > 0 ? lua_newuserdatauv(L, n * sizeof *ptrs, 0) : NULL;
    if (n > 0) lua_rawseti(L, lines, 0); /* the pointer array, kept with the lines */
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, lines, (lua_Integer)i + 1);
        ptrs[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    rfl_keep_value(L, k, "inbound_headers");
    lua_pop(L, 1);
    req->inbound_headers = ptrs;
    req->n_inbound_headers = n;
}

/* rf.libcurl = {version = "7.88.1", ssl = "OpenSSL/3.0.2" or nil, http2 = bool}: what the client runs on
 * (rf_client_runtime_info); `retryfreeze --version` prints it. */
void rfl_open_client_network(lua_State *L) {
    rf_client_runtime rt = rf_client_runtime_info();
    lua_createtable(L, 0, 3);
    lua_pushstring(L, rt.libcurl);
    lua_setfield(L, -2, "version");
    if (rt.ssl) {
        lua_pushstring(L, rt.ssl);
        lua_setfield(L, -2, "ssl");
    }
    lua_pushboolean(L, rt.http2);
    lua_setfield(L, -2, "http2");
    lua_setfield(L, -2, "libcurl");
}
