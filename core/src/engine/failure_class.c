/*
 * Failure classes: parsing lock tokens into sets, printing sets canonically, classifying transport facts,
 * and the retryable test. Tokens: HTTP_<nnn> (100..599), HTTP_4XX, HTTP_5XX, the named classes of
 * RF_NAMED_CLASSES, and the original pairing lock's aliases GATEWAY_TIMEOUT (= TIMEOUT + HTTP_504) and
 * HANDLER_5XX (= HTTP_5XX).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define RF_X_NAME(name, str) str,
static const char *const named_tokens[] = {RF_NAMED_CLASSES(RF_X_NAME)};

/* The tokens of the statuses 100..599, static strings: a policy's views point at them instead of keeping copies. */
#define STATUS_TOKEN(h, t, u) "HTTP_" #h #t #u
#define STATUS_TENS(h, t)                                                                                              \
    STATUS_TOKEN(h, t, 0), STATUS_TOKEN(h, t, 1), STATUS_TOKEN(h, t, 2), STATUS_TOKEN(h, t, 3), STATUS_TOKEN(h, t, 4), \
        STATUS_TOKEN(h, t, 5), STATUS_TOKEN(h, t, 6), STATUS_TOKEN(h, t, 7), STATUS_TOKEN(h, t, 8),                    \
        STATUS_TOKEN(h, t, 9)
#define STATUS_HUNDREDS(h)                                                                                            \
    STATUS_TENS(h, 0), STATUS_TENS(h, 1), STATUS_TENS(h, 2), STATUS_TENS(h, 3), STATUS_TENS(h, 4), STATUS_TENS(h, 5), \
        STATUS_TENS(h, 6), STATUS_TENS(h, 7), STATUS_TENS(h, 8), STATUS_TENS(h, 9)
const char *const rfi_status_tokens[500] = {STATUS_HUNDREDS(1), STATUS_HUNDREDS(2), STATUS_HUNDREDS(3),
                                            STATUS_HUNDREDS(4), STATUS_HUNDREDS(5)};

const char *rfi_status_token(int status) { return rfi_status_tokens[status - 100]; }

const char *rfi_named_token(unsigned named) { return named_tokens[named]; }

static bool token_is(const char *token, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(token, lit, len) == 0;
}

static void set_status(rfi_class_set *set, int status) { set->status[status / 64] |= (uint64_t)1 << (status % 64); }

static bool has_status(const rfi_class_set *set, int status) {
    return (set->status[status / 64] >> (status % 64)) & 1u;
}

#define RF_X_ALIAS(token, expansion) {token, expansion},
static const struct { const char *token, *expansion; } aliases[] = {RF_CLASS_ALIASES(RF_X_ALIAS)};
#undef RF_X_ALIAS

bool rfi_class_add_token(rfi_class_set *set, const char *token, size_t len) {
    for (size_t a = 0; a < sizeof aliases / sizeof aliases[0]; a++) {
        if (!token_is(token, len, aliases[a].token)) continue;
        for (const char *p = aliases[a].expansion; *p;) { /* "TIMEOUT + HTTP_504": each part, itself a token */
            const char *end = strstr(p, " + ");
            size_t n = end ? (size_t)(end - p) : strlen(p);
            if (!rfi_class_add_token(set, p, n)) return false;
            p += n + (end ? 3 : 0);
        }
        return true;
    }
    if (token_is(token, len, "HTTP_5XX")) {
        set->family5xx = true;
        return true;
    }
    if (token_is(token, len, "HTTP_4XX")) {
        set->family4xx = true;
        return true;
    }
    for (unsigned i = 0; i < RF_NAMED_CLASS_COUNT; i++) {
        if (token_is(token, len, named_tokens[i])) {
            set->named |= 1u << i;
            return true;
        }
    }
    if (len == 8 && memcmp(token, "HTTP_", 5) == 0 && token[5] >= '1' && token[5] <= '5' && token[6] >= '0' &&
        token[6] <= '9' && token[7] >= '0' && token[7] <= '9') {
        set_status(set, (token[5] - '0') * 100 + (token[6] - '0') * 10 + (token[7] - '0'));
        return true;
    }
    return false;
}

/* The words rfi_class_add_token accepts, in the order the refusal lists them: the families, the named classes,
 * then the aliases; `status` and `aliases_word` say what goes before the first family and the first alias. */
