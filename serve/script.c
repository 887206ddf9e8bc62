/* retryfreeze-serve: X-Fault-Script grammar.
 *
 *   script = step *( "," step )
 *   step   = name *( ";" param )          spaces around steps and params are ignored
 *   name   = 3DIGIT (200..599) / "ok" / "timeout" / "reset" / "empty" / "cut"
 *   param  = "delay=" MS                  (0..3600000, any step)
 *          / "retry-after=" value         (status steps; sent verbatim)
 *          / "retry-after-date=" ["-"] N  (status steps; IMF-fixdate N seconds from now)
 *          / "header=" NAME ":" text      (status steps; that response header, verbatim; repeatable, up to 4
 *                                          with header-epoch; the same NAME twice sends two field lines)
 *          / "header-epoch=" NAME ":" ["-"] N  (status steps; NAME: the Unix time N seconds from now, in seconds)
 *   NAME   = an RFC 9110 token, not one the server sets itself (Content-Length, Content-Type,
 *            Transfer-Encoding, Connection, Date) nor Retry-After (use retry-after=)
 *   The NAME:text of header= is one value (bare, or quoted to hold "," and ";"), split at its first ":".
 *   value  = bare / quoted                bare: any text up to "," or ";" (not empty)
 *   quoted = DQUOTE *( char / "\" DQUOTE / "\\" ) DQUOTE   (may hold "," and ";")
 *
 * No 1xx: those are interim responses, and libmicrohttpd 0.9.75 sends one and then leaves the
 * client waiting (or, for 102, asks for a final answer), so they cannot be a step's answer.
 *
 * The script is parsed afresh on every attempt (it is short and comes with every retry), so no
 * per-sequence copy of it is ever stored. */
#include "script.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct cursor {
    const char *p, *end;
    char *err;
    size_t errlen;
};

static int fail(struct cursor *c, const char *what) {
    size_t left = (size_t)(c->end - c->p);
    int n = left > 40 ? 40 : (int)left;
    snprintf(c->err, c->errlen, "%s at '%.*s'", what, n, c->p);
    return -1;
}

static void skip_spaces(struct cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int at_separator(const struct cursor *c) { return c->p == c->end || *c->p == ',' || *c->p == ';'; }

static size_t word_len(const struct cursor *c) {
    const char *q = c->p;
    while (q < c->end && *q != ',' && *q != ';' && *q != '=' && *q != ' ' && *q != '\t') q++;
    return (size_t)(q - c->p);
}

static int word_is(const struct cursor *c, size_t n, const char *w) {
    return strlen(w) == n && memcmp(c->p, w, n) == 0;
}

/* A bare or quoted parameter value into out (NUL-terminated, at most SRV_RETRY_AFTER_MAX); what names it in
 * the messages ("retry-after", "header"). */
static int parse_value(struct cursor *c, char *out, const char *what) {
    char msg[80];
    size_t n = 0;
    if (c->p < c->end && *c->p == '"') {
        c->p++;
        for (;;) {
            if (c->p == c->end) return fail(c, "unterminated quote");
            char ch = *c->p++;
            if (ch == '"') break;
            if (ch == '\\') {
                if (c->p == c->end || (*c->p != '"' && *c->p != '\\'))
                    return fail(c, "only \\\" and \\\\ may be escaped");
                ch = *c->p++;
            }
            if (n == SRV_RETRY_AFTER_MAX) return snprintf(msg, sizeof msg, "%s value too long", what), fail(c, msg);
            out[n++] = ch;
        }
    } else {
        while (!at_separator(c)) {
            if (n == SRV_RETRY_AFTER_MAX) return snprintf(msg, sizeof msg, "%s value too long", what), fail(c, msg);
            out[n++] = *c->p++;
        }
        while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t')) n--;
    }
    out[n] = '\0';
    if (n == 0) {
        snprintf(msg, sizeof msg, "empty %s value (libmicrohttpd cannot send an empty header)", what);
        return fail(c, msg);
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f) {
            snprintf(msg, sizeof msg, "control character in %s value", what);
            return fail(c, msg);
        }
    }
    return 0;
}

static int parse_number(struct cursor *c, long long max, int allow_negative, long long *out) {
    int negative = 0;
    if (allow_negative && c->p < c->end && *c->p == '-') {
        negative = 1;
        c->p++;
    }
    size_t n = word_len(c);
    uint64_t v;
    if (srv_parse_uint(c->p, n, (uint64_t)max, &v) != 0) return fail(c, "bad number");
    c->p += n;
    *out = negative ? -(long long)v : (long long)v;
    return 0;
}

