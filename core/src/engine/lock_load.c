/*
 * Loading a lock: parse with cJSON, read every field by its schema row (lock_schema.c, lock_fields.c), apply the
 * defaults, check the rules that join fields, and build an immutable rf_policy. Any failure yields an rf_error
 * naming the JSON path, the rule and the offending value; a bad lock never becomes a policy.
 */
#define _POSIX_C_SOURCE 200809L
#include "lock_schema.h"
#include "retryfreeze/input.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The places a member may be a row of: a route object (and defaults), a flat lock's top level, a multi-route one. */
#define IN_ROUTE (1u << RF_PLACE_ROUTE)
#define IN_FLAT (1u << RF_PLACE_ROUTE | 1u << RF_PLACE_LOCK)
#define IN_MULTI (1u << RF_PLACE_MULTI | 1u << RF_PLACE_LOCK)

/* A route as it is read: its values, which of its fields are set, and the JSON path of the object it came from. */
typedef struct spec {
    rfi_field_set has;
    rfi_route r;
    char where[RFI_PATH_CAP];
} spec;

/* Duplicate keys in any object anywhere (cJSON keeps both, so they would silently shadow each other). */
static bool check_duplicates(const cJSON *node, const char *path, rf_error *err) {
    char sub[RFI_PATH_CAP];
    int i = 0;
    for (const cJSON *c = node->child; c != NULL; c = c->next, i++) {
        if (cJSON_IsObject(node)) {
            for (const cJSON *d = c->next; d != NULL; d = d->next) {
                if (c->string && d->string && strcmp(c->string, d->string) == 0) {
                    rfi_path_child(sub, path, c->string);
                    rfi_fail(err, sub, "duplicate key \"%s\" in one object (a JSON object's keys must be unique)",
                             c->string);
                    return false;
                }
            }
            rfi_path_child(sub, path, c->string ? c->string : "?");
        } else {
            rfi_path_index(sub, path, i);
        }
        if (!check_duplicates(c, sub, err)) return false;
    }
    return true;
}

/* Copies row f's value from one holder to another: its bytes, and a list's count when it lives elsewhere. */
static void copy_value(void *to, const void *from, const rfi_field *f) {
    memcpy((char *)to + f->at, (const char *)from + f->at, f->size);
    if (f->n_at != 0 && (f->n_at < f->at || f->n_at >= f->at + f->size))
        memcpy((char *)to + f->n_at, (const char *)from + f->n_at, sizeof(size_t));
}

/* Copies each route field set in from but not in to (a list is replaced as a whole, never merged). */
static void inherit(spec *to, const rfi_route *from, rfi_field_set from_has) {
    const rfi_field_set take = from_has & ~to->has;
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++)
        if ((take & RFI_BIT(i)) && rfi_lock_fields[i].size != 0) copy_value(&to->r, from, &rfi_lock_fields[i]);
    to->has |= take;
}

/* One member of a route (or of a flat lock's top level, or of defaults): a row of the places (read into the route's
 * spec or the policy), a "$comment", or an unknown key. */
static bool read_member(const cJSON *c, const char *where, unsigned places, spec *sp, rf_policy *p, rf_error *err) {
    char sub[RFI_PATH_CAP];
    rfi_path_child(sub, where, c->string);
    long i = rfi_field_find(-1, places, c->string);
    if (i >= 0) {
        const rfi_read_ctx ctx = {.route = &sp->r, .route_has = &sp->has, .lock = p};
        return rfi_field_read(&rfi_lock_fields[i], c, sub, &ctx, err);
    }
    if (strcmp(c->string, "$comment") == 0) return rfi_field_comment(c, sub, err);
    return rfi_field_unknown(c, where, -1, places, err);
}

/* A rule joining two of a route's fields: true when ok; else false, with err at the field's path saying "must be
 * RULE BOUND_NAME (bound), got value" (rule: "at most" or "at least"). */
static bool joined(const spec *sp, bool ok, const char *field, const char *rule, const char *bound_name, int64_t bound,
                   int64_t value, rf_error *err) {
    if (ok) return true;
    char sub[RFI_PATH_CAP];
    rfi_path_child(sub, sp->where, field);
    rfi_fail(err, sub, "must be %s %s (%lld), got %lld", rule, bound_name, (long long)bound, (long long)value);
    return false;
}

