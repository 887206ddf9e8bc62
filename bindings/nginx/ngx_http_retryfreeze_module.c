/*
 * ngx_http_retryfreeze_module: the gateway as an nginx module. nginx's proxy module does all the I/O (headers both
 * ways, keep-alive pools, TLS to the upstream, streamed bodies); the engine's attempt loop (rf_step, libretryfreeze
 * _attempt) governs every try through the peer hooks of an upstream {} block, with no Lua phase to pay for:
 *
 *   retryfreeze_lock PATH;            http{}: loads the lock (its error stops nginx, `nginx -t` included) and refuses
 *                                     a route the module cannot serve (rf_gateway_refusals, RF_GATEWAY_NO_PROPAGATION)
 *                                     or a retry budget shared by a fleet (its store needs Redis)
 *   retryfreeze_ledger PATH [hold_bytes=N] [flush_ms=N];
 *                                     http{}: the ledger, opened as nginx loads the configuration; each worker holds
 *                                     its lines (rf_ledger_hold) and writes them every flush_ms and as it exits
 *   retryfreeze;                      upstream{}: the engine picks each try's peer and governs it (first in the block,
 *                                     before keepalive; no balancing method after it)
 *   retryfreeze_stopped;              the named location of `error_page 500 = @NAME`: answers a request the engine
 *                                     stopped with its status ($retryfreeze_stop_status) and no body
 *
 * Per request (init_peer, once): the route matched on the method and the path of the request line proxy_pass built
 * (what the upstream gets), the key from the first Idempotency-Key header; no route: 404. Per try (get): the verdict on
 * the last try (its upstream state: a status when a head came, else nginx's 504 for a timeout, a connection that never
 * opened, or one that broke), then rf_step_begin's per-try timeout for connect, send and read, and the next of the
 * block's servers not yet tried while one is left. nginx may come back for another try only while the route's
 * maxAttempts (and proxy_next_upstream_tries) leaves one, so a last try's failure reaches the client as it came.
 * The final verdict and the ledger line: when the request's pool is freed (every request, whatever ended it).
 * Times are nginx's cached monotonic ms (ngx_current_msec: the clock its timers use) and wall ms.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "retryfreeze/attempt_step.h"
#include "retryfreeze/gateway.h"
#include "retryfreeze/ledger.h"

#include <stdbool.h>
#include <string.h>

/* An upstream block `retryfreeze;` named, and whether nginx set it up through the module (a balancing method after
 * the directive would have replaced it). */
typedef struct {
    ngx_http_upstream_srv_conf_t *uscf;
    ngx_uint_t line; /* of the directive */
    bool initialised;
} rf_ngx_governed;

typedef struct {
    rf_policy *policy;
    rf_ledger *ledger;
    size_t hold_bytes;
    ngx_msec_t flush_ms;
    ngx_int_t stop_var;   /* index of $retryfreeze_stop_status */
    ngx_array_t governed; /* the upstream blocks `retryfreeze;` named (rf_ngx_governed) */
    /* this worker's own, set in init_process: */
    rf_rng rng;
    ngx_uint_t next_peer;
    ngx_event_t flush_event;
} rf_ngx_main_conf;

/* One request's state: its step and what nginx tells of its tries. */
typedef struct {
    ngx_http_request_t *r;
    rf_ngx_main_conf *mcf;
    ngx_http_upstream_rr_peer_data_t *rrp; /* round robin's data: the block's servers, TLS sessions */
    rf_step step;
    rf_request req;
    rf_response resp;
    ngx_uint_t tries;          /* tries begun, in every governed upstream of the request */
    ngx_uint_t upstream_tries; /* of them, in the current upstream block */
    ngx_uint_t server;         /* the index in the block of the current try's server */
    ngx_uint_t state; /* the index in r->upstream_states of the current try's state: a later upstream of the request
                         (an error_page that proxies elsewhere) pushes its own after it */
    int max_attempts; /* the route's maxAttempts */
    bool done, conf_cloned;
    bool verdict_given;   /* the last try's verdict was given as the request moved to another governed upstream */
    ngx_uint_t stop_code; /* the status the engine's stop answered */
    char stop_status[4];
    char peer[RF_LEDGER_PEER_MAX]; /* the current try's "host:port" */
} rf_ngx_request;