static void class_words(char *buf, size_t cap, const char *status, const char *aliases_word) {
    size_t n = (size_t)snprintf(buf, cap, "%sHTTP_4XX, HTTP_5XX", status);
    for (unsigned i = 0; i < RF_NAMED_CLASS_COUNT && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, ", %s", named_tokens[i]);
    for (size_t a = 0; a < sizeof aliases / sizeof aliases[0] && n < cap; a++)
        n += (size_t)snprintf(buf + n, cap - n, ", %s%s", a == 0 ? aliases_word : "", aliases[a].token);
}

void rfi_class_list_text(char *buf, size_t cap) { class_words(buf, cap, "HTTP_<100..599>, ", "or the aliases "); }

/* The status token a near spelling of one means ("503", "http_503", "HTTP 503", "5xx", "http-5xx" → HTTP_503,
 * HTTP_5XX): an optional "http" in any case, an optional separator, then a status from 100 to 599 or a 4/5 and
 * "xx". Writes it into out (at least RF_CLASS_NAME_MAX), or "" when the token is not one. */
static void status_spelling(const char *token, char *out) {
    const char *p = token;
    out[0] = '\0';
    if ((p[0] | 0x20) == 'h' && (p[1] | 0x20) == 't' && (p[2] | 0x20) == 't' && (p[3] | 0x20) == 'p') {
        p += 4;
        if (*p == '_' || *p == ' ' || *p == '-' || *p == '/') p++;
    }
    if (strlen(p) != 3 || p[0] < '1' || p[0] > '5') return;
    if (p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9')
        snprintf(out, RF_CLASS_NAME_MAX, "HTTP_%.3s", p);
    else if ((p[0] == '4' || p[0] == '5') && (p[1] == 'x' || p[1] == 'X') && (p[2] == 'x' || p[2] == 'X'))
        snprintf(out, RF_CLASS_NAME_MAX, "HTTP_%cXX", p[0]);
}

void rfi_class_unknown(rf_error *err, const char *path, const char *token) {
    char words[RFI_CLASS_LIST_TEXT_MAX], near[RF_CLASS_NAME_MAX], hint[64] = "";
    class_words(words, sizeof words, "", "");
    status_spelling(token, near);
    if (!near[0]) rfi_did_you_mean(token, words, near, sizeof near);
    if (near[0]) snprintf(hint, sizeof hint, "did you mean \"%s\"? ", near);
    rfi_class_list_text(words, sizeof words);
    rfi_fail(err, path, "unknown failure class \"%.40s\" (%s%s)", token, hint, words);
}

bool rfi_class_overlap(const rfi_class_set *a, const rfi_class_set *b, char first[RF_CLASS_NAME_MAX]) {
    const char *tokens[1];
    rfi_class_set both = {0};
    for (size_t i = 0; i < 10; i++) both.status[i] = a->status[i] & b->status[i];
    both.family4xx = a->family4xx && b->family4xx;
    both.family5xx = a->family5xx && b->family5xx;
    both.named = a->named & b->named;
    if (rfi_class_count(&both) == 0) return false; /* the common case, without listing a token */
    rfi_class_tokens(&both, tokens, 1);
    snprintf(first, RF_CLASS_NAME_MAX, "%s", tokens[0]);
    return true;
}

size_t rfi_class_count(const rfi_class_set *set) {
    size_t n = (size_t)set->family4xx + (size_t)set->family5xx;
    for (size_t i = 0; i < 10; i++)
        for (uint64_t w = set->status[i]; w != 0; w &= w - 1) n++; /* one per set bit */
    for (uint32_t w = set->named; w != 0; w &= w - 1) n++;
    return n;
}

size_t rfi_class_tokens(const rfi_class_set *set, const char **tokens, size_t cap) {
    size_t n = 0;
    for (int st = RF_HTTP_STATUS_MIN; st <= RF_HTTP_STATUS_MAX; st++) {
        if (has_status(set, st)) {
            if (n < cap) tokens[n] = rfi_status_tokens[st - 100];
            n++;
        }
    }
    if (set->family4xx) {
        if (n < cap) tokens[n] = "HTTP_4XX";
        n++;
    }
    if (set->family5xx) {
        if (n < cap) tokens[n] = "HTTP_5XX";
        n++;
    }
    for (unsigned i = 0; i < RF_NAMED_CLASS_COUNT; i++) {
        if (set->named & (1u << i)) {
            if (n < cap) tokens[n] = named_tokens[i];
            n++;
        }
    }
    return n;
}

/* A table, since a switch on the decision path compiles to an indirect jump. */
const unsigned char rfi_transport_classes[RF_TRANSPORT_COUNT] = {
    [RF_TRANSPORT_OK] = RF_NAMED_CLASS_COUNT,
    [RF_TRANSPORT_TIMEOUT] = RF_CLASS_TIMEOUT,
    [RF_TRANSPORT_CONNECT_RESET] = RF_CLASS_CONNECT_RESET,
    [RF_TRANSPORT_CONNECT_REFUSED] = RF_CLASS_CONNECT_REFUSED,
    [RF_TRANSPORT_DNS] = RF_CLASS_DNS_FAILURE,
    [RF_TRANSPORT_TLS] = RF_CLASS_TLS_FAILURE,
    [RF_TRANSPORT_GOT_NOTHING] = RF_CLASS_CONNECT_RESET,
    [RF_TRANSPORT_OTHER] = RF_CLASS_UNKNOWN,
    [RF_TRANSPORT_PROXY_REFUSED] = RF_CLASS_PROXY_REFUSED,
    [RF_TRANSPORT_TOO_MANY_REDIRECTS] = RF_CLASS_TOO_MANY_REDIRECTS,
};
/* An entry left out would read as 0, TIMEOUT: a new transport outcome must be given its class here. */
_Static_assert(RF_TRANSPORT_COUNT == 10, "a new transport outcome needs its class in rfi_transport_classes");

#define RF_X_PADDED(name, str) str,
const char rfi_named_padded[RF_NAMED_CLASS_COUNT][RF_CLASS_NAME_MAX] = {RF_NAMED_CLASSES(RF_X_PADDED)};
#undef RF_X_PADDED

/* decide.h; the decision path calls rfi_classify, inline. */
void rf_classify(int status, rf_transport transport, char buf[RF_CLASS_NAME_MAX]) {
    rfi_classify(status, transport, 0, buf);
}

/* The bits of statuses lo..hi that lie in word w of a status mask (bit s of word s / 64). */
static uint64_t status_bits(unsigned w, unsigned lo, unsigned hi) {
    const unsigned first = w * 64, last = first + 63;
    if (hi < first || lo > last) return 0;
    const unsigned from = lo > first ? lo - first : 0, to = hi < last ? hi - first : 63;
    return (~UINT64_C(0) >> (63 - to)) & (~UINT64_C(0) << from);
}

/* Every status at once, a word at a time: a status is retryable when the retryable list names it, or names its
 * family while the other list does not name the status (a specific status beats a family; a family in the
 * notRetryable list only keeps what no list names from being retried, which it is not anyway). */
void rfi_class_retry_masks(rfi_route *r) {
    for (unsigned w = 0; w < 10; w++) {
        const uint64_t family = (r->retryable.family4xx ? status_bits(w, 400, 499) : 0) |
                                (r->retryable.family5xx ? status_bits(w, 500, 599) : 0);
        r->retry_status[w] = (r->retryable.status[w] | (family & ~r->not_retryable.status[w])) &
                             status_bits(w, RF_HTTP_STATUS_MIN, RF_HTTP_STATUS_MAX);
    }
    r->retry_named = r->retryable.named & ~(1u << RF_CLASS_TOO_MANY_REDIRECTS);
}

bool rfi_hedge_non_fatal(const rfi_route *r, int status, rf_transport transport, int grpc_status) {
    const rfi_class_set *set = &r->hedge_non_fatal;
    unsigned named = rfi_fact_class(transport, grpc_status);
    if (named == RF_NAMED_CLASS_COUNT) {
        if (status >= RF_HTTP_STATUS_MIN && status <= RF_HTTP_STATUS_MAX) {
            if (has_status(set, status)) return true;
            return (status >= 400 && status <= 499 && set->family4xx) || (status >= 500 && set->family5xx);
        }
        named = RF_CLASS_UNKNOWN;
    }
    return (set->named & (1u << named)) != 0;
}

bool rf_policy_class_retryable(const rf_policy *p, size_t route, int status, rf_transport transport) {
    if (p == NULL || route >= p->n_routes || (unsigned)transport >= RF_TRANSPORT_COUNT) return false;
    if (transport == RF_TRANSPORT_OK && status >= RF_SUCCESS_STATUS_MIN && status <= RF_SUCCESS_STATUS_MAX)
        return false; /* a success */
    return rfi_class_retryable(&p->routes[route], status, transport, 0);
}
