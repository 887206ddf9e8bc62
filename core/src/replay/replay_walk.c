/*
 * One recorded request decided again under the candidate, try by try, as the attempt loop decides a live one
 * (core/src/attempt/attempt_step.c, under the client's core/src/client/client_flow.c): before an attempt rf_budget
 * gives its per-try timeout (a followed redirect's hop takes the redirect verdict's); the try's facts go to
 * rf_decide_on_route, or to rf_redirect_verdict for a 3xx the record followed; an on_attempt hook that stopped a retry
 * in the record stops it again; the verdict's delay and the try's duration advance the request's clock. The try's facts
 * are the record's (status, transport, whether it left, every wait header and the Date, its duration), under the
 * candidate's per-try timeout: a try that ran longer becomes a TIMEOUT at it, as libcurl would have cut it (exact); a
 * try that timed out at a per-try timeout shorter than the candidate's is assumed to time out again at the candidate's
 * (the record cannot say when or whether the upstream would have answered). On a request the candidate hedges
 * (rf_policy_hedging), every try is decided as a hedged one (a fatal class ends it), and hedges start while a try is in
 * flight, every hedgingDelayMs after the latest start, as rf_hedge_decide allows (client_flow.c): attempts the upstream
 * sees, with no answer of their own (the worst case), and the best case (each answers as its route's fastest recorded
 * success) kept beside them.
 */
#include "replay_internal.h"

#include <stdio.h>
#include <string.h>

int rfi_replay_class_id(const char *name) {
    if (name[0] == 'H' && name[1] == 'T' && name[2] == 'T' && name[3] == 'P' && name[4] == '_' && name[5] >= '1' &&
        name[5] <= '5' && name[6] >= '0' && name[6] <= '9' && name[7] >= '0' && name[7] <= '9' && name[8] == '\0')
        return (name[5] - '0') * 100 + (name[6] - '0') * 10 + (name[7] - '0');
#define RF_X_NAMED(e, token) \
    if (strcmp(name, token) == 0) return RFI_REPLAY_NAMED + e;
    RF_NAMED_CLASSES(RF_X_NAMED)
#undef RF_X_NAMED
    return RFI_REPLAY_UNKNOWN;
}

/* The transport an older line's class implies, by the engine's own mapping (rf_classify): exact but for
 * connect-reset and got-nothing (one class, one decision) and TLS_FAILURE's not_sent (unknown: taken as sent). An
 * HTTP class (most tries) is a response: no string compare. */
static rf_transport transport_of_class(const char *name) {
    if (name[0] == 'H' && name[1] == 'T' && name[2] == 'T' && name[3] == 'P' && name[4] == '_') return RF_TRANSPORT_OK;
    char buf[RF_CLASS_NAME_MAX];
    for (int t = RF_TRANSPORT_OK + 1; t < RF_TRANSPORT_COUNT; t++) {
        rf_classify(0, (rf_transport)t, buf);
        if (strcmp(name, buf) == 0) return (rf_transport)t;
    }
    return RF_TRANSPORT_OK;
}

/* The grpc-status a try's class implies: N for GRPC_<name of N> (RF_GRPC_CLASSES, in code order), else 0. A class is
 * what the engine classified, so the code is exact, on a line that did not write grpc_status too. */
static int grpc_status_of_class(const char *name) {
    if (name[0] != 'G' || strncmp(name, "GRPC_", 5) != 0) return 0;
    int code = 0;
#define RF_X_GRPC(e, token) \
    code++;                 \
    if (strcmp(name, token) == 0) return code;
    RF_GRPC_CLASSES(RF_X_GRPC)
#undef RF_X_GRPC
    return 0;
}

/* A reason's enum from its name; -1 when it is none. */
static int reason_of(const char *name) {
    for (int i = 0; i < RF_REASON_COUNT; i++)
        if (name[0] == rf_reason_name((rf_reason)i)[0] && strcmp(name, rf_reason_name((rf_reason)i)) == 0) return i;
    return -1;
}

static int outcome_of(const char *name) {
    for (int i = 0; i < RF_OUTCOME_COUNT; i++)
        if (name[0] == rf_outcome_name((rf_outcome)i)[0] && strcmp(name, rf_outcome_name((rf_outcome)i)) == 0) return i;
    return -1;
}

