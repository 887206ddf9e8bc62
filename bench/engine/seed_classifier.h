/*
 * The C BASELINE of bench/engine/bench_decide.c, not part of retryfreeze: a hand-written C port of
 * bench/lua/seed_classifier.lua (the kind of classifier the project's seed had). Facts (status, transport, attempts) →
 * the failure class by the engine's rules (a transport outcome names the class, else HTTP_<status> for 100..599,
 * else UNKNOWN), a lookup in the route's retryable / not-retryable class sets (a status's own token beats its
 * family's), attempts < maxAttempts → retry, and exponential backoff with full jitter from a seeded xorshift64*.
 *
 * Left out, as in the Lua port: route matching, the deadline and per-try timeout, Retry-After and the other wait
 * headers, retry budgets, idempotency keys, classLimits, unpinned sources and redirects. It is the yardstick of
 * what the C engine adds over the smallest classifier a user could write instead.
 */
#ifndef RETRYFREEZE_BENCH_SEED_CLASSIFIER_H
#define RETRYFREEZE_BENCH_SEED_CLASSIFIER_H

#include "retryfreeze/decide.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct seed_set {
    uint64_t status[10]; /* bit s for HTTP_<s> */
    bool family4xx, family5xx;
    uint32_t named; /* bit per transport class: TIMEOUT, CONNECT_RESET, … (seed_named) */
} seed_set;

enum {
    SEED_TIMEOUT,
    SEED_CONNECT_RESET,
    SEED_CONNECT_REFUSED,
    SEED_DNS,
    SEED_TLS,
    SEED_PROXY,
    SEED_REDIRECTS,
    SEED_UNKNOWN
};

/* The named classes' texts, padded so that a copy is of a constant size. */
static const char seed_named_text[][RF_CLASS_NAME_MAX] = {
    "TIMEOUT",     "CONNECT_RESET", "CONNECT_REFUSED",    "DNS_FAILURE",
    "TLS_FAILURE", "PROXY_REFUSED", "TOO_MANY_REDIRECTS", "UNKNOWN"};

typedef struct seed_classifier {
    seed_set retryable, not_retryable;
    int max_attempts;
    int64_t base_ms, max_ms;
    uint64_t state;
} seed_classifier;

typedef struct seed_verdict {
    bool retry;
    const char *reason;
    int64_t delay_ms;
    char class_name[RF_CLASS_NAME_MAX];
} seed_verdict;

/* The named class of each transport outcome (ok: UNKNOWN, never read). */
static const unsigned char seed_transport_class[RF_TRANSPORT_COUNT] = {
    [RF_TRANSPORT_OK] = SEED_UNKNOWN,
    [RF_TRANSPORT_TIMEOUT] = SEED_TIMEOUT,
    [RF_TRANSPORT_CONNECT_RESET] = SEED_CONNECT_RESET,
    [RF_TRANSPORT_CONNECT_REFUSED] = SEED_CONNECT_REFUSED,
    [RF_TRANSPORT_DNS] = SEED_DNS,
    [RF_TRANSPORT_TLS] = SEED_TLS,
    [RF_TRANSPORT_GOT_NOTHING] = SEED_CONNECT_RESET,
    [RF_TRANSPORT_OTHER] = SEED_UNKNOWN,
    [RF_TRANSPORT_PROXY_REFUSED] = SEED_PROXY,
    [RF_TRANSPORT_TOO_MANY_REDIRECTS] = SEED_REDIRECTS,
};

