/*
 * The transport-free attempt loop (retryfreeze/attempt_step.h, attempt_step_internal.h): the one place where a
 * request's attempts meet the engine. The libcurl flow (core/src/client/client_flow.c) calls down into it after each
 * HTTP request, and the public rf_step is this same core for a host's own transport (rf.flow, the gateway); nothing
 * here calls back up. The ledger lines of finished requests are written here too, by one writer. Part of
 * libretryfreeze_attempt, which needs only the engine and the ledger (libretryfreeze): no libcurl, no hiredis.
 */
#include "attempt_step_internal.h"
#include "request_limits.h"
#include "../util/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Records built per rf_ledger_append_batch call: bounds a batch's arrays (a record with its tries is ~2 kB). */
#define BATCH_RECORDS 64

void rf_response_clear(rf_response *r) {
    if (r == NULL) return;
    free(r->tries);
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

/* ---- deciding --------------------------------------------------------------------------------------------- */

/* rf_decide on route, failing closed; fills the try from the verdict. Returns whether the failure class is
 * retryable on its route (or the attempt succeeded). */
static bool verdict_on_route(const rf_policy *p, long route, const rf_facts *facts, rf_rng *rng,
                             rf_retry_budget *budget, rf_try *t, rf_verdict *v) {
    rf_error err;
    if (rf_decide_on_route(p, route, facts, rng, budget, v, &err) != RF_OK) {
        /* Facts built by a transport are always valid; fail closed if that ever changes. */
        *v = (rf_verdict){.retry = false, .reason = RF_REASON_STATUS_NOT_RETRYABLE, .retry_after_header = -1};
        rf_classify(facts->status, facts->transport, v->class_name);
    }
    memcpy(t->class_name, v->class_name, sizeof t->class_name);
    t->reason = v->reason;
    t->budget = v->budget;
    t->retry_after[0] = t->retry_after_header[0] = '\0';
    if (v->retry_after_header >= 0 && v->retry_after_header < RF_WAIT_HEADER_COUNT &&
        facts->hints[v->retry_after_header] != NULL) {
        snprintf(t->retry_after, sizeof t->retry_after, "%.*s", (int)facts->hint_lens[v->retry_after_header],
                 facts->hints[v->retry_after_header]);
        snprintf(t->retry_after_header, sizeof t->retry_after_header, "%s",
                 rf_wait_header_name((rf_wait_header)v->retry_after_header));
    }
    return v->class_retryable || v->reason == RF_REASON_SUCCESS;
}

bool rf_step_verdict(const rf_policy *p, const rf_facts *facts, rf_rng *rng, rf_retry_budget *budget, rf_try *t,
                     rf_verdict *v) {
    return verdict_on_route(p, rf_policy_match(p, facts->method, facts->method_len, facts->path, facts->path_len),
                            facts, rng, budget, t, v);
}

int rf_step_narrow(rf_attempt_hook hook, void *hook_ud, rf_try *t, rf_verdict *v) {
    if (hook == NULL) return 0;
    int h = hook(hook_ud, t, v);
    if (h != 0 && v->retry) {
        v->retry = false; /* the hook narrows: a retry may become a stop, never the reverse */
        v->reason = RF_REASON_STOPPED_BY_CALLER;
        t->reason = v->reason;
    }
    return h;
}

rf_status rf_request_header_check(const char *line, rf_error *err) {
    if (line == NULL) return rfi_fail(err, "headers", "a header line is NULL");
    const char *colon = strchr(line, ':');
    if (colon == NULL || colon == line)
        return rfi_fail(err, "headers", "header \"%.40s\" must be \"Name: value\"", line);
    const int name_len = (int)(colon - line);
    const char *framing = rf_framing_header(line, (size_t)(colon - line));
    if (framing != NULL)
        return rfi_fail(err, "headers",
                        "header \"%.*s\" is %s, which frames the message or steers its connection: the transport "
                        "writes it itself, a request may not set it",
                        name_len > 60 ? 60 : name_len, line, framing);
    for (const char *p = line; p < colon; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *p)))
            return rfi_fail(err, "headers", "header name \"%.*s\" is not an RFC 9110 token",
                            name_len > 60 ? 60 : name_len, line);
    }
    if (strpbrk(line, "\r\n") != NULL)
        return rfi_fail(err, "headers", "header \"%.*s\" contains CR or LF", name_len > 60 ? 60 : name_len, line);
    if (name_len == 15 && strncasecmp(line, "Idempotency-Key", 15) == 0)
        return rfi_fail(err, "headers", "pass the idempotency key as idempotency_key, not as a raw header");
    return RF_OK;
}

