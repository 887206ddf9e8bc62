/*
 * Reading one field of a lock by its schema row (lock_schema.c): its type, its range and its own rules, and for an
 * object its members. Every refusal names the JSON path, the rule and the offending value (docs/lock.md,
 * "Refusals"); the lists of allowed keys are the rows' keys.
 */
#include "lock_schema.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Integer in [lo, hi]: refuses non-numbers, non-finite values (1e400), fractions and out-of-range values. */
static bool get_int(const cJSON *item, const char *path, int64_t lo, int64_t hi, int64_t *out, rf_error *err) {
    if (!cJSON_IsNumber(item)) {
        rfi_fail(err, path, "must be an integer from %lld to %lld, got %s", (long long)lo, (long long)hi,
                 rfi_json_type_name(item));
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

/* A number with at most 3 decimal places in [lo, hi] (both × 1000), stored × 1000 (exact, so digests are stable). */
static bool get_milli(const cJSON *item, const char *path, int64_t lo_milli, int64_t hi_milli, int64_t *out,
                      rf_error *err) {
    const double lo = (double)lo_milli / 1000.0, hi = (double)hi_milli / 1000.0;
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
        rfi_fail(err, path, "must be a finite number from %g to %g, got %s", lo, hi, rfi_json_type_name(item));
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
        rfi_fail(err, path, "must be true or false, got %s", rfi_json_type_name(item));
        return false;
    }
    *out = cJSON_IsTrue(item);
    return true;
}

static bool get_string(const cJSON *item, const char *path, const char **out, size_t *len, rf_error *err) {
    if (!cJSON_IsString(item) || item->valuestring == NULL) {
        rfi_fail(err, path, "must be a string, got %s", rfi_json_type_name(item));
        return false;
    }
    *out = item->valuestring;
    *len = strlen(item->valuestring);
    return true;
}

/* Item i of the array at path, which must be a string: its text (len bytes), or NULL with err. sub receives the
 * item's path, for the caller's own refusals of it. */
static const char *string_item(const cJSON *c, const char *path, int i, char sub[RFI_PATH_CAP], size_t *len,
                               rf_error *err) {
    const char *s;
    rfi_path_index(sub, path, i);
    return get_string(c, sub, &s, len, err) ? s : NULL;
}

bool rfi_field_comment(const cJSON *c, const char *path, rf_error *err) {
    if (cJSON_IsString(c)) return true;
    rfi_fail(err, path, "must be a string, got %s", rfi_json_type_name(c));
    return false;
}

/* Whether row f is at the top of one of places (parent -1) or in the object of row parent. */
static bool row_in(const rfi_field *f, long parent, unsigned places) {
    return f->pub.parent == parent && (parent >= 0 || (places & (1u << f->pub.place)) != 0);
}

long rfi_field_find(long parent, unsigned places, const char *key) {
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++)
        if (row_in(&rfi_lock_fields[i], parent, places) && strcmp(rfi_field_key(&rfi_lock_fields[i]), key) == 0)
            return (long)i;
    return -1;
}

/* Appends the keys of the rows in (parent, places), each after sep, to buf at *used. */
static void append_keys(char *buf, size_t cap, size_t *used, long parent, unsigned places, const char *sep) {
    for (size_t i = 0; i < RFI_FIELD_COUNT && *used < cap; i++) {
        if (!row_in(&rfi_lock_fields[i], parent, places)) continue;
        *used +=
            (size_t)snprintf(buf + *used, cap - *used, "%s%s", *used ? sep : "", rfi_field_key(&rfi_lock_fields[i]));
    }
}

/* The keys allowed in an object, as its unknown-key refusal names them: its rows and "$comment"; a flat lock's top
 * level (a route's fields and the lock's) adds "(or version/defaults/routes)", the keys that make it multi-route. */
