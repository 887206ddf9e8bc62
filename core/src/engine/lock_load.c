/*
 * Loading a lock: parse with cJSON, validate every rule (the lock schema, docs/lock.md), merge defaults,
 * and build an immutable rf_policy. Any failure yields an rf_error naming the JSON path, the rule and the
 * offending value; a bad lock never becomes a policy.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "retryfreeze/input.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_CAP 256

/* Field presence bits of a route spec (a route, or the defaults it inherits from). */
enum {
    F_ENDPOINT = 1 << 0,
    F_MAX_ATTEMPTS = 1 << 1,
    F_PER_ATTEMPT = 1 << 2,
    F_TOTAL = 1 << 3,
    F_MIN_ATTEMPT = 1 << 4,
    F_RETRYABLE = 1 << 5,
    F_NOT_RETRYABLE = 1 << 6,
    F_METHODS = 1 << 7,
    F_BASE = 1 << 8,
    F_MULT = 1 << 9,
    F_BACKOFF_MAX = 1 << 10,
    F_JITTER = 1 << 11,
    F_HONOR = 1 << 12,
    F_RA_MAX = 1 << 13,
    F_WAIT_HEADERS = 1 << 14,
    F_CLASS_LIMITS = 1 << 15
};

typedef struct spec {
    unsigned has;
    rfi_route r;          /* values, valid where the bit in has is set */
    char where[PATH_CAP]; /* JSON path of the object the spec came from */
} spec;

/* Built-in defaults (docs/lock.md). Required fields have none. */
#define DEFAULT_MIN_ATTEMPT_MS 200
#define DEFAULT_BACKOFF_BASE_MS 100
#define DEFAULT_BACKOFF_MULT_MILLI 2000
#define DEFAULT_BACKOFF_MAX_MS 10000
#define DEFAULT_JITTER RF_JITTER_FULL
#define DEFAULT_RA_MAX_MS 120000
static const char *const default_methods[] = {"POST", "PATCH", "DELETE"};

/* JSON paths are bounded (PATH_CAP); a deeper path is cut and marked with "…" rather than overflowing. */
static void mark_cut(char *dst, int n) {
    if (n >= PATH_CAP) memcpy(dst + PATH_CAP - 4, "\xE2\x80\xA6", 4);
}

static void child_path(char *dst, const char *parent, const char *key) {
    mark_cut(dst, snprintf(dst, PATH_CAP, "%s.%s", parent, key));
}

static void index_path(char *dst, const char *parent, int i) {
    mark_cut(dst, snprintf(dst, PATH_CAP, "%s[%d]", parent, i));
}

static const char *type_name(const cJSON *item) {
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsBool(item)) return "a boolean";
    if (cJSON_IsNumber(item)) return "a number";
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    return "an invalid value";
}