/* ---- the core both loops run ------------------------------------------------------------------------------ */

void rfi_request_hedging(const rf_policy *p, long route, const rf_request *req, rf_hedging *out) {
    if (rf_policy_hedging(p, route, req->method, strlen(req->method), req->idempotency_key != NULL, out) != RF_OK)
        *out = (rf_hedging){.hedged = false, .why_not = RF_REASON_NO_ROUTE};
    if (!out->hedged) return;
    rf_propagation prop;
    if (rf_policy_propagation(p, route, &prop) != RF_OK || !prop.inbound_attempt) return;
    rf_inbound in = {0};
    for (size_t i = 0; i < req->n_inbound_headers; i++) rf_inbound_line(&prop, req->inbound_headers[i], &in);
    if (in.attempt > 1) { /* as rf_decide's inbound-retry: the caller retries, this layer makes one attempt */
        out->hedged = false;
        out->why_not = RF_REASON_INBOUND_RETRY;
    }
}

void rfi_attempts_init(rfi_attempts *a, const rf_policy *p, const rf_request *req, rf_response *resp, long route,
                       size_t tries_cap) {
    *a = (rfi_attempts){.policy = p,
                        .req = req,
                        .resp = resp,
                        .route = route,
                        .tries_cap = tries_cap,
                        .last_class_retryable = true}; /* no failure yet: nothing to blame on a class */
    rf_route_view rv;
    if (route >= 0 && rf_policy_route(p, (size_t)route, &rv) == RF_OK) {
        for (size_t i = 0; i < rv.n_retry_after_headers; i++) {
            rf_wait_header h;
            if (rf_wait_header_parse_name(rv.retry_after_headers[i], strlen(rv.retry_after_headers[i]), &h) == 0)
                a->reads[h] = true;
        }
    }
    rf_policy_propagation(p, route, &a->prop); /* disabled for no route */
    resp->inbound = (rf_inbound){0};
    for (size_t i = 0; a->prop.enabled && i < req->n_inbound_headers; i++)
        rf_inbound_line(&a->prop, req->inbound_headers[i], &resp->inbound);
}

bool rfi_step_begin(const rfi_attempts *a, int64_t elapsed_ms, int64_t *timeout_ms, rf_reason *stop) {
    rf_attempt_budget b = {.reason = RF_REASON_NO_ROUTE}; /* fail closed should rf_budget ever refuse */
    rf_error err;
    /* The route matched once (rfi_attempts_init): a policy is immutable, a request's method and path do not change. */
    if (rf_budget_on_route(a->policy, a->route, a->attempts, elapsed_ms, &b, &err) != RF_OK || !b.allowed) {
        *stop = b.reason;
        return false;
    }
    *timeout_ms = b.timeout_ms;
    return true;
}

/* What a replay needs beyond the verdict's own facts (ledger.h): whether the request left, every wait header the
 * response carried and, beside them, its Date (an HTTP-date's reference). */
static void record_replay_facts(rf_try *t, const rfi_attempt_end *e) {
    t->not_sent = e->not_sent;
    /* the peer the try went to: kept only as the ledger records it (a malformed one would cost the request its line) */
    const char *peer_end = e->peer != NULL ? memchr(e->peer, '\0', sizeof t->peer) : NULL;
    const size_t peer_len = peer_end != NULL ? (size_t)(peer_end - e->peer) : 0;
    if (peer_end != NULL && rf_ledger_peer_ok(e->peer, peer_len)) memcpy(t->peer, e->peer, peer_len + 1);
    t->grpc_status = e->grpc_status;
    if (e->grpc_bad && t->error[0] == '\0') /* fail closed: read as UNKNOWN, and said */
        snprintf(t->error, sizeof t->error, "grpc-status is no gRPC status code 0..%d: read as 2 (UNKNOWN)",
                 RF_GRPC_STATUS_MAX);
    size_t used = 0;
    bool any = false;
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        if (e->hints[h] == NULL) continue;
        any = true;
        int n = snprintf(t->wait_text + used, sizeof t->wait_text - used, "%.255s", e->hints[h]);
        if (n < 0 || (size_t)n >= sizeof t->wait_text - used) {
            t->wait_text[used] = '\0'; /* no room: this header is left out */
            continue;
        }
        t->wait_at[h] = (uint16_t)(used + 1);
        used += (size_t)n + 1;
    }
    if (any && e->date != NULL) snprintf(t->date, sizeof t->date, "%s", e->date);
}

