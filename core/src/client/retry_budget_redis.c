/*
 * The shared retry budget's store in Redis (retryfreeze/retry_budget_redis.h): hiredis, one connection per
 * budget behind a mutex, one EVALSHA per decision. The bucket's rule runs inside Redis, atomically, in
 * integer thousandths: GET (a missing key is a full bucket), add the delta, clamp to [0, max], SET with an
 * idle expiry. Sources: gRPC proposal A6 (retryThrottling), Redis EVALSHA/SCRIPT LOAD documentation.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/retry_budget_redis.h"
#include "../util/clock_ms.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* KEYS[1] the bucket; ARGV: delta (thousandths), max (thousandths), idle expiry (ms). Returns the new count. */
static const char BUCKET_SCRIPT[] = "local max = tonumber(ARGV[2])\n"
                                    "local t = tonumber(redis.call('GET', KEYS[1]) or max)\n"
                                    "t = t + tonumber(ARGV[1])\n"
                                    "if t < 0 then t = 0 elseif t > max then t = max end\n"
                                    "redis.call('SET', KEYS[1], t, 'PX', ARGV[3])\n"
                                    "return t\n";

#define KEY_PREFIX "retryfreeze:budget:"
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define IDLE_TTL_MAX_MS (30LL * 24 * 3600 * 1000) /* 30 days */

typedef struct redis_target {
    char host[256];
    int port;
    int db;
    char password[256];
} redis_target;

typedef struct redis_store {
    pthread_mutex_t lock;
    redis_target target;
    char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX];
    int64_t timeout_ms, ttl_ms;
    redisContext *ctx;       /* NULL while disconnected */
    char sha[41];            /* the script's SHA1 once loaded on this connection, "" before */
    int64_t next_connect_ms; /* no connection attempt before this (monotonic) */
    int64_t backoff_ms;      /* the wait after the next failure */
} redis_store;