static ngx_int_t rf_ngx_preconfiguration(ngx_conf_t *cf);
static ngx_int_t rf_ngx_postconfiguration(ngx_conf_t *cf);
static void *rf_ngx_create_main_conf(ngx_conf_t *cf);
static char *rf_ngx_lock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rf_ngx_ledger(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rf_ngx_upstream(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rf_ngx_stopped(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t rf_ngx_init_process(ngx_cycle_t *cycle);
static void rf_ngx_exit_process(ngx_cycle_t *cycle);

static ngx_command_t rf_ngx_commands[] = {
    {ngx_string("retryfreeze_lock"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, rf_ngx_lock, NGX_HTTP_MAIN_CONF_OFFSET, 0,
     NULL},
    {ngx_string("retryfreeze_ledger"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE123, rf_ngx_ledger, NGX_HTTP_MAIN_CONF_OFFSET,
     0, NULL},
    {ngx_string("retryfreeze"), NGX_HTTP_UPS_CONF | NGX_CONF_NOARGS, rf_ngx_upstream, 0, 0, NULL},
    {ngx_string("retryfreeze_stopped"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, rf_ngx_stopped, NGX_HTTP_LOC_CONF_OFFSET,
     0, NULL},
    ngx_null_command};

static void *rf_ngx_create_loc_conf(ngx_conf_t *cf);
static char *rf_ngx_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);

static ngx_http_module_t rf_ngx_module_ctx = {
    rf_ngx_preconfiguration, rf_ngx_postconfiguration, rf_ngx_create_main_conf, NULL, NULL, NULL,
    rf_ngx_create_loc_conf,  rf_ngx_merge_loc_conf};

/* A location's: whether retryfreeze_stopped is its content. */
typedef struct {
    ngx_flag_t stopped;
} rf_ngx_loc_conf;

ngx_module_t ngx_http_retryfreeze_module = {NGX_MODULE_V1,
                                            &rf_ngx_module_ctx,
                                            rf_ngx_commands,
                                            NGX_HTTP_MODULE,
                                            NULL,
                                            NULL,
                                            rf_ngx_init_process,
                                            NULL,
                                            NULL,
                                            rf_ngx_exit_process,
                                            NULL,
                                            NGX_MODULE_V1_PADDING};

static ngx_str_t rf_ngx_stop_var_name = ngx_string("retryfreeze_stop_status");

/* ---- configuration ------------------------------------------------------------------------------------------ */

static void rf_ngx_conf_cleanup(void *data) {
    rf_ngx_main_conf *mcf = data;
    if (mcf->ledger) rf_ledger_close(mcf->ledger, NULL);
    rf_policy_free(mcf->policy);
    mcf->ledger = NULL;
    mcf->policy = NULL;
}

static void *rf_ngx_create_main_conf(ngx_conf_t *cf) {
    rf_ngx_main_conf *mcf = ngx_pcalloc(cf->pool, sizeof(rf_ngx_main_conf));
    if (!mcf) return NULL;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (!cln) return NULL;
    cln->handler = rf_ngx_conf_cleanup;
    cln->data = mcf;
    mcf->hold_bytes = RF_LEDGER_HOLD_DEFAULT_BYTES;
    mcf->flush_ms = RF_LEDGER_FLUSH_DEFAULT_MS;
    mcf->stop_var = NGX_ERROR;
    if (ngx_array_init(&mcf->governed, cf->pool, 4, sizeof(rf_ngx_governed)) != NGX_OK) return NULL;
    return mcf;
}

/* The directive's file argument (args[1]) as an absolute, NUL-terminated path (relative to nginx's prefix, as nginx
 * reads its own paths), from the configuration's pool; NULL when out of memory. */
static char *rf_ngx_conf_path(ngx_conf_t *cf) {
    ngx_str_t *args = cf->args->elts;
    ngx_str_t path = args[1];
    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) return NULL;
    char *out = ngx_pnalloc(cf->pool, path.len + 1);
    if (!out) return NULL;
    ngx_memcpy(out, path.data, path.len);
    out[path.len] = '\0';
    return out;
}

/* Stops nginx's start with a file's error as one line (rf_error_text): "DIRECTIVE: PATH: $.json.path: message". */
static char *rf_ngx_conf_fail(ngx_conf_t *cf, const char *directive, const rf_error *err, const char *path) {
    char text[sizeof err->path + sizeof err->message + 4096];
    rf_error_text(err, path, text, sizeof text);
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s: %s", directive, text);
    return NGX_CONF_ERROR;
}

/* retryfreeze_lock PATH: the lock loaded and checked whole, or nginx refuses the configuration with the lock's error
 * ("PATH: $.json.path: message") or the routes the module cannot serve, each with why. */
static char *rf_ngx_lock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    rf_ngx_main_conf *mcf = conf;
    if (mcf->policy) return "is duplicate";
    char *cpath = rf_ngx_conf_path(cf);
    if (!cpath) return NGX_CONF_ERROR;
    rf_error err;
    memset(&err, 0, sizeof err);
    if (rf_policy_load_file(cpath, &mcf->policy, &err) != RF_OK)
        return rf_ngx_conf_fail(cf, "retryfreeze_lock", &err, cpath);
    if (rf_policy_retry_budget_shared(mcf->policy)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze_lock: %s: retryBudget.shared names a budget a fleet shares through Redis, "
                           "which the nginx module does not speak (its budget would be each worker's own, a wider "
                           "one): remove retryBudget.shared, or serve the lock from the Lua gateway",
                           cpath);
        return NGX_CONF_ERROR;
    }
    size_t n = rf_policy_route_count(mcf->policy);
    ngx_uint_t refused = 0;
    for (size_t i = 0; i < n; i++) {
        char why[RF_GATEWAY_WHY_MAX];
        if (rf_gateway_refusals(mcf->policy, i, RF_GATEWAY_NO_PROPAGATION, why, sizeof why) == 0) continue;
        rf_route_view route;
        rf_policy_route(mcf->policy, i, &route);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "retryfreeze_lock: %s: the nginx module cannot serve %s: %s", cpath,
                           route.endpoint, why);
        refused++;
    }
    return refused ? NGX_CONF_ERROR : NGX_CONF_OK;
}

/* A "name=N" argument of retryfreeze_ledger: 0 when arg is not name=, 1 and *out with N in lo..hi, -1 (said) when N
 * is not. */
static int rf_ngx_ledger_option(ngx_conf_t *cf, ngx_str_t *arg, const char *name, ngx_int_t lo, ngx_int_t hi,
                                ngx_int_t *out) {
    size_t nlen = strlen(name);
    if (arg->len <= nlen || ngx_strncmp(arg->data, name, nlen) != 0 || arg->data[nlen] != '=') return 0;
    ngx_int_t v = ngx_atoi(arg->data + nlen + 1, arg->len - nlen - 1);
    if (v == NGX_ERROR || v < lo || v > hi) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "retryfreeze_ledger: %s must be an integer from %i to %i, got \"%V\"",
                           name, lo, hi, arg);
        return -1;
    }
    *out = v;
    return 1;
}