int64_t rfi_step_inbound_deadline(const rfi_attempts *a) {
    const rf_inbound *in = &a->resp->inbound;
    return a->prop.enabled && a->prop.inbound_deadline && in->has_deadline ? in->deadline_ms : -1;
}

/* The number the next attempt's propagation header says: the one in flight within a hop (a redirect's), else the
 * next. */
static int next_attempt(const rfi_attempts *a, bool in_hop) { return in_hop ? a->attempts : a->attempts + 1; }

size_t rfi_step_lines(const rfi_attempts *a, bool in_hop, int64_t timeout_ms, char lines[2][RF_PROPAGATION_LINE_MAX]) {
    return rf_propagation_lines(&a->prop, next_attempt(a, in_hop), timeout_ms, lines);
}

/* The try of the request that just ended, recorded in the response (room was made before: rfi_step_after). */
static rf_try *new_try(rfi_attempts *a, const rfi_attempt_end *e) {
    rf_response *r = a->resp;
    rf_try *t = &r->tries[r->n_tries < a->tries_cap ? r->n_tries : a->tries_cap - 1];
    memset(t, 0, sizeof *t);
    t->transport = e->transport;
    t->elapsed_ms = e->elapsed_ms;
    t->delay_ms = a->delay_ms;
    t->timeout_ms = a->timeout_ms;
    t->start_ms = e->hedged ? e->start_ms : -1;
    t->hedge = e->hedged && e->hedge;
    if (e->error) snprintf(t->error, sizeof t->error, "%.127s", e->error);
    record_replay_facts(t, e);
    if (r->n_tries < a->tries_cap) r->n_tries++;
    return t;
}

static rf_try *record_try(rfi_attempts *a, const rfi_attempt_end *e, int status) {
    rf_response *r = a->resp;
    if (!e->counted) { /* a hedged request's attempts count when they start (rfi_step_started) */
        if (!e->hop) a->attempts++;
        a->requests++;
    }
    rf_try *t = new_try(a, e);
    t->status = status;
    r->status = status;
    r->attempts = a->requests;
    return t;
}

void rfi_step_started(rfi_attempts *a) {
    a->attempts++;
    a->requests++;
    a->resp->attempts = a->requests;
}

void rfi_step_cancelled(rfi_attempts *a, const rfi_attempt_end *e, rf_reason reason) {
    rf_try *t = e->counted ? new_try(a, e) : record_try(a, e, 0); /* not counted at its start: it counts now */
    rf_classify(0, RF_TRANSPORT_OTHER, t->class_name);            /* no response: UNKNOWN */
    t->reason = reason;
    t->fate = e->hedged ? RF_FATE_CANCELLED : RF_FATE_NONE; /* a fate is a hedged request's field */
}

/* The facts of the request that just ended; only the wait headers the route reads. */
static void facts_of(rfi_attempts *a, const rfi_attempt_end *e, int status, rf_facts *f) {
    const rf_request *req = a->req;
    *f = (rf_facts){.method = req->method,
                    .method_len = strlen(req->method),
                    .path = req->path,
                    .path_len = strlen(req->path),
                    .status = status,
                    .transport = e->transport,
                    .date = e->date,
                    .date_len = e->date ? strlen(e->date) : 0,
                    .attempts = a->attempts,
                    .elapsed_ms = e->request_elapsed_ms,
                    .not_sent = e->not_sent,
                    .has_idempotency_key = req->idempotency_key != NULL,
                    .now_ms = e->wall_ms,
                    .mono_ms = e->mono_ms,
                    .budget_request = &a->budget_request,
                    .hedged = e->hedged,
                    .overloaded = e->overloaded,
                    .grpc_status = e->grpc_status,
                    .inbound_attempt = a->resp->inbound.attempt};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        if (a->reads[h] && e->hints[h] != NULL) {
            f->hints[h] = e->hints[h];
            f->hint_lens[h] = strlen(e->hints[h]);
        }
    }
}

