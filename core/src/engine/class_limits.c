/*
 * Per-class attempt limits (lock field classLimits, docs/lock.md): {"UNKNOWN": 2, "TIMEOUT": 3}. When the
 * failure's class has a limit and the attempts made so far reach it, rf_decide stops with class-limit. This
 * writes seed 004's "unknown: once, then stop" and urllib3's separate connect/read/status caps in a lock.
 * A specific status beats its family (HTTP_503 over HTTP_5XX), as in the retryable lists; aliases expand
 * (GATEWAY_TIMEOUT = TIMEOUT + HTTP_504, HANDLER_5XX = HTTP_5XX).
 */
#include "internal.h"
#include "lock_schema.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets limit on every member of one (alias-expanded) class token's set. */
static void set_limits(rfi_route *r, const rfi_class_set *one, uint8_t limit) {
    for (int s = RF_HTTP_STATUS_MIN; s <= RF_HTTP_STATUS_MAX; s++)
        if ((one->status[s / 64] >> (s % 64)) & 1u) r->class_limit_status[s] = limit;
    if (one->family4xx) r->class_limit_4xx = limit;
    if (one->family5xx) r->class_limit_5xx = limit;
    for (unsigned i = 0; i < RF_NAMED_CLASS_COUNT; i++)
        if (one->named & (1u << i)) r->class_limit_named[i] = limit;
}

bool rfi_class_limits_parse(const cJSON *obj, const char *path, const rfi_field *f, rfi_route *r, rf_error *err) {
    if (!cJSON_IsObject(obj)) {
        rfi_fail(err, path, "must be an object {class token: attempts}, e.g. {\"UNKNOWN\": 2}");
        return false;
    }
    memset(r->class_limit_status, 0, sizeof r->class_limit_status);
    r->class_limit_4xx = r->class_limit_5xx = 0;
    memset(r->class_limit_named, 0, sizeof r->class_limit_named);
    rfi_class_set seen = {0};
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        char sub[RFI_PATH_CAP];
        rfi_path_child(sub, path, c->string);
        if (strcmp(c->string, "$comment") == 0) {
            if (!cJSON_IsString(c)) return rfi_fail(err, sub, "must be a string (a comment)"), false;
            continue;
        }
        rfi_class_set one = {0};
        if (!rfi_class_add_token(&one, c->string, strlen(c->string))) {
            rfi_class_unknown(err, sub, c->string);
            return false;
        }
        char dup[RF_CLASS_NAME_MAX];
        if (rfi_class_overlap(&seen, &one, dup)) {
            rfi_fail(err, sub, "class %s has two limits", dup);
            return false;
        }
        rfi_class_add_token(&seen, c->string, strlen(c->string));
        double v = cJSON_IsNumber(c) ? c->valuedouble : NAN;
        if (!isfinite(v) || v != floor(v) || v < (double)f->pub.min || v > (double)f->pub.max) {
            rfi_fail(err, sub,
                     "must be an integer from %lld to maxAttempts (at most %lld): the attempts after which %s stops",
                     (long long)f->pub.min, (long long)f->pub.max, c->string);
            return false;
        }
        set_limits(r, &one, (uint8_t)v);
    }
    if (rfi_class_count(&seen) > RFI_MAX_CLASSES) {
        rfi_fail(err, path, "more than %d failure classes", RFI_MAX_CLASSES);
        return false;
    }
    r->has_class_limits = seen.family4xx || seen.family5xx || seen.named != 0;
    for (size_t i = 0; i < sizeof seen.status / sizeof *seen.status; i++) r->has_class_limits |= seen.status[i] != 0;
    return true;
}

/* Calls fn(token, limit) for each limit, in rfi_class_tokens order (tokens are static strings); stops early when fn
 * returns false. */
static bool each_limit(const rfi_route *r, bool (*fn)(void *, const char *, int), void *ud) {
    for (int s = RF_HTTP_STATUS_MIN; s <= RF_HTTP_STATUS_MAX; s++)
        if (r->class_limit_status[s] != 0 && !fn(ud, rfi_status_token(s), r->class_limit_status[s])) return false;
    if (r->class_limit_4xx && !fn(ud, "HTTP_4XX", r->class_limit_4xx)) return false;
    if (r->class_limit_5xx && !fn(ud, "HTTP_5XX", r->class_limit_5xx)) return false;
    for (unsigned i = 0; i < RF_NAMED_CLASS_COUNT; i++)
        if (r->class_limit_named[i] && !fn(ud, rfi_named_token(i), r->class_limit_named[i])) return false;
    return true;
}

typedef struct check_ctx {
    const rfi_route *r;
    const char *where;
    rf_error *err;
} check_ctx;

static bool check_one(void *ud, const char *token, int limit) {
    check_ctx *c = ud;
    if (limit <= c->r->max_attempts) return true;
    char limits[RFI_PATH_CAP], sub[RFI_PATH_CAP];
    rfi_path_child(limits, c->where, "classLimits");
    rfi_path_child(sub, limits, token);
    rfi_fail(c->err, sub, "must be at most maxAttempts (%lld), got %d", (long long)c->r->max_attempts, limit);
    return false;
}

bool rfi_class_limits_check(const rfi_route *r, const char *where, rf_error *err) {
    check_ctx c = {r, where, err};
    return each_limit(r, check_one, &c);
}

typedef struct view_ctx {
    const char **tokens;
    int *values;
    size_t n;
} view_ctx;

static bool add_view(void *ud, const char *token, int limit) {
    view_ctx *v = ud;
    if (v->n == RFI_MAX_CLASSES) return false;
    v->tokens[v->n] = token;
    v->values[v->n++] = limit;
    return true;
}

size_t rfi_class_limits_view(const rfi_route *r, const char **tokens, int *values) {
    view_ctx v = {tokens, values, 0};
    each_limit(r, add_view, &v);
    /* Sorted by token (insertion sort: at most RFI_MAX_CLASSES, once at load), so the canonical JSON's keys are. */
    for (size_t i = 1; i < v.n; i++) {
        for (size_t j = i; j > 0 && strcmp(tokens[j - 1], tokens[j]) > 0; j--) {
            const char *t = tokens[j];
            tokens[j] = tokens[j - 1];
            tokens[j - 1] = t;
            int value = values[j];
            values[j] = values[j - 1];
            values[j - 1] = value;
        }
    }
    return v.n;
}

int rfi_class_limit(const rfi_route *r, int status, rf_transport transport, int grpc_status) {
    if (!r->has_class_limits) return 0;
    unsigned named = rfi_fact_class(transport, grpc_status);
    if (named == RF_NAMED_CLASS_COUNT) {
        if (status < RF_HTTP_STATUS_MIN || status > RF_HTTP_STATUS_MAX) return r->class_limit_named[RF_CLASS_UNKNOWN];
        if (r->class_limit_status[status]) return r->class_limit_status[status];
        if (status >= 400 && status <= 499) return r->class_limit_4xx;
        if (status >= 500) return r->class_limit_5xx;
        return 0;
    }
    return r->class_limit_named[named];
}

int rf_policy_class_attempts(const rf_policy *p, size_t route, int status, rf_transport transport) {
    if (p == NULL || route >= p->n_routes || (unsigned)transport >= RF_TRANSPORT_COUNT) return 0;
    const rfi_route *r = &p->routes[route];
    int limit = rfi_class_limit(r, status, transport, 0);
    return limit > 0 && limit < r->max_attempts ? limit : (int)r->max_attempts;
}