/* retryfreeze_ledger PATH [hold_bytes=N] [flush_ms=N]: the ledger opened (its error stops nginx). */
static char *rf_ngx_ledger(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    rf_ngx_main_conf *mcf = conf;
    if (mcf->ledger) return "is duplicate";
    ngx_str_t *args = cf->args->elts;
    for (ngx_uint_t a = 2; a < cf->args->nelts; a++) {
        ngx_int_t v = 0;
        int hold = rf_ngx_ledger_option(cf, &args[a], "hold_bytes", 0, RF_LEDGER_BATCH_BYTES, &v);
        if (hold > 0) mcf->hold_bytes = (size_t)v;
        int flush = hold ? 0 : rf_ngx_ledger_option(cf, &args[a], "flush_ms", 1, RF_LEDGER_FLUSH_MAX_MS, &v);
        if (flush > 0) mcf->flush_ms = (ngx_msec_t)v;
        if (hold < 0 || flush < 0) return NGX_CONF_ERROR;
        if (hold == 0 && flush == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "retryfreeze_ledger: unknown argument \"%V\" (hold_bytes=N or flush_ms=N)", &args[a]);
            return NGX_CONF_ERROR;
        }
    }
    char *cpath = rf_ngx_conf_path(cf);
    if (!cpath) return NGX_CONF_ERROR;
    rf_error err;
    memset(&err, 0, sizeof err);
    if (rf_ledger_open(cpath, RF_LEDGER_FSYNC_NONE, &mcf->ledger, &err) != RF_OK) {
        return rf_ngx_conf_fail(cf, "retryfreeze_ledger", &err, cpath);
    }
    return NGX_CONF_OK;
}

static ngx_int_t rf_ngx_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us);

/* retryfreeze (in an upstream{} block): the engine governs the block's tries. Its servers are tried in turn; a backup
 * server is refused (the engine, not the peers' health, decides each retry). */
static char *rf_ngx_upstream(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_upstream_srv_conf_t *uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    if (uscf->peer.init_upstream == rf_ngx_init_upstream) return "is duplicate";
    if (uscf->peer.init_upstream) { /* keepalive, or another balancing method, would be dropped in silence */
        return "must come first in the upstream block, before keepalive and any other balancing method";
    }
    uscf->peer.init_upstream = rf_ngx_init_upstream;
    rf_ngx_main_conf *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_retryfreeze_module);
    rf_ngx_governed *g = ngx_array_push(&mcf->governed);
    if (!g) return NGX_CONF_ERROR;
    g->uscf = uscf;
    g->line = cf->conf_file->line;
    g->initialised = false;
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE | NGX_HTTP_UPSTREAM_WEIGHT | NGX_HTTP_UPSTREAM_MAX_FAILS |
                  NGX_HTTP_UPSTREAM_FAIL_TIMEOUT | NGX_HTTP_UPSTREAM_DOWN;
    return NGX_CONF_OK;
}

static ngx_int_t rf_ngx_stopped_handler(ngx_http_request_t *r);

/* retryfreeze_stopped: the location's content is the answer to a request the engine stopped. */
static char *rf_ngx_stopped(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    rf_ngx_loc_conf *lcf = conf;
    if (lcf->stopped == 1) return "is duplicate";
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    if (clcf->handler) return "is in a location with another content handler (proxy_pass, return, …): give it its own";
    clcf->handler = rf_ngx_stopped_handler;
    lcf->stopped = 1;
    return NGX_CONF_OK;
}

static void *rf_ngx_create_loc_conf(ngx_conf_t *cf) {
    rf_ngx_loc_conf *lcf = ngx_pcalloc(cf->pool, sizeof(rf_ngx_loc_conf));
    if (lcf) lcf->stopped = NGX_CONF_UNSET;
    return lcf;
}

/* A content handler set after retryfreeze_stopped (proxy_pass below it) replaced it: refused, as one set before. */
static char *rf_ngx_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    rf_ngx_loc_conf *lcf = child;
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    if (lcf->stopped == 1 && clcf->handler != rf_ngx_stopped_handler) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze_stopped is in a location with another content handler (proxy_pass, …): give "
                           "it its own");
        return NGX_CONF_ERROR;
    }
    if (lcf->stopped == NGX_CONF_UNSET) lcf->stopped = 0; /* not inherited: a location answers stops only if it says */
    return NGX_CONF_OK;
}

/* $retryfreeze_stop_status: set by the engine's stop (an indexed value, which an internal redirect keeps); empty
 * otherwise. */
static ngx_int_t rf_ngx_stop_var_get(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data) {
    v->not_found = 1;
    return NGX_OK;
}

/* Declares $retryfreeze_stop_status before the configuration that reads it. */
static ngx_int_t rf_ngx_preconfiguration(ngx_conf_t *cf) {
    ngx_http_variable_t *var = ngx_http_add_variable(cf, &rf_ngx_stop_var_name, NGX_HTTP_VAR_NOHASH);
    if (!var) return NGX_ERROR;
    var->get_handler = rf_ngx_stop_var_get;
    return NGX_OK;
}

