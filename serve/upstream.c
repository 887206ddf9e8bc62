/* retryfreeze-serve: attempt admission, fault choice and counting under one lock. */
#include "upstream.h"

#include <stdio.h>
#include <string.h>

int srv_upstream_init(struct srv_upstream *u, const struct srv_fault_spec *faults, uint64_t seed, size_t max_keys,
                      size_t max_key_bytes) {
    memset(u, 0, sizeof *u);
    u->faults = *faults;
    u->seed = seed;
    if (srv_seq_init(&u->seqs, max_keys, max_key_bytes) != 0) return -1;
    if (pthread_mutex_init(&u->lock, NULL) != 0) {
        srv_seq_free(&u->seqs);
        return -1;
    }
    return 0;
}

void srv_upstream_free(struct srv_upstream *u) {
    pthread_mutex_destroy(&u->lock);
    srv_seq_free(&u->seqs);
}

/* The draw of attempt n of sequence id: a generator seeded from the server's seed, the identity (FNV-1a) and
 * n, so a request's faults do not depend on the order in which concurrent requests arrive. */
static uint64_t draw(const struct srv_upstream *u, const char *id, size_t len, uint64_t n) {
    uint64_t h = 14695981039346656037u; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)id[i];
        h *= 1099511628211u; /* FNV-1a 64 prime */
    }
    rf_rng p;
    rf_rng_seed(&p, u->seed ^ h ^ (n * 0x9E3779B97F4A7C15u));
    return srv_prng_below(&p, SRV_PPB);
}

static void random_step(struct srv_upstream *u, const char *id, size_t len, uint64_t n, struct srv_step *out) {
    const struct srv_fault_rule *rule = srv_faults_pick(&u->faults, draw(u, id, len, n));
    memset(out, 0, sizeof *out);
    out->kind = rule ? rule->kind : SRV_FAULT_STATUS;
    out->status = rule ? rule->status : 200;
    out->stall_ms = rule ? rule->stall_ms : 0;
    if (out->kind == SRV_FAULT_STATUS && (out->status == 503 || out->status == 429) && u->faults.retry_after_s >= 0) {
        out->ra = SRV_RA_TEXT;
        snprintf(out->ra_text, sizeof out->ra_text, "%ld", u->faults.retry_after_s);
    }
}

/* Only a 2xx answer executes: a timeout stalls before the work starts (an overloaded server that never got
 * to the request), so a client that reuses its idempotency key correctly never causes a duplicate; a
 * duplicate means a key reused across logical requests or a retry after a success. */
static int executes(const struct srv_step *s) {
    return (s->kind == SRV_FAULT_STATUS && s->status >= 200 && s->status <= 299) || s->kind == SRV_FAULT_CUT;
}

enum srv_admit srv_upstream_attempt(struct srv_upstream *u, const char *id, size_t len, int keyed, const char *script,
                                    struct srv_step *out, uint64_t *n) {
    char err[1];
    pthread_mutex_lock(&u->lock);
    struct srv_seq *seq = srv_seq_get(&u->seqs, id, len, keyed);
    if (seq == NULL) {
        pthread_mutex_unlock(&u->lock);
        return SRV_FULL;
    }
    *n = ++seq->attempts;
    /* Past the script's end the answer is plain 200; the script's count is what tells us. */
    if (script == NULL)
        random_step(u, id, len, *n, out);
    else if (srv_script_parse(script, strlen(script), (size_t)(*n - 1), out, err, sizeof err) < (long)*n) {
        memset(out, 0, sizeof *out);
        out->kind = SRV_FAULT_STATUS;
        out->status = 200;
    }
    srv_stats_count(&u->stats, out->kind, out->status);
    if (++u->in_flight > u->stats.max_in_flight) u->stats.max_in_flight = u->in_flight;
    if (executes(out)) {
        u->stats.executions++;
        if (keyed && seq->executions > 0) u->stats.duplicate_executions++;
        seq->executions++;
    }
    pthread_mutex_unlock(&u->lock);
    return SRV_ADMITTED;
}

void srv_upstream_answered(struct srv_upstream *u) {
    pthread_mutex_lock(&u->lock);
    u->in_flight--;
    pthread_mutex_unlock(&u->lock);
}

void srv_upstream_count_refusal(struct srv_upstream *u, int status) {
    pthread_mutex_lock(&u->lock);
    srv_stats_count(&u->stats, SRV_FAULT_STATUS, status);
    pthread_mutex_unlock(&u->lock);
}

int srv_upstream_stats_json(struct srv_upstream *u, char *out, size_t cap) {
    pthread_mutex_lock(&u->lock);
    int n = srv_stats_json(&u->stats, u->seqs.keyed, out, cap);
    pthread_mutex_unlock(&u->lock);
    return n;
}

int srv_upstream_reset(struct srv_upstream *u) {
    pthread_mutex_lock(&u->lock);
    memset(&u->stats, 0, sizeof u->stats);
    u->stats.max_in_flight = u->in_flight; /* the attempts still being answered count from here */
    int rc = srv_seq_clear(&u->seqs);
    pthread_mutex_unlock(&u->lock);
    return rc;
}
