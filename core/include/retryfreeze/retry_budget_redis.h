/*
 * A retry budget shared by a fleet: the lock's retryBudget (gRPC A6 retryThrottling) kept in Redis, so that
 * 40 processes draw on one bucket instead of 40. A ratio budget (retryBudget.retryRatio) keeps its window there the
 * same way: one script per decision counts the request or the retry in the window's slot of Redis' own clock (TIME)
 * and says whether the retry is allowed (retry_budget_redis.c, WINDOW_SCRIPT), exactly the local rule. Each decision
 * that touches the budget runs one server-side script (EVALSHA) that adds the attempt's effect and returns the new
 * count atomically: a retryable failure takes 1 token, a success adds tokenRatio, the count stays in [0, maxTokens] in
 * thousandths (no float drift), and a retry is throttled while tokens <= maxTokens / 2 — exactly the local budget's
 * rule (rf_decide).
 *
 * When Redis is down or slow, a decision waits at most timeout_ms and then uses the process's own bucket
 * (verdict and ledger say "local-fallback"): an outage never means unlimited retries. The timeout is one
 * deadline for the whole decision, on CLOCK_MONOTONIC: the wait for another thread's round trip, connect(2),
 * every write and the whole reply (non-blocking sockets, poll(2) on the time left), so a Redis that
 * drips its reply a byte at a time or stops mid-reply holds a decision no longer than one that is down. A
 * reply cut off by the deadline drops the connection. After a failure the next connection attempt waits a
 * backoff (100 ms doubling to 5 s), during which decisions fall back at once. A host name is looked up with
 * glibc's getaddrinfo_a(3) under the same deadline (a lookup still running then is waited for by the next
 * connection attempt, never started twice); each address is tried in turn, as hiredis does.
 *
 * rediss:// speaks TLS (OpenSSL; the server's certificate checked against the system's CAs or ca_file/ca_path,
 * and against the URL's host), inside the same deadline: the handshake's every wait is on the time left. A user
 * in the URL authenticates as that ACL user (AUTH user password, Redis 6+). Why a budget falls back is said
 * once per kind of failure (o->log, else stderr): a wrong password, an untrusted certificate or a missing ACL
 * permission does not fill a log at every decision, and the URL in it never shows the password. A decision that
 * waits out its timeout for another thread's call (one budget makes one call at a time) falls back and says so too.
 *
 * Library libretryfreeze_budget_redis (hiredis, OpenSSL, and libcurl's URL parser for the URL; no HTTP client).
 * Thread-safe: one budget may serve many threads and clients.
 */
#ifndef RETRYFREEZE_RETRY_BUDGET_REDIS_H
#define RETRYFREEZE_RETRY_BUDGET_REDIS_H

#include "retryfreeze/decide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default and largest wait for Redis in one decision, and the default idle expiry of a bucket's key. */
#define RF_REDIS_BUDGET_TIMEOUT_MS 20
#define RF_REDIS_BUDGET_TIMEOUT_MAX_MS 10000
#define RF_REDIS_BUDGET_TTL_MS 3600000