void rfi_replay_walk_start(const rfi_replay_ctx *c, rfi_replay_walk *w, const rf_ledger_record *rec,
                           const rf_attempt_budget *first) {
    memset(w, 0, offsetof(rfi_replay_walk, tries));
    w->route = first->route;
    w->first = *first;
    w->method = rec->method;
    w->method_len = strlen(rec->method);
    w->path = rec->path;
    w->path_len = strlen(rec->path);
    w->host = rec->host;
    w->has_key = rec->key != NULL;
    int64_t spent = 0;
    for (size_t i = 0; i < rec->n_tries; i++) spent += rec->tries[i].elapsed_ms + rec->tries[i].delay_ms;
    w->overhead_ms =
        rec->n_tries > 0 && rec->elapsed_ms > spent ? (rec->elapsed_ms - spent) / (int64_t)rec->n_tries : 0;
    w->start_wall_ms = rec->ts_ms - rec->elapsed_ms;
    w->rec_tries = (int)rec->n_tries;
    int outcome = outcome_of(rec->outcome), reason = reason_of(rec->reason);
    w->rec_outcome = (uint8_t)(outcome >= 0 ? outcome : RF_OUTCOME_TERMINAL);
    w->rec_reason = (uint8_t)(reason >= 0 ? reason : RF_REASON_STATUS_NOT_RETRYABLE);
    w->rec_ok = rec->ok;
    w->rec_attempts = rec->attempts;
    w->rec_status = rec->status;
    w->rec_elapsed_ms = rec->elapsed_ms;
    w->prev_class = RFI_REPLAY_FIRST;
    w->last_retryable = true;
    rf_hedging h = {.hedged = false, .why_not = RF_REASON_NO_ROUTE};
    if (rf_policy_hedging(c->p, w->route, w->method, w->method_len, w->has_key, &h) == RF_OK && h.hedged) {
        w->hedged = true;
        w->hedge_delay_ms = h.delay_ms;
        w->hedge_at = h.delay_ms; /* the first attempt starts at 0 */
    }
    w->win_at = -1;
    if (c->info != NULL && h.hedged) c->info->hedged_requests++;
    if (c->info != NULL && !h.hedged && h.why_not == RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY) c->info->hedge_keyless++;
}

void rfi_replay_recorded_facts(const rf_ledger_record *rec, size_t i, int64_t end_wall_ms,
                               const rfi_replay_route *route, rf_replay_info *info, rfi_replay_facts *f) {
    const rf_ledger_try *t = &rec->tries[i];
    *f = (rfi_replay_facts){.status = t->status,
                            .transport = transport_of_class(t->class_name),
                            .not_sent = t->not_sent,
                            .grpc_status = t->grpc_status ? t->grpc_status : grpc_status_of_class(t->class_name),
                            .elapsed_ms = t->elapsed_ms,
                            .timeout_ms = t->timeout_ms,
                            .wall_ms = end_wall_ms,
                            .date = t->date,
                            .stopped_by_caller = t->reason[0] == 's' && strcmp(t->reason, "stopped-by-caller") == 0,
                            .older = t->timeout_ms <= 0};
    if (t->transport) rf_transport_parse(t->transport, strlen(t->transport), &f->transport);
    /* A 3xx the record decided by the redirect verdict (the client follows redirects): it followed it, stopped it
     * for time, or found too many. A 3xx decided as a success (reason success) was not followed. */
    if (f->transport == RF_TRANSPORT_TOO_MANY_REDIRECTS && t->status >= 300 && t->status <= 399) {
        f->redirect = RFI_REPLAY_TOO_MANY;
        f->transport = RF_TRANSPORT_OK; /* what the verdict saw: the client names the class after it */
    } else if (f->transport == RF_TRANSPORT_OK && t->status >= 300 && t->status <= 399 &&
               strcmp(t->reason, "success") != 0) {
        f->redirect = RFI_REPLAY_FOLLOWED;
    }
    if (!f->older) {
        memcpy(f->wait, t->wait, sizeof f->wait);
        return;
    }
    /* An older line: only the wait header its verdict named (Retry-After when unnamed), no Date, no not_sent. */
    rf_wait_header h = RF_WAIT_RETRY_AFTER;
    if (t->retry_after != NULL &&
        (t->retry_after_header == NULL ||
         rf_wait_header_parse_name(t->retry_after_header, strlen(t->retry_after_header), &h) == 0))
        f->wait[h] = t->retry_after;
    if (info == NULL) return;
    if (f->transport == RF_TRANSPORT_TIMEOUT) info->older_timeouts++;
    if (f->transport == RF_TRANSPORT_TLS) info->older_tls++;
    if (route != NULL && route->reads_beyond_retry_after) {
        for (int k = 0; k < RF_WAIT_HEADER_COUNT; k++) {
            if (route->reads[k] && k != RF_WAIT_RETRY_AFTER && f->wait[k] == NULL) {
                info->older_waits++;
                break;
            }
        }
    }
    int64_t delay;
    if (f->wait[h] != NULL &&
        rf_wait_header_parse(h, f->wait[h], strlen(f->wait[h]), 0, NULL, 0, &delay) == RF_RA_NO_CLOCK)
        info->older_dates++; /* a valid date: read against the try's end, not the response's Date */
}