/* After every upstream block is set up: the variable's index, and no governed block whose setup skipped the module. */
static ngx_int_t rf_ngx_postconfiguration(ngx_conf_t *cf) {
    rf_ngx_main_conf *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_retryfreeze_module);
    mcf->stop_var = ngx_http_get_variable_index(cf, &rf_ngx_stop_var_name);
    if (mcf->stop_var == NGX_ERROR) return NGX_ERROR;
    /* nginx set up every upstream block after reading them all: one whose setup never reached the module had its
     * balancing method replaced by a later directive (least_conn, hash, …), and would run without the engine */
    rf_ngx_governed *g = mcf->governed.elts;
    for (ngx_uint_t i = 0; i < mcf->governed.nelts; i++) {
        if (g[i].initialised) continue;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze: upstream \"%V\" (retryfreeze; on line %ui) has another balancing method "
                           "after retryfreeze;, which replaced it: remove that method",
                           &g[i].uscf->host, g[i].line);
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* ---- the worker's ledger ------------------------------------------------------------------------------------ */

/* Writes the worker's held ledger lines; an error (lines lost, a full disk) goes to nginx's error log. */
static void rf_ngx_flush(rf_ngx_main_conf *mcf, ngx_log_t *log) {
    rf_error err;
    memset(&err, 0, sizeof err);
    if (rf_ledger_flush(mcf->ledger, &err) != RF_OK) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "retryfreeze: ledger: %s", err.message);
    }
}

/* Every flush_ms while the worker runs. */
static void rf_ngx_flush_timer(ngx_event_t *ev) {
    rf_ngx_main_conf *mcf = ev->data;
    rf_ngx_flush(mcf, ev->log);
    if (!ngx_exiting) ngx_add_timer(ev, mcf->flush_ms);
}

/* Each worker (or the single process): its jitter RNG and peer rotation from its pid, its held ledger lines and their
 * flush timer. */
static ngx_int_t rf_ngx_init_process(ngx_cycle_t *cycle) {
    rf_ngx_main_conf *mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_retryfreeze_module);
    if (!mcf || !mcf->policy) return NGX_OK;
    rf_rng_seed(&mcf->rng, (uint64_t)ngx_pid ^ ((uint64_t)ngx_time() << 20));
    mcf->next_peer = (ngx_uint_t)ngx_pid;
    if (!mcf->ledger || mcf->hold_bytes == 0) return NGX_OK;
    rf_error err;
    memset(&err, 0, sizeof err);
    if (rf_ledger_hold(mcf->ledger, mcf->hold_bytes, &err) != RF_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "retryfreeze: ledger: %s", err.message);
        return NGX_ERROR;
    }
    ngx_event_t *ev = &mcf->flush_event;
    ev->handler = rf_ngx_flush_timer;
    ev->data = mcf;
    ev->log = cycle->log;
    ev->cancelable = 1; /* an exiting worker does not wait for it: exit_process writes what is held */
    ngx_add_timer(ev, mcf->flush_ms);
    return NGX_OK;
}

/* An exiting worker writes what it holds (its timer is cancelable, so it does not wait for it). */
static void rf_ngx_exit_process(ngx_cycle_t *cycle) {
    rf_ngx_main_conf *mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_retryfreeze_module);
    if (mcf && mcf->ledger) rf_ngx_flush(mcf, cycle->log);
}

/* ---- one request -------------------------------------------------------------------------------------------- */

/* The Unix time in ms, from nginx's cached time. */
static int64_t rf_ngx_wall_ms(void) {
    ngx_time_t *tp = ngx_timeofday();
    return (int64_t)tp->sec * 1000 + (int64_t)tp->msec;
}

/* s[0..len) as a NUL-terminated string from the request's pool, each byte that belongs to no well-formed UTF-8
 * sequence as U+FFFD (rf_utf8_repair: what comes from the wire goes to the ledger, which takes only UTF-8). */
static char *rf_ngx_text(ngx_http_request_t *r, const u_char *s, size_t len) {
    size_t need = rf_utf8_repair((const char *)s, len, NULL, 0);
    char *out = ngx_pnalloc(r->pool, need + 1);
    if (!out) return NULL;
    rf_utf8_repair((const char *)s, len, out, need + 1);
    return out;
}

/* The method and the path (without its query) of the request the upstream gets: the request line proxy_pass built
 * before nginx set up the peer, after every rewrite, proxy_pass URI and proxy_method, and a subrequest's own. False
 * when the first buffer holds no "METHOD /path HTTP/1.x" line (a module other than proxy_pass: fastcgi, grpc,
 * memcached, …). */
static bool rf_ngx_request_line(ngx_http_request_t *r, ngx_str_t *method, ngx_str_t *path) {
    ngx_chain_t *cl = r->upstream->request_bufs;
    if (!cl || !cl->buf || !ngx_buf_in_memory(cl->buf)) return false;
    u_char *p = cl->buf->pos, *end = cl->buf->last;
    u_char *sp = ngx_strlchr(p, end, ' ');
    if (!sp || sp == p || sp + 1 >= end || sp[1] != '/') return false;
    for (u_char *m = p; m < sp; m++) {
        if ((*m < 'A' || *m > 'Z') && *m != '-' && *m != '_') return false; /* memcached's "get /key" is no method */
    }
    u_char *target = sp + 1, *t = target;
    while (t < end && *t != ' ' && *t != '?' && *t != '\r' && *t != '\n') t++;
    u_char *version = t;
    while (version < end && *version != ' ' && *version != '\r' && *version != '\n') version++;
    static const char http1[] = " HTTP/1.";
    if ((size_t)(end - version) < sizeof http1 - 1 || ngx_strncmp(version, http1, sizeof http1 - 1) != 0) return false;
    method->data = p;
    method->len = (size_t)(sp - p);
    path->data = target;
    path->len = (size_t)(t - target);
    return true;
}