typedef struct rf_redis_budget_options {
    /* required: "redis://" (TCP) or "rediss://" (TLS), then "[user:password@]host[:port][/db]": port 6379 and
     * db 0 by default; host a name, an IPv4 address or [an IPv6 address]; user and password percent-encoded
     * where they hold ':', '@', '/' or '%' (RFC 3986); an empty user is Redis' default user (":password@"). */
    const char *url;
    int64_t
        timeout_ms; /* one decision's deadline for Redis (lock wait, connect, TLS, script, reply), 1..10000; 0 = 20 */
    int64_t idle_ttl_ms; /* the bucket's key expires after this long without a decision, up to 30 days; 0 = 1 hour */
    /* TLS, rediss:// only (RF_EINVAL with redis://), as the HTTP client's tls options: the CAs to trust, a PEM
     * file and/or a directory in `openssl rehash` layout (neither: the system's, OpenSSL's default paths, which
     * $SSL_CERT_FILE and $SSL_CERT_DIR override); a client certificate (PEM) for a server that asks for one,
     * and its private key (PEM, without a password; NULL: read from cert). Read when the budget is made. */
    const char *ca_file, *ca_path, *cert, *key;
    /* Where the budget says why it falls back: one line, without a newline, per kind of failure (unreachable
     * or slow, TLS, authentication, permission, protocol, a wait for another thread's call) over the budget's
     * life. NULL: stderr. Called in a deciding thread, with the budget's lock held except for the wait's line,
     * which may come while another thread is in log: it must not use the budget, and must be thread-safe where
     * threads share the budget. */
    void (*log)(void *log_ctx, const char *line);
    void *log_ctx;
} rf_redis_budget_options;

/*
 * Creates policy p's retry budget with its bucket in Redis under the key "retryfreeze:budget:<name>", where
 * name is the lock's retryBudget.shared.name. Nothing is sent yet: the first decision connects. A bucket
 * Redis has not seen (or that expired) starts full. Free with rf_retry_budget_free, which waits for a name
 * lookup still running (a resolver that does not answer: up to its own timeouts).
 * RF_EINVAL (err->path names the option): the lock has no retryBudget or no retryBudget.shared, a malformed URL,
 * timeout_ms or idle_ttl_ms out of range, a TLS option with redis://, a CA file, CA directory, certificate or
 * key that cannot be read or used. No message shows the URL's password. RF_ENOMEM.
 */
RF_API rf_status rf_retry_budget_redis_new(const rf_policy *p, const rf_redis_budget_options *o, rf_retry_budget **out,
                                           rf_error *err);

/*
 * Reads bucket `name` at o->url (with o's TLS options; idle_ttl_ms and log are not used) without changing it:
 * *tokens_milli (-1 when Redis holds no such key: a new bucket, or one expired while idle) and *ttl_ms (its
 * remaining idle expiry, -1 when absent). For `retryfreeze budget show`. o->timeout_ms (1..10000, 0 = 20) is
 * one deadline for the name lookup, connect, TLS, AUTH/SELECT and both commands with their whole replies. One
 * connection, closed before returning (a name lookup the resolver cannot cancel at the deadline keeps its few
 * hundred bytes until it ends). RF_EINVAL as rf_retry_budget_redis_new's, and for NULL pointers or a name that
 * is not 1..64 characters of A-Z a-z 0-9 . _ -; RF_EIO when Redis cannot be reached, refuses the TLS handshake,
 * AUTH or a command, answers garbage, or has not answered whole within the deadline (err->message says which:
 * "redis GET: no whole reply within 200 ms"). Thread-safe.
 */
RF_API rf_status rf_retry_budget_redis_peek(const rf_redis_budget_options *o, const char *name, int64_t *tokens_milli,
                                            int64_t *ttl_ms, rf_error *err);

/*
 * Reads the ratio window `name` (a lock whose retryBudget is a ratio, with shared.name: Redis key
 * "retryfreeze:budget:<name>:window") at o->url without changing it: *found false when Redis holds no such window
 * (new, or expired while idle); else *w as the window stands at Redis' own clock (TIME, the clock its decisions
 * use): ttl_ms, the requests and retries it counts, and its allowance × 1000 with the retryRatio and minimum the last
 * decision wrote; and *idle_ms, its remaining idle expiry (-1 when absent). For `retryfreeze budget show`. One
 * deadline and one connection, as rf_retry_budget_redis_peek; the same errors. Thread-safe.
 */
RF_API rf_status rf_retry_budget_redis_peek_window(const rf_redis_budget_options *o, const char *name, bool *found,
                                                   rf_budget_window *w, int64_t *idle_ms, rf_error *err);

#ifdef __cplusplus
}
#endif
#endif
