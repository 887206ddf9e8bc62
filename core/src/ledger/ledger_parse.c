/*
 * One ledger line (JSON text) into an rf_ledger_record. Strict, like the rest of the engine: every field the
 * writer writes is required (key and tries[].retry_after(_header) may be null, those two may also be absent), unknown
 * or duplicate fields are refused, integers must be integral and in range, ts must be the writer's format.
 * The record's strings point into the parsed cJSON tree, which the caller keeps alive.
 */
#include "ledger_internal.h"
#include "../util/json_text.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum record_field {
    F_TS,
    F_ROUTE,
    F_METHOD,
    F_PATH,
    F_KEY,
    F_POLICY,
    F_ATTEMPTS,
    F_ELAPSED_MS,
    F_OUTCOME,
    F_REASON,
    F_OK,
    F_STATUS,
    F_BODY_LEN,
    F_TRIES,
    F_REQUIRED, /* the fields above are required; the ones below came later and are optional */
    F_HOST = F_REQUIRED,
    F_BUDGET,
    F_INBOUND_DEADLINE,
    F_INBOUND_ATTEMPT,
    F_COUNT
};
static const char *const record_fields[F_COUNT] = {
    "ts",     "route", "method", "path",     "key",   "policy", "attempts", "elapsed_ms",          "outcome",
    "reason", "ok",    "status", "body_len", "tries", "host",   "budget",   "inbound_deadline_ms", "inbound_attempt"};

enum try_field {
    T_CLASS,
    T_STATUS,
    T_ELAPSED_MS,
    T_DELAY_MS,
    T_REASON,
    T_RETRY_AFTER, /* the fields above are required; retry_after (null) and those below came later, optional */
    T_RETRY_AFTER_HEADER,
    T_START_MS, /* start_ms, hedge and fate: a hedged request's, together (fate names them) */
    T_HEDGE,
    T_FATE,
    T_TIMEOUT_MS, /* the replay facts (ledger.h) */
    T_TRANSPORT,
    T_NOT_SENT,
    T_GRPC_STATUS,
    T_WAIT,
    T_DATE,
    T_PEER,
    T_COUNT
};
static const char *const try_fields[T_COUNT] = {
    "class",    "status", "elapsed_ms", "delay_ms",   "reason",    "retry_after", "retry_after_header",
    "start_ms", "hedge",  "fate",       "timeout_ms", "transport", "not_sent",    "grpc_status",
    "wait",     "date",   "peer"};

/* Where the complaint goes. */
typedef struct complaint {
    char *why;
    size_t cap;
} complaint;

static bool refuse(complaint *c, const char *fmt, ...) RFI_PRINTF(2, 3);

static bool refuse(complaint *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->cap, fmt, ap);
    va_end(ap);
    return false;
}

/* Files obj's members under their names in slot[] (n names); refuses unknown and duplicate names. */
static bool collect(const cJSON *obj, const char *const *names, size_t n, const cJSON **slot, const char *prefix,
                    complaint *c) {
    memset(slot, 0, n * sizeof *slot);
    for (const cJSON *m = obj->child; m; m = m->next) {
        size_t i = 0;
        while (i < n && strcmp(m->string, names[i]) != 0) {
            i++;
        }
        if (i == n) {
            return refuse(c, "unknown field \"%s%.64s\"", prefix, m->string);
        }
        if (slot[i]) {
            return refuse(c, "duplicate field \"%s%s\"", prefix, names[i]);
        }
        slot[i] = m;
    }
    return true;
}

static bool want_string(const cJSON *v, bool nullable, const char *prefix, const char *name, const char **out,
                        complaint *c) {
    if (nullable && cJSON_IsNull(v)) {
        *out = NULL;
        return true;
    }
    if (!cJSON_IsString(v)) {
        return refuse(c, "field \"%s%s\" must be a string%s, got %s", prefix, name, nullable ? " or null" : "",
                      rfi_json_type_name(v));
    }
    *out = v->valuestring;
    return true;
}

/* An integral JSON number in [lo, hi]. */
static bool want_int(const cJSON *v, int64_t lo, int64_t hi, const char *prefix, const char *name, int64_t *out,
                     complaint *c) {
    if (!cJSON_IsNumber(v)) {
        return refuse(c, "field \"%s%s\" must be an integer, got %s", prefix, name, rfi_json_type_name(v));
    }
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || (double)(int64_t)d != d) {
        char text[RFI_NUMBER_TEXT_MAX];
        return refuse(c, "field \"%s%s\" must be an integer in %s, got %s", prefix, name,
                      hi == INT_MAX ? "int range" : "+-2^53", rfi_number_text(text, d));
    }
    *out = (int64_t)d;
    return true;
}