/* The value of the first Idempotency-Key header of the request the upstream gets (the header block proxy_pass built,
 * after proxy_set_header and proxy_pass_request_headers), without the spaces around it; false for none or an empty
 * one (no key). */
static bool rf_ngx_sent_key(ngx_http_request_t *r, ngx_str_t *key) {
    static const char name[] = "idempotency-key:";
    ngx_buf_t *b = r->upstream->request_bufs->buf; /* rf_ngx_request_line read its first line */
    u_char *p = ngx_strlchr(b->pos, b->last, '\n'), *end = b->last;
    while (p && p + 1 < end) {
        u_char *line = p + 1;
        p = ngx_strlchr(line, end, '\n');
        u_char *eol = p ? p : end;
        if (eol > line && eol[-1] == '\r') eol--;
        if (eol == line) return false; /* the blank line: the headers end */
        if ((size_t)(eol - line) < sizeof name - 1 || ngx_strncasecmp(line, (u_char *)name, sizeof name - 1) != 0) {
            continue;
        }
        u_char *v = line + sizeof name - 1;
        while (v < eol && (*v == ' ' || *v == '\t')) v++;
        while (eol > v && (eol[-1] == ' ' || eol[-1] == '\t')) eol--;
        key->data = v;
        key->len = (size_t)(eol - v);
        return key->len > 0;
    }
    return false;
}

/* Stops the request with status: $retryfreeze_stop_status, which `error_page 500 = @NAME` and retryfreeze_stopped
 * answer with. Returns NGX_ERROR, which nginx turns into that 500. */
static ngx_int_t rf_ngx_answer(ngx_http_request_t *r, rf_ngx_main_conf *mcf, char text[4], ngx_uint_t status) {
    ngx_snprintf((u_char *)text, 4, "%03ui", status);
    ngx_http_variable_value_t *v = &r->variables[mcf->stop_var];
    v->data = (u_char *)text;
    v->len = 3;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    v->escape = 0;
    return NGX_ERROR;
}

/* Ends the request's step with reason, the ledger line held. */
static void rf_ngx_end(rf_ngx_request *ctx, rf_reason reason) {
    ctx->done = true;
    rf_step_end_request(&ctx->step, reason, (int64_t)ngx_current_msec, rf_ngx_wall_ms(), ctx->mcf->ledger);
    if (ctx->resp.ledger_error[0]) {
        ngx_log_error(NGX_LOG_ERR, ctx->r->connection->log, 0, "retryfreeze: ledger: %s", ctx->resp.ledger_error);
    }
}

/* The try nginx kept state of as the engine's result: a status when a head came (one outside RF_HTTP_STATUS_MIN..MAX
 * is no HTTP response: transport other); else nginx's 504 is a timeout, a connection that never opened was never
 * sent, one that broke may have sent the request (connect-reset); a try with no status at all was given up (the
 * client went away: transport other). Returns whether the try was given up that way. */
static bool rf_ngx_result(rf_ngx_request *ctx, ngx_http_upstream_state_t *st, rf_step_result *res) {
    memset(res, 0, sizeof *res);
    res->peer = ctx->peer;
    res->now_ms = (int64_t)ngx_current_msec;
    res->wall_ms = rf_ngx_wall_ms();
    res->transport = RF_TRANSPORT_OK;
    ngx_uint_t status = st->status;
    if (st->header_time != (ngx_msec_t)-1 && status) {
        if (status < RF_HTTP_STATUS_MIN || status > RF_HTTP_STATUS_MAX) {
            res->transport = RF_TRANSPORT_OTHER;
        } else {
            res->status = (int)status;
        }
        return false;
    }
    if (status == 0) {
        res->transport = RF_TRANSPORT_OTHER;
        return true;
    }
    if (status == NGX_HTTP_GATEWAY_TIME_OUT) {
        res->transport = RF_TRANSPORT_TIMEOUT;
    } else if (st->connect_time == (ngx_msec_t)-1) {
        res->transport = RF_TRANSPORT_CONNECT_REFUSED;
        res->not_sent = true;
    } else {
        res->transport = RF_TRANSPORT_CONNECT_RESET;
    }
    return false;
}

/* The engine's verdict on the request's last try (nginx's state of it, ctx->state), and *last, the status a stop
 * answers with (that try's, or 502). True when the engine retries with no wait; else false and *stop: the engine's
 * reason, or stopped-by-caller for a try nginx gave up (the client went away) or a wait nginx cannot make (never for
 * a lock retryfreeze_lock accepted; said in the error log). */