/* The verdict on a 3xx the client may follow (rf_redirect_verdict, failing closed), filling the try; false (nothing
 * filled) when it is a retry whose next request could not be made: rf_decide then decides. A followed redirect is
 * no failure: its stops keep their own outcome (deadline, …), so the last class stays retryable. */
static bool redirect_verdict(rfi_attempts *a, const rfi_attempt_end *e, rfi_redirect_ask *ask, const rf_facts *facts,
                             rf_try *t, rf_verdict *v) {
    /* Hops stop at max_redirects, and where the tries array ends (RF_MAX_TRIES requests in all). */
    int room = ask->hops + (RF_MAX_TRIES - a->requests);
    int max = ask->max_redirects < room ? ask->max_redirects : room;
    rf_facts hop_facts = *facts;
    if (e->hints[RF_WAIT_RETRY_AFTER] != NULL) { /* a 3xx's Retry-After counts whatever the route reads */
        hop_facts.hints[RF_WAIT_RETRY_AFTER] = e->hints[RF_WAIT_RETRY_AFTER];
        hop_facts.hint_lens[RF_WAIT_RETRY_AFTER] = strlen(e->hints[RF_WAIT_RETRY_AFTER]);
    }
    rf_error err;
    if (rf_redirect_verdict(a->policy, &hop_facts, ask->hops, max, v, &err) != RF_OK) {
        *v = (rf_verdict){.retry = false, .reason = RF_REASON_STATUS_NOT_RETRYABLE, .retry_after_header = -1};
        rf_classify(facts->status, facts->transport, v->class_name); /* fail closed */
    } else if (v->retry && !ask->next_ready) {
        return false; /* not followable: the 3xx is the answer */
    } else if (strcmp(v->class_name, "TOO_MANY_REDIRECTS") == 0) {
        t->transport = RF_TRANSPORT_TOO_MANY_REDIRECTS;
        snprintf(t->error, sizeof t->error, "more than %d redirects (max_redirects)", max);
    }
    memcpy(t->class_name, v->class_name, sizeof t->class_name);
    t->reason = v->reason;
    a->last_class_retryable = true;
    if (v->retry_after_header >= 0 && v->retry_after_header < RF_WAIT_HEADER_COUNT) {
        snprintf(t->retry_after, sizeof t->retry_after, "%s",
                 e->hints[v->retry_after_header] ? e->hints[v->retry_after_header] : "");
        snprintf(t->retry_after_header, sizeof t->retry_after_header, "%s",
                 rf_wait_header_name((rf_wait_header)v->retry_after_header));
    }
    ask->followed = true;
    return true;
}

/* Makes room in the response for the try of one more request; false at RF_MAX_TRIES or when memory runs out. Called
 * after the hook, so no try pointer is held across the realloc. */
static bool room_for_another_try(rfi_attempts *a) {
    rf_response *r = a->resp;
    if (a->requests >= RF_MAX_TRIES) return false;
    if (r->n_tries < a->tries_cap) return true;
    size_t cap = a->tries_cap * 2 < RF_MAX_TRIES ? a->tries_cap * 2 : RF_MAX_TRIES;
    rf_try *more = realloc(r->tries, cap * sizeof *more);
    if (more == NULL) return false;
    r->tries = more;
    a->tries_cap = cap;
    return true;
}