static bool want_int32(const cJSON *v, const char *prefix, const char *name, int *out, complaint *c) {
    int64_t i = 0;
    if (!want_int(v, INT_MIN, INT_MAX, prefix, name, &i, c)) {
        return false;
    }
    *out = (int)i;
    return true;
}

static bool want_int53(const cJSON *v, const char *prefix, const char *name, int64_t *out, complaint *c) {
    return want_int(v, -RFI_LEDGER_MAX_SAFE_INT, RFI_LEDGER_MAX_SAFE_INT, prefix, name, out, c);
}

/* The "wait" object of a try: wait header names (RF_WAIT_HEADERS, lowercase as written) → string values. */
static bool fill_wait(const cJSON *obj, const char *prefix, rf_ledger_try *t, complaint *c) {
    if (!cJSON_IsObject(obj))
        return refuse(c, "field \"%swait\" must be an object, got %s", prefix, rfi_json_type_name(obj));
    for (const cJSON *m = obj->child; m; m = m->next) {
        int h = 0;
        while (h < RF_WAIT_HEADER_COUNT && strcmp(m->string, rf_wait_header_name((rf_wait_header)h)) != 0) h++;
        if (h == RF_WAIT_HEADER_COUNT) return refuse(c, "unknown wait header \"%swait.%.64s\"", prefix, m->string);
        if (t->wait[h]) return refuse(c, "duplicate field \"%swait.%s\"", prefix, m->string);
        char name[48];
        snprintf(name, sizeof name, "wait.%s", m->string);
        if (!want_string(m, false, prefix, name, &t->wait[h], c)) return false;
    }
    return true;
}

/* A try's replay facts (ledger.h), each optional: timeout_ms (0..2^53), transport (an RF_TRANSPORTS name), not_sent,
 * grpc_status (1..16), wait, date; and its peer ("host:port"). */
static bool fill_try_facts(const cJSON *const *f, const char *prefix, rf_ledger_try *t, complaint *c) {
    if (f[T_TIMEOUT_MS] &&
        !want_int(f[T_TIMEOUT_MS], 0, RFI_LEDGER_MAX_SAFE_INT, prefix, "timeout_ms", &t->timeout_ms, c))
        return false;
    if (f[T_TRANSPORT]) {
        rf_transport tr;
        if (!want_string(f[T_TRANSPORT], false, prefix, "transport", &t->transport, c)) return false;
        if (rf_transport_parse(t->transport, strlen(t->transport), &tr) != 0)
            return refuse(c, "field \"%stransport\" must be a transport outcome, got \"%.40s\"", prefix, t->transport);
    }
    if (f[T_NOT_SENT]) {
        if (!cJSON_IsBool(f[T_NOT_SENT]))
            return refuse(c, "field \"%snot_sent\" must be a boolean, got %s", prefix,
                          rfi_json_type_name(f[T_NOT_SENT]));
        t->not_sent = cJSON_IsTrue(f[T_NOT_SENT]);
    }
    if (f[T_GRPC_STATUS]) {
        int64_t g = 0;
        if (!want_int(f[T_GRPC_STATUS], 1, RF_GRPC_STATUS_MAX, prefix, "grpc_status", &g, c)) return false;
        t->grpc_status = (int)g;
    }
    if (f[T_WAIT] && !fill_wait(f[T_WAIT], prefix, t, c)) return false;
    if (f[T_DATE] && !want_string(f[T_DATE], false, prefix, "date", &t->date, c)) return false;
    if (!f[T_PEER]) return true;
    if (!want_string(f[T_PEER], false, prefix, "peer", &t->peer, c)) return false;
    if (!rfi_ledger_peer_ok(t->peer, strlen(t->peer)))
        return refuse(c, "field \"%speer\" must be \"host:port\" (port 1..65535), got \"%.64s\"", prefix, t->peer);
    return true;
}

