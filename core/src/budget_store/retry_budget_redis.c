/*
 * The shared retry budget's store in Redis (retryfreeze/retry_budget_redis.h): one connection per budget behind
 * a mutex, one EVALSHA per decision. The bucket's rule runs inside Redis, atomically, in integer thousandths:
 * GET (a missing key is a full bucket), add the delta, clamp to [0, max], SET with an idle expiry. Sources: gRPC
 * proposal A6 (retryThrottling), Redis EVALSHA/SCRIPT LOAD/AUTH/ACL documentation, RFC 3986 (the URL).
 *
 * The socket is ours (non-blocking, every wait a poll(2) on the time left): hiredis formats the commands and
 * parses the replies (redisFormatCommandArgv, redisReader), and OpenSSL runs TLS over two memory BIOs, so the
 * handshake's bytes go through the same bounded waits as the commands'. Debian 12's hiredis (0.14) has no TLS.
 */
#define _GNU_SOURCE /* getaddrinfo_a(3), gai_suspend(3): glibc's asynchronous name lookup; explicit_bzero(3) */
#include "retryfreeze/retry_budget_redis.h"
#include "../util/clock_ms.h"
#include "../util/report.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* KEYS[1] the bucket; ARGV: delta (thousandths), max (thousandths), idle expiry (ms). Returns the new count. */
static const char BUCKET_SCRIPT[] = "local max = tonumber(ARGV[2])\n"
                                    "local t = tonumber(redis.call('GET', KEYS[1]) or max)\n"
                                    "t = t + tonumber(ARGV[1])\n"
                                    "if t < 0 then t = 0 elseif t > max then t = max end\n"
                                    "redis.call('SET', KEYS[1], t, 'PX', ARGV[3])\n"
                                    "return t\n";

/*
 * A ratio window (retryBudget.retryRatio): KEYS[1] a hash, ARGV: request (0/1), retry (0/1), retryRatio × 1000,
 * reserve (minRetriesPerSecond × ttlMs: retries × 1000), ttlMs, idle expiry (ms). On the server's clock (TIME): the
 * window is the slot of now and the 9 before it, slots of ttlMs / 10 ms, each k<i> (its number), q<i> (requests) and
 * r<i> (retries) at i = its number mod 10; a window of another ttlMs starts afresh. Returns {allowed, requests,
 * retries}, a refused retry not counted: the rule of the local window (retry_budget.c).
 */
static const char WINDOW_SCRIPT[] =
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local function n(x) return tonumber(x) or 0 end\n"
    "local ttl = tonumber(ARGV[5])\n"
    "local t = redis.call('TIME')\n"
    "local k = math.floor((tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) / (ttl / 10))\n"
    "local a = redis.call('HGETALL', KEYS[1])\n"
    "local h = {}\n"
    "for i = 1, #a, 2 do h[a[i]] = a[i + 1] end\n"
    "if h.ttl ~= nil and n(h.ttl) ~= ttl then redis.call('DEL', KEYS[1]); h = {} end\n"
    "if h.newest ~= nil and k < n(h.newest) then k = n(h.newest) end\n"
    "local pos = k % 10\n"
    "local cq, cr = 0, 0\n"
    "if h['k' .. pos] ~= nil and n(h['k' .. pos]) == k then cq, cr = n(h['q' .. pos]), n(h['r' .. pos]) end\n"
    "if ARGV[1] == '1' then cq = cq + 1 end\n"
    "local q, r = cq, cr\n"
    "for i = 0, 9 do\n"
    "  local s = h['k' .. i]\n"
    "  if i ~= pos and s ~= nil and n(s) <= k and n(s) > k - 10 then q = q + n(h['q' .. i]); r = r + n(h['r' .. i]) "
    "end\n"
    "end\n"
    "local allowed = 1\n"
    "if ARGV[2] == '1' then\n"
    "  if (r + 1) * 1000 <= tonumber(ARGV[3]) * q + tonumber(ARGV[4]) then cr = cr + 1; r = r + 1 else allowed = 0 "
    "end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'ttl', ttl, 'newest', k, 'ratio', ARGV[3], 'reserve', ARGV[4], 'k' .. pos, k,\n"
    "  'q' .. pos, cq, 'r' .. pos, cr)\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[6])\n"
    "return {allowed, q, r}\n";

#define KEY_PREFIX "retryfreeze:budget:"
#define WINDOW_SUFFIX ":window" /* a ratio's key: the name holds no ':', so it is never a bucket's */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define IDLE_TTL_MAX_MS (30LL * 24 * 3600 * 1000) /* 30 days */
#define IO_CHUNK 16384                            /* one TLS record's worth of bytes per read */
/* A budget's replies are tiny (a count, a SHA, a hash of 34 fields, an error line): a reply past these caps is
 * refused as soon as it says so, rather than buffered up to the deadline (hiredis keeps what a reply declares). */
#define REPLY_BYTES_MAX 16384 /* one reply, all of it */
#define BULK_BYTES_MAX 4096   /* a bulk string's declared length */
#define ELEMENTS_MAX 256      /* an array's (or RESP3 map's, set's, push's) declared count */

/* Why a budget fell back, by kind: each kind is said once per budget (report). */
typedef enum failure_kind {
    FAIL_UNREACHABLE, /* no address, refused, closed, or not whole by the deadline */
    FAIL_TLS,         /* the handshake or a record failed: the certificate, an alert */
    FAIL_AUTH,        /* AUTH refused, or a command refused for want of it (WRONGPASS, NOAUTH) */
    FAIL_PERMISSION,  /* the ACL user may not run a command or touch the key (NOPERM) */
    FAIL_PROTOCOL,    /* garbage, an unexpected reply, any other error reply */
    FAIL_BUSY,        /* another thread's call held the budget's lock to the decision's deadline */
    FAIL_KINDS
} failure_kind;

/* What a log line adds to the reason, by kind: what to change. */
static const char *const FAILURE_HINTS[FAIL_KINDS] = {
    [FAIL_AUTH] = " (check the user and password in the URL)",
    [FAIL_PERMISSION] = " (the budget's ACL user needs ~" KEY_PREFIX "* +evalsha +script|load +get +set (a ratio "
                        "budget: +hgetall +hset +del +pexpire +time instead of +get +set), and +select "
                        "for a db other than 0)",
    [FAIL_BUSY] = " (a budget makes one call to redis at a time: raise timeout_ms, or give busy threads budgets of "
                  "their own)",
};

typedef struct redis_target {
    bool tls;        /* rediss:// */
    bool host_is_ip; /* a literal address: no lookup, no SNI, the certificate checked for that IP */
    char host[256];  /* a name or an address, without an IPv6 address' brackets */
    char port[8];
    int db;
    bool auth;          /* the URL has user:password@ */
    char user[256];     /* "" for the default user */
    char password[256]; /* secret: never in a message, wiped when the target is */
    char where[300];    /* host:port (the port always, an IPv6 address in [ ]), for messages */
    char shown[600];    /* the URL with the password as ***, for messages */
} redis_target;

/* One name lookup of the target's host (getaddrinfo_a), kept while it runs: a lookup still running at a
 * deadline is waited for again by the next connection attempt, never started twice. On the heap, with its own
 * copy of the name: one the resolver cannot cancel outlives its store (release_lookup). */
typedef struct name_lookup {
    struct gaicb req;
    struct addrinfo hints;
    char host[256], port[8];
    bool pending; /* started, its result not yet taken */
} name_lookup;

/* A connection: its non-blocking socket, TLS over two memory BIOs (rediss://), and the reply parser. */
typedef struct redis_conn {
    int fd;
    SSL *ssl;              /* NULL for redis:// */
    BIO *tls_in, *tls_out; /* owned by ssl: what came from the socket, what goes to it */
    bool tls_answered;     /* a record came after the handshake: the server accepted the session */
    redisReader *reader;
    size_t seen_len;                /* the bytes of the reply being read so far, in seen (at most REPLY_BYTES_MAX) */
    char seen[REPLY_BYTES_MAX + 1]; /* they are scanned for the lengths they declare (reply_within_caps) */
} redis_conn;