bool rfi_step_after(rfi_attempts *a, const rfi_attempt_end *e, rfi_redirect_ask *redirect, rf_rng *rng,
                    rf_retry_budget *budget, rf_attempt_hook hook, void *hook_ud, int *hook_rc, rf_verdict *v) {
    int status = e->status >= RF_HTTP_STATUS_MIN && e->status <= RF_HTTP_STATUS_MAX ? e->status : 0;
    rf_try *t = record_try(a, e, status);
    rf_facts facts;
    facts_of(a, e, status, &facts);
    if (redirect != NULL) redirect->followed = false;
    if (redirect == NULL || !redirect_verdict(a, e, redirect, &facts, t, v))
        a->last_class_retryable = verdict_on_route(a->policy, a->route, &facts, rng,
                                                   budget ? budget : rf_policy_default_budget(a->policy), t, v);
    if (e->hedged) t->fate = v->reason == RF_REASON_SUCCESS ? RF_FATE_WINNER : RF_FATE_FAILED;
    *hook_rc = rf_step_narrow(hook, hook_ud, t, v);
    if (v->retry && !room_for_another_try(a)) { /* RF_MAX_TRIES reached, or out of memory: fail closed */
        v->retry = false;
        v->reason = RF_REASON_MAX_ATTEMPTS;
        t->reason = v->reason;
    }
    return v->retry;
}

/* ---- the end of a request ------------------------------------------------------------------------------------ */

/* The response's end: reason, outcome, ok, elapsed_ms, route, budget and what a proxy tells its caller. */
static void finish(const rf_policy *p, long route, rf_reason reason, bool last_class_retryable, int64_t elapsed_ms,
                   rf_response *r) {
    r->reason = reason;
    r->outcome = rf_outcome_of_stop(reason, last_class_retryable);
    r->ok = r->outcome == RF_OUTCOME_SUCCESS;
    rf_propagation prop;
    r->overloaded =
        rf_policy_propagation(p, route, &prop) == RF_OK && rf_propagation_tells_overloaded(&prop, reason, r->outcome);
    r->elapsed_ms = elapsed_ms;
    rf_route_view rv;
    r->route = route >= 0 && rf_policy_route(p, (size_t)route, &rv) == RF_OK ? rv.endpoint : NULL;
    r->budget = RF_BUDGET_NONE; /* the worst of its verdicts': none < local < shared < local-fallback */
    for (size_t i = 0; i < r->n_tries; i++)
        if (r->tries[i].budget > r->budget) r->budget = r->tries[i].budget;
}

void rfi_step_end(const rfi_attempts *a, rf_reason reason, int64_t elapsed_ms) {
    finish(a->policy, a->route, reason, a->last_class_retryable, elapsed_ms, a->resp);
}

/* rf_step_finish for the request's route, already matched (-1: none). */
static void finish_on_route(const rf_policy *p, long route, const rf_request *req, rf_reason reason,
                            bool last_class_retryable, int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger,
                            rf_response *r) {
    finish(p, route, reason, last_class_retryable, elapsed_ms, r);
    if (ledger != NULL) rfi_step_write(ledger, p, &(rfi_finished){.req = req, .resp = r, .wall_ms = wall_ms}, 1, NULL);
}

void rf_step_finish(const rf_policy *p, const rf_request *req, rf_reason reason, bool last_class_retryable,
                    int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger, rf_response *r) {
    finish_on_route(p, rf_policy_match(p, req->method, strlen(req->method), req->path, strlen(req->path)), req, reason,
                    last_class_retryable, elapsed_ms, wall_ms, ledger, r);
}

/* ---- the ledger line ------------------------------------------------------------------------------------------ */

