/* Strings for the engine's enums, from the X-macro lists in vocabulary.h (one source of truth). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define RF_X_STR3(name, str, retry) str,
#define RF_X_STR(name, str) str,

static const char *const reason_names[] = {RF_REASONS(RF_X_STR3)};
static const char *const transport_names[] = {RF_TRANSPORTS(RF_X_STR)};
static const char *const jitter_names[] = {RF_JITTERS(RF_X_STR)};
static const char *const retry_after_use_names[] = {RF_RETRY_AFTER_USES(RF_X_STR)};
static const char *const wait_header_names[] = {RF_WAIT_HEADERS(RF_X_STR)};
/* Their lengths (sizeof a string literal counts its NUL): compared before any byte, as every response header line
 * of an attempt is checked against each (client_flow.c, response_head.c). */
#define RF_X_LEN(name, str) sizeof(str) - 1,
static const size_t wait_header_lens[] = {RF_WAIT_HEADERS(RF_X_LEN)};
#undef RF_X_LEN
static const char *const budget_source_names[] = {RF_BUDGET_SOURCES(RF_X_STR)};

const char *rf_reason_name(rf_reason r) { return (unsigned)r < RF_REASON_COUNT ? reason_names[r] : "?"; }

const char *rf_transport_name(rf_transport t) { return (unsigned)t < RF_TRANSPORT_COUNT ? transport_names[t] : "?"; }

const char *rf_jitter_name(rf_jitter j) { return (unsigned)j < RF_JITTER_COUNT ? jitter_names[j] : "?"; }

const char *rf_retry_after_use_name(rf_retry_after_use u) {
    return (unsigned)u < RF_RA_USE_COUNT ? retry_after_use_names[u] : "?";
}

const char *rf_budget_source_name(rf_budget_source s) {
    return (unsigned)s < RF_BUDGET_SOURCE_COUNT ? budget_source_names[s] : "?";
}

int rf_transport_parse(const char *s, size_t len, rf_transport *out) {
    if (s == NULL || out == NULL) return -1;
    for (unsigned i = 0; i < RF_TRANSPORT_COUNT; i++) {
        if (strlen(transport_names[i]) == len && memcmp(transport_names[i], s, len) == 0) {
            *out = (rf_transport)i;
            return 0;
        }
    }
    return -1;
}

const char *rf_wait_header_name(rf_wait_header h) {
    return (unsigned)h < RF_WAIT_HEADER_COUNT ? wait_header_names[h] : "?";
}

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

int rf_wait_header_parse_name(const char *s, size_t len, rf_wait_header *out) {
    if (s == NULL || out == NULL) return -1;
    for (unsigned i = 0; i < RF_WAIT_HEADER_COUNT; i++) {
        if (wait_header_lens[i] != len) continue;
        const char *name = wait_header_names[i];
        size_t k = 0;
        while (k < len && ascii_lower(s[k]) == name[k]) k++;
        if (k == len) {
            *out = (rf_wait_header)i;
            return 0;
        }
    }
    return -1;
}

static const char *const framing_names[] = {RF_FRAMING_HEADERS(RF_X_STR)};

const char *rf_framing_header(const char *s, size_t len) {
    if (s == NULL) return NULL;
    while (len > 0 && (*s == ' ' || *s == '\t')) s++, len--;
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    for (size_t i = 0; i < sizeof framing_names / sizeof *framing_names; i++) {
        const char *name = framing_names[i];
        size_t k = 0;
        while (k < len && name[k] != '\0' && ascii_lower(s[k]) == name[k]) k++;
        if (k == len && name[k] == '\0') return name;
    }
    return NULL;
}

/* names[0..n) joined by ", " into buf (cut to cap). */
static void join(char *buf, size_t cap, const char *const *names, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
}

void rfi_jitter_names_text(char *buf, size_t cap) { join(buf, cap, jitter_names, RF_JITTER_COUNT); }

void rfi_wait_header_names_text(char *buf, size_t cap) { join(buf, cap, wait_header_names, RF_WAIT_HEADER_COUNT); }