typedef struct redis_store {
    pthread_mutex_t lock;
    redis_target target;
    SSL_CTX *tls; /* rediss://: the trust and client certificate, read once; NULL for redis:// */
    name_lookup *lookup;
    char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX + sizeof WINDOW_SUFFIX];
    char name[RF_SHARED_BUDGET_NAME_MAX + 1]; /* the budget's name (retryBudget.shared.name), for messages */
    const char *script;                       /* BUCKET_SCRIPT or WINDOW_SCRIPT: the rule of the budget's form */
    int64_t timeout_ms, ttl_ms;
    redis_conn *conn;        /* NULL while disconnected */
    char sha[41];            /* the script's SHA1 once loaded on this connection, "" before */
    int64_t next_connect_ns; /* no connection attempt before this (CLOCK_MONOTONIC) */
    int64_t backoff_ms;      /* the wait after the next failure */
    atomic_uint said;        /* the failure kinds already logged, one bit each (a waiter sets one without the lock) */
    void (*log)(void *, const char *);
    void *log_ctx;
} redis_store;

/* One decision's (or one peek's) talk with Redis: its deadline, timeout_ms from the start on CLOCK_MONOTONIC,
 * what a wait is for ("reply", "handshake": for messages), and why and how it failed. */
typedef struct redis_call {
    int64_t deadline_ns, timeout_ms;
    const char *awaited;
    failure_kind kind;
    bool late; /* failed at the deadline (not closed, reset or refused) */
    char why[384];
} redis_call;

static redis_call call_of(int64_t timeout_ms) {
    return (redis_call){
        .deadline_ns = rfi_mono_ns() + timeout_ms * 1000000, .timeout_ms = timeout_ms, .awaited = "reply"};
}

static bool failed(redis_call *k, failure_kind kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records why the call failed and the kind of failure; returns false, for `return failed(…)`. */
static bool failed(redis_call *k, failure_kind kind, const char *fmt, ...) {
    k->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->why, sizeof k->why, fmt, ap);
    va_end(ap);
    return false;
}

/*
 * Waits until fd is ready for events (POLLIN or POLLOUT) or the deadline passes, polling with the time left
 * (poll(2)). True when fd is ready, or in error (the read or write that follows says which); false at the
 * deadline, or when poll itself fails. A timeout per read bounds a read, not a reply: a server that sends one
 * byte at a time never trips it, so every wait of a call goes through here instead. Past the deadline fd is
 * still polled once without waiting: a process the machine did not run until then finds what arrived in the
 * meantime instead of blaming the server for its own stall (a loaded 2-core machine named a stalled PTTL a
 * connect timeout).
 */
static bool wait_fd(int fd, short events, int64_t deadline_ns) {
    for (;;) {
        int64_t left_ns = deadline_ns - rfi_mono_ns();
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left_ns <= 0 ? 0 : (int)((left_ns + 999999) / 1000000));
        if (n > 0) return true;
        if (n == 0 && left_ns <= 0) return false;
        if (n < 0 && errno != EINTR) return false;
    }
}

/* errno e's message. _GNU_SOURCE gives GNU's strerror_r, which returns the message (in buf, or a static string)
 * rather than a status: testing it as a status turned every message into "error N". */
static const char *errno_text(int e, char *buf, size_t cap) { return strerror_r(e, buf, cap); }

/* ---- The URL ------------------------------------------------------------------------------------------- */

/* Whether every '%' of s starts a %XX escape (RFC 3986 §2.1); libcurl decodes a malformed one as itself. */
static bool escapes_ok(const char *s) {
    for (const char *c = strchr(s, '%'); c != NULL; c = strchr(c + 1, '%'))
        if (!isxdigit((unsigned char)c[1]) || !isxdigit((unsigned char)c[2])) return false;
    return true;
}

/* Part `what` of h into out (cap bytes), percent-decoded when decode; false when absent or it does not fit. */
static bool url_part(CURLU *h, CURLUPart what, bool decode, char *out, size_t cap, CURLUcode *rc) {
    char *v = NULL;
    *rc = curl_url_get(h, what, &v, decode ? CURLU_URLDECODE : 0);
    bool ok = *rc == CURLUE_OK && strlen(v) < cap;
    if (ok) snprintf(out, cap, "%s", v);
    if (v != NULL) {
        if (decode) OPENSSL_cleanse(v, strlen(v)); /* it may be the password */
        curl_free(v);
    }
    return ok;
}

/* The message for a host libcurl refused: one in [ ] is an IPv6 address that is empty or unclosed, or not one; a
 * port after it is checked with the rest of the authority. */
static const char *host_refusal(const char *authority, CURLUcode rc) {
    const char *open = strchr(authority, '[');
    if (open == NULL && rc != CURLUE_BAD_IPV6) return "has no host (redis://host:port/db)";
    const char *close = open ? strchr(open, ']') : NULL;
    if (open == NULL || close == NULL || close == open + 1)
        return "has an IPv6 address that is empty or lacks its closing ]";
    if (close[1] != '\0' && close[1] != ':' && close[1] != '/')
        return "has unexpected text after the host (a query or fragment?)";
    return "has something in [ ] that is not an IPv6 address";
}

/*
 * Parses "redis[s]://[user:password@]host[:port][/db]" with libcurl's URL API (RFC 3986: the userinfo ends at the
 * last '@' before the path; user and password percent-decoded, the first ':' ending the user). No query, no
 * fragment, no control character. A user without ":password" is refused rather than guessed at: the URL form
 * before ACL users put the password there. why never quotes the URL (it may hold the password). RF_OK, RF_EINVAL
 * (why says what is wrong), or RF_ENOMEM when libcurl ran out of memory reading it.
 */