static bool rf_ngx_verdict(rf_ngx_request *ctx, rf_reason *stop, ngx_uint_t *last) {
    ngx_http_upstream_state_t *states = ctx->r->upstream_states->elts;
    ngx_http_upstream_state_t *st = &states[ctx->state];
    *last = st->status ? st->status : NGX_HTTP_BAD_GATEWAY;
    rf_step_result res;
    bool given_up = rf_ngx_result(ctx, st, &res);
    int hook_rc = 0;
    int64_t delay_ms = 0;
    *stop = RF_REASON_STOPPED_BY_CALLER;
    bool retry = rf_step_after(&ctx->step, &res, &ctx->mcf->rng, NULL, NULL, NULL, &hook_rc, &delay_ms, stop);
    if (retry && delay_ms > 0) {
        ngx_log_error(NGX_LOG_ERR, ctx->r->connection->log, 0,
                      "retryfreeze: the engine asked for a %L ms wait nginx cannot make", delay_ms);
    }
    if (given_up || (retry && delay_ms > 0)) {
        *stop = RF_REASON_STOPPED_BY_CALLER;
        return false;
    }
    return retry;
}

/* The request's end, whatever ended it (its pool is freed): the final try's verdict and the ledger line, unless the
 * engine stopped it before; then what the step allocated. */
static void rf_ngx_cleanup(void *data) {
    rf_ngx_request *ctx = data;
    if (!ctx->done) {
        ngx_http_request_t *r = ctx->r;
        if (ctx->tries == 0 || !r->upstream_states || r->upstream_states->nelts == 0) {
            rf_ngx_end(ctx, RF_REASON_STOPPED_BY_CALLER); /* ended before its first try */
        } else {
            rf_reason stop;
            ngx_uint_t last;
            /* a retry nginx was not told to come back for (a status proxy_next_upstream does not list): the request
             * ends as one its caller stopped */
            bool retry = rf_ngx_verdict(ctx, &stop, &last);
            rf_ngx_end(ctx, retry ? RF_REASON_STOPPED_BY_CALLER : stop);
        }
    }
    rf_response_clear(&ctx->resp);
}

static ngx_int_t rf_ngx_get_peer(ngx_peer_connection_t *pc, void *data);
static void rf_ngx_free_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state);
static ngx_int_t rf_ngx_stop(rf_ngx_request *ctx, rf_reason reason, ngx_uint_t status);
#if (NGX_HTTP_SSL)
static ngx_int_t rf_ngx_set_session(ngx_peer_connection_t *pc, void *data);
static void rf_ngx_save_session(ngx_peer_connection_t *pc, void *data);
#endif

/* The state of request r from an earlier governed upstream, or NULL: found among the pool's cleanups, which an
 * internal redirect (an error_page that proxies elsewhere) keeps where it clears the module's context. */
static rf_ngx_request *rf_ngx_earlier(ngx_http_request_t *r) {
    for (ngx_pool_cleanup_t *c = r->pool->cleanup; c; c = c->next) {
        if (c->handler == rf_ngx_cleanup && ((rf_ngx_request *)c->data)->r == r) return c->data;
    }
    return NULL;
}

/* Points nginx's peer hooks for the request's current upstream at ctx. */
static void rf_ngx_hook(rf_ngx_request *ctx, ngx_http_upstream_t *u) {
    ctx->rrp = u->peer.data;
    ctx->upstream_tries = 0;
    ctx->conf_cloned = false; /* each location has its own upstream configuration */
    u->peer.data = ctx;
    u->peer.get = rf_ngx_get_peer;
    u->peer.free = rf_ngx_free_peer;
#if (NGX_HTTP_SSL)
    u->peer.set_session = rf_ngx_set_session;
    u->peer.save_session = rf_ngx_save_session;
#endif
}

/* A request that comes to a governed upstream again (an error_page that proxies it elsewhere) is the same logical
 * request: its step goes on, so the lock's limits (maxAttempts, the deadline, the idempotency rule, the budget) hold
 * for the client's request, not per upstream. The verdict on the earlier upstream's last try says whether it may:
 * a stop ends the request there (its line written) and answers as a stop does; a request the engine stopped before
 * is answered so again. */
static ngx_int_t rf_ngx_go_on(ngx_http_request_t *r, rf_ngx_request *ctx) {
    if (ctx->done) return rf_ngx_answer(r, ctx->mcf, ctx->stop_status, ctx->stop_code);
    rf_reason stop;
    ngx_uint_t last;
    if (!rf_ngx_verdict(ctx, &stop, &last)) return rf_ngx_stop(ctx, stop, last);
    ctx->verdict_given = true;
    rf_ngx_hook(ctx, r->upstream);
    return NGX_OK;
}

