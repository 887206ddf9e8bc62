/*
 * Propagation across layers (retryfreeze/propagation.h): a route's propagation as a view, the caller's headers read
 * so that they can only narrow, the lines an attempt sends, and when a stop is told to the caller. The decision's
 * own checks (upstream-overloaded, inbound-retry) are decide.c's, in the order of RF_REASONS.
 */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <strings.h>

bool rfi_propagation_check(const rfi_route *r, const char *where, rf_error *err) {
    const rfi_propagation *pr = &r->prop;
    if (!pr->on) return true;
    /* In the table's order: a later field is refused for repeating an earlier one. */
    const char *const names[3] = {pr->attempt_header, pr->deadline_header, pr->overloaded_header};
    static const char *const keys[3] = {"attemptHeader", "deadlineHeader", "overloadedHeader"};
    for (int i = 1; i < 3; i++) {
        for (int k = 0; k < i; k++) {
            if (strcmp(names[i], names[k]) != 0) continue;
            char sub[RFI_PATH_CAP], field[40];
            snprintf(field, sizeof field, "propagation.%s", keys[i]);
            rfi_path_child(sub, where, field);
            rfi_fail(err, sub, "\"%s\" is already propagation.%s: each header says one thing", names[i], keys[k]);
            return false;
        }
    }
    return true;
}

rf_status rf_policy_propagation(const rf_policy *p, long route, rf_propagation *out) {
    if (p == NULL || out == NULL || route < -1 || route >= (long)p->n_routes) return RF_EINVAL;
    *out = (rf_propagation){.enabled = false};
    if (route < 0 || !p->routes[route].prop.on) return RF_OK;
    const rfi_propagation *pr = &p->routes[route].prop;
    *out = (rf_propagation){.enabled = true,
                            .attempt_header = pr->attempt_header,
                            .deadline_header = pr->deadline_header,
                            .overloaded_header = pr->overloaded_header,
                            .inbound_deadline = pr->inbound_deadline,
                            .inbound_attempt = pr->inbound_attempt};
    return RF_OK;
}

/* Whether name[0..len) is the lowercase field name want, case-insensitively (RFC 9110 §5.1). */
static bool name_is(const char *name, size_t len, const char *want) {
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* One list element [s, end) as 1*DIGIT: true and *out (saturated at UINT64_MAX, *overflow set past INT64_MAX);
 * false for anything else (empty, a sign, a fraction, letters, inner spaces). */
static bool digits(const char *s, const char *end, uint64_t *out, bool *overflow) {
    if (s == end) return false;
    uint64_t v = 0;
    *overflow = false;
    for (const char *c = s; c < end; c++) {
        if (*c < '0' || *c > '9') return false;
        const unsigned d = (unsigned)(*c - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            *overflow = true;
            v = (uint64_t)INT64_MAX;
        } else if (!*overflow) {
            v = v * 10 + d;
        }
    }
    *out = v;
    return true;
}

void rf_inbound_header(const rf_propagation *prop, const char *name, size_t name_len, const char *value,
                       size_t value_len, rf_inbound *in) {
    if (prop == NULL || !prop->enabled || name == NULL || value == NULL || in == NULL) return;
    const bool deadline = name_is(name, name_len, prop->deadline_header);
    if (!deadline && !name_is(name, name_len, prop->attempt_header)) return;
    const char *end = value + value_len;
    for (const char *s = value; s <= end;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma != NULL ? comma : end, *a = s;
        while (a < e && (*a == ' ' || *a == '\t')) a++;
        while (e > a && (e[-1] == ' ' || e[-1] == '\t')) e--;
        uint64_t v;
        bool overflow;
        if (digits(a, e, &v, &overflow)) {
            if (deadline && !overflow && v <= RF_INBOUND_DEADLINE_MAX &&
                (!in->has_deadline || (int64_t)v < in->deadline_ms)) {
                in->has_deadline = true;
                in->deadline_ms = (int64_t)v; /* a larger deadline narrows nothing: ignored */
            } else if (!deadline && v >= 1) {
                const int attempt = v > (uint64_t)INT_MAX ? INT_MAX : (int)v; /* a huge attempt still narrows */
                if (attempt > in->attempt) in->attempt = attempt;
            }
        }
        if (comma == NULL) break;
        s = comma + 1;
    }
}

void rf_inbound_line(const rf_propagation *prop, const char *line, rf_inbound *in) {
    if (line == NULL) return;
    const char *colon = strchr(line, ':');
    if (colon == NULL) return;
    rf_inbound_header(prop, line, (size_t)(colon - line), colon + 1, strlen(colon + 1), in);
}

bool rf_propagation_values(const rf_propagation *prop, int attempt, int64_t deadline_ms, int *attempt_out,
                           int64_t *deadline_out) {
    if (prop == NULL || attempt_out == NULL || deadline_out == NULL || !prop->enabled) return false;
    *attempt_out = attempt > 0 ? attempt : 1;
    *deadline_out = deadline_ms > 0 ? deadline_ms : 0;
    return true;
}

size_t rf_propagation_lines(const rf_propagation *prop, int attempt, int64_t deadline_ms,
                            char lines[2][RF_PROPAGATION_LINE_MAX]) {
    int n = 0;
    int64_t ms = 0;
    if (lines == NULL || !rf_propagation_values(prop, attempt, deadline_ms, &n, &ms)) return 0;
    snprintf(lines[0], RF_PROPAGATION_LINE_MAX, "%s: %d", prop->attempt_header, n);
    snprintf(lines[1], RF_PROPAGATION_LINE_MAX, "%s: %lld", prop->deadline_header, (long long)ms);
    return 2;
}

bool rf_propagation_tells_overloaded(const rf_propagation *prop, rf_reason reason, rf_outcome outcome) {
    if (prop == NULL || !prop->enabled) return false;
    return outcome == RF_OUTCOME_EXHAUSTED || outcome == RF_OUTCOME_THROTTLED ||
           reason == RF_REASON_UPSTREAM_OVERLOADED;
}