static rf_status parse_url(const char *url, redis_target *t, char *why, size_t why_cap) {
    memset(t, 0, sizeof *t);
    snprintf(t->port, sizeof t->port, "6379");
    const char *msg = NULL;
    if (url == NULL) return snprintf(why, why_cap, "must start with redis:// or rediss://"), RF_EINVAL;
    for (const char *c = url; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return snprintf(why, why_cap, "has a control character (a byte below 0x20, or 0x7f)"), RF_EINVAL;
    }
    if (strncasecmp(url, "rediss://", 9) == 0)
        t->tls = true;
    else if (strncasecmp(url, "redis://", 8) != 0)
        return snprintf(why, why_cap, "must start with redis:// or rediss://"), RF_EINVAL;
    /* The authority as written (for the messages libcurl's codes do not tell apart): up to the path, query or
     * fragment, after the userinfo. */
    const char *scheme_end = url + (t->tls ? 9 : 8);
    char authority[600];
    size_t an = strcspn(scheme_end, "/?#");
    snprintf(authority, sizeof authority, "%.*s", (int)an, scheme_end);
    char *at = strrchr(authority, '@');
    const char *hostport = at ? at + 1 : authority;
    CURLU *h = curl_url();
    if (h == NULL) return snprintf(why, why_cap, "out of memory"), RF_ENOMEM;
    CURLUcode rc = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME | CURLU_ALLOW_SPACE);
    char raw_user[256] = "", raw_password[256] = "", db[32] = "", extra[8];
    const bool port_after_host = strchr(hostport, '[') == NULL || strstr(hostport, "]:") != NULL;
    if (rc == CURLUE_BAD_PORT_NUMBER && port_after_host) {
        msg = "has a port that is not 1..65535";
    } else if (rc == CURLUE_BAD_PORT_NUMBER || rc == CURLUE_BAD_IPV6 || rc == CURLUE_NO_HOST ||
               rc == CURLUE_BAD_HOSTNAME) {
        msg = host_refusal(hostport, rc);
    } else if (rc != CURLUE_OK) {
        msg = *hostport == '\0' || *hostport == ':' ? "has no host (redis://host:port/db)"
                                                    : "is not a URL of the form redis://host:port/db";
    } else if (at != NULL && (!url_part(h, CURLUPART_PASSWORD, false, raw_password, sizeof raw_password, &rc) ||
                              raw_password[0] == '\0')) {
        msg = rc == CURLUE_NO_PASSWORD && memchr(authority, ':', (size_t)(at - authority)) == NULL
                  ? "has a user but no password: write user:password@ (an ACL user) or :password@ (the default user)"
              : rc == CURLUE_OK || rc == CURLUE_NO_PASSWORD
                  ? "has an empty password"
                  : "has a user or password that is over-long or has a bad %-escape (%XX, not %00)";
    } else if (at != NULL &&
               ((!url_part(h, CURLUPART_USER, false, raw_user, sizeof raw_user, &rc) && rc != CURLUE_NO_USER) ||
                !escapes_ok(raw_user) || !escapes_ok(raw_password) ||
                (raw_user[0] != '\0' && !url_part(h, CURLUPART_USER, true, t->user, sizeof t->user, &rc)) ||
                !url_part(h, CURLUPART_PASSWORD, true, t->password, sizeof t->password, &rc))) {
        msg = "has a user or password that is over-long or has a bad %-escape (%XX, not %00)";
    } else if (!url_part(h, CURLUPART_HOST, false, t->host, sizeof t->host, &rc) || t->host[0] == '\0') {
        msg = "has no host (redis://host:port/db)";
    } else if (url_part(h, CURLUPART_ZONEID, false, extra, sizeof extra, &rc) || rc != CURLUE_NO_ZONEID) {
        msg = "has something in [ ] that is not an IPv6 address";
    } else if (!url_part(h, CURLUPART_PATH, false, db, sizeof db, &rc)) {
        msg = "has a database that is not a number (redis://host:port/0)";
    } else if ((db[0] == '\0' || strcmp(db, "/") == 0) &&
               (url_part(h, CURLUPART_QUERY, false, extra, sizeof extra, &rc) || rc != CURLUE_NO_QUERY ||
                url_part(h, CURLUPART_FRAGMENT, false, extra, sizeof extra, &rc) || rc != CURLUE_NO_FRAGMENT ||
                strchr(scheme_end, '?') != NULL || strchr(scheme_end, '#') != NULL)) {
        msg = "has unexpected text after the host (a query or fragment?)";
    } else if (db[0] == '/' && db[1] != '\0') {
        char *end;
        errno = 0;
        long n = strtol(db + 1, &end, 10);
        if (db[1] < '0' || db[1] > '9' || errno != 0 || n < 0 || n > 1000000 || *end != '\0' ||
            strpbrk(scheme_end, "?#") != NULL)
            msg = "has a database that is not a number (redis://host:port/0)";
        t->db = (int)n;
    }
    char port[16] = "";
    const char *after_host = hostport[0] == '[' && strchr(hostport, ']') ? strchr(hostport, ']') : hostport;
    if (msg == NULL && strchr(after_host, ':') != NULL) {
        /* A port written: libcurl takes "h:" as no port, and a port of 0. */
        char *end;
        errno = 0;
        long n = url_part(h, CURLUPART_PORT, false, port, sizeof port, &rc) ? strtol(port, &end, 10) : 0;
        if (n < 1 || n > 65535 || errno != 0)
            msg = "has a port that is not 1..65535";
        else
            snprintf(t->port, sizeof t->port, "%ld", n);
    }
    curl_url_cleanup(h);
    OPENSSL_cleanse(raw_password, sizeof raw_password);
    if (msg != NULL) {
        OPENSSL_cleanse(t->password, sizeof t->password);
        if (rc == CURLUE_OUT_OF_MEMORY) return snprintf(why, why_cap, "out of memory"), RF_ENOMEM;
        return snprintf(why, why_cap, "%s", msg), RF_EINVAL;
    }
    if (t->host[0] == '[') { /* an IPv6 address: without its brackets */
        size_t n = strlen(t->host);
        memmove(t->host, t->host + 1, n - 2);
        t->host[n - 2] = '\0';
    }
    unsigned char addr[sizeof(struct in6_addr)];
    t->host_is_ip = inet_pton(AF_INET, t->host, addr) == 1 || inet_pton(AF_INET6, t->host, addr) == 1;
    t->auth = at != NULL;
    bool v6 = strchr(t->host, ':') != NULL;
    snprintf(t->where, sizeof t->where, "%s%s%s:%s", v6 ? "[" : "", t->host, v6 ? "]" : "", t->port);
    snprintf(t->shown, sizeof t->shown, "%s://%s%s%s/%d", t->tls ? "rediss" : "redis", raw_user, t->auth ? ":***@" : "",
             t->where, t->db);
    return RF_OK;
}

/* ---- TLS settings --------------------------------------------------------------------------------------- */

/* OpenSSL's reason for the last error on this thread's queue ("certificate verify failed"). */
static const char *tls_reason(void) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "no reason given";
}

/* The key's password callback: none. An encrypted key fails to load instead of prompting on a terminal. */
static int no_password(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0;
}

/* RF_EINVAL naming the option when path is not a readable regular file (a directory, for dir). */
static rf_status readable(const char *option, const char *path, bool dir, rf_error *err) {
    struct stat st;
    char text[128];
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        return rfi_report(err, RF_EINVAL, option, "%.200s: %s", path, errno_text(errno, text, sizeof text));
    if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        return rfi_report(err, RF_EINVAL, option, "%.200s: not a %s", path, dir ? "directory" : "regular file");
    return RF_OK;
}

/* RF_EINVAL naming the first TLS option whose file or directory cannot be read, or a key without its cert. */
static rf_status tls_files_readable(const rf_redis_budget_options *o, rf_error *err) {
    if (o->key && !o->cert)
        return rfi_report(err, RF_EINVAL, "key", "needs cert (the client certificate it belongs to)");
    const char *const options[] = {"ca_file", "ca_path", "cert", "key"};
    const char *const paths[] = {o->ca_file, o->ca_path, o->cert, o->key};
    for (size_t i = 0; i < 4; i++) {
        rf_status st = paths[i] ? readable(options[i], paths[i], i == 1, err) : RF_OK;
        if (st != RF_OK) return st;
    }
    return RF_OK;
}

/*
 * The TLS context of a rediss:// budget, read once (the files checked by tls_files_readable first): peer verification
 * on (the chain against ca_file/ca_path or the system's CAs; the host is checked per connection), TLS 1.2 or later, the
 * client certificate and key when given. RF_EINVAL naming the option that cannot be read or used; RF_ENOMEM.
 */
static rf_status tls_context(const rf_redis_budget_options *o, SSL_CTX **out, rf_error *err) {
    *out = NULL;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) return rfi_report(err, RF_ENOMEM, "", "cannot make a TLS context: %s", tls_reason());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_default_passwd_cb(ctx, no_password);
    rf_status st = RF_OK;
    if (o->ca_file || o->ca_path) {
        if (SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_path) != 1)
            st = rfi_report(err, RF_EINVAL, o->ca_file ? "ca_file" : "ca_path",
                            "%.200s: no CA certificate could be read (%s)", o->ca_file ? o->ca_file : o->ca_path,
                            tls_reason());
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        st = rfi_report(err, RF_EINVAL, "ca_file", "the system's CA certificates cannot be read (%s): set ca_file",
                        tls_reason());
    }
    if (st == RF_OK && o->cert) {
        const char *key = o->key ? o->key : o->cert;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1)
            st = rfi_report(err, RF_EINVAL, "cert", "%.200s: not a PEM certificate (%s)", o->cert, tls_reason());
        else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
            st = rfi_report(err, RF_EINVAL, o->key ? "key" : "cert",
                            "%.200s: no usable private key (%s; a key with a password is not supported)", key,
                            tls_reason());
        else if (SSL_CTX_check_private_key(ctx) != 1)
            st = rfi_report(err, RF_EINVAL, o->key ? "key" : "cert",
                            "%.200s: the key does not belong to the certificate", key);
    }
    ERR_clear_error();
    if (st != RF_OK) {
        SSL_CTX_free(ctx);
        return st;
    }
    *out = ctx;
    return RF_OK;
}

/* ---- Bytes on the socket, each wait bounded by the call's deadline -------------------------------------------- */

