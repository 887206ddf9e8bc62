/*
 * The fast path of the ledger reader: a single pass over a line in exactly the form the writer produces
 * (fields in the writer's order, no spaces, strings of printable ASCII without escapes, plain integers).
 * Every line it accepts, the strict parser (ledger_parse.c) accepts with the same record; anything else
 * returns false and the strict parser decides, so what counts as corrupt does not change. No allocation:
 * on success the strings are NUL-terminated in place, in the reader's buffer.
 */
#include "ledger_internal.h"

#include <limits.h>
#include <string.h>

/* The most strings a line holds: ts, route, method, path, key, policy, outcome, reason, host and budget, and per try
 * class, reason, retry_after, retry_after_header, fate, transport, the wait headers and date. A line with more is
 * left to the general parser. */
#define MAX_STRINGS (10 + (8 + RF_WAIT_HEADER_COUNT) * RF_LEDGER_MAX_TRIES)

typedef struct cursor {
    const char *p, *end;
    size_t n_ends;
    const char *ends[MAX_STRINGS]; /* closing quotes to overwrite with NUL once the whole line is accepted */
} cursor;

static bool lit(cursor *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return false;
    c->p += n;
    return true;
}
#define LIT(c, s) lit((c), (s), sizeof(s) - 1)

/* A string of printable ASCII without '"' or '\\' up to the closing quote (the opening one is consumed). */
static bool str(cursor *c, const char **out) {
    const char *start = c->p;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch < 0x20 || ch > 0x7e || ch == '\\') return false;
        c->p++;
    }
    if (c->p == c->end || c->n_ends == MAX_STRINGS) return false;
    *out = start;
    c->ends[c->n_ends++] = c->p;
    c->p++;
    return true;
}

/* '"'-prefixed string, or null when nullable. */
static bool str_or_null(cursor *c, bool nullable, const char **out) {
    if (nullable && LIT(c, "null")) {
        *out = NULL;
        return true;
    }
    return LIT(c, "\"") && str(c, out);
}

/* A plain JSON integer (no leading zeros, at most 16 digits) in [lo, hi]. */
static bool integer(cursor *c, int64_t lo, int64_t hi, int64_t *out) {
    bool neg = c->p < c->end && *c->p == '-';
    if (neg) c->p++;
    const char *start = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - start < 16) v = v * 10 + (*c->p++ - '0');
    size_t digits = (size_t)(c->p - start);
    if (digits == 0 || (digits > 1 && *start == '0') || (c->p < c->end && *c->p >= '0' && *c->p <= '9')) return false;
    if (neg) v = -v;
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool int32(cursor *c, int *out) {
    int64_t v;
    if (!integer(c, INT_MIN, INT_MAX, &v)) return false;
    *out = (int)v;
    return true;
}

static bool int53(cursor *c, int64_t *out) {
    return integer(c, -RFI_LEDGER_MAX_SAFE_INT, RFI_LEDGER_MAX_SAFE_INT, out);
}

/* The name of a wait header up to its closing quote (the opening one consumed), one after `after` in RF_WAIT_HEADERS
 * order (the writer's): its index, or -1. */
static int wait_name(cursor *c, int after) {
    for (int h = after + 1; h < RF_WAIT_HEADER_COUNT; h++) {
        const char *name = rf_wait_header_name((rf_wait_header)h);
        size_t n = strlen(name);
        if ((size_t)(c->end - c->p) > n && memcmp(c->p, name, n) == 0 && c->p[n] == '"') {
            c->p += n + 1;
            return h;
        }
    }
    return -1;
}

/* A try's replay facts (ledger.h), each optional, in the writer's order; the transport one of RF_TRANSPORTS; then
 * the try's peer ("host:port"). */
static bool try_facts(cursor *c, rf_ledger_try *t) {
    if (LIT(c, ",\"timeout_ms\":") && !(int53(c, &t->timeout_ms) && t->timeout_ms > 0)) return false;
    if (LIT(c, ",\"transport\":\"")) {
        rf_transport tr;
        if (!str(c, &t->transport) ||
            rf_transport_parse(t->transport, (size_t)(c->ends[c->n_ends - 1] - t->transport), &tr) != 0)
            return false;
    }
    if (LIT(c, ",\"not_sent\":true")) t->not_sent = true;
    if (LIT(c, ",\"grpc_status\":")) {
        int64_t g = 0;
        if (!int53(c, &g) || g < 1 || g > RF_GRPC_STATUS_MAX) return false;
        t->grpc_status = (int)g;
    }
    if (LIT(c, ",\"wait\":{\"")) {
        int h = -1;
        do {
            h = wait_name(c, h);
            if (h < 0 || !LIT(c, ":\"") || !str(c, &t->wait[h])) return false;
        } while (LIT(c, ",\""));
        if (!LIT(c, "}")) return false;
    }
    if (LIT(c, ",\"date\":\"") && !str(c, &t->date)) return false;
    return !LIT(c, ",\"peer\":\"") ||
           (str(c, &t->peer) && rfi_ledger_peer_ok(t->peer, (size_t)(c->ends[c->n_ends - 1] - t->peer)));
}