/* The request's route and step, before its first try: 404 (through retryfreeze_stopped) without a route. */
static ngx_int_t rf_ngx_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us) {
    rf_ngx_main_conf *mcf = ngx_http_get_module_main_conf(r, ngx_http_retryfreeze_module);
    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) return NGX_ERROR;
    rf_ngx_request *earlier = rf_ngx_earlier(r);
    if (earlier) return rf_ngx_go_on(r, earlier);
    /* the method and path the upstream gets, not the client's: a rewrite, a proxy_pass URI and a subrequest change
     * them, and nginx's normalised $uri is not what is sent ("/a/%2e%2e/items/1" is not "/items/1") */
    ngx_str_t line_method, line_path;
    if (!rf_ngx_request_line(r, &line_method, &line_path)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "retryfreeze: the request to upstream \"%V\" has no HTTP/1 request line: the module governs "
                      "proxy_pass only",
                      &us->host);
        return NGX_ERROR;
    }
    rf_ngx_request *ctx = ngx_pcalloc(r->pool, sizeof(rf_ngx_request));
    if (!ctx) return NGX_ERROR;
    char *method = rf_ngx_text(r, line_method.data, line_method.len);
    char *path = rf_ngx_text(r, line_path.data, line_path.len);
    if (!method || !path) return NGX_ERROR;
    long route = rf_policy_match(mcf->policy, method, strlen(method), path, strlen(path));
    rf_route_view view;
    if (route < 0 || rf_policy_route(mcf->policy, (size_t)route, &view) != RF_OK) {
        return rf_ngx_answer(r, mcf, ctx->stop_status, NGX_HTTP_NOT_FOUND);
    }
    ctx->max_attempts = view.max_attempts;
    ngx_str_t key;
    ctx->req.method = method;
    ctx->req.path = path;
    if (rf_ngx_sent_key(r, &key)) {
        ctx->req.idempotency_key = rf_ngx_text(r, key.data, key.len);
        if (!ctx->req.idempotency_key) return NGX_ERROR;
    }
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, 0);
    if (!cln) return NGX_ERROR;
    rf_error err;
    memset(&err, 0, sizeof err);
    if (rf_step_init(&ctx->step, mcf->policy, &ctx->req, &ctx->resp, (int64_t)ngx_current_msec, &err) != RF_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "retryfreeze: %s: %s", err.path, err.message);
        return NGX_ERROR;
    }
    cln->handler = rf_ngx_cleanup;
    cln->data = ctx;
    ctx->r = r;
    ctx->mcf = mcf;
    rf_ngx_hook(ctx, r->upstream);
    return NGX_OK;
}

/* Sets the try's per-try timeout on a copy of the location's upstream configuration (made once per request, so no
 * other request sees it), as lua-nginx-module's ngx.balancer.set_timeouts does. */
static ngx_int_t rf_ngx_set_timeouts(rf_ngx_request *ctx, int64_t timeout_ms) {
    ngx_http_upstream_t *u = ctx->r->upstream;
    if (!ctx->conf_cloned) {
        ngx_http_upstream_conf_t *conf = ngx_palloc(ctx->r->pool, sizeof(ngx_http_upstream_conf_t));
        if (!conf) return NGX_ERROR;
        ngx_memcpy(conf, u->conf, sizeof(ngx_http_upstream_conf_t));
        u->conf = conf;
        ctx->conf_cloned = true;
    }
    ngx_msec_t t = (ngx_msec_t)timeout_ms;
    u->conf->connect_timeout = t;
    u->conf->send_timeout = t;
    u->conf->read_timeout = t;
    return NGX_OK;
}

/* The engine's stop before a try: the ledger line now, the answer (status) through retryfreeze_stopped. */
static ngx_int_t rf_ngx_stop(rf_ngx_request *ctx, rf_reason reason, ngx_uint_t status) {
    rf_ngx_end(ctx, reason);
    ctx->stop_code = status;
    return rf_ngx_answer(ctx->r, ctx->mcf, ctx->stop_status, status);
}

/* The server of the block for the try about to start, under the peers' read lock: the first from this worker's
 * rotation, then the next one after the last try's that this request has not tried in the block (round robin's
 * tried bits), none marked down; once every server that is up was tried, they are all untried again. Walked as
 * round robin walks them, a list (with `zone` the servers live in shared memory, linked). NULL when every server
 * is down. */
static ngx_http_upstream_rr_peer_t *rf_ngx_next_server(rf_ngx_request *ctx) {
    ngx_http_upstream_rr_peers_t *peers = ctx->rrp->peers;
    uintptr_t *tried = ctx->rrp->tried;
    const size_t bits = 8 * sizeof(uintptr_t);
    ngx_uint_t n = peers->number;
    ngx_uint_t start = ctx->upstream_tries == 0 ? ctx->mcf->next_peer++ % n : (ctx->server + 1) % n;
    for (int round = 0; round < 2; round++) {
        ngx_http_upstream_rr_peer_t *p = peers->peer;
        for (ngx_uint_t i = 0; p && i < start; i++) p = p->next;
        for (ngx_uint_t k = 0, i = start; k < n; k++, i = (i + 1) % n) {
            if (!p) p = peers->peer; /* round again from the first */
            uintptr_t bit = (uintptr_t)1 << (i % bits);
            if (!p->down && !(tried[i / bits] & bit)) {
                tried[i / bits] |= bit;
                ctx->server = i;
                return p;
            }
            p = p->next;
        }
        ngx_memzero(tried, (n + bits - 1) / bits * sizeof(uintptr_t)); /* every server up was tried: again */
    }
    return NULL;
}