static bool fill_try(const cJSON *obj, size_t index, rf_ledger_try *t, complaint *c) {
    const cJSON *f[T_COUNT];
    char prefix[32];

    snprintf(prefix, sizeof prefix, "$.tries[%zu].", index);
    if (!cJSON_IsObject(obj)) {
        return refuse(c, "field \"$.tries[%zu]\" must be an object, got %s", index, rfi_json_type_name(obj));
    }
    if (!collect(obj, try_fields, T_COUNT, f, prefix, c)) {
        return false;
    }
    for (size_t i = 0; i < T_RETRY_AFTER; i++) { /* retry_after and what follows it are optional */
        if (!f[i]) {
            return refuse(c, "missing field \"%s%s\"", prefix, try_fields[i]);
        }
    }
    *t = (rf_ledger_try){0};
    if (!(want_string(f[T_CLASS], false, prefix, "class", &t->class_name, c) &&
          want_int32(f[T_STATUS], prefix, "status", &t->status, c) &&
          want_int53(f[T_ELAPSED_MS], prefix, "elapsed_ms", &t->elapsed_ms, c) &&
          want_int53(f[T_DELAY_MS], prefix, "delay_ms", &t->delay_ms, c) &&
          want_string(f[T_REASON], false, prefix, "reason", &t->reason, c) &&
          (!f[T_RETRY_AFTER] || want_string(f[T_RETRY_AFTER], true, prefix, "retry_after", &t->retry_after, c)) &&
          (!f[T_RETRY_AFTER_HEADER] ||
           want_string(f[T_RETRY_AFTER_HEADER], true, prefix, "retry_after_header", &t->retry_after_header, c)) &&
          fill_try_facts(f, prefix, t, c)))
        return false;
    if (!f[T_FATE]) {
        if (f[T_START_MS] || f[T_HEDGE])
            return refuse(c, "field \"%s%s\" without \"%sfate\" (a hedged try's fields come together)", prefix,
                          f[T_START_MS] ? "start_ms" : "hedge", prefix);
        return true;
    }
    if (!want_string(f[T_FATE], false, prefix, "fate", &t->fate, c)) return false;
    if (!rfi_ledger_fate_known(t->fate, strlen(t->fate)))
        return refuse(c, "field \"%sfate\" must be winner, cancelled or failed, got \"%.40s\"", prefix, t->fate);
    if (!f[T_START_MS]) return refuse(c, "missing field \"%sstart_ms\" (a hedged try's start)", prefix);
    if (!want_int(f[T_START_MS], 0, RFI_LEDGER_MAX_SAFE_INT, prefix, "start_ms", &t->start_ms, c)) return false;
    if (f[T_HEDGE] && !cJSON_IsBool(f[T_HEDGE]))
        return refuse(c, "field \"%shedge\" must be a boolean, got %s", prefix, rfi_json_type_name(f[T_HEDGE]));
    t->hedge = f[T_HEDGE] != NULL && cJSON_IsTrue(f[T_HEDGE]);
    return true;
}

static bool fill_tries(const cJSON *arr, rf_ledger_record *rec, complaint *c) {
    if (!cJSON_IsArray(arr)) {
        return refuse(c, "field \"$.tries\" must be an array, got %s", rfi_json_type_name(arr));
    }
    rec->n_tries = 0;
    for (const cJSON *e = arr->child; e; e = e->next) {
        if (rec->n_tries == RF_LEDGER_MAX_TRIES) {
            return refuse(c, "field \"$.tries\" has more than RF_LEDGER_MAX_TRIES (%d) entries", RF_LEDGER_MAX_TRIES);
        }
        if (!fill_try(e, rec->n_tries, &rec->tries[rec->n_tries], c)) {
            return false;
        }
        rec->n_tries++;
    }
    return true;
}

/*
 * A line of the seed's Python harness: {"key":…, "attempts":2, "elapsed_s":0.41,
 * "last":{"status":200, "body_len":12, "verdict":"unknown"}, "ok":true}. Recognized by its "elapsed_s"
 * field, line by line, so a file may mix both forms. Mapped as docs/evidence.md "Seed-harness lines" says:
 * route RF_LEDGER_HARNESS_ROUTE, elapsed_ms = elapsed_s × 1000 rounded, status = last.status, body_len =
 * last.body_len, outcome/reason success/success when ok, else failed/seed-harness (the harness does not
 * record the failure class, so such a line is never counted as terminal), no tries. Strict like the rest:
 * every field required, unknown fields refused.
 */
enum harness_field { H_KEY, H_ATTEMPTS, H_ELAPSED_S, H_LAST, H_OK, H_COUNT };
static const char *const harness_fields[H_COUNT] = {"key", "attempts", "elapsed_s", "last", "ok"};
enum harness_last_field { HL_STATUS, HL_BODY_LEN, HL_VERDICT, HL_COUNT };
static const char *const harness_last_fields[HL_COUNT] = {"status", "body_len", "verdict"};

