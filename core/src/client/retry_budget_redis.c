/*
 * The shared retry budget's store in Redis (retryfreeze/retry_budget_redis.h): hiredis, one connection per
 * budget behind a mutex, one EVALSHA per decision. The bucket's rule runs inside Redis, atomically, in
 * integer thousandths: GET (a missing key is a full bucket), add the delta, clamp to [0, max], SET with an
 * idle expiry. Sources: gRPC proposal A6 (retryThrottling), Redis EVALSHA/SCRIPT LOAD documentation.
 */
#define _GNU_SOURCE /* getaddrinfo_a(3), gai_suspend(3): glibc's asynchronous name lookup */
#include "retryfreeze/retry_budget_redis.h"
#include "../util/clock_ms.h"
#include "../util/report.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* One name lookup of the target's host (getaddrinfo_a), kept while it runs: a lookup still running at a
 * deadline is waited for again by the next connection attempt, never started twice. On the heap, with its own
 * copy of the name: one the resolver cannot cancel outlives its store (release_lookup). */
typedef struct name_lookup {
    struct gaicb req;
    struct addrinfo hints;
    char host[256];
    bool pending; /* started, its result not yet taken */
} name_lookup;

typedef struct redis_store {
    pthread_mutex_t lock;
    redis_target target;
    name_lookup *lookup;
    char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX];
    int64_t timeout_ms, ttl_ms;
    redisContext *ctx;       /* NULL while disconnected */
    char sha[41];            /* the script's SHA1 once loaded on this connection, "" before */
    int64_t next_connect_ns; /* no connection attempt before this (CLOCK_MONOTONIC) */
    int64_t backoff_ms;      /* the wait after the next failure */
} redis_store;

/* One decision's (or one peek's) talk with Redis: its deadline, timeout_ms from the start on CLOCK_MONOTONIC,
 * and why it failed, for messages. */
typedef struct redis_call {
    int64_t deadline_ns, timeout_ms;
    char why[256];
} redis_call;

static redis_call call_of(int64_t timeout_ms) {
    return (redis_call){.deadline_ns = rfi_mono_ns() + timeout_ms * 1000000, .timeout_ms = timeout_ms};
}

/*
 * Waits until fd is ready for events (POLLIN or POLLOUT) or the deadline passes, polling with the time left
 * (poll(2)). True when fd is ready, or in error (the read or write that follows says which); false at the
 * deadline, or when poll itself fails. hiredis' own timeout bounds each read, not a reply: a server that
 * sends one byte at a time never trips it, so every wait of a command goes through here instead.
 */
static bool wait_fd(int fd, short events, int64_t deadline_ns) {
    for (;;) {
        int64_t left_ns = deadline_ns - rfi_mono_ns();
        if (left_ns <= 0) return false;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)((left_ns + 999999) / 1000000));
        if (n > 0) return true;
        if (n < 0 && errno != EINTR) return false;
    }
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

/*
 * Sends one command and reads its whole reply by deadline_ns, on a non-blocking connection (hiredis'
 * redisBufferWrite, redisBufferRead and redisGetReplyFromReader, each wait bounded by wait_fd). The reply is
 * the caller's; NULL on an I/O error, a protocol error or the deadline, with why saying which. After NULL the
 * connection is out of step (a reply may still arrive) and must be dropped.
 */
static redisReply *command(redisContext *c, redis_call *k, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK) {
        snprintf(k->why, sizeof k->why, "redis %s: %s", argv[0], c->errstr);
        return NULL;
    }
    for (int done = 0; !done;) {
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            snprintf(k->why, sizeof k->why, "redis %s: %s", argv[0], c->errstr);
            return NULL;
        }
        if (!done && !wait_fd(c->fd, POLLOUT, k->deadline_ns)) {
            snprintf(k->why, sizeof k->why, "redis %s: not sent within %" PRId64 " ms", argv[0], k->timeout_ms);
            return NULL;
        }
    }
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
            snprintf(k->why, sizeof k->why, "redis %s: %s", argv[0], c->errstr);
            return NULL;
        }
        if (reply != NULL) return reply;
        if (!wait_fd(c->fd, POLLIN, k->deadline_ns)) {
            snprintf(k->why, sizeof k->why, "redis %s: no whole reply within %" PRId64 " ms", argv[0], k->timeout_ms);
            return NULL;
        }
        if (redisBufferRead(c) != REDIS_OK) {
            snprintf(k->why, sizeof k->why, "redis %s: %s", argv[0], c->errstr);
            return NULL;
        }
    }
}