void rfi_replay_walk_end(rfi_replay_walk *w, rf_reason reason) {
    w->done = true;
    w->stop = (uint8_t)reason;
}

rf_outcome rfi_replay_walk_outcome(const rfi_replay_walk *w) {
    if (w->unmodelled) return (rf_outcome)w->rec_outcome;
    return rf_outcome_of_stop((rf_reason)w->stop, w->last_retryable);
}

/* Keeps try facts f, started at start_ms, and its verdict v as w's next predicted try (unless w is light). */
static void keep_try(rfi_replay_walk *w, const rfi_replay_facts *f, const rf_facts *facts, const rf_verdict *v,
                     int64_t timeout_ms, int64_t start_ms) {
    if (w->light || w->n >= RF_LEDGER_MAX_TRIES) return;
    rfi_replay_try *t = &w->tries[w->n++];
    *t = (rfi_replay_try){.elapsed_ms = f->elapsed_ms,
                          .delay_ms = w->delay_ms,
                          .timeout_ms = timeout_ms,
                          .start_ms = start_ms,
                          .class_id = (uint16_t)rfi_replay_class_id(v->class_name),
                          .status = (int16_t)f->status,
                          .reason = (uint8_t)v->reason,
                          .ra_header = -1};
    int h = v->retry_after_header;
    if (h < 0 || h >= RF_WAIT_HEADER_COUNT || facts->hints[h] == NULL) return;
    size_t len = facts->hint_lens[h];
    if (len + 1 > sizeof w->text - w->text_used) return; /* no room: recorded without its value */
    memcpy(w->text + w->text_used, facts->hints[h], len);
    w->text[w->text_used + len] = '\0';
    t->ra_header = (int8_t)h;
    t->ra_at = (uint16_t)(w->text_used + 1);
    w->text_used += len + 1;
}

/* Best case: the hedge that would answer first has answered before an event of w at clock t (a start, an answer). */
static void best_before(rfi_replay_walk *w, int64_t t, bool or_at) {
    if (w->best_taken || w->win_at < 0 || w->win_at > t || (w->win_at == t && !or_at)) return;
    w->best_taken = w->best_won = true;
    w->best_hedges = w->hedges;
    w->best_requests = w->requests;
}

/* A hedge of w started at clock at, with per-try timeout timeout_ms: no answer of its own (the prediction's worst
 * case); its best case answers as the route's fastest recorded success. */
static void keep_hedge(const rfi_replay_ctx *c, rfi_replay_walk *w, int64_t at, int64_t timeout_ms) {
    w->attempts++;
    w->requests++;
    w->hedges++;
    w->modelled = true;
    const int64_t fastest = c->fastest_ms != NULL ? c->fastest_ms[w->route] : -1;
    if (fastest < 0) w->unbounded = true;
    if (w->win_at < 0 && fastest >= 0 && fastest <= timeout_ms) w->win_at = at + fastest;
    if (w->light || w->n >= RF_LEDGER_MAX_TRIES) return;
    w->tries[w->n++] = (rfi_replay_try){.timeout_ms = timeout_ms,
                                        .start_ms = at,
                                        .hedge = true,
                                        .class_id = RFI_REPLAY_NAMED + RF_CLASS_UNKNOWN,
                                        .reason = RF_REASON_SUCCESS, /* the request's end cancelled it */
                                        .ra_header = -1};
}