/* Integer in [lo, hi]: refuses non-numbers, non-finite values (1e400), fractions and out-of-range values. */
static bool get_int(const cJSON *item, const char *path, int64_t lo, int64_t hi, int64_t *out, rf_error *err) {
    if (!cJSON_IsNumber(item)) {
        rfi_fail(err, path, "must be an integer from %lld to %lld, got %s", (long long)lo, (long long)hi,
                 type_name(item));
        return false;
    }
    double v = item->valuedouble;
    if (!isfinite(v)) {
        rfi_fail(err, path, "must be an integer from %lld to %lld, got a number too large to represent", (long long)lo,
                 (long long)hi);
        return false;
    }
    if (v != floor(v)) {
        char text[RFI_NUMBER_TEXT_MAX];
        rfi_fail(err, path, "must be an integer (no fraction), got %s", rfi_number_text(text, v));
        return false;
    }
    if (v < (double)lo || v > (double)hi) {
        char text[RFI_NUMBER_TEXT_MAX];
        rfi_fail(err, path, "must be an integer from %lld to %lld, got %s", (long long)lo, (long long)hi,
                 rfi_number_text(text, v));
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* A number with at most 3 decimal places in [lo, hi], stored × 1000 (exact, so digests are stable). */
static bool get_milli(const cJSON *item, const char *path, double lo, double hi, int64_t *out, rf_error *err) {
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
        rfi_fail(err, path, "must be a finite number from %g to %g, got %s", lo, hi, type_name(item));
        return false;
    }
    double v = item->valuedouble;
    if (v < lo || v > hi) {
        char text[RFI_NUMBER_TEXT_MAX];
        rfi_fail(err, path, "must be a number from %g to %g, got %s", lo, hi, rfi_number_text(text, v));
        return false;
    }
    double milli = v * 1000.0, rounded = round(milli);
    if (fabs(milli - rounded) > 1e-6) {
        char text[RFI_NUMBER_TEXT_MAX];
        rfi_fail(err, path, "must have at most 3 decimal places, got %s", rfi_number_text(text, v));
        return false;
    }
    *out = (int64_t)rounded;
    return true;
}

static bool get_bool(const cJSON *item, const char *path, bool *out, rf_error *err) {
    if (!cJSON_IsBool(item)) {
        rfi_fail(err, path, "must be true or false, got %s", type_name(item));
        return false;
    }
    *out = cJSON_IsTrue(item);
    return true;
}

static bool get_string(const cJSON *item, const char *path, const char **out, size_t *len, rf_error *err) {
    if (!cJSON_IsString(item) || item->valuestring == NULL) {
        rfi_fail(err, path, "must be a string, got %s", type_name(item));
        return false;
    }
    *out = item->valuestring;
    *len = strlen(item->valuestring);
    return true;
}

/* Duplicate keys in any object anywhere (cJSON keeps both, so they would silently shadow each other). */
static bool check_duplicates(const cJSON *node, const char *path, rf_error *err) {
    char sub[PATH_CAP];
    int i = 0;
    for (const cJSON *c = node->child; c != NULL; c = c->next, i++) {
        if (cJSON_IsObject(node)) {
            for (const cJSON *d = c->next; d != NULL; d = d->next) {
                if (c->string && d->string && strcmp(c->string, d->string) == 0) {
                    child_path(sub, path, c->string);
                    rfi_fail(err, sub, "duplicate key \"%s\" in one object (a JSON object's keys must be unique)",
                             c->string);
                    return false;
                }
            }
            child_path(sub, path, c->string ? c->string : "?");
        } else {
            index_path(sub, path, i);
        }
        if (!check_duplicates(c, sub, err)) return false;
    }
    return true;
}

/* "$comment" is free text, but it must be text: a string, wherever it appears. */
static bool comment_ok(const cJSON *c, const char *path, rf_error *err) {
    if (cJSON_IsString(c)) return true;
    char sub[PATH_CAP];
    child_path(sub, path, "$comment");
    rfi_fail(err, sub, "must be a string, got %s", type_name(c));
    return false;
}

/* Case-insensitive edit distance (Levenshtein) of two short words; a large number when either is over 64. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    enum { MAX = 64 };
    if (la > MAX || lb > MAX) return SIZE_MAX;
    size_t row[MAX + 1], prev;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t keep = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = prev + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = keep;
        }
    }
    return row[lb];
}

/*
 * The entry of a ", "-separated list closest to word, when it is close enough to be a likely typo (at most a
 * third of the word's length, and at least one edit, away); writes it into out ("" when none).
 */
static void did_you_mean(const char *word, const char *list, char *out, size_t cap) {
    size_t lw = strlen(word), best = SIZE_MAX;
    out[0] = '\0';
    for (const char *p = list; *p;) {
        const char *end = strstr(p, ", ");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t d = edit_distance(word, lw, p, len);
        if (d < best && len < cap) {
            best = d;
            memcpy(out, p, len);
            out[len] = '\0';
        }
        p += len + (end ? 2 : 0);
    }
    size_t limit = lw / 3 > 1 ? lw / 3 : 1;
    if (best > limit) out[0] = '\0';
}

static bool unknown_key(const cJSON *key_item, const char *path, const char *allowed, rf_error *err) {
    char sub[PATH_CAP], near[64];
    child_path(sub, path, key_item->string);
    did_you_mean(key_item->string, allowed, near, sizeof near);
    if (near[0])
        rfi_fail(err, sub, "unknown key \"%s\" (did you mean \"%s\"? allowed here: %s)", key_item->string, near,
                 allowed);
    else
        rfi_fail(err, sub, "unknown key \"%s\" (allowed here: %s)", key_item->string, allowed);
    return false;
}

/* A member no field of its object took: "$comment" (free text, checked to be a string) or an unknown key
 * (refused, naming the keys allowed there). */
static bool other_member(const cJSON *c, const char *path, const char *allowed, rf_error *err) {
    return strcmp(c->string, "$comment") == 0 ? comment_ok(c, path, err) : unknown_key(c, path, allowed, err);
}

/* obj must be a JSON object; shape says what it holds ("{honor, maxMs, headers}", "of gate thresholds"). */
static bool is_object(const cJSON *obj, const char *path, const char *shape, rf_error *err) {
    if (cJSON_IsObject(obj)) return true;
    rfi_fail(err, path, "must be an object %s, got %s", shape, type_name(obj));
    return false;
}

static bool parse_class_list(const cJSON *item, const char *path, rfi_class_set *set, rf_error *err) {
    char sub[PATH_CAP];
    if (!cJSON_IsArray(item)) {
        rfi_fail(err, path, "must be an array of failure class tokens, got %s", type_name(item));
        return false;
    }
    int i = 0;
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        index_path(sub, path, i);
        const char *s;
        size_t len;
        if (!get_string(c, sub, &s, &len, err)) return false;
        rfi_class_set one = {0};
        if (!rfi_class_add_token(&one, s, len)) {
            char near[RF_CLASS_NAME_MAX], hint[64] = "";
            did_you_mean(s,
                         "HTTP_4XX, HTTP_5XX, TIMEOUT, CONNECT_RESET, CONNECT_REFUSED, DNS_FAILURE, TLS_FAILURE, "
                         "UNKNOWN, PROXY_REFUSED, TOO_MANY_REDIRECTS, GATEWAY_TIMEOUT, HANDLER_5XX",
                         near, sizeof near);
            if (near[0]) snprintf(hint, sizeof hint, "did you mean \"%s\"? ", near);
            rfi_fail(err, sub,
                     "unknown failure class \"%.40s\" (%sHTTP_<100..599>, HTTP_4XX, HTTP_5XX, TIMEOUT, CONNECT_RESET, "
                     "CONNECT_REFUSED, DNS_FAILURE, TLS_FAILURE, UNKNOWN, PROXY_REFUSED, TOO_MANY_REDIRECTS, or the "
                     "aliases GATEWAY_TIMEOUT, HANDLER_5XX)",
                     s, hint);
            return false;
        }
        char dup[RF_CLASS_NAME_MAX];
        if (rfi_class_overlap(set, &one, dup)) {
            rfi_fail(err, sub, "class \"%s\" is listed twice (as %s)", s, dup);
            return false;
        }
        rfi_class_add_token(set, s, len);
    }
    const char *tokens[RFI_MAX_CLASSES + 1];
    if (rfi_class_tokens(set, tokens, RFI_MAX_CLASSES + 1) > RFI_MAX_CLASSES) {
        rfi_fail(err, path, "more than %d failure classes", RFI_MAX_CLASSES);
        return false;
    }
    return true;
}

static bool parse_methods(const cJSON *item, const char *path, rfi_route *r, rf_error *err) {
    char sub[PATH_CAP];
    if (!cJSON_IsArray(item)) {
        rfi_fail(err, path, "must be an array of HTTP methods, got %s", type_name(item));
        return false;
    }
    r->n_methods = 0;
    int i = 0;
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        index_path(sub, path, i);
        const char *s;
        size_t len;
        if (!get_string(c, sub, &s, &len, err)) return false;
        if (!rfi_method_valid(s, len)) {
            rfi_fail(err, sub, "\"%.40s\" is not a method: 1..%d uppercase letters (RFC 9110 §9)", s, RFI_MAX_METHOD);
            return false;
        }
        for (size_t k = 0; k < r->n_methods; k++) {
            if (strcmp(r->methods[k], s) == 0) {
                rfi_fail(err, sub, "method \"%s\" is listed twice", s);
                return false;
            }
        }
        if (r->n_methods == RFI_MAX_METHODS) {
            rfi_fail(err, path, "more than %d methods", RFI_MAX_METHODS);
            return false;
        }
        memcpy(r->methods[r->n_methods++], s, len + 1);
    }
    return true;
}