/* Sends p[0..n) whole (MSG_NOSIGNAL: a peer gone is an error here, never a SIGPIPE for the host). */
static bool send_all(int fd, const char *p, size_t n, redis_call *k, const char *what) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, k->deadline_ns))
                return k->late = true,
                       failed(k, FAIL_UNREACHABLE, "%s: not sent within %" PRId64 " ms", what, k->timeout_ms);
        } else {
            char text[128];
            return failed(k, FAIL_UNREACHABLE, "%s: %s", what, errno_text(w < 0 ? errno : EPIPE, text, sizeof text));
        }
    }
    return true;
}

/* Receives what has come, up to cap bytes, waiting for some by the deadline: the count, or 0 with why. */
static size_t receive(int fd, char *buf, size_t cap, redis_call *k, const char *what) {
    for (;;) {
        ssize_t r = recv(fd, buf, cap, 0);
        if (r > 0) return (size_t)r;
        if (r == 0) return failed(k, FAIL_UNREACHABLE, "%s: the server closed the connection", what), 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            char text[128];
            return failed(k, FAIL_UNREACHABLE, "%s: %s", what, errno_text(errno, text, sizeof text)), 0;
        }
        if (!wait_fd(fd, POLLIN, k->deadline_ns))
            return k->late = true,
                   failed(k, FAIL_UNREACHABLE, "%s: no whole %s within %" PRId64 " ms", what, k->awaited,
                          k->timeout_ms),
                   0;
    }
}

/* ---- TLS over the socket -------------------------------------------------------------------------------- */

/* Why the server's certificate was refused, in the HTTP client's words (OpenSSL's X509_V_ERR_* results). */
static const char *certificate_problem(long v) {
    switch (v) {
    case X509_V_ERR_CERT_HAS_EXPIRED: return "certificate expired";
    case X509_V_ERR_CERT_NOT_YET_VALID: return "certificate not yet valid";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE: return "unknown CA (the issuer is not trusted: set ca_file)";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH: return "hostname mismatch (the certificate does not name this host)";
    default: return X509_verify_cert_error_string(v);
    }
}

/* Sends what OpenSSL has written into the outgoing BIO. */
static bool tls_flush(redis_conn *c, redis_call *k, const char *what) {
    char buf[IO_CHUNK];
    int n;
    while ((n = BIO_read(c->tls_out, buf, sizeof buf)) > 0)
        if (!send_all(c->fd, buf, (size_t)n, k, what)) return false;
    return true;
}

typedef enum tls_op { TLS_HANDSHAKE, TLS_READ, TLS_WRITE } tls_op;

/*
 * Runs one TLS operation to its end by the call's deadline: the handshake (SSL_connect), one read (SSL_read:
 * some plaintext into `in`, up to n bytes) or one whole write (SSL_write of out[0..n)). OpenSSL works on memory
 * BIOs: what it writes is sent, and when it wants input some is received, each wait on the time left. Returns
 * the bytes read or written (1 for the handshake), or 0 with why.
 */
static int tls_exchange(redis_conn *c, tls_op op, void *in, const void *out, int n, redis_call *k, const char *what) {
    for (;;) {
        ERR_clear_error();
        int rc = op == TLS_HANDSHAKE ? SSL_connect(c->ssl)
                 : op == TLS_READ    ? SSL_read(c->ssl, in, n)
                                     : SSL_write(c->ssl, out, n);
        int e = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, rc);
        if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
            long v = SSL_get_verify_result(c->ssl);
            const char *reason = e == SSL_ERROR_ZERO_RETURN ? "the server closed the session"
                                 : v != X509_V_OK           ? certificate_problem(v)
                                                            : tls_reason();
            bool wants_cert = strstr(reason, "certificate required") != NULL;
            failed(k, FAIL_TLS, "%s: TLS: %s%s", what, reason,
                   wants_cert ? " (a server that wants a client certificate does this: set cert and key)" : "");
            ERR_clear_error();
            redis_call alert = *k; /* the alert OpenSSL wrote, if any, without waiting and without losing why */
            alert.deadline_ns = 0;
            (void)tls_flush(c, &alert, what);
            return 0;
        }
        if (!tls_flush(c, k, what)) return 0;
        if (rc > 0 && op == TLS_READ) c->tls_answered = true;
        if (rc > 0) return rc;
        char bytes[IO_CHUNK];
        size_t got = receive(c->fd, bytes, sizeof bytes, k, what);
        if (got == 0) return 0;
        if (BIO_write(c->tls_in, bytes, (int)got) != (int)got)
            return failed(k, FAIL_TLS, "%s: TLS: out of memory", what), 0;
    }
}

/*
 * tls_exchange, and what a failure means in the session's first moments. TLS 1.3 refuses a client certificate
 * after the handshake: an alert, then the connection closed. When the client's first command is still unread
 * there, the server's kernel answers it with a reset, which may discard the alert, so the client sees a reset or
 * an end of stream on its next write or read. A session that ends so, after the handshake and before the server's
 * first record, is a TLS failure, not an unreachable server.
 */
static int tls_run(redis_conn *c, tls_op op, void *in, const void *out, int n, redis_call *k, const char *what) {
    int r = tls_exchange(c, op, in, out, n, k, what);
    if (r == 0 && k->kind == FAIL_UNREACHABLE && !k->late && !c->tls_answered && SSL_is_init_finished(c->ssl)) {
        char cause[sizeof k->why]; /* the socket's words, without the "what: " every socket failure starts with */
        size_t lead = strlen(what);
        snprintf(cause, sizeof cause, "%s",
                 strncmp(k->why, what, lead) == 0 && strncmp(k->why + lead, ": ", 2) == 0 ? k->why + lead + 2 : k->why);
        failed(k, FAIL_TLS,
               "%s: TLS: the server ended the session before its first reply (%s; a server that wants a client "
               "certificate does this: set cert and key)",
               what, cause);
    }
    return r;
}

/* Starts TLS on c for t: SNI and the host check for a name, the address check for an IP, then the handshake. */
static bool tls_start(redis_conn *c, SSL_CTX *ctx, const redis_target *t, redis_call *k) {
    char what[sizeof t->where + 32];
    snprintf(what, sizeof what, "TLS handshake with redis %s", t->where);
    ERR_clear_error();
    c->ssl = SSL_new(ctx);
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    if (c->ssl == NULL || in == NULL || out == NULL) {
        BIO_free(in);
        BIO_free(out);
        return failed(k, FAIL_TLS, "%s: out of memory", what);
    }
    BIO_set_mem_eof_return(in, -1); /* empty means "wait for more", not the end of the stream */
    SSL_set_bio(c->ssl, in, out);
    c->tls_in = in;
    c->tls_out = out;
    bool named = t->host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), t->host) == 1
                               : SSL_set_tlsext_host_name(c->ssl, t->host) == 1 && SSL_set1_host(c->ssl, t->host) == 1;
    if (!named)
        return failed(k, FAIL_TLS, "%s: TLS: cannot check the certificate for this host (%s)", what, tls_reason());
    SSL_set_connect_state(c->ssl);
    k->awaited = "handshake";
    bool ok = tls_exchange(c, TLS_HANDSHAKE, NULL, NULL, 0, k, what) > 0;
    k->awaited = "reply";
    return ok;
}

/* ---- A connection --------------------------------------------------------------------------------------- */

/* Closes c: a TLS session that is in step says close_notify first, without waiting. NULL is a no-op. */
static void conn_free(redis_conn *c) {
    if (c == NULL) return;
    if (c->ssl) {
        if (SSL_is_init_finished(c->ssl) && SSL_shutdown(c->ssl) >= 0) {
            redis_call now = call_of(0);
            (void)tls_flush(c, &now, "");
        }
        SSL_free(c->ssl);
        ERR_clear_error();
    }
    if (c->reader) redisReaderFree(c->reader);
    if (c->fd >= 0) close(c->fd);
    free(c);
}

static bool conn_send(redis_conn *c, const char *p, size_t n, redis_call *k, const char *what) {
    if (c->ssl == NULL) return send_all(c->fd, p, n, k, what);
    return n > INT32_MAX ? failed(k, FAIL_PROTOCOL, "%s: a command too long", what)
                         : tls_run(c, TLS_WRITE, NULL, p, (int)n, k, what) > 0;
}