/* The hedges the candidate starts while w's try is in flight, from its start to end (clock ms): one every
 * hedgingDelayMs after the latest start, each as the client asks rf_hedge_decide (a refusal ends the hedging). */
static void hedge_during(const rfi_replay_ctx *c, rfi_replay_walk *w, int64_t end) {
    while (w->hedged && !w->hedge_stopped && w->hedge_at < end) {
        const int64_t at = w->hedge_at;
        best_before(w, at, true);
        const rf_hedge_facts h = {.method = w->method,
                                  .method_len = w->method_len,
                                  .started = w->attempts,
                                  .elapsed_ms = at,
                                  .has_idempotency_key = w->has_key,
                                  .mono_ms = w->start_wall_ms + at, /* the record's clock: a ratio window's */
                                  .budget_request = &w->budget_request};
        rf_verdict v;
        rf_error err;
        if (rf_hedge_decide(c->p, w->route, &h, c->budget, &v, &err) != RF_OK || !v.retry) {
            w->hedge_stopped = true;
            return;
        }
        keep_hedge(c, w, at, v.timeout_ms);
        w->hedge_at = at + w->hedge_delay_ms;
    }
}

void rfi_replay_walk_best(const rfi_replay_walk *w, int *hedges, int *requests, bool *won) {
    *hedges = w->hedges;
    *requests = w->requests;
    *won = false;
    if (w->unmodelled || w->hedges == 0) return;
    if (w->best_taken) {
        *hedges = w->best_hedges;
        *requests = w->best_requests;
        *won = w->best_won;
        return;
    }
    /* The request ended on a failure that did not end a hedged request at once: the client waits for the hedges in
     * flight, and the first would answer. */
    const rf_reason stop = (rf_reason)w->stop;
    *won = w->win_at >= 0 && stop != RF_REASON_SUCCESS && stop != RF_REASON_HEDGE_FATAL &&
           stop != RF_REASON_STOPPED_BY_CALLER;
}