/* Applies the built-in defaults, refuses missing required fields, checks the rules that join fields. */
static bool finish_route(spec *sp, const rfi_lock_defaults *d, rf_error *err) {
    char sub[RFI_PATH_CAP];
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++) {
        const rfi_field *f = &rfi_lock_fields[i];
        /* A field of an optional object (hedging) is required only when the object is there (read_object). */
        if (f->pub.place == RF_PLACE_ROUTE && f->pub.if_absent == RF_DEFAULT_REQUIRED && f->pub.parent < 0 &&
            !(sp->has & RFI_BIT(i))) {
            rfi_path_child(sub, sp->where, f->pub.path);
            rfi_fail(err, sub, "is required and has no default (an absent number never becomes a retry count)");
            return false;
        }
    }
    rfi_route *r = &sp->r;
    if (!joined(sp, r->total_budget_ms >= r->per_attempt_timeout_ms, "totalBudgetMs", "at least", "perAttemptTimeoutMs",
                r->per_attempt_timeout_ms, r->total_budget_ms, err))
        return false;
    const bool min_attempt_set = (sp->has & RFI_BIT(RFI_F_MIN_ATTEMPT)) != 0;
    inherit(sp, &d->route, d->route_has);
    /* minAttemptMs defaults to 200, or perAttemptTimeoutMs when that is smaller (docs/lock.md). */
    if (!min_attempt_set && r->min_attempt_ms > r->per_attempt_timeout_ms)
        r->min_attempt_ms = r->per_attempt_timeout_ms;
    if (!joined(sp, r->min_attempt_ms <= r->per_attempt_timeout_ms, "minAttemptMs", "at most", "perAttemptTimeoutMs",
                r->per_attempt_timeout_ms, r->min_attempt_ms, err))
        return false;
    if (!rfi_class_limits_check(r, sp->where, err)) return false;
    /* Hedges are attempts: the route's cap holds. */
    if (!joined(sp, !r->has_hedging || r->hedge_max_attempts <= r->max_attempts,
                rfi_lock_fields[RFI_F_HEDGING_MAX_ATTEMPTS].pub.path, "at most", "maxAttempts", r->max_attempts,
                r->hedge_max_attempts, err))
        return false;
    if (!joined(sp, r->backoff_base_ms <= r->backoff_max_ms, "backoff.baseMs", "at most", "backoff.maxMs",
                r->backoff_max_ms, r->backoff_base_ms, err))
        return false;
    if (!rfi_propagation_check(r, sp->where, err)) return false;
    char both[RF_CLASS_NAME_MAX];
    if (rfi_class_overlap(&r->retryable, &r->not_retryable, both)) {
        rfi_path_child(sub, sp->where, "notRetryable");
        rfi_fail(err, sub, "class %s is in both retryable and notRetryable", both);
        return false;
    }
    return true;
}

/* The lock's own fields the lock does not set, from the defaults (a field in an object only when the object is set). */
static void lock_defaults(rf_policy *p, const rfi_lock_defaults *d) {
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++) {
        const rfi_field *f = &rfi_lock_fields[i];
        if (f->pub.place == RF_PLACE_ROUTE || !(d->lock.has & RFI_BIT(i)) || (p->has & RFI_BIT(i))) continue;
        if (f->pub.parent >= 0 && !(p->has & RFI_BIT(f->pub.parent))) continue;
        copy_value(p, &d->lock, f);
        p->has |= RFI_BIT(i);
    }
}

rf_status rfi_lock_defaults_read(rfi_lock_defaults *d, rf_error *err) {
    /* Only the values are zeroed (a route's views are kilobytes no default touches): the parts of a value its reader
     * leaves alone (a list's unused entries) must compare equal to a route's (RF_CANON_UNLESS_DEFAULT). */
    d->route_has = 0;
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++)
        if (rfi_lock_fields[i].pub.place == RF_PLACE_ROUTE)
            memset((char *)&d->route + rfi_lock_fields[i].at, 0, rfi_lock_fields[i].size);
    memset(&d->lock, 0, sizeof d->lock);
    const rfi_read_ctx ctx = {.route = &d->route, .route_has = &d->route_has, .lock = &d->lock};
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++) {
        const rfi_field *f = &rfi_lock_fields[i];
        if (f->pub.if_absent != RF_DEFAULT_VALUE) continue;
        /* A default its own reader refuses is a bug in the table (spec/core/test_lock_schema.c guards it). */
        rf_status st = rfi_field_default(f, f->pub.path, &ctx, err);
        if (st != RF_OK) return st;
    }
    return RF_OK;
}