/* A lock token ("GATEWAY_TIMEOUT", "HTTP_429", "HANDLER_5XX", …, as rf_route_view lists them) into set. */
static inline void seed_set_add(seed_set *set, const char *token) {
    if (strcmp(token, "GATEWAY_TIMEOUT") == 0) {
        set->named |= 1u << SEED_TIMEOUT;
        set->status[504 / 64] |= (uint64_t)1 << (504 % 64);
    } else if (strcmp(token, "HANDLER_5XX") == 0 || strcmp(token, "HTTP_5XX") == 0) {
        set->family5xx = true;
    } else if (strcmp(token, "HTTP_4XX") == 0) {
        set->family4xx = true;
    } else if (strncmp(token, "HTTP_", 5) == 0) {
        int s = (token[5] - '0') * 100 + (token[6] - '0') * 10 + (token[7] - '0');
        set->status[s / 64] |= (uint64_t)1 << (s % 64);
    } else {
        for (unsigned i = 0; i < sizeof seed_named_text / sizeof seed_named_text[0]; i++)
            if (strcmp(token, seed_named_text[i]) == 0) set->named |= 1u << i;
    }
}

/* The classifier of one route of a loaded policy, seeded with seed. */
static inline void seed_for_route(seed_classifier *c, const rf_route_view *r, uint64_t seed) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < r->n_retryable; i++) seed_set_add(&c->retryable, r->retryable[i]);
    for (size_t i = 0; i < r->n_not_retryable; i++) seed_set_add(&c->not_retryable, r->not_retryable[i]);
    c->max_attempts = r->max_attempts;
    c->base_ms = r->backoff_base_ms;
    c->max_ms = r->backoff_max_ms;
    c->state = seed * 0x9E3779B97F4A7C15u | 1u; /* xorshift64* must not start at 0 */
}

static inline bool seed_has(const seed_set *s, int status) { return (s->status[status / 64] >> (status % 64)) & 1u; }

/* An integer in [0, hi]. */
static inline int64_t seed_random_upto(seed_classifier *c, int64_t hi) {
    c->state ^= c->state >> 12;
    c->state ^= c->state << 25;
    c->state ^= c->state >> 27;
    return (int64_t)(((c->state * 0x2545F4914F6CDD1Du) >> 11) % (uint64_t)(hi + 1));
}

/* The class name into buf (HTTP_<status> written by hand, as rf_classify does) and whether the class is
 * retryable under the route's sets. */
static inline bool seed_classify(const seed_classifier *c, int status, rf_transport transport, char *buf) {
    if (transport != RF_TRANSPORT_OK) {
        int named = (unsigned)transport < RF_TRANSPORT_COUNT ? seed_transport_class[transport] : SEED_UNKNOWN;
        memcpy(buf, seed_named_text[named], RF_CLASS_NAME_MAX);
        return (c->retryable.named >> named) & 1u;
    }
    if (status < 100 || status > 599) {
        memcpy(buf, seed_named_text[SEED_UNKNOWN], RF_CLASS_NAME_MAX);
        return (c->retryable.named >> SEED_UNKNOWN) & 1u;
    }
    const char text[9] = {
        'H', 'T', 'T', 'P', '_', (char)('0' + status / 100), (char)('0' + status / 10 % 10), (char)('0' + status % 10),
        '\0'};
    memcpy(buf, text, sizeof text);
    if (seed_has(&c->retryable, status)) return true;
    if (seed_has(&c->not_retryable, status)) return false;
    return (status >= 500 && c->retryable.family5xx) || (status >= 400 && status < 500 && c->retryable.family4xx);
}

/* facts → verdict, as bench/lua/seed_classifier.lua's classifier function. */
static inline void seed_decide(seed_classifier *c, const rf_facts *f, seed_verdict *v) {
    int status = f->status, attempts = f->attempts;
    bool retryable = seed_classify(c, status, f->transport, v->class_name);
    v->retry = false;
    v->delay_ms = 0;
    if (f->transport == RF_TRANSPORT_OK && status >= 200 && status <= 399) {
        v->reason = "success";
    } else if (attempts >= c->max_attempts) {
        v->reason = "max-attempts";
    } else if (!retryable) {
        v->reason = "status-not-retryable";
    } else {
        int64_t cap = attempts - 1 < 62 ? c->base_ms << (attempts - 1) : c->max_ms;
        if (cap > c->max_ms || cap <= 0) cap = c->max_ms;
        v->retry = true;
        v->reason = "within-budget";
        v->delay_ms = seed_random_upto(c, cap);
    }
}

#endif