static void allowed_keys(char *buf, size_t cap, long parent, unsigned places) {
    size_t used = 0;
    buf[0] = '\0';
    const unsigned route = 1u << RF_PLACE_ROUTE, lock = 1u << RF_PLACE_LOCK;
    if (parent < 0 && (places & route) && (places & lock)) {
        append_keys(buf, cap, &used, -1, route, ", ");
        if (used < cap) used += (size_t)snprintf(buf + used, cap - used, ", $comment");
        append_keys(buf, cap, &used, -1, lock, ", ");
        if (used < cap) used += (size_t)snprintf(buf + used, cap - used, " (or ");
        size_t start = used;
        for (size_t i = 0; i < RFI_FIELD_COUNT && used < cap; i++) {
            if (!row_in(&rfi_lock_fields[i], -1, 1u << RF_PLACE_MULTI)) continue;
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used > start ? "/" : "",
                                     rfi_field_key(&rfi_lock_fields[i]));
        }
        if (used < cap) snprintf(buf + used, cap - used, ")");
        return;
    }
    append_keys(buf, cap, &used, parent, places, ", ");
    if (used < cap) snprintf(buf + used, cap - used, "%s$comment", used ? ", " : "");
}

bool rfi_field_unknown(const cJSON *c, const char *path, long parent, unsigned places, rf_error *err) {
    char sub[RFI_PATH_CAP], near[64], allowed[512];
    rfi_path_child(sub, path, c->string);
    allowed_keys(allowed, sizeof allowed, parent, places);
    rfi_did_you_mean(c->string, allowed, near, sizeof near);
    if (near[0])
        rfi_fail(err, sub, "unknown key \"%s\" (did you mean \"%s\"? allowed here: %s)", c->string, near, allowed);
    else
        rfi_fail(err, sub, "unknown key \"%s\" (allowed here: %s)", c->string, allowed);
    return false;
}

static bool read_classes(const cJSON *item, const char *path, const rfi_field *f, rfi_class_set *set, rf_error *err) {
    char sub[RFI_PATH_CAP];
    if (!cJSON_IsArray(item)) {
        rfi_fail(err, path, "must be an array of failure class tokens, got %s", rfi_json_type_name(item));
        return false;
    }
    memset(set, 0, sizeof *set);
    int i = 0;
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        size_t len;
        const char *s = string_item(c, path, i, sub, &len, err);
        if (s == NULL) return false;
        rfi_class_set one = {0};
        if (!rfi_class_add_token(&one, s, len)) {
            rfi_class_unknown(err, sub, s);
            return false;
        }
        char dup[RF_CLASS_NAME_MAX];
        if (rfi_class_overlap(set, &one, dup)) {
            rfi_fail(err, sub, "class \"%s\" is listed twice (as %s)", s, dup);
            return false;
        }
        rfi_class_add_token(set, s, len);
    }
    if (rfi_class_count(set) > (size_t)f->pub.max) {
        rfi_fail(err, path, "more than %lld failure classes", (long long)f->pub.max);
        return false;
    }
    return true;
}

static bool read_methods(const cJSON *item, const char *path, const rfi_field *f, rfi_route *r, rf_error *err) {
    char sub[RFI_PATH_CAP];
    if (!cJSON_IsArray(item)) {
        rfi_fail(err, path, "must be an array of HTTP methods, got %s", rfi_json_type_name(item));
        return false;
    }
    r->n_methods = 0;
    int i = 0;
    for (const cJSON *c = item->child; c != NULL; c = c->next, i++) {
        size_t len;
        const char *s = string_item(c, path, i, sub, &len, err);
        if (s == NULL) return false;
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
        if (r->n_methods == (size_t)f->pub.max) {
            rfi_fail(err, path, "more than %lld methods", (long long)f->pub.max);
            return false;
        }
        memcpy(r->methods[r->n_methods++], s, len + 1);
    }
    return true;
}