static bool fill_harness(const cJSON *root, rf_ledger_record *rec, complaint *c) {
    const cJSON *f[H_COUNT], *l[HL_COUNT];
    const char *verdict;
    int64_t attempts = 0;

    if (!collect(root, harness_fields, H_COUNT, f, "$.", c)) {
        return false;
    }
    for (size_t i = 0; i < H_COUNT; i++) {
        if (!f[i]) {
            return refuse(c, "missing field \"$.%s\" (a seed-harness line)", harness_fields[i]);
        }
    }
    if (!cJSON_IsNumber(f[H_ELAPSED_S]) || !(f[H_ELAPSED_S]->valuedouble >= 0.0) ||
        !(f[H_ELAPSED_S]->valuedouble * 1000.0 < (double)RFI_LEDGER_MAX_SAFE_INT)) {
        return refuse(c, "field \"$.elapsed_s\" must be a number of seconds, 0 or more");
    }
    if (!cJSON_IsBool(f[H_OK])) {
        return refuse(c, "field \"$.ok\" must be a boolean, got %s", rfi_json_type_name(f[H_OK]));
    }
    if (!cJSON_IsObject(f[H_LAST])) {
        return refuse(c, "field \"$.last\" must be an object, got %s", rfi_json_type_name(f[H_LAST]));
    }
    if (!collect(f[H_LAST], harness_last_fields, HL_COUNT, l, "$.last.", c)) {
        return false;
    }
    for (size_t i = 0; i < HL_COUNT; i++) {
        if (!l[i]) {
            return refuse(c, "missing field \"$.last.%s\" (a seed-harness line)", harness_last_fields[i]);
        }
    }
    if (!want_int(f[H_ATTEMPTS], 0, RF_LEDGER_MAX_TRIES, "$.", "attempts", &attempts, c) ||
        !want_string(f[H_KEY], true, "$.", "key", &rec->key, c) ||
        !want_int32(l[HL_STATUS], "$.last.", "status", &rec->status, c) ||
        !want_int53(l[HL_BODY_LEN], "$.last.", "body_len", &rec->body_len, c) ||
        !want_string(l[HL_VERDICT], false, "$.last.", "verdict", &verdict, c)) {
        return false;
    }
    rec->ts_ms = 0;
    rec->route = RF_LEDGER_HARNESS_ROUTE;
    rec->method = "";
    rec->path = "";
    rec->policy = "";
    rec->attempts = (int)attempts;
    rec->elapsed_ms = (int64_t)(f[H_ELAPSED_S]->valuedouble * 1000.0 + 0.5);
    rec->ok = cJSON_IsTrue(f[H_OK]);
    rec->outcome = rec->ok ? "success" : "failed";
    rec->reason = rec->ok ? "success" : "seed-harness";
    rec->n_tries = 0;
    return true;
}

/* An integral JSON number of a top-level field in [lo, hi], which the refusal names as range ("1..2147483647"). */
static bool want_range(const cJSON *v, int64_t lo, int64_t hi, const char *range, const char *name, int64_t *out,
                       complaint *c) {
    const double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
    if (cJSON_IsNumber(v) && d >= (double)lo && d <= (double)hi && (double)(int64_t)d == d) {
        *out = (int64_t)d;
        return true;
    }
    char text[RFI_NUMBER_TEXT_MAX];
    return refuse(c, "field \"$.%s\" must be an integer in %s, got %s", name, range,
                  cJSON_IsNumber(v) ? rfi_number_text(text, d) : rfi_json_type_name(v));
}

/* What the request's caller propagated: inbound_deadline_ms (0..2^53) and inbound_attempt (1 and up). */
static bool want_inbound(const cJSON *deadline, const cJSON *attempt, rf_ledger_record *rec, complaint *c) {
    int64_t n = 0;
    if (deadline != NULL) {
        if (!want_range(deadline, 0, RFI_LEDGER_MAX_SAFE_INT, "0..2^53", "inbound_deadline_ms",
                        &rec->inbound_deadline_ms, c))
            return false;
        rec->has_inbound_deadline = true;
    }
    if (attempt != NULL) {
        if (!want_range(attempt, 1, INT_MAX, "1..2147483647", "inbound_attempt", &n, c)) return false;
        rec->inbound_attempt = (int)n;
    }
    return true;
}