static bool parse_backoff(const cJSON *obj, const char *path, spec *sp, rf_error *err) {
    char sub[PATH_CAP];
    if (!is_object(obj, path, "{baseMs, multiplier, maxMs, jitter}", err)) return false;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        child_path(sub, path, c->string);
        const char *k = c->string;
        if (strcmp(k, "baseMs") == 0) {
            if (!get_int(c, sub, 0, 600000, &sp->r.backoff_base_ms, err)) return false;
            sp->has |= F_BASE;
        } else if (strcmp(k, "multiplier") == 0) {
            if (!get_milli(c, sub, 1.0, 10.0, &sp->r.backoff_multiplier_milli, err)) return false;
            sp->has |= F_MULT;
        } else if (strcmp(k, "maxMs") == 0) {
            if (!get_int(c, sub, 0, 600000, &sp->r.backoff_max_ms, err)) return false;
            sp->has |= F_BACKOFF_MAX;
        } else if (strcmp(k, "jitter") == 0) {
            const char *s;
            size_t len;
            if (!get_string(c, sub, &s, &len, err)) return false;
            int found = -1;
            for (int j = 0; j < RF_JITTER_COUNT; j++)
                if (strcmp(rf_jitter_name((rf_jitter)j), s) == 0) found = j;
            if (found < 0) {
                rfi_fail(err, sub, "must be one of none, full, equal, decorrelated, got \"%.40s\"", s);
                return false;
            }
            sp->r.jitter = (rf_jitter)found;
            sp->has |= F_JITTER;
        } else if (!other_member(c, path, "baseMs, multiplier, maxMs, jitter, $comment", err)) {
            return false;
        }
    }
    return true;
}

static bool parse_retry_after(const cJSON *obj, const char *path, spec *sp, rf_error *err) {
    char sub[PATH_CAP];
    if (!is_object(obj, path, "{honor, maxMs, headers}", err)) return false;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        child_path(sub, path, c->string);
        if (strcmp(c->string, "honor") == 0) {
            if (!get_bool(c, sub, &sp->r.retry_after_honor, err)) return false;
            sp->has |= F_HONOR;
        } else if (strcmp(c->string, "maxMs") == 0) {
            if (!get_int(c, sub, 0, 3600000, &sp->r.retry_after_max_ms, err)) return false;
            sp->has |= F_RA_MAX;
        } else if (strcmp(c->string, "headers") == 0) {
            if (!rfi_wait_headers_parse(c, sub, &sp->r, err)) return false;
            sp->has |= F_WAIT_HEADERS;
        } else if (!other_member(c, path, "honor, maxMs, headers, $comment", err)) {
            return false;
        }
    }
    return true;
}

typedef struct budget_cfg {
    bool present;
    int64_t max_tokens_milli, ratio_milli;
    char shared_name[RF_SHARED_BUDGET_NAME_MAX + 1]; /* "" = the bucket is the process's own */
} budget_cfg;

/* retryBudget.shared = {name}: the bucket a fleet shares in a store (docs/lock.md). The name becomes part of a
 * store key, so it is 1..64 of [A-Za-z0-9._-]. */
static bool parse_shared_budget(const cJSON *obj, const char *path, budget_cfg *b, rf_error *err) {
    char sub[PATH_CAP];
    if (!is_object(obj, path, "{name}", err)) return false;
    bool has_name = false;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        child_path(sub, path, c->string);
        if (strcmp(c->string, "name") == 0) {
            const char *s;
            size_t len;
            if (!get_string(c, sub, &s, &len, err)) return false;
            if (len == 0 || len > RF_SHARED_BUDGET_NAME_MAX ||
                strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789._-") != len) {
                rfi_fail(err, sub,
                         "must be 1..%d characters of A-Z a-z 0-9 . _ - (it names a shared bucket), got \"%s\"",
                         RF_SHARED_BUDGET_NAME_MAX, s);
                return false;
            }
            memcpy(b->shared_name, s, len + 1);
            has_name = true;
        } else if (!other_member(c, path, "name, $comment", err)) {
            return false;
        }
    }
    if (!has_name) {
        child_path(sub, path, "name");
        rfi_fail(err, sub, "is required in retryBudget.shared (no default)");
        return false;
    }
    return true;
}

/* gRPC A6 retryThrottling: maxTokens in (0, 1000], tokenRatio > 0 with at most 3 decimal places. */
static bool parse_retry_budget(const cJSON *obj, const char *path, budget_cfg *b, rf_error *err) {
    char sub[PATH_CAP];
    if (!is_object(obj, path, "{maxTokens, tokenRatio}", err)) return false;
    bool has_max = false, has_ratio = false;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        child_path(sub, path, c->string);
        if (strcmp(c->string, "maxTokens") == 0) {
            int64_t v;
            if (!get_int(c, sub, 1, 1000, &v, err)) return false;
            b->max_tokens_milli = v * 1000;
            has_max = true;
        } else if (strcmp(c->string, "tokenRatio") == 0) {
            if (!get_milli(c, sub, 0.001, 1000.0, &b->ratio_milli, err)) return false;
            has_ratio = true;
        } else if (strcmp(c->string, "shared") == 0) {
            if (!parse_shared_budget(c, sub, b, err)) return false;
        } else if (!other_member(c, path, "maxTokens, tokenRatio, shared, $comment", err)) {
            return false;
        }
    }
    if (!has_max || !has_ratio) {
        child_path(sub, path, has_max ? "tokenRatio" : "maxTokens");
        rfi_fail(err, sub, "is required in retryBudget (no default)");
        return false;
    }
    b->present = true;
    return true;
}

/* The gate's numeric thresholds (docs/lock.md): a number with at most 3 decimal places (stored × 1000) or an
 * integer, in [lo, hi], stored at `value` with its presence flag at `has` in rf_gate_view. */