/* The flat form: the whole document is one route, plus the lock's own fields. */
static bool load_flat(const cJSON *root, spec *sp, rf_policy *p, const rfi_lock_defaults *d, rf_error *err) {
    snprintf(sp->where, RFI_PATH_CAP, "$");
    for (const cJSON *c = root->child; c != NULL; c = c->next)
        if (!read_member(c, "$", IN_FLAT, sp, p, err)) return false;
    p->version = 1; /* the flat form is the first version */
    p->has |= RFI_BIT(RFI_F_VERSION);
    return finish_route(sp, d, err);
}

/* A route of a multi-route lock: its members, then what it inherits from defaults and the built-in defaults. */
static bool load_route(const cJSON *rt, spec *sp, const spec *defaults, rf_policy *p, const rfi_lock_defaults *d,
                       rf_error *err) {
    char sub[RFI_PATH_CAP];
    if (!cJSON_IsObject(rt)) {
        rfi_fail(err, sp->where, "must be a route object, got %s", rfi_json_type_name(rt));
        return false;
    }
    for (const cJSON *c = rt->child; c != NULL; c = c->next) {
        long lock_row = rfi_field_find(-1, 1u << RF_PLACE_LOCK, c->string);
        if (lock_row >= 0 && rfi_lock_fields[lock_row].in_route != NULL) {
            rfi_path_child(sub, sp->where, c->string);
            return rfi_fail(err, sub, "%s", rfi_lock_fields[lock_row].in_route), false;
        }
        if (!read_member(c, sp->where, IN_ROUTE, sp, p, err)) return false;
    }
    inherit(sp, &defaults->r, defaults->has);
    return finish_route(sp, d, err);
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

static bool load_multi(const cJSON *root, spec **specs_out, size_t *n_out, rf_policy *p, const rfi_lock_defaults *d,
                       rf_status *st, rf_error *err) {
    char sub[RFI_PATH_CAP];
    const cJSON *found[RFI_FIELD_COUNT] = {0}; /* the multi-route form's own members: version, defaults, routes */
    for (const cJSON *c = root->child; c != NULL; c = c->next) {
        long i = rfi_field_find(-1, IN_MULTI, c->string);
        if (i >= 0 && rfi_lock_fields[i].pub.place == RF_PLACE_MULTI) {
            found[i] = c;
        } else if (i >= 0) {
            const rfi_read_ctx ctx = {.lock = p};
            rfi_path_child(sub, "$", c->string);
            if (!rfi_field_read(&rfi_lock_fields[i], c, sub, &ctx, err)) return false;
        } else if (strcmp(c->string, "$comment") == 0) {
            rfi_path_child(sub, "$", c->string);
            if (!rfi_field_comment(c, sub, err)) return false;
        } else {
            return rfi_field_unknown(c, "$", -1, IN_MULTI, err);
        }
    }
    const cJSON *version = found[RFI_F_VERSION], *defaults = found[RFI_F_DEFAULTS], *routes = found[RFI_F_ROUTES];
    if (version == NULL) return rfi_fail(err, "$.version", "is required in a multi-route lock (use 1)"), false;
    const rfi_read_ctx top = {.lock = p};
    if (!rfi_field_read(&rfi_lock_fields[RFI_F_VERSION], version, "$.version", &top, err)) return false;
    spec defaults_spec;
    memset(&defaults_spec, 0, sizeof defaults_spec);
    snprintf(defaults_spec.where, RFI_PATH_CAP, "$.defaults");
    if (defaults != NULL) {
        if (!cJSON_IsObject(defaults))
            return rfi_fail(err, "$.defaults", "must be an object %s, got %s", rfi_lock_fields[RFI_F_DEFAULTS].shape,
                            rfi_json_type_name(defaults)),
                   false;
        for (const cJSON *c = defaults->child; c != NULL; c = c->next) {
            if (rfi_field_find(-1, IN_ROUTE, c->string) == RFI_F_ENDPOINT) {
                rfi_path_child(sub, "$.defaults", c->string);
                return rfi_fail(err, sub, "endpoint cannot have a default; each route names its own"), false;
            }
            if (!read_member(c, "$.defaults", IN_ROUTE, &defaults_spec, p, err)) return false;
        }
    }
    const rfi_field *routes_row = &rfi_lock_fields[RFI_F_ROUTES];
    if (routes == NULL) return rfi_fail(err, "$.routes", "is required: an array of at least one route"), false;
    int n = cJSON_GetArraySize(routes);
    if (!cJSON_IsArray(routes) || n < routes_row->pub.min)
        return rfi_fail(err, "$.routes", "must be a non-empty array of route objects"), false;
    if (n > routes_row->pub.max)
        return rfi_fail(err, "$.routes", "more than %lld routes", (long long)routes_row->pub.max), false;
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
        rfi_path_index(sp->where, "$.routes", i);
        if (!load_route(rt, sp, &defaults_spec, p, d, err)) goto fail;
        int k = shape_set_add(&shapes, specs, i);
        if (k >= 0) {
            rfi_path_child(sub, sp->where, "endpoint");
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
    char sub[RFI_PATH_CAP], shown[RFI_PATH_CAP];
    if (cJSON_IsString(node) && has_marker(m, node->valuestring)) {
        rfi_fail(err, path, "string contains a NUL character (\\u0000); lock strings may not hold NUL");
        return false;
    }
    int i = 0;
    for (const cJSON *c = node->child; c != NULL; c = c->next, i++) {
        if (cJSON_IsObject(node)) {
            show_nuls(m, c->string ? c->string : "?", shown, sizeof shown);
            rfi_path_child(sub, path, shown);
            if (has_marker(m, c->string)) {
                rfi_fail(err, sub, "key contains a NUL character (\\u0000); lock strings may not hold NUL");
                return false;
            }
        } else {
            rfi_path_index(sub, path, i);
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
    rf_policy *p = NULL;
    rfi_lock_defaults *d = NULL;
    const rfi_route **order = NULL;
    if (used < len) {
        rfi_fail(err, "$", "trailing data after the JSON value at byte %zu", used);
        if (err != NULL) line_col(text, used, &err->line, &err->column);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rfi_fail(err, "$", "a lock must be a JSON object, got %s", rfi_json_type_name(root));
        goto done;
    }
    if (mask.copy != NULL && !check_nuls(&mask, root, "$", err)) goto done;
    if (!check_duplicates(root, "$", err)) goto done;
    p = calloc(1, sizeof *p);
    d = malloc(sizeof *d);
    if (p == NULL || d == NULL) {
        st = RF_ENOMEM;
        rfi_fail(err, "$", "out of memory");
        goto done;
    }
    if ((st = rfi_lock_defaults_read(d, err)) != RF_OK) goto done;
    st = RF_EINVAL;
    if (cJSON_GetObjectItemCaseSensitive(root, rfi_field_key(&rfi_lock_fields[RFI_F_ROUTES])) ||
        cJSON_GetObjectItemCaseSensitive(root, rfi_field_key(&rfi_lock_fields[RFI_F_VERSION]))) {
        if (!load_multi(root, &specs, &n, p, d, &st, err)) goto done;
    } else {
        specs = calloc(1, sizeof *specs);
        if (specs == NULL) {
            st = RF_ENOMEM;
            rfi_fail(err, "$", "out of memory");
            goto done;
        }
        n = 1;
        if (!load_flat(root, specs, p, d, err)) goto done;
    }
    lock_defaults(p, d);
    p->routes = malloc(n * sizeof *p->routes);
    order = malloc(n * sizeof *order);
    if (p->routes == NULL || order == NULL) {
        st = RF_ENOMEM;
        rfi_fail(err, "$", "out of memory");
        goto done;
    }
    p->n_routes = n;
    p->has |= RFI_BIT(RFI_F_ROUTES); /* a flat lock is one route */
    for (size_t i = 0; i < n; i++) order[i] = &specs[i].r;
    qsort(order, n, sizeof *order, compare_routes);
    for (size_t i = 0; i < n; i++) p->routes[i] = *order[i];
    st = rfi_policy_finish(p, d, err);
    if (st == RF_OK) {
        *out = p;
        p = NULL;
    }
done:
    rf_policy_free(p);
    free(order);
    free(d);
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