/* A hedged request's fields of a try, in the writer's order: ,"start_ms":N[,"hedge":true],"fate":"…" (a fate the
 * vocabulary knows, checked before the line is terminated), or none of them. */
static bool hedge_fields(cursor *c, rf_ledger_try *t) {
    if (!LIT(c, ",\"start_ms\":")) return true;
    if (!integer(c, 0, RFI_LEDGER_MAX_SAFE_INT, &t->start_ms)) return false;
    t->hedge = LIT(c, ",\"hedge\":true");
    return LIT(c, ",\"fate\":\"") && str(c, &t->fate) &&
           rfi_ledger_fate_known(t->fate, (size_t)(c->ends[c->n_ends - 1] - t->fate));
}

static bool try_entry(cursor *c, rf_ledger_try *t) {
    *t = (rf_ledger_try){0};
    return LIT(c, "{\"class\":\"") && str(c, &t->class_name) && LIT(c, ",\"status\":") && int32(c, &t->status) &&
           LIT(c, ",\"elapsed_ms\":") && int53(c, &t->elapsed_ms) && LIT(c, ",\"delay_ms\":") &&
           int53(c, &t->delay_ms) && LIT(c, ",\"reason\":\"") && str(c, &t->reason) && LIT(c, ",\"retry_after\":") &&
           str_or_null(c, true, &t->retry_after) &&
           (!LIT(c, ",\"retry_after_header\":\"") || str(c, &t->retry_after_header)) && hedge_fields(c, t) &&
           try_facts(c, t) && LIT(c, "}");
}

bool rfi_ledger_parse_fast(char *line, size_t len, rf_ledger_record *rec) {
    cursor c = {.p = line, .end = line + len, .n_ends = 0};
    const char *ts;
    rfi_ledger_record_clear(rec);
    bool ok = LIT(&c, "{\"ts\":\"") && str(&c, &ts) && LIT(&c, ",\"route\":\"") && str(&c, &rec->route) &&
              LIT(&c, ",\"method\":\"") && str(&c, &rec->method) && LIT(&c, ",\"path\":\"") && str(&c, &rec->path) &&
              LIT(&c, ",\"key\":") && str_or_null(&c, true, &rec->key) && LIT(&c, ",\"policy\":\"") &&
              str(&c, &rec->policy) && LIT(&c, ",\"attempts\":") && int32(&c, &rec->attempts) &&
              LIT(&c, ",\"elapsed_ms\":") && int53(&c, &rec->elapsed_ms) && LIT(&c, ",\"outcome\":\"") &&
              str(&c, &rec->outcome) && LIT(&c, ",\"reason\":\"") && str(&c, &rec->reason);
    if (ok) {
        if (LIT(&c, ",\"ok\":true"))
            rec->ok = true;
        else
            ok = LIT(&c, ",\"ok\":false");
    }
    ok = ok && LIT(&c, ",\"status\":") && int32(&c, &rec->status) && LIT(&c, ",\"body_len\":") &&
         int53(&c, &rec->body_len) && LIT(&c, ",\"tries\":[");
    if (ok && !LIT(&c, "]")) {
        do {
            if (rec->n_tries == RF_LEDGER_MAX_TRIES || !try_entry(&c, &rec->tries[rec->n_tries])) return false;
            rec->n_tries++;
        } while (LIT(&c, ","));
        ok = LIT(&c, "]");
    }
    if (ok && LIT(&c, ",\"host\":\"")) ok = str(&c, &rec->host);
    if (ok && LIT(&c, ",\"budget\":\"")) ok = str(&c, &rec->budget);
    if (ok && LIT(&c, ",\"inbound_deadline_ms\":"))
        ok = (rec->has_inbound_deadline = integer(&c, 0, RFI_LEDGER_MAX_SAFE_INT, &rec->inbound_deadline_ms));
    int64_t attempt = 0;
    if (ok && LIT(&c, ",\"inbound_attempt\":")) ok = integer(&c, 1, INT_MAX, &attempt);
    rec->inbound_attempt = (int)attempt;
    ok = ok && LIT(&c, "}") && c.p == c.end;
    /* ts: exactly the writer's format and a real date, as the strict parser demands. */
    if (!ok || ts + RFI_LEDGER_TS_LEN != c.ends[0] || !rfi_ledger_ts_parse(ts, RFI_LEDGER_TS_LEN, &rec->ts_ms)) {
        rfi_ledger_record_clear(rec);
        return false;
    }
    for (size_t i = 0; i < c.n_ends; i++) *(char *)c.ends[i] = '\0'; /* the line is accepted: terminate */
    return true;
}