static const struct gate_threshold {
    const char *key;
    bool integer;
    double lo, hi;
    size_t value, has;
} gate_thresholds[] = {
#define GATE_MILLI(key, lo, hi, field) \
    { key, false, lo, hi, offsetof(rf_gate_view, field##_milli), offsetof(rf_gate_view, has_##field) }
    GATE_MILLI("maxRetriedSuccess", 0.0, 1.0, max_retried_success),
    GATE_MILLI("maxAttemptsPerSuccess", 1.0, 10.0, max_attempts_per_success),
    GATE_MILLI("maxTerminalRate", 0.0, 1.0, max_terminal_rate),
    GATE_MILLI("maxRetryRatio", 0.0, 10.0, max_retry_ratio),
    GATE_MILLI("minSuccessRate", 0.0, 1.0, min_success_rate),
#undef GATE_MILLI
    {"minSuccesses", true, 0, 1000000000, offsetof(rf_gate_view, min_successes),
     offsetof(rf_gate_view, has_min_successes)},
};

/* The gate object: thresholds over ledger stats (docs/lock.md). Every field optional; unknown keys refused. */
static bool parse_gate(const cJSON *obj, const char *path, rfi_gate *g, rf_error *err) {
    char sub[PATH_CAP];
    if (!is_object(obj, path, "of gate thresholds", err)) return false;
    rf_gate_view *v = &g->view;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        child_path(sub, path, c->string);
        const char *k = c->string;
        const struct gate_threshold *t = NULL;
        for (size_t i = 0; i < sizeof gate_thresholds / sizeof gate_thresholds[0] && t == NULL; i++)
            if (strcmp(k, gate_thresholds[i].key) == 0) t = &gate_thresholds[i];
        if (t != NULL) {
            int64_t *value = (int64_t *)(void *)((char *)v + t->value);
            if (!(t->integer ? get_int(c, sub, (int64_t)t->lo, (int64_t)t->hi, value, err)
                             : get_milli(c, sub, t->lo, t->hi, value, err)))
                return false;
            *(bool *)(void *)((char *)v + t->has) = true;
        } else if (strcmp(k, "forbidReasons") == 0) {
            if (!cJSON_IsArray(c)) {
                rfi_fail(err, sub, "must be an array of reasons, got %s", type_name(c));
                return false;
            }
            int i = 0;
            char item[PATH_CAP];
            for (const cJSON *r = c->child; r != NULL; r = r->next, i++) {
                index_path(item, sub, i);
                const char *name;
                size_t len;
                if (!get_string(r, item, &name, &len, err)) return false;
                int found = -1;
                for (int j = 0; j < RF_REASON_COUNT; j++)
                    if (strcmp(rf_reason_name((rf_reason)j), name) == 0) found = j;
                if (found < 0) {
                    rfi_fail(err, item, "unknown reason \"%.40s\" (see docs/reasons.md)", name);
                    return false;
                }
                for (size_t k2 = 0; k2 < v->n_forbid_reasons; k2++) {
                    if (strcmp(g->reason_ptrs[k2], name) == 0) {
                        rfi_fail(err, item, "reason \"%s\" is listed twice", name);
                        return false;
                    }
                }
                g->reason_ptrs[v->n_forbid_reasons++] = rf_reason_name((rf_reason)found);
            }
        } else if (!other_member(c, path,
                                 "maxRetriedSuccess, maxAttemptsPerSuccess, maxTerminalRate, maxRetryRatio, "
                                 "minSuccessRate, minSuccesses, forbidReasons, $comment",
                                 err)) {
            return false;
        }
    }
    g->present = true;
    return true;
}

#define ROUTE_KEYS                                                                                       \
    "endpoint, maxAttempts, perAttemptTimeoutMs, totalBudgetMs, minAttemptMs, retryable, notRetryable, " \
    "idempotencyRequired, backoff, retryAfter, classLimits, $comment"

/*
 * One route field of obj's member c into sp. Returns 1 when c was a route field, 0 when it is not a route
 * field (the caller decides whether it is allowed there), -1 on an error.
 */
static int parse_route_field(const cJSON *c, const char *path, spec *sp, rf_error *err) {
    char sub[PATH_CAP];
    child_path(sub, path, c->string);
    const char *k = c->string;
    int64_t v;
    if (strcmp(k, "endpoint") == 0) {
        const char *s;
        size_t len;
        char msg[200];
        if (!get_string(c, sub, &s, &len, err)) return -1;
        if (!rfi_endpoint_parse(s, len, &sp->r.endpoint, msg, sizeof msg)) {
            rfi_fail(err, sub, "endpoint \"%.80s\": %s", s, msg);
            return -1;
        }
        sp->has |= F_ENDPOINT;
    } else if (strcmp(k, "maxAttempts") == 0) {
        if (!get_int(c, sub, 1, 10, &v, err)) return -1;
        sp->r.max_attempts = (int)v;
        sp->has |= F_MAX_ATTEMPTS;
    } else if (strcmp(k, "perAttemptTimeoutMs") == 0) {
        if (!get_int(c, sub, 1, 600000, &sp->r.per_attempt_timeout_ms, err)) return -1;
        sp->has |= F_PER_ATTEMPT;
    } else if (strcmp(k, "totalBudgetMs") == 0) {
        if (!get_int(c, sub, 1, 3600000, &sp->r.total_budget_ms, err)) return -1;
        sp->has |= F_TOTAL;
    } else if (strcmp(k, "minAttemptMs") == 0) {
        if (!get_int(c, sub, 0, 600000, &sp->r.min_attempt_ms, err)) return -1;
        sp->has |= F_MIN_ATTEMPT;
    } else if (strcmp(k, "retryable") == 0) {
        memset(&sp->r.retryable, 0, sizeof sp->r.retryable);
        if (!parse_class_list(c, sub, &sp->r.retryable, err)) return -1;
        if (sp->r.retryable.named & (1u << RF_CLASS_TOO_MANY_REDIRECTS)) {
            rfi_fail(err, sub, "TOO_MANY_REDIRECTS cannot be retryable: the same redirect chain would loop again");
            return -1;
        }
        sp->has |= F_RETRYABLE;
    } else if (strcmp(k, "notRetryable") == 0) {
        memset(&sp->r.not_retryable, 0, sizeof sp->r.not_retryable);
        if (!parse_class_list(c, sub, &sp->r.not_retryable, err)) return -1;
        sp->has |= F_NOT_RETRYABLE;
    } else if (strcmp(k, "idempotencyRequired") == 0) {
        if (!parse_methods(c, sub, &sp->r, err)) return -1;
        sp->has |= F_METHODS;
    } else if (strcmp(k, "backoff") == 0) {
        if (!parse_backoff(c, sub, sp, err)) return -1;
    } else if (strcmp(k, "retryAfter") == 0) {
        if (!parse_retry_after(c, sub, sp, err)) return -1;
    } else if (strcmp(k, "classLimits") == 0) {
        if (!rfi_class_limits_parse(c, sub, &sp->r, err)) return -1;
        sp->has |= F_CLASS_LIMITS;
    } else if (strcmp(k, "$comment") == 0) {
        if (!cJSON_IsString(c)) {
            rfi_fail(err, sub, "must be a string, got %s", type_name(c));
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

/* Copies each field set in from but not in to. */
static void inherit(spec *to, const spec *from) {
    const rfi_route *f = &from->r;
    rfi_route *t = &to->r;
    unsigned take = from->has & ~to->has;
    if (take & F_MAX_ATTEMPTS) t->max_attempts = f->max_attempts;
    if (take & F_PER_ATTEMPT) t->per_attempt_timeout_ms = f->per_attempt_timeout_ms;
    if (take & F_TOTAL) t->total_budget_ms = f->total_budget_ms;
    if (take & F_MIN_ATTEMPT) t->min_attempt_ms = f->min_attempt_ms;
    if (take & F_RETRYABLE) t->retryable = f->retryable;
    if (take & F_NOT_RETRYABLE) t->not_retryable = f->not_retryable;
    if (take & F_METHODS) {
        t->n_methods = f->n_methods;
        memcpy(t->methods, f->methods, sizeof t->methods);
    }
    if (take & F_BASE) t->backoff_base_ms = f->backoff_base_ms;
    if (take & F_MULT) t->backoff_multiplier_milli = f->backoff_multiplier_milli;
    if (take & F_BACKOFF_MAX) t->backoff_max_ms = f->backoff_max_ms;
    if (take & F_JITTER) t->jitter = f->jitter;
    if (take & F_HONOR) t->retry_after_honor = f->retry_after_honor;
    if (take & F_RA_MAX) t->retry_after_max_ms = f->retry_after_max_ms;
    if (take & F_WAIT_HEADERS) {
        t->n_wait_headers = f->n_wait_headers;
        memcpy(t->wait_headers, f->wait_headers, sizeof t->wait_headers);
    }
    if (take & F_CLASS_LIMITS) {
        t->has_class_limits = f->has_class_limits;
        memcpy(t->class_limit_status, f->class_limit_status, sizeof t->class_limit_status);
        t->class_limit_4xx = f->class_limit_4xx;
        t->class_limit_5xx = f->class_limit_5xx;
        memcpy(t->class_limit_named, f->class_limit_named, sizeof t->class_limit_named);
    }
    to->has |= take;
}

/* Applies built-in defaults, refuses missing required fields, checks cross-field rules. */
static bool finish_route(spec *sp, rf_error *err) {
    static const struct {
        unsigned bit;
        const char *name;
    } required[] = {{F_ENDPOINT, "endpoint"},
                    {F_MAX_ATTEMPTS, "maxAttempts"},
                    {F_PER_ATTEMPT, "perAttemptTimeoutMs"},
                    {F_TOTAL, "totalBudgetMs"},
                    {F_RETRYABLE, "retryable"}};
    char sub[PATH_CAP];
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (!(sp->has & required[i].bit)) {
            child_path(sub, sp->where, required[i].name);
            rfi_fail(err, sub, "is required and has no default (an absent number never becomes a retry count)");
            return false;
        }
    }
    rfi_route *r = &sp->r;
    if (r->total_budget_ms < r->per_attempt_timeout_ms) {
        child_path(sub, sp->where, "totalBudgetMs");
        rfi_fail(err, sub, "must be at least perAttemptTimeoutMs (%lld), got %lld",
                 (long long)r->per_attempt_timeout_ms, (long long)r->total_budget_ms);
        return false;
    }
    if (!(sp->has & F_MIN_ATTEMPT))
        r->min_attempt_ms =
            r->per_attempt_timeout_ms < DEFAULT_MIN_ATTEMPT_MS ? r->per_attempt_timeout_ms : DEFAULT_MIN_ATTEMPT_MS;
    if (r->min_attempt_ms > r->per_attempt_timeout_ms) {
        child_path(sub, sp->where, "minAttemptMs");
        rfi_fail(err, sub, "must be at most perAttemptTimeoutMs (%lld), got %lld", (long long)r->per_attempt_timeout_ms,
                 (long long)r->min_attempt_ms);
        return false;
    }
    if (!(sp->has & F_METHODS)) {
        r->n_methods = 3;
        for (size_t i = 0; i < 3; i++) snprintf(r->methods[i], sizeof r->methods[i], "%s", default_methods[i]);
    }
    if (!(sp->has & F_BASE)) r->backoff_base_ms = DEFAULT_BACKOFF_BASE_MS;
    if (!(sp->has & F_MULT)) r->backoff_multiplier_milli = DEFAULT_BACKOFF_MULT_MILLI;
    if (!(sp->has & F_BACKOFF_MAX)) r->backoff_max_ms = DEFAULT_BACKOFF_MAX_MS;
    if (!(sp->has & F_JITTER)) r->jitter = DEFAULT_JITTER;
    if (!(sp->has & F_HONOR)) r->retry_after_honor = true;
    if (!(sp->has & F_RA_MAX)) r->retry_after_max_ms = DEFAULT_RA_MAX_MS;
    if (!(sp->has & F_WAIT_HEADERS)) rfi_wait_headers_default(r);
    if (!rfi_class_limits_check(r, sp->where, err)) return false;
    if (r->backoff_base_ms > r->backoff_max_ms) {
        child_path(sub, sp->where, "backoff.baseMs");
        rfi_fail(err, sub, "must be at most backoff.maxMs (%lld), got %lld", (long long)r->backoff_max_ms,
                 (long long)r->backoff_base_ms);
        return false;
    }
    char both[RF_CLASS_NAME_MAX];
    if (rfi_class_overlap(&r->retryable, &r->not_retryable, both)) {
        child_path(sub, sp->where, "notRetryable");
        rfi_fail(err, sub, "class %s is in both retryable and notRetryable", both);
        return false;
    }
    return true;
}

/* transparentRetry: a boolean, true by default (docs/lock.md): retries of requests that never left skip the
 * idempotency-key requirement. */
static bool parse_transparent(const cJSON *c, bool *off, rf_error *err) {
    if (!cJSON_IsBool(c)) {
        rfi_fail(err, "$.transparentRetry", "must be true or false, got %s", type_name(c));
        return false;
    }
    *off = cJSON_IsFalse(c);
    return true;
}

/* The flat form: the whole document is one route (plus $comment and retryBudget). */
static bool load_flat(const cJSON *root, spec *sp, budget_cfg *budget, rfi_gate *gate, bool *transparent_off,
                      rf_error *err) {
    snprintf(sp->where, PATH_CAP, "$");
    char sub[PATH_CAP];
    for (const cJSON *c = root->child; c != NULL; c = c->next) {
        if ((strcmp(c->string, "retryBudget") == 0 || strcmp(c->string, "gate") == 0) && cJSON_IsNull(c))
            continue; /* null: none, as the canonical form writes it */
        if (strcmp(c->string, "retryBudget") == 0) {
            child_path(sub, "$", c->string);
            if (!parse_retry_budget(c, sub, budget, err)) return false;
            continue;
        }
        if (strcmp(c->string, "gate") == 0) {
            if (!parse_gate(c, "$.gate", gate, err)) return false;
            continue;
        }
        if (strcmp(c->string, "transparentRetry") == 0) {
            if (!parse_transparent(c, transparent_off, err)) return false;
            continue;
        }
        int r = parse_route_field(c, "$", sp, err);
        if (r < 0) return false;
        if (r == 0)
            return unknown_key(c, "$", ROUTE_KEYS ", retryBudget, gate, transparentRetry (or version/defaults/routes)",
                               err);
    }
    return finish_route(sp, err);
}

/* The routes read so far, by shape: a duplicate endpoint is found as each route is read, by one lookup (comparing
 * every pair costs seconds at RFI_MAX_ROUTES routes). Open addressing over indexes into the specs, at most half
 * full. */
typedef struct shape_set {
    int *slots; /* -1: empty */
    size_t mask;
} shape_set;

static bool shape_set_init(shape_set *set, size_t n) {
    size_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    set->slots = malloc(cap * sizeof *set->slots);
    set->mask = cap - 1;
    if (set->slots == NULL) return false;
    for (size_t i = 0; i < cap; i++) set->slots[i] = -1;
    return true;
}

/* Adds specs[i]; returns the earlier route of the same shape (then i is not added), or -1. */
static int shape_set_add(shape_set *set, const spec *specs, int i) {
    const rfi_endpoint *e = &specs[i].r.endpoint;
    for (size_t at = (size_t)rfi_endpoint_shape_hash(e) & set->mask;; at = (at + 1) & set->mask) {
        const int k = set->slots[at];
        if (k < 0) {
            set->slots[at] = i;
            return -1;
        }
        if (rfi_endpoint_shape_compare(&specs[k].r.endpoint, e) == 0) return k;
    }
}

static bool load_multi(const cJSON *root, spec **specs_out, size_t *n_out, budget_cfg *budget, rfi_gate *gate,
                       bool *transparent_off, rf_status *st, rf_error *err) {
    char sub[PATH_CAP];
    const cJSON *version = NULL, *defaults = NULL, *routes = NULL;
    for (const cJSON *c = root->child; c != NULL; c = c->next) {
        if (strcmp(c->string, "version") == 0)
            version = c;
        else if (strcmp(c->string, "defaults") == 0)
            defaults = c;
        else if (strcmp(c->string, "routes") == 0)
            routes = c;
        else if ((strcmp(c->string, "retryBudget") == 0 || strcmp(c->string, "gate") == 0) && cJSON_IsNull(c)) {
            /* null: none, as the canonical form writes it */
        } else if (strcmp(c->string, "retryBudget") == 0) {
            if (!parse_retry_budget(c, "$.retryBudget", budget, err)) return false;
        } else if (strcmp(c->string, "gate") == 0) {
            if (!parse_gate(c, "$.gate", gate, err)) return false;
        } else if (strcmp(c->string, "transparentRetry") == 0) {
            if (!parse_transparent(c, transparent_off, err)) return false;
        } else if (!other_member(c, "$", "version, defaults, routes, retryBudget, gate, transparentRetry, $comment",
                                 err)) {
            return false;
        }
    }
    int64_t v;
    if (version == NULL) return rfi_fail(err, "$.version", "is required in a multi-route lock (use 1)"), false;
    if (!get_int(version, "$.version", 1, 1, &v, err)) return false;
    spec defaults_spec;
    memset(&defaults_spec, 0, sizeof defaults_spec);
    snprintf(defaults_spec.where, PATH_CAP, "$.defaults");
    if (defaults != NULL) {
        if (!is_object(defaults, "$.defaults", "of route fields", err)) return false;
        for (const cJSON *c = defaults->child; c != NULL; c = c->next) {
            if (strcmp(c->string, "endpoint") == 0) {
                child_path(sub, "$.defaults", "endpoint");
                return rfi_fail(err, sub, "endpoint cannot have a default; each route names its own"), false;
            }
            int r = parse_route_field(c, "$.defaults", &defaults_spec, err);
            if (r < 0) return false;
            if (r == 0) return unknown_key(c, "$.defaults", ROUTE_KEYS, err);
        }
    }
    if (routes == NULL) return rfi_fail(err, "$.routes", "is required: an array of at least one route"), false;
    int n = cJSON_GetArraySize(routes);
    if (!cJSON_IsArray(routes) || n < 1)
        return rfi_fail(err, "$.routes", "must be a non-empty array of route objects"), false;
    if (n > RFI_MAX_ROUTES) return rfi_fail(err, "$.routes", "more than %d routes", RFI_MAX_ROUTES), false;
    spec *specs = calloc((size_t)n, sizeof *specs);
    shape_set shapes = {NULL, 0};
    if (specs == NULL || !shape_set_init(&shapes, (size_t)n)) {
        free(specs);
        free(shapes.slots);
        *st = RF_ENOMEM;
        return rfi_fail(err, "$.routes", "out of memory"), false;
    }
    int i = 0;
    for (const cJSON *rt = routes->child; rt != NULL; rt = rt->next, i++) {
        spec *sp = &specs[i];
        index_path(sp->where, "$.routes", i);
        if (!cJSON_IsObject(rt)) {
            rfi_fail(err, sp->where, "must be a route object, got %s", type_name(rt));
            goto fail;
        }
        for (const cJSON *c = rt->child; c != NULL; c = c->next) {
            if (strcmp(c->string, "retryBudget") == 0) {
                child_path(sub, sp->where, c->string);
                rfi_fail(err, sub, "retryBudget is client-wide (gRPC retryThrottling): set it at the top level");
                goto fail;
            }
            int r = parse_route_field(c, sp->where, sp, err);
            if (r < 0) goto fail;
            if (r == 0) {
                unknown_key(c, sp->where, ROUTE_KEYS, err);
                goto fail;
            }
        }
        inherit(sp, &defaults_spec);
        if (!finish_route(sp, err)) goto fail;
        int k = shape_set_add(&shapes, specs, i);
        if (k >= 0) {
            child_path(sub, sp->where, "endpoint");
            rfi_fail(err, sub, "endpoint \"%s\" duplicates $.routes[%d] (\"%s\")", sp->r.endpoint.text, k,
                     specs[k].r.endpoint.text);
            goto fail;
        }
    }
    free(shapes.slots);
    *specs_out = specs;
    *n_out = (size_t)n;
    return true;
fail:
    free(shapes.slots);
    free(specs);
    return false;
}

/*
 * NUL inside a lock string. cJSON returns strings NUL-terminated, so a key "maxAttempts\u0000 x" (or one with a
 * raw NUL byte) would read as "maxAttempts". Before parsing, each NUL inside a string is replaced by a marker
 * of the same length that the text does not otherwise contain: a raw NUL byte by the byte 0xFF (never part of
 * UTF-8, RFC 3629), an escaped \u0000 by the escape of an unused noncharacter U+FDD0..U+FDEF (Unicode §23.7).
 * After parsing, any key or string holding a marker is refused with its JSON path. A raw NUL outside strings
 * (cJSON would skip it as whitespace) is refused at once. Offsets stay the same, so error positions hold.
 */
typedef struct nul_mask {
    char *copy;         /* the masked text, or NULL when the text holds no NUL */
    char raw_marker;    /* the byte that stands for a raw NUL */
    char esc_utf8[4];   /* the UTF-8 (NUL-terminated) of the noncharacter standing for \u0000 */
    size_t raw_outside; /* offset + 1 of a raw NUL outside strings, 0 if none */
    bool unmaskable;    /* the text holds every candidate marker: refuse rather than guess */
} nul_mask;

static bool has_escape_of(const char *text, size_t len, unsigned cp) {
    char hex[5];
    snprintf(hex, sizeof hex, "%04x", cp);
    for (size_t i = 0; i + 6 <= len; i++)
        if (text[i] == '\\' && text[i + 1] == 'u' && strncasecmp(text + i + 2, hex, 4) == 0) return true;
    return false;
}

static void utf8_of(unsigned cp, char out[4]) { /* cp in U+0800..U+FFFF */
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    out[3] = '\0';
}

static bool contains(const char *text, size_t len, const char *needle, size_t n) {
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(text + i, needle, n) == 0) return true;
    return false;
}

/* Fills m for text[0..len); m->copy is malloc'd when any NUL sits inside a string. False: out of memory. */
static bool mask_nuls(const char *text, size_t len, nul_mask *m) {
    memset(m, 0, sizeof *m);
    bool in_string = false, any = false, any_raw = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (!in_string) {
            if (c == '"') in_string = true;
            if (c == '\0' && m->raw_outside == 0) m->raw_outside = i + 1;
        } else if (c == '"') {
            in_string = false;
        } else if (c == '\0') {
            any = any_raw = true;
        } else if (c == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 6 <= len && memcmp(text + i + 2, "0000", 4) == 0) any = true;
            i++; /* the escaped character: `\"` does not end the string, `\\` is no escape */
        }
    }
    if (!any) return true;
    m->raw_marker = (char)0xFF;
    if (any_raw && memchr(text, 0xFF, len) != NULL) m->unmaskable = true;
    unsigned cp = 0xFDD0;
    for (; cp <= 0xFDEF; cp++) {
        utf8_of(cp, m->esc_utf8);
        if (!contains(text, len, m->esc_utf8, 3) && !has_escape_of(text, len, cp)) break;
    }
    if (cp > 0xFDEF) m->unmaskable = true;
    if (m->unmaskable) return true;
    m->copy = malloc(len);
    if (m->copy == NULL) return false;
    memcpy(m->copy, text, len);
    char esc[7];
    snprintf(esc, sizeof esc, "\\u%04X", cp);
    in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = m->copy[i];
        if (!in_string) {
            if (c == '"') in_string = true;
        } else if (c == '"') {
            in_string = false;
        } else if (c == '\0') {
            m->copy[i] = m->raw_marker;
        } else if (c == '\\' && i + 1 < len) {
            if (m->copy[i + 1] == 'u' && i + 6 <= len && memcmp(m->copy + i + 2, "0000", 4) == 0) {
                memcpy(m->copy + i, esc, 6);
                i += 5;
            } else {
                i++;
            }
        }
    }
    return true;
}