static rf_status fail(rf_error *err, rf_status st, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static rf_status fail(rf_error *err, rf_status st, const char *path, const char *fmt, ...) {
    if (err) {
        memset(err, 0, sizeof *err);
        snprintf(err->path, sizeof err->path, "%s", path);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

static struct timeval tv_of(int64_t ms) {
    if (ms < 1) ms = 1;
    return (struct timeval){.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)((ms % 1000) * 1000)};
}

/* Parses "redis://[:password@]host[:port][/db]" (no other scheme, no query). */
static bool parse_url(const char *url, redis_target *t, char *why, size_t why_cap) {
    static const char scheme[] = "redis://";
    memset(t, 0, sizeof *t);
    t->port = 6379;
    if (url == NULL || strncmp(url, scheme, sizeof scheme - 1) != 0) {
        snprintf(why, why_cap, "must start with redis://");
        return false;
    }
    const char *p = url + sizeof scheme - 1;
    const char *at = strchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t n = (size_t)(at - pw);
        if (n == 0 || n >= sizeof t->password) {
            snprintf(why, why_cap, "has an empty or over-long password");
            return false;
        }
        memcpy(t->password, pw, n);
        p = at + 1;
    }
    size_t hn = strcspn(p, ":/");
    if (hn == 0 || hn >= sizeof t->host) {
        snprintf(why, why_cap, "has no host (redis://host:port/db)");
        return false;
    }
    memcpy(t->host, p, hn);
    p += hn;
    if (*p == ':') {
        char *end;
        errno = 0;
        long port = strtol(p + 1, &end, 10);
        if (end == p + 1 || errno != 0 || port < 1 || port > 65535 || (*end != '\0' && *end != '/')) {
            snprintf(why, why_cap, "has a port that is not 1..65535");
            return false;
        }
        t->port = (int)port;
        p = end;
    }
    if (*p == '/' && p[1] != '\0') {
        char *end;
        errno = 0;
        long db = strtol(p + 1, &end, 10);
        if (end == p + 1 || errno != 0 || db < 0 || db > 1000000 || *end != '\0') {
            snprintf(why, why_cap, "has a database that is not a number (redis://host:port/0)");
            return false;
        }
        t->db = (int)db;
    } else if (*p == '/' || *p == '\0') {
        /* no database: 0 */
    } else {
        snprintf(why, why_cap, "has unexpected text after the host");
        return false;
    }
    return true;
}

static bool reply_ok(redisReply *r, int type) { return r != NULL && r->type == type; }

/* Runs one command within the context's timeout; the reply (or NULL on an I/O error) is the caller's. */
static redisReply *command(redisContext *c, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return redisCommandArgv(c, argc, argv, lens);
}

/* Connects to t within timeout_ms, authenticates and selects the database. NULL on any failure. */
static redisContext *connect_target(const redis_target *t, int64_t timeout_ms, char *why, size_t why_cap) {
    redisContext *c = redisConnectWithTimeout(t->host, t->port, tv_of(timeout_ms));
    if (c == NULL || c->err) {
        snprintf(why, why_cap, "cannot connect to redis %.100s:%d: %.100s", t->host, t->port,
                 c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv_of(timeout_ms));
    char db[16];
    snprintf(db, sizeof db, "%d", t->db);
    const char *auth[] = {"AUTH", t->password}, *select[] = {"SELECT", db};
    if (t->password[0]) {
        redisReply *r = command(c, 2, auth);
        bool ok = reply_ok(r, REDIS_REPLY_STATUS);
        if (!ok) snprintf(why, why_cap, "redis AUTH failed: %s", r && r->str ? r->str : c->errstr);
        if (r) freeReplyObject(r);
        if (!ok) goto fail;
    }
    if (t->db != 0) {
        redisReply *r = command(c, 2, select);
        bool ok = reply_ok(r, REDIS_REPLY_STATUS);
        if (!ok) snprintf(why, why_cap, "redis SELECT %d failed: %s", t->db, r && r->str ? r->str : c->errstr);
        if (r) freeReplyObject(r);
        if (!ok) goto fail;
    }
    return c;
fail:
    redisFree(c);
    return NULL;
}

static void disconnect(redis_store *s, int64_t mono_ms) {
    if (s->ctx) redisFree(s->ctx);
    s->ctx = NULL;
    s->sha[0] = '\0';
    s->next_connect_ms = mono_ms + s->backoff_ms;
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

static bool load_script(redis_store *s) {
    const char *argv[] = {"SCRIPT", "LOAD", BUCKET_SCRIPT};
    redisReply *r = command(s->ctx, 3, argv);
    bool ok = reply_ok(r, REDIS_REPLY_STRING) && r->len == 40;
    if (ok) memcpy(s->sha, r->str, 41);
    if (r) freeReplyObject(r);
    return ok;
}

/* The store's add: at most timeout_ms from entry (waiting for the lock included), else false. */
static bool redis_add(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli) {
    redis_store *s = ctx;
    int64_t start = rfi_mono_ms();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + (s->timeout_ms % 1000) * 1000000;
    until.tv_sec += (time_t)(s->timeout_ms / 1000 + ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    if (pthread_mutex_timedlock(&s->lock, &until) != 0) return false;
    bool ok = false;
    int64_t mono = rfi_mono_ms();
    if (s->ctx == NULL) {
        char why[256];
        if (mono < s->next_connect_ms) goto out; /* backing off: fall back at once */
        s->ctx = connect_target(&s->target, s->timeout_ms - (mono - start), why, sizeof why);
        if (s->ctx == NULL) {
            disconnect(s, rfi_mono_ms());
            goto out;
        }
    }
    redisSetTimeout(s->ctx, tv_of(s->timeout_ms - (rfi_mono_ms() - start)));
    if (s->sha[0] == '\0' && !load_script(s)) {
        disconnect(s, rfi_mono_ms());
        goto out;
    }
    char delta[24], max[24], ttl[24];
    snprintf(delta, sizeof delta, "%" PRId64, delta_milli);
    snprintf(max, sizeof max, "%" PRId64, max_milli);
    snprintf(ttl, sizeof ttl, "%" PRId64, s->ttl_ms);
    const char *argv[] = {"EVALSHA", s->sha, "1", s->key, delta, max, ttl};
    redisReply *r = command(s->ctx, 7, argv);
    if (reply_ok(r, REDIS_REPLY_ERROR) && strncmp(r->str, "NOSCRIPT", 8) == 0) { /* the server lost its cache */
        freeReplyObject(r);
        r = load_script(s) ? command(s->ctx, 7, argv) : NULL;
    }
    if (reply_ok(r, REDIS_REPLY_INTEGER)) {
        *tokens_milli = r->integer;
        s->backoff_ms = BACKOFF_FIRST_MS;
        ok = true;
    } else if (r == NULL || s->ctx->err) {
        disconnect(s, rfi_mono_ms()); /* timed out or lost: the stream may be out of step */
    }
    if (r) freeReplyObject(r);
out:
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void redis_free(void *ctx) {
    redis_store *s = ctx;
    if (s == NULL) return;
    if (s->ctx) redisFree(s->ctx);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

rf_status rf_retry_budget_redis_new(const rf_policy *p, const rf_redis_budget_options *o, rf_retry_budget **out,
                                    rf_error *err) {
    if (p == NULL || o == NULL || out == NULL) return fail(err, RF_EINVAL, "", "policy, options and out are required");
    *out = NULL;
    const char *name = rf_policy_retry_budget_shared(p);
    if (name == NULL)
        return fail(err, RF_EINVAL, "retryBudget.shared",
                    "the lock has no retryBudget.shared {name}: a shared budget needs the bucket's name in the lock");
    if (o->timeout_ms < 0 || o->timeout_ms > RF_REDIS_BUDGET_TIMEOUT_MAX_MS)
        return fail(err, RF_EINVAL, "timeout_ms", "must be 1..%d ms (0 for the default %d), got %" PRId64,
                    RF_REDIS_BUDGET_TIMEOUT_MAX_MS, RF_REDIS_BUDGET_TIMEOUT_MS, o->timeout_ms);
    if (o->idle_ttl_ms < 0 || o->idle_ttl_ms > IDLE_TTL_MAX_MS)
        return fail(err, RF_EINVAL, "idle_ttl_ms", "must be 1..%lld ms (0 for the default, 1 hour), got %" PRId64,
                    (long long)IDLE_TTL_MAX_MS, o->idle_ttl_ms);
    redis_store *s = calloc(1, sizeof *s);
    if (s == NULL) return fail(err, RF_ENOMEM, "", "out of memory");
    char why[128];
    if (!parse_url(o->url, &s->target, why, sizeof why)) {
        free(s);
        return fail(err, RF_EINVAL, "url", "%s", why);
    }
    snprintf(s->key, sizeof s->key, KEY_PREFIX "%s", name);
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : RF_REDIS_BUDGET_TIMEOUT_MS;
    s->ttl_ms = o->idle_ttl_ms ? o->idle_ttl_ms : RF_REDIS_BUDGET_TTL_MS;
    s->backoff_ms = BACKOFF_FIRST_MS;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return fail(err, RF_ENOMEM, "", "cannot create a mutex");
    }
    rf_retry_budget *b = rf_retry_budget_new(p);
    if (b == NULL) {
        redis_free(s);
        return fail(err, RF_ENOMEM, "", "out of memory");
    }
    rf_retry_budget_store store = {.add = redis_add, .free = redis_free, .ctx = s};
    rf_status st = rf_retry_budget_set_store(b, &store, err);
    if (st != RF_OK) {
        redis_free(s);
        rf_retry_budget_free(b);
        return st;
    }
    *out = b;
    return RF_OK;
}

rf_status rf_retry_budget_redis_peek(const char *url, const char *name, int64_t timeout_ms, int64_t *tokens_milli,
                                     int64_t *ttl_ms, rf_error *err) {
    if (tokens_milli == NULL || ttl_ms == NULL) return fail(err, RF_EINVAL, "", "tokens_milli and ttl_ms are required");
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > RF_SHARED_BUDGET_NAME_MAX ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return fail(err, RF_EINVAL, "name", "must be 1..64 characters of A-Z a-z 0-9 . _ -, got \"%s\"",
                    name ? name : "");
    if (timeout_ms < 1 || timeout_ms > RF_REDIS_BUDGET_TIMEOUT_MAX_MS)
        return fail(err, RF_EINVAL, "timeout_ms", "must be 1..%d ms", RF_REDIS_BUDGET_TIMEOUT_MAX_MS);
    redis_target t;
    char why[256];
    if (!parse_url(url, &t, why, sizeof why)) return fail(err, RF_EINVAL, "url", "%s", why);
    redisContext *c = connect_target(&t, timeout_ms, why, sizeof why);
    if (c == NULL) return fail(err, RF_EIO, "url", "%s", why);
    char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX];
    snprintf(key, sizeof key, KEY_PREFIX "%s", name);
    const char *get[] = {"GET", key}, *pttl[] = {"PTTL", key};
    redisReply *g = command(c, 2, get);
    redisReply *x = g ? command(c, 2, pttl) : NULL;
    rf_status st = RF_OK;
    if (reply_ok(g, REDIS_REPLY_NIL)) {
        *tokens_milli = -1;
    } else if (reply_ok(g, REDIS_REPLY_STRING)) {
        *tokens_milli = strtoll(g->str, NULL, 10);
    } else {
        snprintf(why, sizeof why, "redis GET %s failed: %s", key, g && g->str ? g->str : c->errstr);
        st = fail(err, RF_EIO, "url", "%s", why);
    }
    *ttl_ms = (x != NULL && x->type == REDIS_REPLY_INTEGER && x->integer >= 0) ? x->integer : -1;
    if (g) freeReplyObject(g);
    if (x) freeReplyObject(x);
    redisFree(c);
    return st;
}