static bool fill_record(const cJSON *root, rf_ledger_record *rec, complaint *c) {
    const cJSON *f[F_COUNT];
    const char *ts = NULL;

    if (!cJSON_IsObject(root)) {
        return refuse(c, "the line must be a JSON object, got %s", rfi_json_type_name(root));
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "elapsed_s") != NULL) {
        return fill_harness(root, rec, c);
    }
    if (!collect(root, record_fields, F_COUNT, f, "$.", c)) {
        return false;
    }
    for (size_t i = 0; i < F_REQUIRED; i++) {
        if (!f[i]) {
            return refuse(c, "missing field \"$.%s\"", record_fields[i]);
        }
    }
    if (!want_string(f[F_TS], false, "$.", "ts", &ts, c)) {
        return false;
    }
    if (!rfi_ledger_ts_parse(ts, strlen(ts), &rec->ts_ms)) {
        return refuse(c,
                      "field \"$.ts\" must be RFC 3339 UTC with milliseconds like 2026-11-29T17:20:01.123Z, got "
                      "\"%.40s\"",
                      ts);
    }
    if (!cJSON_IsBool(f[F_OK])) {
        return refuse(c, "field \"$.ok\" must be a boolean, got %s", rfi_json_type_name(f[F_OK]));
    }
    rec->ok = cJSON_IsTrue(f[F_OK]);
    return want_string(f[F_ROUTE], false, "$.", "route", &rec->route, c) &&
           want_string(f[F_METHOD], false, "$.", "method", &rec->method, c) &&
           want_string(f[F_PATH], false, "$.", "path", &rec->path, c) &&
           want_string(f[F_KEY], true, "$.", "key", &rec->key, c) &&
           want_string(f[F_POLICY], false, "$.", "policy", &rec->policy, c) &&
           want_int32(f[F_ATTEMPTS], "$.", "attempts", &rec->attempts, c) &&
           want_int53(f[F_ELAPSED_MS], "$.", "elapsed_ms", &rec->elapsed_ms, c) &&
           want_string(f[F_OUTCOME], false, "$.", "outcome", &rec->outcome, c) &&
           want_string(f[F_REASON], false, "$.", "reason", &rec->reason, c) &&
           want_int32(f[F_STATUS], "$.", "status", &rec->status, c) &&
           want_int53(f[F_BODY_LEN], "$.", "body_len", &rec->body_len, c) && fill_tries(f[F_TRIES], rec, c) &&
           (!f[F_HOST] || want_string(f[F_HOST], false, "$.", "host", &rec->host, c)) &&
           (!f[F_BUDGET] || want_string(f[F_BUDGET], false, "$.", "budget", &rec->budget, c)) &&
           want_inbound(f[F_INBOUND_DEADLINE], f[F_INBOUND_ATTEMPT], rec, c);
}

void rfi_ledger_record_clear(rf_ledger_record *rec) {
    /* Every byte but the tries array's, before it and after it: a field added to the record later is cleared too
     * (the inbound fields after host and budget were not, and a line without them read the previous line's). */
    const size_t after = offsetof(rf_ledger_record, tries) + sizeof rec->tries;
    memset(rec, 0, offsetof(rf_ledger_record, tries));
    memset((char *)rec + after, 0, sizeof *rec - after);
}

rfi_ledger_parse_result rfi_ledger_parse_line(const char *line, size_t len, rf_ledger_record *rec, cJSON **tree,
                                              char *why, size_t why_cap, int *column) {
    complaint c = {why, why_cap};
    const char *bad;
    const char *end = NULL;

    *tree = NULL;
    *column = 0;
    rfi_ledger_record_clear(rec);
    if (len == 0) {
        refuse(&c, "empty line");
        return RFI_LEDGER_NOT_JSON;
    }
    size_t at = rfi_ledger_text_check(line, len, &bad);
    if (at < len) {
        *column = (int)(at + 1);
        refuse(&c, "not valid JSON text: %s at column %zu", bad, at + 1);
        return RFI_LEDGER_NOT_JSON;
    }
    cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, false);
    size_t offset = end ? (size_t)(end - line) : 0;
    if (root) {
        while (offset < len && (line[offset] == ' ' || line[offset] == '\t' || line[offset] == '\r')) {
            offset++;
        }
    }
    if (!root || offset != len) {
        cJSON_Delete(root);
        *column = (int)(offset + 1);
        refuse(&c,
               root ? "not valid JSON: unexpected text after the value at column %zu"
                    : "not valid JSON: syntax error at column %zu",
               offset + 1);
        return RFI_LEDGER_NOT_JSON;
    }
    if (!fill_record(root, rec, &c)) {
        cJSON_Delete(root);
        rfi_ledger_record_clear(rec);
        return RFI_LEDGER_BAD_FIELD;
    }
    *tree = root;
    return RFI_LEDGER_PARSED;
}