static int is_tchar(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static int header_name_allowed(const char *name) {
    static const char *const reserved[] = {"content-length", "content-type", "transfer-encoding",
                                           "connection",     "date",         "retry-after"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcasecmp(name, reserved[i]) == 0) return 0;
    return 1;
}

/* header=NAME:text or header-epoch=NAME:N into the step's next header. */
static int parse_header(struct cursor *c, struct srv_step *s, int epoch) {
    if (s->n_headers == SRV_MAX_HEADERS) return fail(c, "more than 4 header parameters in one step");
    struct srv_header *h = &s->headers[s->n_headers];
    char text[SRV_RETRY_AFTER_MAX + 1];
    const char *start = c->p;
    if (parse_value(c, text, "header") != 0) return -1;
    char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : 0;
    if (colon == NULL || name_len == 0 || name_len > SRV_HEADER_NAME_MAX) {
        c->p = start;
        return fail(c, "header wants NAME:VALUE with a NAME of 1..64 token characters");
    }
    for (size_t i = 0; i < name_len; i++) {
        if (!is_tchar(text[i])) {
            c->p = start;
            return fail(c, "header NAME is not an RFC 9110 token");
        }
    }
    memcpy(h->name, text, name_len);
    h->name[name_len] = '\0';
    if (!header_name_allowed(h->name)) {
        c->p = start;
        return fail(c, "header NAME is one the server sets itself (use retry-after= for Retry-After)");
    }
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    if (epoch) {
        struct cursor num = {v, v + strlen(v), c->err, c->errlen};
        long long off;
        if (parse_number(&num, SRV_DATE_OFFSET_MAX, 1, &off) != 0 || num.p != num.end) {
            c->p = start;
            return fail(c, "header-epoch wants NAME:N with N whole seconds from now");
        }
        h->epoch = 1;
        h->epoch_offset_s = off;
    } else {
        if (*v == '\0') {
            c->p = start;
            return fail(c, "empty header value (libmicrohttpd cannot send an empty header)");
        }
        snprintf(h->value, sizeof h->value, "%s", v);
    }
    s->n_headers++;
    return 0;
}

static int parse_param(struct cursor *c, struct srv_step *s, int *seen_delay) {
    size_t n = word_len(c);
    int is_delay = word_is(c, n, "delay");
    int is_ra = word_is(c, n, "retry-after");
    int is_date = word_is(c, n, "retry-after-date");
    int is_header = word_is(c, n, "header"), is_epoch = word_is(c, n, "header-epoch");
    if (!is_delay && !is_ra && !is_date && !is_header && !is_epoch)
        return fail(c, "unknown parameter (want delay, retry-after, retry-after-date, header or header-epoch)");
    if ((is_delay && *seen_delay) || ((is_ra || is_date) && s->ra != SRV_RA_NONE)) return fail(c, "repeated parameter");
    if ((is_ra || is_date) && s->kind != SRV_FAULT_STATUS) return fail(c, "retry-after needs a status step");
    if ((is_header || is_epoch) && s->kind != SRV_FAULT_STATUS) return fail(c, "header needs a status step");
    c->p += n;
    skip_spaces(c);
    if (c->p == c->end || *c->p != '=') return fail(c, "expected '='");
    c->p++;
    skip_spaces(c);
    long long v;
    if (is_header || is_epoch) return parse_header(c, s, is_epoch);
    if (is_delay) {
        if (parse_number(c, SRV_DELAY_MAX_MS, 0, &v) != 0) return -1;
        s->delay_ms = (long)v;
        *seen_delay = 1;
    } else if (is_date) {
        if (parse_number(c, SRV_DATE_OFFSET_MAX, 1, &v) != 0) return -1;
        s->ra = SRV_RA_DATE;
        s->ra_date_offset_s = v;
    } else {
        if (parse_value(c, s->ra_text, "retry-after") != 0) return -1;
        s->ra = SRV_RA_TEXT;
    }
    return 0;
}

static int parse_step(struct cursor *c, struct srv_step *s) {
    memset(s, 0, sizeof *s);
    skip_spaces(c);
    size_t n = word_len(c);
    uint64_t status;
    s->kind = SRV_FAULT_STATUS;
    if (word_is(c, n, "ok"))
        s->status = 200;
    else if (word_is(c, n, "timeout"))
        s->kind = SRV_FAULT_TIMEOUT;
    else if (word_is(c, n, "reset"))
        s->kind = SRV_FAULT_RESET;
    else if (word_is(c, n, "empty"))
        s->kind = SRV_FAULT_EMPTY;
    else if (word_is(c, n, "cut"))
        s->kind = SRV_FAULT_CUT;
    else if (n == 3 && srv_parse_uint(c->p, 3, 599, &status) == 0 && status >= 200)
        s->status = (int)status;
    else
        return fail(c, "unknown step (want 200..599, ok, timeout, reset, empty or cut)");
    c->p += n;
    int seen_delay = 0;
    for (;;) {
        skip_spaces(c);
        if (c->p == c->end || *c->p == ',') return 0;
        if (*c->p != ';') return fail(c, "expected ';' or ','");
        c->p++;
        skip_spaces(c);
        if (parse_param(c, s, &seen_delay) != 0) return -1;
    }
}

long srv_script_parse(const char *text, size_t len, size_t index, struct srv_step *step, char *err, size_t errlen) {
    struct cursor c = {text, text + len, err, errlen};
    struct srv_step scratch;
    long count = 0;
    for (;;) {
        struct srv_step *into = (step != NULL && (size_t)count == index) ? step : &scratch;
        if (parse_step(&c, into) != 0) return -1;
        count++;
        if (c.p == c.end) return count;
        c.p++; /* the ',' */
    }
}