/* A command whose only acceptable reply is a status (+OK): AUTH and SELECT. False with why otherwise. */
static bool command_ok(redisContext *c, redis_call *k, int argc, const char **argv, const char *shown) {
    redisReply *r = command(c, k, argc, argv);
    bool ok = reply_ok(r, REDIS_REPLY_STATUS);
    if (!ok && r != NULL)
        snprintf(k->why, sizeof k->why, "redis %s failed: %.200s", shown, r->str ? r->str : "an unexpected reply");
    if (r) freeReplyObject(r);
    return ok;
}

/*
 * The addresses of t->host, in *found (the caller frees them with freeaddrinfo), or NULL in *found for a literal
 * IPv4 or IPv6 address, which is used as it is. A name is looked up with getaddrinfo_a(3), on a thread of its
 * own, and waited for with gai_suspend(3) on the time left: getaddrinfo(3), which hiredis would call, cannot be
 * interrupted, and a resolver that does not answer would hold the decision for its own timeouts (5 s per try
 * by default). A lookup still running at the deadline stays pending in *n. False with why at the deadline or
 * on an error.
 */
static bool resolve_host(const redis_target *t, name_lookup *n, redis_call *k, struct addrinfo **found) {
    *found = NULL;
    unsigned char bytes[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, t->host, bytes) == 1 || inet_pton(AF_INET6, t->host, bytes) == 1) return true;
    if (!n->pending) {
        memset(n, 0, sizeof *n);
        n->hints.ai_family = AF_UNSPEC;
        n->hints.ai_socktype = SOCK_STREAM;
        memcpy(n->host, t->host, sizeof n->host);
        n->req.ar_name = n->host;
        n->req.ar_request = &n->hints;
        struct gaicb *list[1] = {&n->req};
        int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
        if (rc != 0) {
            snprintf(k->why, sizeof k->why, "cannot resolve redis host %.100s: %s", t->host, gai_strerror(rc));
            return false;
        }
        n->pending = true;
    }
    int rc;
    while ((rc = gai_error(&n->req)) == EAI_INPROGRESS) {
        int64_t left_ns = k->deadline_ns - rfi_mono_ns();
        if (left_ns <= 0) {
            snprintf(k->why, sizeof k->why, "cannot resolve redis host %.100s within %" PRId64 " ms", t->host,
                     k->timeout_ms);
            return false;
        }
        const struct gaicb *list[1] = {&n->req};
        struct timespec wait = {.tv_sec = (time_t)(left_ns / 1000000000), .tv_nsec = (long)(left_ns % 1000000000)};
        (void)gai_suspend(list, 1, &wait); /* done, the time is up, or a signal: gai_error says which */
    }
    n->pending = false;
    *found = n->req.ar_result;
    n->req.ar_result = NULL;
    if (rc == 0 && *found != NULL) return true;
    snprintf(k->why, sizeof k->why, "cannot resolve redis host %.100s: %s", t->host,
             gai_strerror(rc != 0 ? rc : EAI_NONAME));
    return false;
}