static size_t conn_receive(redis_conn *c, char *buf, size_t cap, redis_call *k, const char *what) {
    if (c->ssl == NULL) return receive(c->fd, buf, cap, k, what);
    int n = tls_run(c, TLS_READ, buf, NULL, (int)cap, k, what);
    return n > 0 ? (size_t)n : 0;
}

/* Most words one command has: EVALSHA, its SHA, the key count, the key and a window script's 6 arguments. */
#define COMMAND_ARGS_MAX 10
#define SCRIPT_ARGS_MAX (COMMAND_ARGS_MAX - 4)

/*
 * Sends one command and reads its whole reply by the call's deadline. The reply is the caller's; NULL on an
 * I/O error, a protocol error or the deadline, with why. After NULL the connection is out of step (a reply may
 * still arrive) and must be dropped. Messages name the command (argv[0]), never its arguments.
 */
/* The number on the RESP header line buf[0..n) after its type byte; a value past 10^15 reads as 10^15 + 1. */
static long long header_number(const char *buf, size_t n) {
    size_t i = 1;
    bool negative = i < n && buf[i] == '-';
    if (negative) i++;
    long long v = 0;
    for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        if (v <= 1000000000000000LL) v = v * 10 + (buf[i] - '0');
    return negative ? -v : v;
}

/*
 * Whether the reply bytes buf[0..n) (from the reply's first byte) stay within the caps: each header line read so far
 * (RESP2 and RESP3) declares a bulk length of at most BULK_BYTES_MAX and an aggregate count of at most ELEMENTS_MAX.
 * False with why (what: the command) at the first header past its cap, however little of its payload came.
 */
static bool reply_within_caps(const char *buf, size_t n, redis_call *k, const char *what) {
    size_t pos = 0;
    while (pos < n) {
        const char *nl = memchr(buf + pos, '\n', n - pos);
        if (nl == NULL) return true; /* a line not whole yet */
        const size_t line_end = (size_t)(nl - buf) + 1;
        const char type = buf[pos];
        if (type == '$' || type == '=' || type == '!') { /* bulk string, verbatim string, bulk error */
            const long long len = header_number(buf + pos, line_end - pos);
            if (len > BULK_BYTES_MAX)
                return failed(k, FAIL_PROTOCOL,
                              "%s: the reply declares a bulk string of %lld bytes (a retry budget's replies are at "
                              "most %d): refused",
                              what, len, BULK_BYTES_MAX);
            pos = line_end + (len > 0 ? (size_t)len + 2 : len == 0 ? 2 : 0); /* its payload and CRLF; -1: nil */
        } else if (type == '*' || type == '%' || type == '~' || type == '>' || type == '|') {
            const long long count = header_number(buf + pos, line_end - pos);
            if (count > ELEMENTS_MAX)
                return failed(k, FAIL_PROTOCOL,
                              "%s: the reply declares an array of %lld elements (a retry budget's replies have at "
                              "most %d): refused",
                              what, count, ELEMENTS_MAX);
            pos = line_end;
        } else {
            pos = line_end;
        }
    }
    return true;
}

static redisReply *command(redis_conn *c, redis_call *k, int argc, const char **argv) {
    size_t lens[COMMAND_ARGS_MAX];
    if (argc < 1 || argc > COMMAND_ARGS_MAX) /* fail closed: a caller's bug, never a write past lens */
        return failed(k, FAIL_PROTOCOL, "redis: a command of %d words (at most %d)", argc, COMMAND_ARGS_MAX), NULL;
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    char what[64]; /* SCRIPT's subcommand too; never AUTH's arguments */
    snprintf(what, sizeof what, "redis %s%s%s", argv[0], strcmp(argv[0], "SCRIPT") == 0 ? " " : "",
             strcmp(argv[0], "SCRIPT") == 0 ? argv[1] : "");
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) return failed(k, FAIL_UNREACHABLE, "%s: out of memory", what), NULL;
    bool sent = conn_send(c, cmd, (size_t)len, k, what);
    redisFreeCommand(cmd);
    if (!sent) return NULL;
    c->seen_len = 0; /* a new reply: the caps count from its first byte */
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK)
            return failed(k, FAIL_PROTOCOL, "%s: %s", what, c->reader->errstr), NULL;
        if (reply != NULL) return reply;
        char buf[IO_CHUNK];
        size_t n = conn_receive(c, buf, sizeof buf, k, what);
        if (n == 0) return NULL;
        if (n > REPLY_BYTES_MAX - c->seen_len)
            return failed(k, FAIL_PROTOCOL, "%s: a reply over %d bytes (a retry budget's replies are smaller): refused",
                          what, REPLY_BYTES_MAX),
                   NULL;
        memcpy(c->seen + c->seen_len, buf, n);
        c->seen_len += n;
        if (!reply_within_caps(c->seen, c->seen_len, k, what)) return NULL;
        if (redisReaderFeed(c->reader, buf, n) != REDIS_OK)
            return failed(k, FAIL_PROTOCOL, "%s: %s", what, c->reader->errstr), NULL;
    }
}

static bool reply_ok(redisReply *r, int type) { return r != NULL && r->type == type; }

/* The kind of an error reply (Redis' ACL documentation): NOPERM, or a script's command the user may not run
 * (Redis 7 reports that one as ERR), is a permission; WRONGPASS and NOAUTH are authentication. */
static failure_kind error_kind(const char *text) {
    if (strncmp(text, "NOPERM", 6) == 0 || strstr(text, "can't run this command") != NULL) return FAIL_PERMISSION;
    if (strncmp(text, "WRONGPASS", 9) == 0 || strncmp(text, "NOAUTH", 6) == 0) return FAIL_AUTH;
    return FAIL_PROTOCOL;
}

/* Says why reply r (not NULL) to command `shown` is not the one wanted; returns false. */
static bool refused(redis_call *k, redisReply *r, const char *shown, failure_kind kind) {
    if (r->type == REDIS_REPLY_ERROR)
        return failed(k, kind == FAIL_PROTOCOL ? error_kind(r->str) : kind, "redis %s failed: %.200s", shown, r->str);
    return failed(k, FAIL_PROTOCOL, "redis %s: an unexpected reply (type %d)", shown, r->type);
}

/* A command whose only acceptable reply is a status (+OK): AUTH and SELECT. False with why otherwise. */
static bool command_ok(redis_conn *c, redis_call *k, int argc, const char **argv, const char *shown,
                       failure_kind kind) {
    redisReply *r = command(c, k, argc, argv);
    bool ok = reply_ok(r, REDIS_REPLY_STATUS) || (r != NULL && refused(k, r, shown, kind));
    if (r) freeReplyObject(r);
    return ok;
}

/*
 * The addresses of t's host and port, in *found (the caller frees them with freeaddrinfo). A literal address is
 * converted at once (AI_NUMERICHOST: no lookup). A name is looked up with getaddrinfo_a(3), on a thread of its
 * own, and waited for with gai_suspend(3) on the time left: getaddrinfo(3) cannot be interrupted, and a resolver
 * that does not answer would hold the decision for its own timeouts (5 s per try by default). A lookup still
 * running at the deadline stays pending in *n. False with why at the deadline or on an error.
 */
static bool resolve_host(const redis_target *t, name_lookup *n, redis_call *k, struct addrinfo **found) {
    *found = NULL;
    if (t->host_is_ip) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
        int rc = getaddrinfo(t->host, t->port, &hints, found);
        return rc == 0 || failed(k, FAIL_UNREACHABLE, "cannot use redis address %s: %s", t->where, gai_strerror(rc));
    }
    if (!n->pending) {
        memset(n, 0, sizeof *n);
        n->hints.ai_family = AF_UNSPEC;
        n->hints.ai_socktype = SOCK_STREAM;
        n->hints.ai_flags = AI_NUMERICSERV;
        memcpy(n->host, t->host, sizeof n->host);
        memcpy(n->port, t->port, sizeof n->port);
        n->req.ar_name = n->host;
        n->req.ar_service = n->port;
        n->req.ar_request = &n->hints;
        struct gaicb *list[1] = {&n->req};
        int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
        if (rc != 0)
            return failed(k, FAIL_UNREACHABLE, "cannot resolve redis host %.100s: %s", t->host, gai_strerror(rc));
        n->pending = true;
    }
    int rc;
    while ((rc = gai_error(&n->req)) == EAI_INPROGRESS) {
        int64_t left_ns = k->deadline_ns - rfi_mono_ns();
        if (left_ns <= 0)
            return failed(k, FAIL_UNREACHABLE, "cannot resolve redis host %.100s within %" PRId64 " ms", t->host,
                          k->timeout_ms);
        const struct gaicb *list[1] = {&n->req};
        struct timespec wait = {.tv_sec = (time_t)(left_ns / 1000000000), .tv_nsec = (long)(left_ns % 1000000000)};
        (void)gai_suspend(list, 1, &wait); /* done, the time is up, or a signal: gai_error says which */
    }
    n->pending = false;
    *found = n->req.ar_result;
    n->req.ar_result = NULL;
    if (rc == 0 && *found != NULL) return true;
    return failed(k, FAIL_UNREACHABLE, "cannot resolve redis host %.100s: %s", t->host,
                  gai_strerror(rc != 0 ? rc : EAI_NONAME));
}

