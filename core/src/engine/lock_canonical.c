/*
 * The canonical form of a policy: the effective lock (defaults applied, aliases expanded, lists sorted, routes
 * sorted by endpoint, every object's keys sorted) as compact JSON, which is the digest's input (SHA-256 through
 * OpenSSL's EVP API), and the same indented for people with every field shown. Written from the schema's rows
 * (lock_schema.c): a field is written as its row says (always, as null when absent, or left out at its default).
 */
#include "lock_schema.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The order of an object's rows, once per text (every route's objects share it). */
typedef struct rows_order {
    bool known;
    size_t n;
    size_t row[RFI_FIELD_COUNT];
} rows_order;

typedef struct writer {
    const rf_policy *p;
    const rfi_lock_defaults *d;
    bool full;          /* the pretty form: fields at their default are shown too */
    rows_order *orders; /* by parent row + 1: [0] is the top level of a route */
} writer;

static cJSON *string_array(const char *const *items, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a != NULL && i < n; i++) {
        cJSON *s = cJSON_CreateString(items[i]);
        if (s == NULL || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static bool write_object(const writer *w, cJSON *obj, const char *holder, const char *dflt, long parent,
                         unsigned places);

static cJSON *class_limits_json(const rfi_route *r) {
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o != NULL && i < r->n_class_limit_tokens; i++) {
        if (!cJSON_AddNumberToObject(o, r->class_limit_ptrs[i], r->class_limit_values[i])) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static cJSON *routes_json(const writer *w) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a != NULL && i < w->p->n_routes; i++) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL ||
            !write_object(w, o, (const char *)&w->p->routes[i], (const char *)&w->d->route, -1, 1u << RF_PLACE_ROUTE) ||
            !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* Row i's value in holder as JSON (NULL: out of memory). */
static cJSON *value_json(const writer *w, size_t i, const char *holder, const char *dflt) {
    const rfi_field *f = &rfi_lock_fields[i];
    const char *v = holder + f->at;
    int64_t number;
    size_t n;
    switch (f->pub.type) {
    case RF_FIELD_OBJECT: {
        cJSON *o = cJSON_CreateObject();
        if (o != NULL && !write_object(w, o, holder, dflt, (long)i, 0)) {
            cJSON_Delete(o);
            return NULL;
        }
        return o;
    }
    case RF_FIELD_INTEGER: memcpy(&number, v, sizeof number); return cJSON_CreateNumber((double)number);
    case RF_FIELD_DECIMAL: memcpy(&number, v, sizeof number); return cJSON_CreateNumber((double)number / 1000.0);
    case RF_FIELD_BOOLEAN: return cJSON_CreateBool(*(const bool *)(const void *)v);
    case RF_FIELD_JITTER: return cJSON_CreateString(rf_jitter_name(*(const rf_jitter *)(const void *)v));
    case RF_FIELD_ENDPOINT: return cJSON_CreateString(((const rfi_endpoint *)(const void *)v)->text);
    case RF_FIELD_NAME:
    case RF_FIELD_HEADER: return cJSON_CreateString(v);
    case RF_FIELD_CLASSES:
    case RF_FIELD_METHODS:
    case RF_FIELD_WAIT_HEADERS:
    case RF_FIELD_REASONS: {
        const char *const *items = rfi_field_items(holder, f, &n);
        return string_array(items, n);
    }
    case RF_FIELD_CLASS_LIMITS: return class_limits_json((const rfi_route *)(const void *)holder);
    case RF_FIELD_ROUTES: return routes_json(w);
    case RF_FIELD_TYPE_COUNT: break;
    }
    return NULL;
}

/* The rows of an object (parent's, or the top level of the places), in the order the canonical form writes them:
 * by key (strcmp), a canonical_last row after the others. Returns how many. */
static size_t rows_in_order(long parent, unsigned places, size_t out[RFI_FIELD_COUNT]) {
    size_t n = 0;
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++) {
        const rfi_field *f = &rfi_lock_fields[i];
        if (f->pub.parent != parent || (parent < 0 && !(places & (1u << f->pub.place)))) continue;
        size_t k = n++;
        for (; k > 0; k--) { /* insertion sort: a dozen rows */
            const rfi_field *g = &rfi_lock_fields[out[k - 1]];
            int cmp = g->canonical_last != f->canonical_last ? (g->canonical_last ? 1 : -1)
                                                             : strcmp(rfi_field_key(g), rfi_field_key(f));
            if (cmp <= 0) break;
            out[k] = out[k - 1];
        }
        out[k] = i;
    }
    return n;
}

static bool write_object(const writer *w, cJSON *obj, const char *holder, const char *dflt, long parent,
                         unsigned places) {
    rows_order top, *order = &top; /* the lock's top level is written once: not kept */
    bool fresh = true;
    if (places != (1u << RF_PLACE_LOCK | 1u << RF_PLACE_MULTI)) {
        order = &w->orders[parent + 1];
        fresh = !order->known;
    }
    if (fresh) {
        order->n = rows_in_order(parent, places, order->row);
        order->known = true;
    }
    for (size_t k = 0; k < order->n; k++) {
        const size_t i = order->row[k];
        const rfi_field *f = &rfi_lock_fields[i];
        if (f->pub.canonical == RF_CANON_NEVER) continue;
        if (!rfi_field_present(w->p, holder, i)) {
            if (f->pub.canonical == RF_CANON_NULL_WHEN_NONE && !cJSON_AddNullToObject(obj, rfi_field_key(f)))
                return false;
            continue;
        }
        if (f->pub.canonical == RF_CANON_UNLESS_DEFAULT && !w->full &&
            memcmp(holder + f->at, dflt + f->at, f->size) == 0)
            continue;
        cJSON *v = value_json(w, i, holder, dflt);
        if (v == NULL || !cJSON_AddItemToObject(obj, rfi_field_key(f), v)) {
            cJSON_Delete(v);
            return false;
        }
    }
    return true;
}

static char *policy_text(const rf_policy *p, const rfi_lock_defaults *d, bool full) {
    rows_order orders[RFI_FIELD_COUNT + 1];
    for (size_t i = 0; i <= RFI_FIELD_COUNT; i++) orders[i].known = false;
    const writer w = {.p = p, .d = d, .full = full, .orders = orders};
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (root != NULL &&
        write_object(&w, root, (const char *)p, (const char *)&d->lock, -1, 1u << RF_PLACE_LOCK | 1u << RF_PLACE_MULTI))
        text = full ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static bool sha256_hex_len(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) || md_len != 32) return false;
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return true;
}

rf_status rf_sha256(const void *data, size_t len, char out[RF_SHA256_TEXT_LEN + 1]) {
    char hex[65];
    if ((data == NULL && len > 0) || out == NULL) return RF_EINVAL;
    if (!sha256_hex_len(data == NULL ? "" : data, len, hex)) return RF_ENOMEM;
    snprintf(out, RF_SHA256_TEXT_LEN + 1, "sha256:%s", hex);
    return RF_OK;
}

rf_status rfi_policy_canonical(rf_policy *p, const rfi_lock_defaults *d, rf_error *err) {
    p->canonical = policy_text(p, d, false);
    p->pretty = policy_text(p, d, true);
    if (p->canonical == NULL || p->pretty == NULL) {
        rfi_fail(err, "$", "out of memory while building the canonical policy");
        return RF_ENOMEM;
    }
    char hex[65];
    if (!sha256_hex_len(p->canonical, strlen(p->canonical), hex)) {
        rfi_fail(err, "$", "SHA-256 failed (libcrypto)");
        return RF_ENOMEM;
    }
    snprintf(p->digest, sizeof p->digest, "sha256:%s", hex);
    return RF_OK;
}