/* The ledger record of a finished request; its strings are those of p, the request and the response. */
static void record_of(const rf_policy *p, const rfi_finished *f, rf_ledger_record *rec) {
    const rf_request *req = f->req;
    const rf_response *r = f->resp;
    /* Zeroed but for the tries: each of the n_tries written is set whole below, and none past them is read (32 of
     * them zeroed were most of a line's cost). */
    memset(rec, 0, offsetof(rf_ledger_record, tries));
    memset(&rec->host, 0, sizeof *rec - offsetof(rf_ledger_record, host));
    rec->ts_ms = f->wall_ms;
    rec->route = r->route ? r->route : "";
    rec->method = req->method;
    rec->path = req->path;
    rec->key = req->idempotency_key;
    rec->policy = rf_policy_digest(p);
    rec->attempts = r->attempts;
    rec->elapsed_ms = r->elapsed_ms;
    rec->outcome = rf_outcome_name(r->outcome);
    rec->reason = rf_reason_name(r->reason);
    rec->ok = r->ok;
    rec->status = r->status;
    rec->body_len = (int64_t)r->body_len;
    rec->n_tries = r->n_tries;
    rec->budget = r->budget != RF_BUDGET_NONE ? rf_budget_source_name(r->budget) : NULL;
    rec->has_inbound_deadline = r->inbound.has_deadline;
    rec->inbound_deadline_ms = r->inbound.deadline_ms;
    rec->inbound_attempt = r->inbound.attempt;
    for (size_t i = 0; i < r->n_tries && i < RF_LEDGER_MAX_TRIES; i++) {
        const rf_try *t = &r->tries[i];
        rec->tries[i] =
            (rf_ledger_try){.class_name = t->class_name,
                            .status = t->status,
                            .elapsed_ms = t->elapsed_ms,
                            .delay_ms = t->delay_ms,
                            .reason = rf_reason_name(t->reason),
                            /* a header the verdict names is recorded even when it was empty */
                            .retry_after = t->retry_after_header[0] ? t->retry_after : NULL,
                            .retry_after_header = t->retry_after_header[0] ? t->retry_after_header : NULL,
                            .start_ms = t->fate != RF_FATE_NONE ? t->start_ms : 0,
                            .hedge = t->fate != RF_FATE_NONE && t->hedge,
                            .fate = t->fate != RF_FATE_NONE ? rf_try_fate_name(t->fate) : NULL,
                            .timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : 0,
                            .transport = t->transport != RF_TRANSPORT_OK ? rf_transport_name(t->transport) : NULL,
                            .not_sent = t->not_sent,
                            .grpc_status = t->grpc_status,
                            .date = t->date[0] ? t->date : NULL,
                            .peer = t->peer[0] ? t->peer : NULL};
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++)
            rec->tries[i].wait[h] = t->wait_at[h] ? t->wait_text + t->wait_at[h] - 1 : NULL;
    }
}

/* Puts a failed append's error into the response (the request itself is unaffected). */
static void ledger_error(rf_response *r, const rf_error *err) {
    snprintf(r->ledger_error, sizeof r->ledger_error, "%.60s: %.190s", err->path, err->message);
}

void rfi_batch_free(rfi_batch *b) {
    free(b->recs);
    free(b->ptrs);
    free(b->status);
    free(b->errs);
    *b = (rfi_batch){0};
}

/* Makes the batch's arrays hold n records; false when memory runs out. */
static bool batch_reserve(rfi_batch *b, size_t n) {
    if (n <= b->cap) return true;
    rf_ledger_record *recs = realloc(b->recs, n * sizeof *recs);
    if (recs != NULL) b->recs = recs;
    const rf_ledger_record **ptrs = realloc(b->ptrs, n * sizeof *ptrs);
    if (ptrs != NULL) b->ptrs = ptrs;
    rf_status *status = realloc(b->status, n * sizeof *status);
    if (status != NULL) b->status = status;
    rf_error *errs = realloc(b->errs, n * sizeof *errs);
    if (errs != NULL) b->errs = errs;
    if (recs == NULL || ptrs == NULL || status == NULL || errs == NULL) return false;
    b->cap = n;
    return true;
}

void rfi_step_write(rf_ledger *l, const rf_policy *p, const rfi_finished *done, size_t n, rfi_batch *batch) {
    for (size_t from = 0; from < n; from += BATCH_RECORDS) {
        size_t count = n - from < BATCH_RECORDS ? n - from : BATCH_RECORDS;
        const rfi_finished *slice = done + from;
        if (batch == NULL || !batch_reserve(batch, count)) { /* one line at a time: no batch, or out of memory */
            for (size_t i = 0; i < count; i++) {
                rf_ledger_record rec;
                record_of(p, &slice[i], &rec);
                rf_error err;
                if (rf_ledger_append(l, &rec, &err) != RF_OK) ledger_error(slice[i].resp, &err);
            }
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            record_of(p, &slice[i], &batch->recs[i]);
            batch->ptrs[i] = &batch->recs[i];
        }
        rf_ledger_append_batch(l, batch->ptrs, count, batch->status, batch->errs);
        for (size_t i = 0; i < count; i++)
            if (batch->status[i] != RF_OK) ledger_error(slice[i].resp, &batch->errs[i]);
    }
}

/* ---- rf_step: the core for a host's own transport ------------------------------------------------------------- */