static bool read_jitter(const cJSON *c, const char *path, rf_jitter *out, rf_error *err) {
    const char *s;
    size_t len;
    if (!get_string(c, path, &s, &len, err)) return false;
    for (int j = 0; j < RF_JITTER_COUNT; j++) {
        if (strcmp(rf_jitter_name((rf_jitter)j), s) == 0) {
            *out = (rf_jitter)j;
            return true;
        }
    }
    char kinds[RFI_NAMES_TEXT_MAX];
    rfi_jitter_names_text(kinds, sizeof kinds);
    rfi_fail(err, path, "must be one of %s, got \"%.40s\"", kinds, s);
    return false;
}

static bool read_endpoint(const cJSON *c, const char *path, rfi_endpoint *out, rf_error *err) {
    const char *s;
    size_t len;
    char msg[200];
    if (!get_string(c, path, &s, &len, err)) return false;
    if (!rfi_endpoint_parse(s, len, out, msg, sizeof msg)) {
        rfi_fail(err, path, "endpoint \"%.80s\": %s", s, msg);
        return false;
    }
    return true;
}

/* A name of 1..max characters A-Z a-z 0-9 . _ - (it becomes part of a store key). */
static bool read_name(const cJSON *c, const char *path, const rfi_field *f, char *out, rf_error *err) {
    const char *s;
    size_t len;
    if (!get_string(c, path, &s, &len, err)) return false;
    if (len < (size_t)f->pub.min || len > (size_t)f->pub.max ||
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != len) {
        rfi_fail(err, path, "must be %lld..%lld characters of A-Z a-z 0-9 . _ - (it names a shared bucket), got \"%s\"",
                 (long long)f->pub.min, (long long)f->pub.max, s);
        return false;
    }
    memcpy(out, s, len + 1);
    return true;
}

/* An HTTP field name of min..max characters (an RFC 9110 §5.1 token), kept lowercase: names are case-insensitive,
 * so the canonical form (and the digest) does not depend on how the lock spells one. */
static bool read_header(const cJSON *c, const char *path, const rfi_field *f, char *out, rf_error *err) {
    const char *s;
    size_t len;
    if (!get_string(c, path, &s, &len, err)) return false;
    bool token = len >= (size_t)f->pub.min && len <= (size_t)f->pub.max;
    for (size_t i = 0; token && i < len; i++) {
        const char ch = s[i];
        token = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
    }
    if (!token) {
        rfi_fail(err, path,
                 "must be an HTTP header name of %lld..%lld characters (RFC 9110 §5.1 token: letters, digits and "
                 "!#$%%&'*+-.^_`|~), got \"%.80s\"",
                 (long long)f->pub.min, (long long)f->pub.max, s);
        return false;
    }
    memset(out, 0, (size_t)f->pub.max + 1);
    for (size_t i = 0; i < len; i++) out[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    /* Not a header that frames the message (RF_FRAMING_HEADERS), which an attempt number or a deadline would break,
     * nor Idempotency-Key, which the client writes itself from the request's key. */
    if (rf_framing_header(out, len) != NULL || strcmp(out, "idempotency-key") == 0) {
        rfi_fail(err, path, "\"%s\" is a header the client writes itself or that frames the message: name another",
                 out);
        return false;
    }
    return true;
}

/* retryAfter.headers (docs/lock.md#wait-headers): an ordered, non-empty list of distinct wait header names
 * (RF_WAIT_HEADERS), matched case-insensitively and kept lowercase, into r's list. */
static bool read_wait_headers(const cJSON *array, const char *path, rfi_route *r, rf_error *err) {
    if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) < 1) {
        rfi_fail(err, path, "must be a non-empty array of header names (e.g. [\"retry-after\", \"retry-after-ms\"])");
        return false;
    }
    r->n_wait_headers = 0;
    int i = 0;
    for (const cJSON *c = array->child; c != NULL; c = c->next, i++) {
        char sub[RFI_PATH_CAP];
        rfi_path_index(sub, path, i);
        if (!cJSON_IsString(c) || c->valuestring == NULL) {
            rfi_fail(err, sub, "must be a header name string");
            return false;
        }
        rf_wait_header h;
        if (rf_wait_header_parse_name(c->valuestring, strlen(c->valuestring), &h) != 0) {
            char names[RFI_NAMES_TEXT_MAX];
            rfi_wait_header_names_text(names, sizeof names);
            rfi_fail(err, sub, "unknown wait header \"%.40s\" (supported: %s)", c->valuestring, names);
            return false;
        }
        for (size_t k = 0; k < r->n_wait_headers; k++) {
            if (r->wait_headers[k] == h) {
                rfi_fail(err, sub, "header \"%s\" is listed twice", rf_wait_header_name(h));
                return false;
            }
        }
        r->wait_headers[r->n_wait_headers++] = h; /* at most RF_WAIT_HEADER_COUNT: duplicates are refused */
    }
    return true;
}

