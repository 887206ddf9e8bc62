/*
 * A ledger record as one JSON line. Fields always appear in this order, every one of them present:
 *   ts, route, method, path, key, policy, attempts, elapsed_ms, outcome, reason, ok, status, body_len, tries
 * then, only when set, host and budget.
 * and in each tries entry: class, status, elapsed_ms, delay_ms, reason, retry_after (null when absent).
 * Integers are emitted as raw number tokens ("%" PRId64): cJSON's own number printer goes through a double
 * and "%1.15g", which prints 1e15 as "1e+15" and 2^53 as "9.00719925474099e+15" (lossy).
 * The path is recorded with every query value replaced by REDACTED (redacted_path): query strings carry
 * secrets (?api_key=…), and the ledger stores none.
 */
#include "ledger_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDACTED "REDACTED"

static bool safe_int(int64_t v) { return v >= -RFI_LEDGER_MAX_SAFE_INT && v <= RFI_LEDGER_MAX_SAFE_INT; }

/* A required (or, with nullable, optional) string field: present and UTF-8. Adds its length to *total. */
static bool check_string(const char *s, bool nullable, const char *prefix, const char *name, size_t *total,
                         rf_error *err) {
    char field[64];

    snprintf(field, sizeof field, "%s%s", prefix, name);
    if (!s) {
        if (nullable) {
            return true;
        }
        rfi_ledger_error(err, field, 0, 0, "%s is NULL; the ledger needs a string", field);
        return false;
    }
    size_t len = strlen(s);
    if (!rfi_ledger_utf8_valid(s, len)) {
        rfi_ledger_error(err, field, 0, 0, "%s is not valid UTF-8, as JSON text must be", field);
        return false;
    }
    *total += len;
    return true;
}

static bool check_int(int64_t v, const char *prefix, const char *name, rf_error *err) {
    char field[64];

    if (safe_int(v)) {
        return true;
    }
    snprintf(field, sizeof field, "%s%s", prefix, name);
    rfi_ledger_error(err, field, 0, 0, "%s is %" PRId64 ", outside +-2^53 (not exact as a JSON number)", field, v);
    return false;
}

static bool check_try(const rf_ledger_try *t, size_t i, size_t *total, rf_error *err) {
    char prefix[32];

    snprintf(prefix, sizeof prefix, "$.tries[%zu].", i);
    return check_string(t->class_name, false, prefix, "class", total, err) &&
           check_string(t->reason, false, prefix, "reason", total, err) &&
           check_string(t->retry_after, true, prefix, "retry_after", total, err) &&
           check_string(t->retry_after_header, true, prefix, "retry_after_header", total, err) &&
           check_int(t->elapsed_ms, prefix, "elapsed_ms", err) && check_int(t->delay_ms, prefix, "delay_ms", err);
}

/* Everything that can make a record unwritable, checked before any allocation. */
static bool check_record(const rf_ledger_record *rec, rf_error *err) {
    size_t total = 0;

    if (rec->ts_ms < 0 || rec->ts_ms > RFI_LEDGER_TS_MAX_MS) {
        rfi_ledger_error(err, "$.ts", 0, 0,
                         "$.ts is %" PRId64 " ms, outside 1970-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z",
                         rec->ts_ms);
        return false;
    }
    if (!check_string(rec->route, false, "$.", "route", &total, err) ||
        !check_string(rec->method, false, "$.", "method", &total, err) ||
        !check_string(rec->path, false, "$.", "path", &total, err) ||
        !check_string(rec->key, true, "$.", "key", &total, err) ||
        !check_string(rec->policy, false, "$.", "policy", &total, err) ||
        !check_string(rec->outcome, false, "$.", "outcome", &total, err) ||
        !check_string(rec->reason, false, "$.", "reason", &total, err) ||
        !check_string(rec->host, true, "$.", "host", &total, err) ||
        !check_string(rec->budget, true, "$.", "budget", &total, err) ||
        !check_int(rec->elapsed_ms, "$.", "elapsed_ms", err) || !check_int(rec->body_len, "$.", "body_len", err)) {
        return false;
    }
    if (rec->n_tries > RF_LEDGER_MAX_TRIES) {
        rfi_ledger_error(err, "$.tries", 0, 0, "$.tries has %zu entries, more than RF_LEDGER_MAX_TRIES (%d)",
                         rec->n_tries, RF_LEDGER_MAX_TRIES);
        return false;
    }
    for (size_t i = 0; i < rec->n_tries; i++) {
        if (!check_try(&rec->tries[i], i, &total, err)) {
            return false;
        }
    }
    /* Escaping only makes strings longer: refuse early rather than print megabytes to throw them away. */
    if (total > RF_LEDGER_MAX_LINE) {
        rfi_ledger_error(err, "$", 0, 0, "the record's strings total %zu bytes, more than RF_LEDGER_MAX_LINE (%d)",
                         total, RF_LEDGER_MAX_LINE);
        return false;
    }
    return true;
}