/* Whether s holds a marker of m (a NUL of the original text). */
static bool has_marker(const nul_mask *m, const char *s) {
    return s != NULL && (strchr(s, m->raw_marker) != NULL || strstr(s, m->esc_utf8) != NULL);
}

/* s with each marker written as \u0000, cut to fit cap. */
static void show_nuls(const nul_mask *m, const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = s; *p && o + 7 < cap; p++) {
        if (*p == m->raw_marker || strncmp(p, m->esc_utf8, 3) == 0) {
            memcpy(out + o, "\\u0000", 6);
            o += 6;
            if (*p != m->raw_marker) p += 2;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

/* The first key or string (document order) holding a NUL: refused with its JSON path. */
static bool check_nuls(const nul_mask *m, const cJSON *node, const char *path, rf_error *err) {
    char sub[PATH_CAP], shown[PATH_CAP];
    if (cJSON_IsString(node) && has_marker(m, node->valuestring)) {
        rfi_fail(err, path, "string contains a NUL character (\\u0000); lock strings may not hold NUL");
        return false;
    }
    int i = 0;
    for (const cJSON *c = node->child; c != NULL; c = c->next, i++) {
        if (cJSON_IsObject(node)) {
            show_nuls(m, c->string ? c->string : "?", shown, sizeof shown);
            child_path(sub, path, shown);
            if (has_marker(m, c->string)) {
                rfi_fail(err, sub, "key contains a NUL character (\\u0000); lock strings may not hold NUL");
                return false;
            }
        } else {
            index_path(sub, path, i);
        }
        if (!check_nuls(m, c, sub, err)) return false;
    }
    return true;
}

static void line_col(const char *text, size_t upto, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < upto; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Routes sort by endpoint text; pointers are sorted, not the routes (kilobytes each). */
static int compare_routes(const void *a, const void *b) {
    return strcmp((*(const rfi_route *const *)a)->endpoint.text, (*(const rfi_route *const *)b)->endpoint.text);
}

rf_status rf_policy_load_buffer(const char *text, size_t len, rf_policy **out, rf_error *err) {
    if (text == NULL || out == NULL) return rfi_fail(err, "", "text and out must not be NULL");
    if (len == 0) return rfi_fail(err, "$", "empty lock: expected a JSON object");
    if (len > RF_LOCK_MAX_BYTES)
        return rfi_fail(err, "$", "lock is %zu bytes, over the %d byte limit", len, RF_LOCK_MAX_BYTES);
    size_t skip = (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ? 3 : 0; /* UTF-8 BOM: skipped */
    nul_mask mask;
    if (!mask_nuls(text, len, &mask)) return rfi_fail(err, "$", "out of memory"), RF_ENOMEM;
    if (mask.raw_outside != 0) {
        size_t at = mask.raw_outside - 1;
        rfi_fail(err, "$", "a raw NUL byte at byte %zu: JSON text holds no NUL (RFC 8259 §2)", at);
        if (err != NULL) line_col(text, at, &err->line, &err->column);
        free(mask.copy);
        return RF_EINVAL;
    }
    if (mask.unmaskable) /* no free marker to find the string by: refuse the whole lock */
        return rfi_fail(err, "$", "a string contains a NUL character (\\u0000); lock strings may not hold NUL");
    const char *src = mask.copy ? mask.copy : text; /* same length and offsets as text */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(src + skip, len - skip, &end, 0);
    if (root == NULL) {
        size_t at = end ? (size_t)(end - src) : skip;
        if (at > len) at = len;
        free(mask.copy);
        rfi_fail(err, "$", "malformed JSON near byte %zu", at);
        if (err != NULL) line_col(text, at, &err->line, &err->column);
        return RF_EINVAL;
    }
    size_t used = (size_t)(end - src);
    while (used < len && (text[used] == ' ' || text[used] == '\t' || text[used] == '\n' || text[used] == '\r')) used++;
    rf_status st = RF_EINVAL;
    spec *specs = NULL;
    size_t n = 0;
    budget_cfg budget = {0};
    rfi_gate gate;
    memset(&gate, 0, sizeof gate);
    bool transparent_off = false;
    rf_policy *p = NULL;
    const rfi_route **order = NULL;
    if (used < len) {
        rfi_fail(err, "$", "trailing data after the JSON value at byte %zu", used);
        if (err != NULL) line_col(text, used, &err->line, &err->column);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rfi_fail(err, "$", "a lock must be a JSON object, got %s", type_name(root));
        goto done;
    }
    if (mask.copy != NULL && !check_nuls(&mask, root, "$", err)) goto done;
    if (!check_duplicates(root, "$", err)) goto done;
    if (cJSON_GetObjectItemCaseSensitive(root, "routes") || cJSON_GetObjectItemCaseSensitive(root, "version")) {
        if (!load_multi(root, &specs, &n, &budget, &gate, &transparent_off, &st, err)) goto done;
    } else {
        specs = calloc(1, sizeof *specs);
        if (specs == NULL) {
            st = RF_ENOMEM;
            rfi_fail(err, "$", "out of memory");
            goto done;
        }
        n = 1;
        if (!load_flat(root, specs, &budget, &gate, &transparent_off, err)) goto done;
    }
    p = calloc(1, sizeof *p);
    if (p != NULL) p->routes = malloc(n * sizeof *p->routes);
    order = malloc(n * sizeof *order);
    if (p == NULL || p->routes == NULL || order == NULL) {
        st = RF_ENOMEM;
        rfi_fail(err, "$", "out of memory");
        goto done;
    }
    p->n_routes = n;
    for (size_t i = 0; i < n; i++) order[i] = &specs[i].r;
    qsort(order, n, sizeof *order, compare_routes);
    for (size_t i = 0; i < n; i++) p->routes[i] = *order[i];
    p->has_retry_budget = budget.present;
    p->budget_max_tokens_milli = budget.max_tokens_milli;
    p->budget_token_ratio_milli = budget.ratio_milli;
    memcpy(p->budget_shared_name, budget.shared_name, sizeof p->budget_shared_name);
    p->gate = gate;
    p->transparent_retry_off = transparent_off;
    p->gate.view.forbid_reasons = p->gate.reason_ptrs;
    st = rfi_policy_finish(p, err);
    if (st == RF_OK) {
        *out = p;
        p = NULL;
    }
done:
    rf_policy_free(p);
    free(order);
    free(specs);
    cJSON_Delete(root);
    free(mask.copy);
    return st;
}

rf_status rf_policy_load_file(const char *path, rf_policy **out, rf_error *err) {
    if (path == NULL || out == NULL) return rfi_fail(err, "", "path and out must not be NULL");
    char *buf = NULL;
    size_t n = 0;
    rf_status st = rf_input_read(path, RF_LOCK_MAX_BYTES, "lock", &buf, &n, err);
    if (st != RF_OK) return st;
    st = rf_policy_load_buffer(buf, n, out, err);
    rf_input_free(buf);
    return st;
}