/* Distinct verdict reasons (RF_REASONS), kept as their static names. */
static bool read_reasons(const cJSON *c, const char *path, rfi_gate *g, rf_error *err) {
    if (!cJSON_IsArray(c)) {
        rfi_fail(err, path, "must be an array of reasons, got %s", rfi_json_type_name(c));
        return false;
    }
    g->view.n_forbid_reasons = 0;
    int i = 0;
    char item[RFI_PATH_CAP];
    for (const cJSON *r = c->child; r != NULL; r = r->next, i++) {
        size_t len;
        const char *name = string_item(r, path, i, item, &len, err);
        if (name == NULL) return false;
        int found = -1;
        for (int j = 0; j < RF_REASON_COUNT; j++)
            if (strcmp(rf_reason_name((rf_reason)j), name) == 0) found = j;
        if (found < 0) {
            rfi_fail(err, item, "unknown reason \"%.40s\" (see docs/reasons.md)", name);
            return false;
        }
        for (size_t k = 0; k < g->view.n_forbid_reasons; k++) {
            if (strcmp(g->reason_ptrs[k], name) == 0) {
                rfi_fail(err, item, "reason \"%s\" is listed twice", name);
                return false;
            }
        }
        g->reason_ptrs[g->view.n_forbid_reasons++] = rf_reason_name((rf_reason)found);
    }
    return true;
}

/* An object's shape in its refusal: the row's own, or "{its required keys}", or "{its keys}" when none is. */
static void object_shape(const rfi_field *f, long row, char *buf, size_t cap) {
    if (f->shape != NULL) {
        snprintf(buf, cap, "%s", f->shape);
        return;
    }
    bool any_required = false;
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++)
        any_required |= rfi_lock_fields[i].pub.parent == row && rfi_lock_fields[i].pub.if_absent == RF_DEFAULT_REQUIRED;
    size_t used = (size_t)snprintf(buf, cap, "{");
    for (size_t i = 0; i < RFI_FIELD_COUNT && used < cap; i++) {
        const rfi_field *g = &rfi_lock_fields[i];
        if (g->pub.parent != row || (any_required && g->pub.if_absent != RF_DEFAULT_REQUIRED)) continue;
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", used > 1 ? ", " : "", rfi_field_key(g));
    }
    if (used < cap) snprintf(buf + used, cap - used, "}");
}