rf_status rf_step_init(rf_step *s, const rf_policy *p, const rf_request *req, rf_response *resp, int64_t now_ms,
                       rf_error *err) {
    rf_error local;
    if (err == NULL) err = &local;
    memset(s, 0, sizeof *s);
    memset(resp, 0, sizeof *resp);
    if (req->method == NULL || req->method[0] == '\0' || req->path == NULL || req->path[0] != '/') {
        return rfi_fail(err, req->method == NULL || req->method[0] == '\0' ? "method" : "path",
                        "is required (a path starts with '/')");
    }
    /* A lowercase letter in the method can match no route (RFC 9110 §9.1): refused before any attempt in the engine's
     * words (rf_budget's check says why), never stopped as a silent no-route. Only such a method pays the call. */
    for (const char *m = req->method; *m != '\0'; m++) {
        if (*m >= 'a' && *m <= 'z') {
            rf_attempt_budget refused;
            rf_budget(p, req->method, strlen(req->method), req->path, strlen(req->path), 0, 0, &refused, err);
            return RF_EINVAL;
        }
    }
    for (size_t i = 0; i < req->n_headers; i++) {
        rf_status hst = rf_request_header_check(req->headers[i], err);
        if (hst != RF_OK) return hst;
    }
    const long route = rf_policy_match(p, req->method, strlen(req->method), req->path, strlen(req->path));
    rf_hedging hg;
    rfi_request_hedging(p, route, req, &hg);
    if (hg.hedged) {
        rf_route_view rv;
        rf_policy_route(p, (size_t)route, &rv);
        return rfi_fail(err, "hedging",
                        "route \"%s\" hedges its requests (hedging: several attempts in flight at once), which a step "
                        "of one attempt at a time cannot do: send it with the client (rf_client_request, "
                        "rf_client_all; in Lua client:request, client:all)",
                        rv.endpoint);
    }
    rfi_attempts a;
    rfi_attempts_init(&a, p, req, resp, route, 1);
    rfi_limits limits;
    rf_status st = rfi_limits_init(&limits, p, route, req, rfi_step_inbound_deadline(&a), err);
    if (st != RF_OK) return st;
    /* Room for one try, grown by rf_step_after up to RF_MAX_TRIES, as client_flow.c does: a host that runs request
     * after request (a proxy) pays for the tries its requests take, not for RF_MAX_TRIES zeroed ones each. */
    resp->tries = malloc(sizeof *resp->tries);
    if (resp->tries == NULL) return rfi_report(err, RF_ENOMEM, "request", "out of memory");
    s->tries_cap = 1;
    s->route = route;
    s->prop = a.prop;
    s->elapsed_shift_ms = limits.elapsed_shift_ms;
    s->timeout_cap_ms = limits.timeout_ms;
    s->policy = p;
    s->req = req;
    s->resp = resp;
    s->start_ms = now_ms;
    s->last_class_retryable = a.last_class_retryable;
    memcpy(s->reads, a.reads, sizeof s->reads);
    return RF_OK;
}

/* now_ms - since_ms for the host's clock readings, without signed overflow: 0 when the clock went backwards,
 * INT64_MAX when the difference does not fit (a host may pass any int64; C11 §6.5p5 makes overflow undefined). */
