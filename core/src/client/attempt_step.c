/*
 * The transport-free attempt loop (retryfreeze/attempt_step.h): the one place where a request's attempts meet
 * the engine. client_flow.c (libcurl) and the Lua binding's rf.flow (the host's I/O) call these.
 */
#include "retryfreeze/attempt_step.h"
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rf_step_verdict(const rf_policy *p, const rf_facts *facts, rf_rng *rng, rf_retry_budget *budget, rf_try *t,
                     rf_verdict *v) {
    return rfi_step_verdict_on_route(p,
                                     rf_policy_match(p, facts->method, facts->method_len, facts->path, facts->path_len),
                                     facts, rng, budget, t, v);
}

bool rfi_step_verdict_on_route(const rf_policy *p, long route, const rf_facts *facts, rf_rng *rng,
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

void rf_step_finish(const rf_policy *p, const rf_request *req, rf_reason reason, bool last_class_retryable,
                    int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger, rf_response *r) {
    rfi_step_finish_on_route(p, rf_policy_match(p, req->method, strlen(req->method), req->path, strlen(req->path)), req,
                             reason, last_class_retryable, elapsed_ms, wall_ms, ledger, r);
}

void rfi_step_finish_on_route(const rf_policy *p, long route, const rf_request *req, rf_reason reason,
                              bool last_class_retryable, int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger,
                              rf_response *r) {
    r->reason = reason;
    r->outcome = rf_outcome_of_stop(reason, last_class_retryable);
    r->ok = r->outcome == RF_OUTCOME_SUCCESS;
    r->elapsed_ms = elapsed_ms;
    rf_route_view rv;
    r->route = route >= 0 && rf_policy_route(p, (size_t)route, &rv) == RF_OK ? rv.endpoint : NULL;
    r->budget = RF_BUDGET_NONE; /* the worst of its verdicts': none < local < shared < local-fallback */
    for (size_t i = 0; i < r->n_tries; i++)
        if (r->tries[i].budget > r->budget) r->budget = r->tries[i].budget;
    if (ledger == NULL) return;
    rf_ledger_record rec;
    rfi_step_record(p, req, r, wall_ms, &rec);
    rf_error err;
    if (rf_ledger_append(ledger, &rec, &err) != RF_OK) rfi_step_ledger_error(r, &err);
}

void rfi_step_record(const rf_policy *p, const rf_request *req, const rf_response *r, int64_t wall_ms,
                     rf_ledger_record *rec) {
    *rec = (rf_ledger_record){.ts_ms = wall_ms};
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
    for (size_t i = 0; i < r->n_tries && i < RF_LEDGER_MAX_TRIES; i++) {
        const rf_try *t = &r->tries[i];
        rec->tries[i] = (rf_ledger_try){.class_name = t->class_name,
                                        .status = t->status,
                                        .elapsed_ms = t->elapsed_ms,
                                        .delay_ms = t->delay_ms,
                                        .reason = rf_reason_name(t->reason),
                                        /* a header the verdict names is recorded even when it was empty */
                                        .retry_after = t->retry_after_header[0] ? t->retry_after : NULL,
                                        .retry_after_header = t->retry_after_header[0] ? t->retry_after_header : NULL};
    }
}

void rfi_step_ledger_error(rf_response *r, const rf_error *err) {
    snprintf(r->ledger_error, sizeof r->ledger_error, "%.60s: %.190s", err->path, err->message);
}

rf_status rf_step_init(rf_step *s, const rf_policy *p, const rf_request *req, rf_response *resp, int64_t now_ms,
                       rf_error *err) {
    rf_error local;
    if (err == NULL) err = &local;
    memset(s, 0, sizeof *s);
    memset(resp, 0, sizeof *resp);
    if (req->method == NULL || req->method[0] == '\0' || req->path == NULL || req->path[0] != '/') {
        snprintf(err->path, sizeof err->path, "%s", req->method == NULL || req->method[0] == '\0' ? "method" : "path");
        snprintf(err->message, sizeof err->message, "is required (a path starts with '/')");
        return RF_EINVAL;
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
    s->policy = p;
    s->req = req;
    s->resp = resp;
    s->start_ms = now_ms;
    s->last_class_retryable = true;
    long i = rf_policy_match(p, req->method, strlen(req->method), req->path, strlen(req->path));
    rf_route_view rv;
    if (i >= 0 && rf_policy_route(p, (size_t)i, &rv) == RF_OK) {
        for (size_t k = 0; k < rv.n_retry_after_headers; k++) {
            rf_wait_header h;
            if (rf_wait_header_parse_name(rv.retry_after_headers[k], strlen(rv.retry_after_headers[k]), &h) == 0)
                s->reads[h] = true;
        }
    }
    resp->tries = calloc(RF_MAX_TRIES, sizeof *resp->tries);
    if (resp->tries == NULL) {
        snprintf(err->path, sizeof err->path, "request");
        snprintf(err->message, sizeof err->message, "out of memory");
        return RF_ENOMEM;
    }
    return RF_OK;
}

/* now_ms - since_ms for the host's clock readings, without signed overflow: 0 when the clock went backwards,
 * INT64_MAX when the difference does not fit (a host may pass any int64; C11 §6.5p5 makes overflow undefined). */
static int64_t elapsed_between(int64_t since_ms, int64_t now_ms) {
    if (now_ms <= since_ms) return 0;
    uint64_t d = (uint64_t)now_ms - (uint64_t)since_ms; /* exact: both in int64, now > since */
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

bool rf_step_begin(rf_step *s, int64_t now_ms, int64_t *timeout_ms, rf_reason *stop) {
    const rf_request *req = s->req;
    rf_attempt_budget b;
    rf_error err;
    if (s->done || rf_budget(s->policy, req->method, strlen(req->method), req->path, strlen(req->path), s->attempts,
                             elapsed_between(s->start_ms, now_ms), &b, &err) != RF_OK) {
        *stop = RF_REASON_NO_ROUTE;
        return false;
    }
    if (!b.allowed) {
        *stop = b.reason;
        return false;
    }
    s->timeout_ms = b.timeout_ms;
    s->attempt_start_ms = now_ms;
    *timeout_ms = b.timeout_ms;
    return true;
}

bool rf_step_after(rf_step *s, const rf_step_result *res, rf_rng *rng, rf_retry_budget *budget, rf_attempt_hook hook,
                   void *hook_ud, int *hook_rc, int64_t *delay_ms, rf_reason *stop) {
    rf_response *r = s->resp;
    const rf_request *req = s->req;
    int status = res->status >= 100 && res->status <= 599 ? res->status : 0;
    s->attempts++;
    rf_try *t = &r->tries[r->n_tries < RF_MAX_TRIES ? r->n_tries : RF_MAX_TRIES - 1];
    memset(t, 0, sizeof *t);
    t->status = status;
    t->transport = res->transport;
    t->elapsed_ms = elapsed_between(s->attempt_start_ms, res->now_ms);
    t->delay_ms = s->delay_ms;
    t->timeout_ms = s->timeout_ms;
    if (res->error) snprintf(t->error, sizeof t->error, "%.127s", res->error);
    if (r->n_tries < RF_MAX_TRIES) r->n_tries++;
    r->status = status;
    r->attempts = s->attempts;
    rf_facts facts = {.method = req->method,
                      .method_len = strlen(req->method),
                      .path = req->path,
                      .path_len = strlen(req->path),
                      .status = status,
                      .transport = res->transport,
                      .date = res->date,
                      .date_len = res->date ? strlen(res->date) : 0,
                      .attempts = s->attempts,
                      .elapsed_ms = elapsed_between(s->start_ms, res->now_ms),
                      .not_sent = res->not_sent,
                      .has_idempotency_key = req->idempotency_key != NULL,
                      .now_ms = res->wall_ms};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        if (s->reads[h] && res->hints[h] != NULL) {
            facts.hints[h] = res->hints[h];
            facts.hint_lens[h] = strlen(res->hints[h]);
        }
    }
    rf_verdict v;
    s->last_class_retryable = rf_step_verdict(s->policy, &facts, rng, budget, t, &v);
    *hook_rc = rf_step_narrow(hook, hook_ud, t, &v);
    if (v.retry && s->attempts >= RF_MAX_TRIES) { /* no room for another try: fail closed */
        v.retry = false;
        v.reason = RF_REASON_MAX_ATTEMPTS;
        t->reason = v.reason;
    }
    if (!v.retry) {
        *stop = v.reason;
        return false;
    }
    s->delay_ms = v.delay_ms;
    *delay_ms = v.delay_ms;
    return true;
}

void rf_step_end_request(rf_step *s, rf_reason stop, int64_t now_ms, int64_t wall_ms, rf_ledger *ledger) {
    s->done = true;
    rf_step_finish(s->policy, s->req, stop, s->last_class_retryable, elapsed_between(s->start_ms, now_ms), wall_ms,
                   ledger, s->resp);
}