/* An object's members: each a row of it (read in turn), a "$comment", or refused; then its required rows. */
static bool read_object(const rfi_field *f, const cJSON *obj, const char *path, const rfi_read_ctx *ctx,
                        rf_error *err) {
    const long row = (long)(f - rfi_lock_fields);
    if (!cJSON_IsObject(obj)) {
        char shape[200];
        object_shape(f, row, shape, sizeof shape);
        rfi_fail(err, path, "must be an object %s, got %s", shape, rfi_json_type_name(obj));
        return false;
    }
    char sub[RFI_PATH_CAP];
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        rfi_path_child(sub, path, c->string);
        long i = rfi_field_find(row, 0, c->string);
        if (i >= 0) {
            if (!rfi_field_read(&rfi_lock_fields[i], c, sub, ctx, err)) return false;
        } else if (strcmp(c->string, "$comment") == 0) {
            if (!rfi_field_comment(c, sub, err)) return false;
        } else {
            return rfi_field_unknown(c, path, row, 0, err);
        }
    }
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++) {
        const rfi_field *g = &rfi_lock_fields[i];
        if (g->pub.parent != row || g->pub.if_absent != RF_DEFAULT_REQUIRED) continue;
        const rfi_field_set has = g->pub.place == RF_PLACE_ROUTE ? *ctx->route_has : ctx->lock->has;
        if (!(has & RFI_BIT(i))) {
            rfi_path_child(sub, path, rfi_field_key(g));
            rfi_fail(err, sub, "is required in %s (no default)", f->pub.path);
            return false;
        }
    }
    return true;
}

rf_status rfi_field_default(const rfi_field *f, const char *path, const rfi_read_ctx *ctx, rf_error *err) {
    cJSON *v = cJSON_Parse(f->pub.default_json);
    if (v == NULL) return rfi_report(err, RF_ENOMEM, "$", "out of memory"); /* the defaults are valid JSON */
    bool ok = rfi_field_read(f, v, path, ctx, err);
    cJSON_Delete(v);
    return ok ? RF_OK : RF_EINVAL;
}

bool rfi_field_read(const rfi_field *f, const cJSON *c, const char *path, const rfi_read_ctx *ctx, rf_error *err) {
    const bool route = f->pub.place == RF_PLACE_ROUTE;
    void *holder = route ? (void *)ctx->route : (void *)ctx->lock;
    void *value = rfi_field_value(holder, f);
    if (f->pub.canonical == RF_CANON_NULL_WHEN_NONE && cJSON_IsNull(c)) return true; /* none, as canonical writes it */
    bool ok = false;
    switch (f->pub.type) {
    case RF_FIELD_OBJECT: ok = read_object(f, c, path, ctx, err); break;
    case RF_FIELD_INTEGER: ok = get_int(c, path, f->pub.min, f->pub.max, value, err); break;
    case RF_FIELD_DECIMAL: ok = get_milli(c, path, f->pub.min, f->pub.max, value, err); break;
    case RF_FIELD_BOOLEAN: ok = get_bool(c, path, value, err); break;
    case RF_FIELD_ENDPOINT: ok = read_endpoint(c, path, value, err); break;
    case RF_FIELD_CLASSES: ok = read_classes(c, path, f, value, err); break;
    case RF_FIELD_METHODS: ok = read_methods(c, path, f, holder, err); break;
    case RF_FIELD_JITTER: ok = read_jitter(c, path, value, err); break;
    case RF_FIELD_WAIT_HEADERS: ok = read_wait_headers(c, path, holder, err); break;
    case RF_FIELD_CLASS_LIMITS: ok = rfi_class_limits_parse(c, path, f, holder, err); break;
    case RF_FIELD_REASONS: ok = read_reasons(c, path, &ctx->lock->gate, err); break;
    case RF_FIELD_NAME: ok = read_name(c, path, f, value, err); break;
    case RF_FIELD_HEADER: ok = read_header(c, path, f, value, err); break;
    case RF_FIELD_ROUTES:
    case RF_FIELD_TYPE_COUNT:
        ok = false; /* the loader reads routes itself (lock_load.c) */
        break;
    }
    if (!ok || (f->check != NULL && !f->check(holder, path, err))) return false;
    const rfi_field_set bit = RFI_BIT(f - rfi_lock_fields);
    if (route)
        *ctx->route_has |= bit;
    else
        ctx->lock->has |= bit;
    if (f->has_at != 0) *(bool *)(void *)((char *)holder + f->has_at - 1) = true;
    return true;
}