/* A non-blocking connect(2) to one address, done by the call's deadline (POLLOUT, then SO_ERROR): the socket
 * (non-blocking, close-on-exec, TCP_NODELAY: a command is one small write), or -1 with why. */
static int connect_addr(const struct addrinfo *ai, const redis_target *t, redis_call *k) {
    char text[128];
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return failed(k, FAIL_UNREACHABLE, "cannot connect to redis %s: %s", t->where,
                      errno_text(errno, text, sizeof text)),
               -1;
    int soerr = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            soerr = errno;
        } else if (!wait_fd(fd, POLLOUT, k->deadline_ns)) {
            close(fd);
            return failed(k, FAIL_UNREACHABLE, "cannot connect to redis %s: no connection within %" PRId64 " ms",
                          t->where, k->timeout_ms),
                   -1;
        } else {
            socklen_t len = sizeof soerr;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
        }
    }
    if (soerr != 0) {
        close(fd);
        return failed(k, FAIL_UNREACHABLE, "cannot connect to redis %s: %s", t->where,
                      errno_text(soerr, text, sizeof text)),
               -1;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
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
 * Connects to t by the call's deadline (its host looked up by resolve_host, each address tried in turn),
 * starts TLS for rediss:// (tls), authenticates (AUTH [user] password) and selects the database, all within the
 * same deadline. NULL on any failure, with why and its kind.
 */
static redis_conn *connect_target(const redis_target *t, SSL_CTX *tls, name_lookup *n, redis_call *k) {
    struct addrinfo *found;
    if (!resolve_host(t, n, k, &found)) return NULL;
    int fd = -1;
    for (const struct addrinfo *ai = found; ai != NULL && fd < 0; ai = ai->ai_next) fd = connect_addr(ai, t, k);
    freeaddrinfo(found);
    if (fd < 0) return NULL;
    redis_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        return failed(k, FAIL_UNREACHABLE, "redis %s: out of memory", t->where), NULL;
    }
    c->fd = fd;
    c->reader = redisReaderCreate();
    if (c->reader == NULL) {
        failed(k, FAIL_UNREACHABLE, "redis %s: out of memory", t->where);
        goto fail;
    }
    if (tls && !tls_start(c, tls, t, k)) goto fail;
    const char *auth[3] = {"AUTH"}; /* AUTH [user] password: an ACL user (Redis 6+), or the default user */
    int argc = 1;
    if (t->user[0] != '\0') auth[argc++] = t->user;
    auth[argc++] = t->password;
    if (t->auth && !command_ok(c, k, argc, auth, "AUTH", FAIL_AUTH)) goto fail;
    char db[16], shown[24];
    snprintf(db, sizeof db, "%d", t->db);
    snprintf(shown, sizeof shown, "SELECT %d", t->db);
    const char *select[] = {"SELECT", db};
    if (t->db != 0 && !command_ok(c, k, 2, select, shown, FAIL_PROTOCOL)) goto fail;
    return c;
fail:
    conn_free(c);
    return NULL;
}

/* ---- The store ------------------------------------------------------------------------------------------ */

/* Says, once per budget and kind of failure, why its decisions fall back (o->log, else stderr). With the store's
 * lock held, or without it for FAIL_BUSY (what it reads of s is fixed when the budget is made). */
static void report(redis_store *s, const redis_call *k) {
    const unsigned bit = 1u << k->kind;
    if (atomic_fetch_or(&s->said, bit) & bit) return;
    char line[1400];
    snprintf(line, sizeof line,
             "retryfreeze: shared retry budget %s at %s falls back to the local %s: %s%s (said once per "
             "budget for this kind of failure)",
             s->name, s->target.shown, s->script == WINDOW_SCRIPT ? "window" : "bucket", k->why,
             FAILURE_HINTS[k->kind] ? FAILURE_HINTS[k->kind] : "");
    if (s->log)
        s->log(s->log_ctx, line);
    else
        fprintf(stderr, "%s\n", line);
}

static void disconnect(redis_store *s) {
    conn_free(s->conn);
    s->conn = NULL;
    s->sha[0] = '\0';
    s->next_connect_ns = rfi_mono_ns() + s->backoff_ms * 1000000;
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

static bool load_script(redis_store *s, redis_call *k) {
    const char *argv[] = {"SCRIPT", "LOAD", s->script};
    redisReply *r = command(s->conn, k, 3, argv);
    bool ok = reply_ok(r, REDIS_REPLY_STRING) && r->len == 40;
    if (ok)
        memcpy(s->sha, r->str, 41);
    else if (r != NULL)
        refused(k, r, "SCRIPT LOAD", FAIL_PROTOCOL);
    if (r) freeReplyObject(r);
    return ok;
}

/* Takes the store's lock within k's deadline (another thread's round trip counts in it). As
 * pthread_mutex_timedlock takes it: CLOCK_REALTIME (a step of the wall clock during this wait moves its end:
 * pthread_mutex_clocklock would not, but ThreadSanitizer does not know that one). */
static bool store_lock(redis_store *s, const redis_call *k) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + (k->deadline_ns - rfi_mono_ns());
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    return pthread_mutex_timedlock(&s->lock, &until) == 0;
}

/* A decision whose deadline passed while another thread's call held the store's lock: it falls back, and says so
 * (once per budget), without the lock. Returns false. */
static bool busy(redis_store *s, redis_call *k) {
    failed(k, FAIL_BUSY, "another thread's call to redis held this budget for the decision's whole %" PRId64 " ms",
           k->timeout_ms);
    report(s, k);
    return false;
}

/*
 * One decision's EVALSHA of the store's script on its key with args[0..n), n at most SCRIPT_ARGS_MAX (the lock held):
 * connects and loads the script first when needed, and loads it again when the server lost its cache (NOSCRIPT). The
 * reply (the caller frees it), or NULL with k->why. *backing_off: no connection attempt was made (the backoff after a
 * failure), so there is nothing new to report.
 */
static redisReply *evalsha(redis_store *s, redis_call *k, const char *const *args, int n, bool *backing_off) {
    *backing_off = false;
    if (s->conn == NULL) {
        if (rfi_mono_ns() < s->next_connect_ns) return *backing_off = true, NULL; /* fall back at once */
        s->conn = connect_target(&s->target, s->tls, s->lookup, k);
        if (s->conn == NULL) return NULL;
    }
    if (s->sha[0] == '\0' && !load_script(s, k)) return NULL;
    const char *argv[COMMAND_ARGS_MAX] = {"EVALSHA", s->sha, "1", s->key};
    for (int i = 0; i < n && i < SCRIPT_ARGS_MAX; i++) argv[4 + i] = args[i];
    redisReply *r = command(s->conn, k, 4 + n, argv);
    if (reply_ok(r, REDIS_REPLY_ERROR) && strncmp(r->str, "NOSCRIPT", 8) == 0) { /* the server lost its cache */
        freeReplyObject(r);
        r = load_script(s, k) ? command(s->conn, k, 4 + n, argv) : NULL;
    }
    return r;
}

/* The end of a decision with the lock held: a good reply resets the backoff; a failure drops the connection (a late
 * reply can never be read as the next decision's) and is reported once per kind. Unlocks. Returns ok. */