/* A non-blocking connect(2) to addr:port, done by the call's deadline (POLLOUT, then SO_ERROR). NULL with why. */
static redisContext *connect_addr(const redis_target *t, const char *addr, redis_call *k) {
    redisContext *c = redisConnectNonBlock(addr, t->port);
    if (c == NULL || c->err) {
        snprintf(k->why, sizeof k->why, "cannot connect to redis %.100s:%d: %.100s", t->host, t->port,
                 c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    if (!wait_fd(c->fd, POLLOUT, k->deadline_ns)) {
        snprintf(k->why, sizeof k->why, "cannot connect to redis %.100s:%d: no connection within %" PRId64 " ms",
                 t->host, t->port, k->timeout_ms);
        redisFree(c);
        return NULL;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
    if (soerr != 0) {
        char text[100];
        if (strerror_r(soerr, text, sizeof text) != 0) snprintf(text, sizeof text, "error %d", soerr);
        snprintf(k->why, sizeof k->why, "cannot connect to redis %.100s:%d: %s", t->host, t->port, text);
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Frees a lookup that is done with (its store freed, its peek over): cancelled if still running, or, when the
 * resolver has already started it (gai_cancel cannot stop that one, and its gaicb must live until it ends),
 * left to the resolver: a few hundred bytes never freed, instead of a wait as long as the resolver's timeouts. */
static void release_lookup(name_lookup *n) {
    if (n == NULL) return;
    if (n->pending && gai_cancel(&n->req) == EAI_NOTCANCELED) return;
    if (n->req.ar_result != NULL) freeaddrinfo(n->req.ar_result);
    free(n);
}

/*
 * Connects to t by the call's deadline (its host looked up by resolve_host, each address tried in turn by
 * connect_addr), authenticates and selects the database, all within the same deadline. NULL on any failure,
 * with why.
 */
static redisContext *connect_target(const redis_target *t, name_lookup *n, redis_call *k) {
    struct addrinfo *found;
    if (!resolve_host(t, n, k, &found)) return NULL;
    redisContext *c = found == NULL ? connect_addr(t, t->host, k) : NULL;
    if (found != NULL)
        snprintf(k->why, sizeof k->why, "cannot connect to redis %.100s:%d: no usable address", t->host, t->port);
    for (const struct addrinfo *ai = found; ai != NULL && c == NULL; ai = ai->ai_next) { /* as hiredis does */
        char addr[INET6_ADDRSTRLEN];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof addr, NULL, 0, NI_NUMERICHOST) == 0)
            c = connect_addr(t, addr, k);
    }
    if (found != NULL) freeaddrinfo(found);
    if (c == NULL) return NULL;
    char db[16];
    snprintf(db, sizeof db, "%d", t->db);
    const char *auth[] = {"AUTH", t->password}, *select[] = {"SELECT", db};
    if (t->password[0] && !command_ok(c, k, 2, auth, "AUTH")) goto fail;
    char shown[24];
    snprintf(shown, sizeof shown, "SELECT %d", t->db);
    if (t->db != 0 && !command_ok(c, k, 2, select, shown)) goto fail;
    return c;
fail:
    redisFree(c);
    return NULL;
}

static void disconnect(redis_store *s) {
    if (s->ctx) redisFree(s->ctx);
    s->ctx = NULL;
    s->sha[0] = '\0';
    s->next_connect_ns = rfi_mono_ns() + s->backoff_ms * 1000000;
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

static bool load_script(redis_store *s, redis_call *k) {
    const char *argv[] = {"SCRIPT", "LOAD", BUCKET_SCRIPT};
    redisReply *r = command(s->ctx, k, 3, argv);
    bool ok = reply_ok(r, REDIS_REPLY_STRING) && r->len == 40;
    if (ok) memcpy(s->sha, r->str, 41);
    if (r) freeReplyObject(r);
    return ok;
}

/*
 * The store's add: one deadline, timeout_ms from entry, bounds all of it: the wait for the lock (another
 * thread's round trip), connect, AUTH, SELECT, SCRIPT LOAD and EVALSHA with its whole reply. False at the
 * deadline or on any error (the decision then uses the local bucket); the connection is dropped unless it
 * ended in step, so a late reply can never be read as the next decision's.
 */
static bool redis_add(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli) {
    redis_store *s = ctx;
    redis_call k = call_of(s->timeout_ms);
    /* The time left, as pthread_mutex_timedlock takes it (CLOCK_REALTIME; a step of the wall clock during this
     * wait moves its end: pthread_mutex_clocklock would not, but ThreadSanitizer does not know that one). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + (k.deadline_ns - rfi_mono_ns());
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    if (pthread_mutex_timedlock(&s->lock, &until) != 0) return false;
    bool ok = false;
    if (s->ctx == NULL) {
        if (rfi_mono_ns() < s->next_connect_ns) goto out; /* backing off: fall back at once */
        s->ctx = connect_target(&s->target, s->lookup, &k);
        if (s->ctx == NULL) {
            disconnect(s);
            goto out;
        }
    }
    if (s->sha[0] == '\0' && !load_script(s, &k)) {
        disconnect(s);
        goto out;
    }
    char delta[24], max[24], ttl[24];
    snprintf(delta, sizeof delta, "%" PRId64, delta_milli);
    snprintf(max, sizeof max, "%" PRId64, max_milli);
    snprintf(ttl, sizeof ttl, "%" PRId64, s->ttl_ms);
    const char *argv[] = {"EVALSHA", s->sha, "1", s->key, delta, max, ttl};
    redisReply *r = command(s->ctx, &k, 7, argv);
    if (reply_ok(r, REDIS_REPLY_ERROR) && strncmp(r->str, "NOSCRIPT", 8) == 0) { /* the server lost its cache */
        freeReplyObject(r);
        r = load_script(s, &k) ? command(s->ctx, &k, 7, argv) : NULL;
    }
    if (reply_ok(r, REDIS_REPLY_INTEGER)) {
        *tokens_milli = r->integer;
        s->backoff_ms = BACKOFF_FIRST_MS;
        ok = true;
    } else if (r == NULL) {
        disconnect(s); /* timed out, lost or garbled: the stream is out of step */
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
    release_lookup(s->lookup);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

rf_status rf_retry_budget_redis_new(const rf_policy *p, const rf_redis_budget_options *o, rf_retry_budget **out,
                                    rf_error *err) {
    if (p == NULL || o == NULL || out == NULL)
        return rfi_report(err, RF_EINVAL, "", "policy, options and out are required");
    *out = NULL;
    const char *name = rf_policy_retry_budget_shared(p);
    if (name == NULL)
        return rfi_report(
            err, RF_EINVAL, "retryBudget.shared",
            "the lock has no retryBudget.shared {name}: a shared budget needs the bucket's name in the lock");
    if (o->timeout_ms < 0 || o->timeout_ms > RF_REDIS_BUDGET_TIMEOUT_MAX_MS)
        return rfi_report(err, RF_EINVAL, "timeout_ms", "must be 1..%d ms (0 for the default %d), got %" PRId64,
                          RF_REDIS_BUDGET_TIMEOUT_MAX_MS, RF_REDIS_BUDGET_TIMEOUT_MS, o->timeout_ms);
    if (o->idle_ttl_ms < 0 || o->idle_ttl_ms > IDLE_TTL_MAX_MS)
        return rfi_report(err, RF_EINVAL, "idle_ttl_ms", "must be 1..%lld ms (0 for the default, 1 hour), got %" PRId64,
                          (long long)IDLE_TTL_MAX_MS, o->idle_ttl_ms);
    redis_store *s = calloc(1, sizeof *s);
    if (s == NULL) return rfi_report(err, RF_ENOMEM, "", "out of memory");
    char why[128];
    if (!parse_url(o->url, &s->target, why, sizeof why)) {
        free(s);
        return rfi_report(err, RF_EINVAL, "url", "%s", why);
    }
    s->lookup = calloc(1, sizeof *s->lookup);
    if (s->lookup == NULL) {
        free(s);
        return rfi_report(err, RF_ENOMEM, "", "out of memory");
    }
    snprintf(s->key, sizeof s->key, KEY_PREFIX "%s", name);
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : RF_REDIS_BUDGET_TIMEOUT_MS;
    s->ttl_ms = o->idle_ttl_ms ? o->idle_ttl_ms : RF_REDIS_BUDGET_TTL_MS;
    s->backoff_ms = BACKOFF_FIRST_MS;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s->lookup);
        free(s);
        return rfi_report(err, RF_ENOMEM, "", "cannot create a mutex");
    }
    rf_retry_budget *b = rf_retry_budget_new(p);
    if (b == NULL) {
        redis_free(s);
        return rfi_report(err, RF_ENOMEM, "", "out of memory");
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
    if (tokens_milli == NULL || ttl_ms == NULL)
        return rfi_report(err, RF_EINVAL, "", "tokens_milli and ttl_ms are required");
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > RF_SHARED_BUDGET_NAME_MAX ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return rfi_report(err, RF_EINVAL, "name", "must be 1..64 characters of A-Z a-z 0-9 . _ -, got \"%s\"",
                          name ? name : "");
    if (timeout_ms < 1 || timeout_ms > RF_REDIS_BUDGET_TIMEOUT_MAX_MS)
        return rfi_report(err, RF_EINVAL, "timeout_ms", "must be 1..%d ms", RF_REDIS_BUDGET_TIMEOUT_MAX_MS);
    redis_target t;
    char why[128];
    if (!parse_url(url, &t, why, sizeof why)) return rfi_report(err, RF_EINVAL, "url", "%s", why);
    redis_call k = call_of(timeout_ms);
    name_lookup *lookup = calloc(1, sizeof *lookup);
    if (lookup == NULL) return rfi_report(err, RF_ENOMEM, "", "out of memory");
    redisContext *c = connect_target(&t, lookup, &k);
    release_lookup(lookup);
    if (c == NULL) return rfi_report(err, RF_EIO, "url", "%s", k.why);
    char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX];
    snprintf(key, sizeof key, KEY_PREFIX "%s", name);
    const char *get[] = {"GET", key}, *pttl[] = {"PTTL", key};
    redisReply *g = command(c, &k, 2, get);
    redisReply *x = g ? command(c, &k, 2, pttl) : NULL;
    rf_status st = RF_OK;
    if (reply_ok(g, REDIS_REPLY_NIL)) {
        *tokens_milli = -1;
    } else if (reply_ok(g, REDIS_REPLY_STRING)) {
        *tokens_milli = strtoll(g->str, NULL, 10);
    } else if (g != NULL) {
        st = rfi_report(err, RF_EIO, "url", "redis GET %s failed: %s", key, g->str ? g->str : "an unexpected reply");
    } else {
        st = rfi_report(err, RF_EIO, "url", "%s", k.why);
    }
    if (st == RF_OK && x == NULL) st = rfi_report(err, RF_EIO, "url", "%s", k.why);
    *ttl_ms = (x != NULL && x->type == REDIS_REPLY_INTEGER && x->integer >= 0) ? x->integer : -1;
    if (g) freeReplyObject(g);
    if (x) freeReplyObject(x);
    redisFree(c);
    return st;
}