static int64_t elapsed_between(int64_t since_ms, int64_t now_ms) {
    if (now_ms <= since_ms) return 0;
    uint64_t d = (uint64_t)now_ms - (uint64_t)since_ms; /* exact: both in int64, now > since */
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

/* The core's view of step s (the public struct keeps its own fields; a request's attempts are all attempts). */
static void attempts_of(const rf_step *s, rfi_attempts *a) {
    const rf_request *req = s->req;
    *a = (rfi_attempts){.policy = s->policy,
                        .req = req,
                        .resp = s->resp,
                        .route = s->route,
                        .attempts = s->attempts,
                        .requests = s->attempts,
                        .tries_cap = s->tries_cap,
                        .delay_ms = s->delay_ms,
                        .timeout_ms = s->timeout_ms,
                        .last_class_retryable = s->last_class_retryable,
                        .prop = s->prop,
                        .budget_request = s->budget_request};
    memcpy(a->reads, s->reads, sizeof a->reads);
}

/* The step's own limits (rf_step_init). */
static rfi_limits limits_of(const rf_step *s) {
    return (rfi_limits){.elapsed_shift_ms = s->elapsed_shift_ms, .timeout_ms = s->timeout_cap_ms};
}

bool rf_step_begin(rf_step *s, int64_t now_ms, int64_t *timeout_ms, rf_reason *stop) {
    if (s->done) {
        *stop = RF_REASON_NO_ROUTE;
        return false;
    }
    rfi_attempts a;
    attempts_of(s, &a);
    const rfi_limits l = limits_of(s);
    int64_t timeout;
    if (!rfi_step_begin(&a, rfi_limits_elapsed(&l, elapsed_between(s->start_ms, now_ms)), &timeout, stop)) return false;
    s->timeout_ms = rfi_limits_timeout(&l, timeout);
    s->attempt_start_ms = now_ms;
    *timeout_ms = s->timeout_ms;
    return true;
}

size_t rf_step_propagation_lines(const rf_step *s, char lines[2][RF_PROPAGATION_LINE_MAX]) {
    rfi_attempts a;
    attempts_of(s, &a);
    return rfi_step_lines(&a, false, s->timeout_ms, lines);
}

bool rf_step_propagation_values(const rf_step *s, int *attempt, int64_t *deadline_ms) {
    rfi_attempts a;
    attempts_of(s, &a);
    return rf_propagation_values(&a.prop, next_attempt(&a, false), s->timeout_ms, attempt, deadline_ms);
}

bool rf_step_after(rf_step *s, const rf_step_result *res, rf_rng *rng, rf_retry_budget *budget, rf_attempt_hook hook,
                   void *hook_ud, int *hook_rc, int64_t *delay_ms, rf_reason *stop) {
    rfi_attempts a;
    attempts_of(s, &a);
    const rfi_limits l = limits_of(s);
    rfi_attempt_end e = {.status = res->status,
                         .transport = res->transport,
                         .error = res->error,
                         .date = res->date,
                         .not_sent = res->not_sent,
                         .peer = res->peer,
                         .overloaded = res->overloaded,
                         .grpc_status = res->grpc_status,
                         .elapsed_ms = elapsed_between(s->attempt_start_ms, res->now_ms),
                         .request_elapsed_ms = rfi_limits_elapsed(&l, elapsed_between(s->start_ms, res->now_ms)),
                         .wall_ms = res->wall_ms,
                         .mono_ms = res->now_ms,
                         .start_ms = -1};
    memcpy(e.hints, res->hints, sizeof e.hints);
    rf_verdict v;
    bool retry = rfi_step_after(&a, &e, NULL, rng, budget, hook, hook_ud, hook_rc, &v);
    s->tries_cap = a.tries_cap; /* resp->tries may have grown (moved) */
    s->attempts = a.attempts;
    s->last_class_retryable = a.last_class_retryable;
    s->budget_request = a.budget_request; /* counted by a ratio budget: the request counts once */
    if (!retry) {
        *stop = v.reason;
        return false;
    }
    s->delay_ms = v.delay_ms;
    *delay_ms = v.delay_ms;
    return true;
}

void rf_step_cancel(rf_step *s, int64_t now_ms, const char *why) {
    if (s->done) return;
    rfi_attempts a;
    attempts_of(s, &a);
    const rfi_limits l = limits_of(s);
    const rfi_attempt_end e = {.transport = RF_TRANSPORT_OTHER,
                               .error = why,
                               .elapsed_ms = elapsed_between(s->attempt_start_ms, now_ms),
                               .request_elapsed_ms = rfi_limits_elapsed(&l, elapsed_between(s->start_ms, now_ms)),
                               .mono_ms = now_ms,
                               .start_ms = -1};
    rfi_step_cancelled(&a, &e, RF_REASON_STOPPED_BY_CALLER); /* room: rf_step_after made it before a retry */
    s->attempts = a.attempts;
}

void rf_step_end_request(rf_step *s, rf_reason stop, int64_t now_ms, int64_t wall_ms, rf_ledger *ledger) {
    s->done = true;
    /* the route rf_step_init matched: the same request, matched once */
    finish_on_route(s->policy, s->route, s->req, stop, s->last_class_retryable, elapsed_between(s->start_ms, now_ms),
                    wall_ms, ledger, s->resp);
}