static bool store_done(redis_store *s, redis_call *k, bool ok, bool backing_off) {
    if (ok) {
        s->backoff_ms = BACKOFF_FIRST_MS;
    } else if (!backing_off) {
        disconnect(s);
        report(s, k);
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/*
 * The store's add (a token bucket): one deadline, timeout_ms from entry, bounds all of it: the wait for the lock
 * (another thread's round trip), connect, TLS, AUTH, SELECT, SCRIPT LOAD and EVALSHA with its whole reply. False at
 * the deadline or on any error (the decision then uses the local bucket): the connection is dropped and the next
 * attempt waits a backoff, so a late reply can never be read as the next decision's, and a refusal (a wrong
 * password, a missing permission) is not asked again at every decision. The first failure of each kind is
 * reported, a deadline passed waiting for another thread's call too.
 */
static bool redis_add(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli) {
    redis_store *s = ctx;
    redis_call k = call_of(s->timeout_ms);
    if (!store_lock(s, &k)) return busy(s, &k);
    char delta[24], max[24], ttl[24];
    snprintf(delta, sizeof delta, "%" PRId64, delta_milli);
    snprintf(max, sizeof max, "%" PRId64, max_milli);
    snprintf(ttl, sizeof ttl, "%" PRId64, s->ttl_ms);
    const char *args[] = {delta, max, ttl};
    bool backing_off;
    redisReply *r = evalsha(s, &k, args, 3, &backing_off);
    bool ok = reply_ok(r, REDIS_REPLY_INTEGER);
    if (ok)
        *tokens_milli = r->integer;
    else if (r != NULL)
        refused(&k, r, "EVALSHA", FAIL_PROTOCOL);
    if (r) freeReplyObject(r);
    return store_done(s, &k, ok, backing_off);
}

/* The store's window (a ratio): as redis_add, one deadline for all of it; the script's reply {allowed, requests,
 * retries} gives *allowed. */
static bool redis_window(void *ctx, bool request, bool retry, int64_t ratio_milli, int64_t reserve_milli,
                         int64_t ttl_ms, bool *allowed) {
    redis_store *s = ctx;
    redis_call k = call_of(s->timeout_ms);
    if (!store_lock(s, &k)) return busy(s, &k);
    char ratio[24], reserve[24], window[24], idle[24];
    snprintf(ratio, sizeof ratio, "%" PRId64, ratio_milli);
    snprintf(reserve, sizeof reserve, "%" PRId64, reserve_milli);
    snprintf(window, sizeof window, "%" PRId64, ttl_ms);
    snprintf(idle, sizeof idle, "%" PRId64, s->ttl_ms > ttl_ms ? s->ttl_ms : ttl_ms); /* kept as long as it counts */
    const char *args[] = {request ? "1" : "0", retry ? "1" : "0", ratio, reserve, window, idle};
    bool backing_off;
    redisReply *r = evalsha(s, &k, args, 6, &backing_off);
    bool ok = reply_ok(r, REDIS_REPLY_ARRAY) && r->elements == 3 && r->element[0]->type == REDIS_REPLY_INTEGER;
    if (ok)
        *allowed = r->element[0]->integer == 1;
    else if (r != NULL)
        refused(&k, r, "EVALSHA", FAIL_PROTOCOL);
    if (r) freeReplyObject(r);
    return store_done(s, &k, ok, backing_off);
}

static void redis_free(void *ctx) {
    redis_store *s = ctx;
    if (s == NULL) return;
    conn_free(s->conn);
    SSL_CTX_free(s->tls);
    release_lookup(s->lookup);
    pthread_mutex_destroy(&s->lock);
    explicit_bzero(&s->target, sizeof s->target); /* the password: not left in the heap */
    free(s);
}

/* Checks the options a budget and a peek share: the URL into *t, the timeout (0: the default), the TLS
 * options (only with rediss://) into *tls (NULL for redis://). RF_EINVAL naming the option; RF_ENOMEM. */
static rf_status check_options(const rf_redis_budget_options *o, redis_target *t, int64_t *timeout_ms, SSL_CTX **tls,
                               rf_error *err) {
    *tls = NULL;
    if (o->timeout_ms < 0 || o->timeout_ms > RF_REDIS_BUDGET_TIMEOUT_MAX_MS)
        return rfi_report(err, RF_EINVAL, "timeout_ms", "must be 1..%d ms (0 for the default %d), got %" PRId64,
                          RF_REDIS_BUDGET_TIMEOUT_MAX_MS, RF_REDIS_BUDGET_TIMEOUT_MS, o->timeout_ms);
    *timeout_ms = o->timeout_ms ? o->timeout_ms : RF_REDIS_BUDGET_TIMEOUT_MS;
    char why[192];
    rf_status url_st = parse_url(o->url, t, why, sizeof why);
    if (url_st != RF_OK) {
        explicit_bzero(t, sizeof *t);
        return rfi_report(err, url_st, "url", "%s", why);
    }
    rf_status st = tls_files_readable(o, err); /* each named file first: the message names a bad one */
    if (st != RF_OK) {
        explicit_bzero(t, sizeof *t);
        return st;
    }
    if (!t->tls) {
        const char *given = o->ca_file ? "ca_file" : o->ca_path ? "ca_path" : o->cert ? "cert" : o->key ? "key" : NULL;
        if (given) {
            explicit_bzero(t, sizeof *t);
            return rfi_report(err, RF_EINVAL, given, "needs a rediss:// URL (TLS); redis:// is plain TCP");
        }
        return RF_OK;
    }
    st = tls_context(o, tls, err);
    if (st != RF_OK) explicit_bzero(t, sizeof *t);
    return st;
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
    if (o->idle_ttl_ms < 0 || o->idle_ttl_ms > IDLE_TTL_MAX_MS)
        return rfi_report(err, RF_EINVAL, "idle_ttl_ms", "must be 1..%lld ms (0 for the default, 1 hour), got %" PRId64,
                          (long long)IDLE_TTL_MAX_MS, o->idle_ttl_ms);
    redis_store *s = calloc(1, sizeof *s);
    if (s == NULL) return rfi_report(err, RF_ENOMEM, "", "out of memory");
    rf_status st = check_options(o, &s->target, &s->timeout_ms, &s->tls, err);
    if (st != RF_OK) {
        free(s);
        return st;
    }
    s->lookup = calloc(1, sizeof *s->lookup);
    if (s->lookup == NULL || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s->lookup);
        SSL_CTX_free(s->tls);
        explicit_bzero(&s->target, sizeof s->target);
        free(s);
        return rfi_report(err, RF_ENOMEM, "", "out of memory");
    }
    const bool ratio = rf_policy_retry_ratio(p, NULL, NULL, NULL);
    snprintf(s->key, sizeof s->key, KEY_PREFIX "%s%s", name, ratio ? WINDOW_SUFFIX : "");
    snprintf(s->name, sizeof s->name, "%s", name);
    s->script = ratio ? WINDOW_SCRIPT : BUCKET_SCRIPT;
    s->ttl_ms = o->idle_ttl_ms ? o->idle_ttl_ms : RF_REDIS_BUDGET_TTL_MS;
    s->backoff_ms = BACKOFF_FIRST_MS;
    atomic_init(&s->said, 0u);
    s->log = o->log;
    s->log_ctx = o->log_ctx;
    rf_retry_budget *b = rf_retry_budget_new(p);
    if (b == NULL) {
        redis_free(s);
        return rfi_report(err, RF_ENOMEM, "", "out of memory");
    }
    rf_retry_budget_store store = {
        .add = ratio ? NULL : redis_add, .window = ratio ? redis_window : NULL, .free = redis_free, .ctx = s};
    st = rf_retry_budget_set_store(b, &store, err);
    if (st != RF_OK) {
        redis_free(s);
        rf_retry_budget_free(b);
        return st;
    }
    *out = b;
    return RF_OK;
}

/* The bucket's GET and PTTL on an open connection, into *tokens_milli and *ttl_ms; RF_EIO with err. */
static rf_status peek_bucket(redis_conn *c, redis_call *k, const char *key, int64_t *tokens_milli, int64_t *ttl_ms,
                             rf_error *err) {
    const char *get[] = {"GET", key}, *pttl[] = {"PTTL", key};
    redisReply *g = command(c, k, 2, get);
    redisReply *x = g ? command(c, k, 2, pttl) : NULL;
    bool ok = x != NULL; /* both replies whole (else k->why says which was not) */
    if (ok && reply_ok(g, REDIS_REPLY_NIL))
        *tokens_milli = -1;
    else if (ok && reply_ok(g, REDIS_REPLY_STRING))
        *tokens_milli = strtoll(g->str, NULL, 10);
    else if (ok)
        ok = refused(k, g, "GET", FAIL_PROTOCOL);
    if (ok && !reply_ok(x, REDIS_REPLY_INTEGER)) ok = refused(k, x, "PTTL", FAIL_PROTOCOL);
    *ttl_ms = ok && x != NULL && x->integer >= 0 ? x->integer : -1;
    if (g) freeReplyObject(g);
    if (x) freeReplyObject(x);
    return ok ? RF_OK : rfi_report(err, RF_EIO, "url", "%s", k->why);
}

/* What a peek reads on its open connection: the bucket (peek_bucket) or the window (peek_window) of the key. */
typedef rf_status (*peek_fn)(redis_conn *c, redis_call *k, const char *key, void *out, rf_error *err);

/* The token bucket a peek reads. */
typedef struct bucket_seen {
    int64_t *tokens_milli, *ttl_ms;
} bucket_seen;

static rf_status read_bucket(redis_conn *c, redis_call *k, const char *key, void *out, rf_error *err) {
    bucket_seen *b = out;
    return peek_bucket(c, k, key, b->tokens_milli, b->ttl_ms, err);
}

/* The ratio window a peek reads: whether Redis holds it, the window at Redis' TIME, its idle expiry. */
typedef struct window_seen {
    bool *found;
    rf_budget_window *w;
    int64_t *idle_ms;
} window_seen;

/* An integer field of a hash reply (HGETALL's flat array of names and values), or dflt. */
static int64_t hash_int(const redisReply *h, const char *field, int64_t dflt) {
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->type == REDIS_REPLY_STRING && strcmp(h->element[i]->str, field) == 0 &&
            h->element[i + 1]->type == REDIS_REPLY_STRING)
            return strtoll(h->element[i + 1]->str, NULL, 10);
    return dflt;
}