bool rfi_replay_walk_try(const rfi_replay_ctx *c, rfi_replay_walk *w, const rfi_replay_facts *in, rf_rng *rng) {
    rf_error err;
    int64_t timeout;
    if (w->in_hop) { /* a followed redirect: the redirect verdict gave its timeout (client_flow.c) */
        timeout = w->hop_timeout_ms;
    } else {
        rf_attempt_budget b = {.reason = RF_REASON_NO_ROUTE}; /* fail closed should rf_budget ever refuse */
        if (w->attempts == 0 && w->clock_ms == 0)             /* asked when the request was routed */
            b = w->first;
        else if (rf_budget(c->p, w->method, w->method_len, w->path, w->path_len, w->attempts, w->clock_ms, &b, &err) !=
                 RF_OK)
            b = (rf_attempt_budget){.reason = RF_REASON_NO_ROUTE};
        if (!b.allowed) {
            rfi_replay_walk_end(w, b.reason);
            return false;
        }
        timeout = b.timeout_ms;
        w->hops = 0;
    }
    /* The candidate's per-try timeout over what the record saw. */
    rfi_replay_facts f = *in;
    if (f.transport == RF_TRANSPORT_TIMEOUT) {
        int64_t ran = f.timeout_ms > 0 ? f.timeout_ms : f.elapsed_ms; /* an older line: its duration */
        if (timeout != ran) f.elapsed_ms = timeout;
        if (timeout > ran) {
            w->modelled = true;
            if (c->info) c->info->assumed_timeouts++;
        }
    } else if (f.elapsed_ms > timeout) { /* the answer came after the candidate's timeout: libcurl cuts it there */
        f = (rfi_replay_facts){.transport = RF_TRANSPORT_TIMEOUT, .elapsed_ms = timeout, .wall_ms = in->wall_ms};
        if (c->info) c->info->timeouts_cut++;
    }
    const int64_t start = w->clock_ms, at = w->clock_ms + f.elapsed_ms + w->overhead_ms;
    if (w->hedged && !w->in_hop) { /* the next hedge waits hedgingDelayMs after this start too */
        best_before(w, start, true);
        if (w->hedge_at < start + w->hedge_delay_ms) w->hedge_at = start + w->hedge_delay_ms;
    }
    if (!w->in_hop) {
        w->attempts++;
        w->depth++;
    }
    w->requests++;
    if (w->hedged && !w->in_hop) {
        hedge_during(c, w, start + f.elapsed_ms);
        best_before(w, start + f.elapsed_ms, false);
    }
    rf_facts facts = {.method = w->method,
                      .method_len = w->method_len,
                      .path = w->path,
                      .path_len = w->path_len,
                      .status = f.status,
                      .transport = f.transport,
                      .date = f.date,
                      .date_len = f.date ? strlen(f.date) : 0,
                      .attempts = w->attempts,
                      .elapsed_ms = at,
                      .has_idempotency_key = w->has_key,
                      .now_ms = f.wall_ms,
                      .not_sent = f.not_sent,
                      .mono_ms = w->start_wall_ms + at, /* the record's clock: a ratio window's */
                      .budget_request = &w->budget_request,
                      .grpc_status = f.grpc_status,
                      .hedged = w->hedged};
    const rfi_replay_route *route = &c->routes[w->route];
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) { /* the wait headers the route reads, as the client gives them */
        if (route->reads[h] && f.wait[h] != NULL) {
            facts.hints[h] = f.wait[h];
            facts.hint_lens[h] = strlen(f.wait[h]);
        }
    }
    rf_verdict v;
    rf_status st;
    const bool redirect = f.redirect != 0 && f.transport == RF_TRANSPORT_OK && f.status >= 300 && f.status <= 399;
    if (redirect) { /* the client's redirect verdict: its Retry-After counts whatever the route reads */
        rf_facts hop = facts;
        if (f.wait[RF_WAIT_RETRY_AFTER] != NULL) {
            hop.hints[RF_WAIT_RETRY_AFTER] = f.wait[RF_WAIT_RETRY_AFTER];
            hop.hint_lens[RF_WAIT_RETRY_AFTER] = strlen(f.wait[RF_WAIT_RETRY_AFTER]);
        }
        facts = hop;
        /* The client's max_redirects is not recorded: as many as the record followed. */
        st = rf_redirect_verdict(c->p, &facts, w->hops, f.redirect == RFI_REPLAY_FOLLOWED ? w->hops + 1 : w->hops, &v,
                                 &err);
    } else {
        st = rf_decide_on_route(c->p, w->route, &facts, rng, c->budget, &v, &err);
    }
    if (st != RF_OK) { /* facts from a record are valid; fail closed if that ever changes */
        v = (rf_verdict){.retry = false, .reason = RF_REASON_STATUS_NOT_RETRYABLE, .retry_after_header = -1};
        rf_classify(f.status, f.transport, v.class_name);
    }
    if (v.retry && f.stopped_by_caller) { /* the caller's hook narrowed here: it would again */
        v.retry = false;
        v.reason = RF_REASON_STOPPED_BY_CALLER;
    }
    if (v.retry && w->requests >= RF_LEDGER_MAX_TRIES) { /* the client's RF_MAX_TRIES */
        v.retry = false;
        v.reason = RF_REASON_MAX_ATTEMPTS;
    }
    keep_try(w, &f, &facts, &v, timeout, start);
    w->last_status = f.status;
    w->last_transport = (uint8_t)f.transport;
    w->last_not_sent = f.not_sent;
    w->last_elapsed_ms = f.elapsed_ms;
    w->last_wall_ms = f.wall_ms;
    w->last_retryable = redirect || v.class_retryable || v.reason == RF_REASON_SUCCESS;
    w->prev_class = (uint16_t)rfi_replay_class_id(v.class_name);
    w->clock_ms = at;
    if (!v.retry) {
        rfi_replay_walk_end(w, v.reason);
        return false;
    }
    w->delay_ms = v.delay_ms;
    w->clock_ms = at + v.delay_ms;
    w->in_hop = redirect;
    if (redirect) {
        w->hops++;
        w->hop_timeout_ms = v.timeout_ms;
    }
    return true;
}