/* Each try: the verdict on the last one, then this one's per-try timeout and server. */
static ngx_int_t rf_ngx_get_peer(ngx_peer_connection_t *pc, void *data) {
    rf_ngx_request *ctx = data;
    ngx_http_request_t *r = ctx->r;
    ngx_uint_t last = NGX_HTTP_SERVICE_UNAVAILABLE; /* what a stop answers when no try could start */
    if (ctx->done) return rf_ngx_answer(r, ctx->mcf, ctx->stop_status, ctx->stop_code);
    rf_reason stop = RF_REASON_STOPPED_BY_CALLER;
    if (ctx->tries > 0 && ctx->verdict_given) {
        ngx_http_upstream_state_t *states = r->upstream_states->elts;
        last = states[ctx->state].status ? states[ctx->state].status : NGX_HTTP_BAD_GATEWAY;
    } else if (ctx->tries > 0 && !rf_ngx_verdict(ctx, &stop, &last)) {
        return rf_ngx_stop(ctx, stop, last);
    }
    ctx->verdict_given = false;
    int64_t timeout_ms = 0;
    if (!rf_step_begin(&ctx->step, (int64_t)ngx_current_msec, &timeout_ms, &stop)) return rf_ngx_stop(ctx, stop, last);
    if (rf_ngx_set_timeouts(ctx, timeout_ms) != NGX_OK) return NGX_ERROR;
    ngx_http_upstream_rr_peers_t *peers = ctx->rrp->peers;
    ngx_http_upstream_rr_peers_rlock(peers);
    ngx_http_upstream_rr_peer_t *peer = rf_ngx_next_server(ctx);
    if (!peer) {
        ngx_http_upstream_rr_peers_unlock(peers);
        ngx_log_error(NGX_LOG_ERR, pc->log, 0, "retryfreeze: every server of upstream \"%V\" is marked down",
                      peers->name);
        rf_step_cancel(&ctx->step, (int64_t)ngx_current_msec, "every server is marked down");
        return rf_ngx_stop(ctx, RF_REASON_STOPPED_BY_CALLER, NGX_HTTP_BAD_GATEWAY);
    }
    ctx->tries++;
    ctx->upstream_tries++;
    ctx->state = r->upstream_states->nelts - 1; /* nginx pushed this try's state before asking */
    ctx->rrp->current = peer;
    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;
    size_t len = peer->name.len < sizeof ctx->peer - 1 ? peer->name.len : sizeof ctx->peer - 1;
    ngx_memcpy(ctx->peer, peer->name.data, len);
    ctx->peer[len] = '\0';
    ngx_http_upstream_rr_peers_unlock(peers);
    /* nginx comes back for another try only while the route (and this block's proxy_next_upstream_tries) leaves one */
    ngx_uint_t cap = r->upstream->conf->next_upstream_tries;
    bool more = ctx->tries < (ngx_uint_t)ctx->max_attempts && (cap == 0 || ctx->upstream_tries < cap);
    pc->tries = more ? 2 : 1;
    return NGX_OK;
}

/* After each try: one try fewer left (the engine, not the server's health, decides what follows). */
static void rf_ngx_free_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state) {
    if (pc->tries) pc->tries--;
}

#if (NGX_HTTP_SSL)
/* TLS sessions to the upstream are round robin's, kept per server (its data, which the request's state holds). */
static ngx_int_t rf_ngx_set_session(ngx_peer_connection_t *pc, void *data) {
    rf_ngx_request *ctx = data;
    return ngx_http_upstream_set_round_robin_peer_session(pc, ctx->rrp);
}

static void rf_ngx_save_session(ngx_peer_connection_t *pc, void *data) {
    rf_ngx_request *ctx = data;
    ngx_http_upstream_save_round_robin_peer_session(pc, ctx->rrp);
}
#endif

/* A governed block's setup, as nginx reads the configuration: round robin's server list (resolved, and copied to a
 * `zone` when there is one), refused with a server the engine cannot honour or without a lock. */
static ngx_int_t rf_ngx_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us) {
    rf_ngx_main_conf *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_retryfreeze_module);
    if (!mcf->policy) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze: upstream \"%V\" is governed by retryfreeze, but http{} has no "
                           "retryfreeze_lock",
                           &us->host);
        return NGX_ERROR;
    }
    /* a server line before `retryfreeze;` was read without its flags: max_conns, which the module does not count */
    ngx_http_upstream_server_t *servers = us->servers ? us->servers->elts : NULL;
    for (ngx_uint_t i = 0; servers && i < us->servers->nelts; i++) {
        if (servers[i].max_conns == 0) continue;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze: upstream \"%V\" has a server with max_conns, which the engine does not "
                           "count: remove it",
                           &us->host);
        return NGX_ERROR;
    }
    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) return NGX_ERROR;
    ngx_http_upstream_rr_peers_t *peers = us->peer.data;
    if (peers->next) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "retryfreeze: upstream \"%V\" has a backup server: the engine "
                           "decides each retry, and its servers are tried in turn",
                           &us->host);
        return NGX_ERROR;
    }
    us->peer.init = rf_ngx_init_peer;
    rf_ngx_governed *g = mcf->governed.elts;
    for (ngx_uint_t i = 0; i < mcf->governed.nelts; i++) {
        if (g[i].uscf == us) g[i].initialised = true;
    }
    return NGX_OK;
}

/* ---- retryfreeze_stopped ------------------------------------------------------------------------------------ */

/* The answer to a request the engine stopped: $retryfreeze_stop_status with no body; any other request that reaches
 * the location stays the 500 it was. */
static ngx_int_t rf_ngx_stopped_handler(ngx_http_request_t *r) {
    rf_ngx_main_conf *mcf = ngx_http_get_module_main_conf(r, ngx_http_retryfreeze_module);
    ngx_http_variable_value_t *v = ngx_http_get_indexed_variable(r, (ngx_uint_t)mcf->stop_var);
    ngx_int_t status = (v && !v->not_found && v->len == 3) ? ngx_atoi(v->data, 3) : NGX_ERROR;
    if (status == NGX_ERROR || status < NGX_HTTP_SPECIAL_RESPONSE) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    r->headers_out.status = (ngx_uint_t)status;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;
    return ngx_http_send_header(r);
}