/* TIME, HGETALL and PTTL of a ratio window's key: the counts of the slots in the window that ends at Redis' now (as
 * WINDOW_SCRIPT counts them), and the allowance with the ratio and reserve the last decision wrote. */
static rf_status read_window(redis_conn *c, redis_call *k, const char *key, void *out, rf_error *err) {
    window_seen *v = out;
    const char *time[] = {"TIME"}, *all[] = {"HGETALL", key}, *pttl[] = {"PTTL", key};
    redisReply *t = command(c, k, 1, time);
    redisReply *h = t ? command(c, k, 2, all) : NULL;
    redisReply *x = h ? command(c, k, 2, pttl) : NULL;
    bool ok = x != NULL; /* every reply whole (else k->why says which was not) */
    if (ok && !(reply_ok(t, REDIS_REPLY_ARRAY) && t->elements == 2 && t->element[0]->type == REDIS_REPLY_STRING &&
                t->element[1]->type == REDIS_REPLY_STRING))
        ok = refused(k, t, "TIME", FAIL_PROTOCOL);
    if (ok && !reply_ok(h, REDIS_REPLY_ARRAY)) ok = refused(k, h, "HGETALL", FAIL_PROTOCOL);
    if (ok && !reply_ok(x, REDIS_REPLY_INTEGER)) ok = refused(k, x, "PTTL", FAIL_PROTOCOL);
    if (ok) {
        *v->found = h->elements > 0;
        *v->w = (rf_budget_window){.ttl_ms = hash_int(h, "ttl", 0)};
        *v->idle_ms = x->integer >= 0 ? x->integer : -1;
        if (*v->found && v->w->ttl_ms >= 10) {
            int64_t now = strtoll(t->element[0]->str, NULL, 10) * 1000 + strtoll(t->element[1]->str, NULL, 10) / 1000;
            int64_t at = now / (v->w->ttl_ms / 10), newest = hash_int(h, "newest", at);
            if (newest > at) at = newest;
            for (int i = 0; i < 10; i++) {
                char kf[8], qf[8], rf[8];
                snprintf(kf, sizeof kf, "k%d", i);
                snprintf(qf, sizeof qf, "q%d", i);
                snprintf(rf, sizeof rf, "r%d", i);
                int64_t slot = hash_int(h, kf, INT64_MIN);
                if (slot == INT64_MIN || slot > at || slot <= at - 10) continue;
                v->w->requests += hash_int(h, qf, 0);
                v->w->retries += hash_int(h, rf, 0);
            }
            v->w->allowance_milli = hash_int(h, "ratio", 0) * v->w->requests + hash_int(h, "reserve", 0);
        }
    }
    if (t) freeReplyObject(t);
    if (h) freeReplyObject(h);
    if (x) freeReplyObject(x);
    return ok ? RF_OK : rfi_report(err, RF_EIO, "url", "%s", k->why);
}

/* A peek: the name checked, one connection (one deadline for the lookup, connect, TLS, AUTH/SELECT and the reads),
 * reader reads the key of name with suffix, and the connection is closed. */
static rf_status peek(const rf_redis_budget_options *o, const char *name, const char *suffix, peek_fn reader, void *out,
                      rf_error *err) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > RF_SHARED_BUDGET_NAME_MAX ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return rfi_report(err, RF_EINVAL, "name", "must be 1..64 characters of A-Z a-z 0-9 . _ -, got \"%.64s\"",
                          name ? name : "");
    redis_target t;
    int64_t timeout_ms;
    SSL_CTX *tls;
    /* One deadline for the whole command, reading the CA files included (the system's take tens of ms). */
    redis_call k =
        call_of(o->timeout_ms > 0 && o->timeout_ms <= RF_REDIS_BUDGET_TIMEOUT_MAX_MS ? o->timeout_ms
                                                                                     : RF_REDIS_BUDGET_TIMEOUT_MS);
    rf_status st = check_options(o, &t, &timeout_ms, &tls, err);
    if (st != RF_OK) return st;
    name_lookup *lookup = calloc(1, sizeof *lookup);
    redis_conn *c = lookup ? connect_target(&t, tls, lookup, &k) : NULL;
    release_lookup(lookup);
    if (lookup == NULL)
        st = rfi_report(err, RF_ENOMEM, "", "out of memory");
    else if (c == NULL)
        st = rfi_report(err, RF_EIO, "url", "%s", k.why);
    if (c != NULL) {
        char key[sizeof KEY_PREFIX + RF_SHARED_BUDGET_NAME_MAX + sizeof WINDOW_SUFFIX];
        snprintf(key, sizeof key, KEY_PREFIX "%s%s", name, suffix);
        st = reader(c, &k, key, out, err);
        conn_free(c);
    }
    SSL_CTX_free(tls);
    explicit_bzero(&t, sizeof t);
    return st;
}

rf_status rf_retry_budget_redis_peek(const rf_redis_budget_options *o, const char *name, int64_t *tokens_milli,
                                     int64_t *ttl_ms, rf_error *err) {
    if (o == NULL || tokens_milli == NULL || ttl_ms == NULL)
        return rfi_report(err, RF_EINVAL, "", "options, tokens_milli and ttl_ms are required");
    bucket_seen seen = {tokens_milli, ttl_ms};
    return peek(o, name, "", read_bucket, &seen, err);
}

rf_status rf_retry_budget_redis_peek_window(const rf_redis_budget_options *o, const char *name, bool *found,
                                            rf_budget_window *w, int64_t *idle_ms, rf_error *err) {
    if (o == NULL || found == NULL || w == NULL || idle_ms == NULL)
        return rfi_report(err, RF_EINVAL, "", "options, found, w and idle_ms are required");
    *found = false;
    window_seen seen = {found, w, idle_ms};
    return peek(o, name, WINDOW_SUFFIX, read_window, &seen, err);
}