/* Adds item under a constant (literal) name; false, with item freed, when anything is NULL or fails. */
static bool put(cJSON *obj, const char *name, cJSON *item) {
    if (!item) {
        return false;
    }
    if (!cJSON_AddItemToObjectCS(obj, name, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

static bool put_int(cJSON *obj, const char *name, int64_t v) {
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRId64, v);
    return put(obj, name, cJSON_CreateRaw(digits));
}

static bool put_string_or_null(cJSON *obj, const char *name, const char *s) {
    return put(obj, name, s ? cJSON_CreateString(s) : cJSON_CreateNull());
}

static bool put_try(cJSON *tries, const rf_ledger_try *t) {
    cJSON *obj = cJSON_CreateObject();

    if (!obj) {
        return false;
    }
    if (!cJSON_AddItemToArray(tries, obj)) {
        cJSON_Delete(obj);
        return false;
    }
    return put(obj, "class", cJSON_CreateString(t->class_name)) && put_int(obj, "status", t->status) &&
           put_int(obj, "elapsed_ms", t->elapsed_ms) && put_int(obj, "delay_ms", t->delay_ms) &&
           put(obj, "reason", cJSON_CreateString(t->reason)) &&
           put_string_or_null(obj, "retry_after", t->retry_after) &&
           (t->retry_after_header == NULL || put(obj, "retry_after_header", cJSON_CreateString(t->retry_after_header)));
}

/*
 * A malloc'd copy of path with each query value (after the first '?', the text after '=' in every
 * '&'-separated part, or the whole part when it has no '=') replaced by REDACTED; names are kept, empty parts
 * stay empty. "/a?api_key=SECRET&x" → "/a?api_key=REDACTED&REDACTED". A query of many tiny parts, which this
 * would lengthen by more than 256 bytes, is recorded as one "?REDACTED". NULL when out of memory.
 */
static char *redacted_path(const char *path) {
    size_t len = strlen(path);
    const char *q = strchr(path, '?'), *end = path + len;
    size_t cap = len + 1;
    for (const char *p = q ? q + 1 : end; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) cap += sizeof REDACTED - 1;
        p = part_end + 1;
    }
    size_t o = q ? (size_t)(q - path) + 1 : len;
    bool whole = cap > len + 1 + 256;
    if (whole) cap = o + sizeof REDACTED;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    memcpy(out, path, o);
    if (whole) {
        memcpy(out + o, REDACTED, sizeof REDACTED);
        return out;
    }
    for (const char *p = q ? q + 1 : end; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) {
            const char *eq = memchr(p, '=', (size_t)(part_end - p));
            if (eq != NULL) {
                memcpy(out + o, p, (size_t)(eq - p) + 1);
                o += (size_t)(eq - p) + 1;
            }
            memcpy(out + o, REDACTED, sizeof REDACTED - 1);
            o += sizeof REDACTED - 1;
        }
        if (amp) out[o++] = '&';
        p = part_end + 1;
    }
    out[o] = '\0';
    return out;
}

static cJSON *build(const rf_ledger_record *rec) {
    char ts[RFI_LEDGER_TS_LEN + 1];
    cJSON *root = cJSON_CreateObject();
    cJSON *tries = cJSON_CreateArray();

    if (!root || !tries) {
        cJSON_Delete(root);
        cJSON_Delete(tries);
        return NULL;
    }
    rfi_ledger_ts_format(rec->ts_ms, ts);
    char *path = redacted_path(rec->path);
    bool ok = path != NULL && put(root, "ts", cJSON_CreateString(ts)) &&
              put(root, "route", cJSON_CreateString(rec->route)) &&
              put(root, "method", cJSON_CreateString(rec->method)) && put(root, "path", cJSON_CreateString(path)) &&
              put_string_or_null(root, "key", rec->key) && put(root, "policy", cJSON_CreateString(rec->policy)) &&
              put_int(root, "attempts", rec->attempts) && put_int(root, "elapsed_ms", rec->elapsed_ms) &&
              put(root, "outcome", cJSON_CreateString(rec->outcome)) &&
              put(root, "reason", cJSON_CreateString(rec->reason)) && put(root, "ok", cJSON_CreateBool(rec->ok)) &&
              put_int(root, "status", rec->status) && put_int(root, "body_len", rec->body_len);
    free(path);
    if (ok) {
        ok = put(root, "tries", tries); /* from here on, root owns tries */
    } else {
        cJSON_Delete(tries);
    }
    for (size_t i = 0; ok && i < rec->n_tries; i++) {
        ok = put_try(tries, &rec->tries[i]);
    }
    if (ok && rec->host) ok = put(root, "host", cJSON_CreateString(rec->host));
    if (ok && rec->budget) ok = put(root, "budget", cJSON_CreateString(rec->budget));
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

char *rfi_ledger_format_line(const rf_ledger_record *rec, size_t *len, rf_status *status, rf_error *err) {
    if (!rec) {
        rfi_ledger_error(err, "rec", 0, 0, "rec is NULL");
        *status = RF_EINVAL;
        return NULL;
    }
    if (!check_record(rec, err)) {
        *status = RF_EINVAL;
        return NULL;
    }
    cJSON *root = build(rec);
    char *line = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!line) {
        rfi_ledger_error(err, "rec", 0, 0, "out of memory while formatting a ledger record");
        *status = RF_ENOMEM;
        return NULL;
    }
    *len = strlen(line);
    if (*len > RF_LEDGER_MAX_LINE) {
        rfi_ledger_error(err, "$", 0, 0, "the record is %zu bytes as JSON, more than RF_LEDGER_MAX_LINE (%d)", *len,
                         RF_LEDGER_MAX_LINE);
        cJSON_free(line);
        *status = RF_EINVAL;
        return NULL;
    }
    *status = RF_OK;
    return line;
}

long rf_ledger_format(const rf_ledger_record *rec, char *buf, size_t cap, rf_error *err) {
    rf_status status;
    size_t len = 0;

    if (!buf) {
        rfi_ledger_error(err, "buf", 0, 0, "buf is NULL");
        return -1;
    }
    char *line = rfi_ledger_format_line(rec, &len, &status, err);
    if (!line) {
        return -1;
    }
    if (len >= cap) {
        rfi_ledger_error(err, "buf", 0, 0, "the record needs %zu bytes with its NUL, buf has %zu", len + 1, cap);
        cJSON_free(line);
        return -1;
    }
    memcpy(buf, line, len + 1);
    cJSON_free(line);
    return (long)len;
}
