/*
 * Every "allowed" list a refusal prints equals what its parser accepts. Each test walks an X-macro list of
 * core/include/retryfreeze/vocabulary.h, so a name added there is checked here without editing this file: it
 * must be printed in the list and accepted by the parser, and the list may print nothing the X-macros do not
 * hold (nor anything the parser refuses).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/policy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B_START                                                                                          \
    "{\"endpoint\": \"GET /x\", \"maxAttempts\": 10, \"perAttemptTimeoutMs\": 1000, \"totalBudgetMs\": " \
    "2000, \"retryable\": []"

/* The message of loading B plus `members` (which must be refused). */
static void refusal(const char *members, char *message, size_t cap) {
    char text[1024];
    snprintf(text, sizeof text, "%s, %s}", B_START, members);
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) == RF_OK) {
        rf_policy_free(p);
        fail_msg("expected a refusal of %s", text);
    }
    snprintf(message, cap, "%s", err.message);
}

static bool loads(const char *members) {
    char text[1024];
    snprintf(text, sizeof text, "%s, %s}", B_START, members);
    rf_policy *p = NULL;
    rf_error err;
    rf_status st = rf_policy_load_buffer(text, strlen(text), &p, &err);
    rf_policy_free(p);
    return st == RF_OK;
}

/* The items of a ", "-separated list (at most 64); "or the aliases X, Y" counts as X and Y. */
typedef struct list {
    size_t n;
    char item[64][48];
} list;

static void split(const char *text, list *out) {
    out->n = 0;
    const char *p = text;
    while (*p) {
        const char *end = strstr(p, ", ");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (strncmp(p, "or the aliases ", 15) == 0) {
            p += 15;
            len -= 15;
        }
        assert_true(out->n < 64 && len < 48);
        memcpy(out->item[out->n], p, len);
        out->item[out->n++][len] = '\0';
        p += len + (end ? 2 : 0);
    }
}

static bool listed(const list *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->item[i], name) == 0) return true;
    return false;
}

/* The text between `open` and the message's last ')'. */
static void between(const char *message, const char *open, char *out, size_t cap) {
    const char *s = strstr(message, open);
    const char *e = strrchr(message, ')');
    if (s == NULL || e == NULL || e < s) fail_msg("no \"%s…)\" in: %s", open, message);
    s += strlen(open);
    snprintf(out, cap, "%.*s", (int)(e - s), s);
}

/* The class tokens a lock may write: the statuses, the families, RF_NAMED_CLASSES and RF_CLASS_ALIASES. */
#define X_NAMED(name, token) token,
#define X_ALIAS(token, expansion) token,
static const char *const named[] = {RF_NAMED_CLASSES(X_NAMED)};
static const char *const aliases[] = {RF_CLASS_ALIASES(X_ALIAS)};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Both class refusals (a class list and classLimits) print the same list: the grammar of a status, the
 * families, every named class and every alias; each listed token loads in both places. */
static void test_class_lists_equal_what_the_parsers_accept(void **state) {
    (void)state;
    char msg[1100], inner[1100];
    list from_lists, from_limits;
    refusal("\"notRetryable\": [\"NOPE\"]", msg, sizeof msg);
    between(msg, "unknown failure class \"NOPE\" (", inner, sizeof inner);
    split(inner, &from_lists);
    refusal("\"classLimits\": {\"NOPE\": 1}", msg, sizeof msg);
    between(msg, "unknown failure class \"NOPE\" (", inner, sizeof inner);
    split(inner, &from_limits);
    assert_int_equal(from_lists.n, 3 + COUNT(named) + COUNT(aliases));
    assert_int_equal(from_limits.n, from_lists.n);
    assert_string_equal(from_lists.item[0], "HTTP_<100..599>");
    assert_true(listed(&from_lists, "HTTP_4XX") && listed(&from_lists, "HTTP_5XX"));
    for (size_t i = 0; i < COUNT(named); i++) assert_true(listed(&from_lists, named[i]));
    for (size_t i = 0; i < COUNT(aliases); i++) assert_true(listed(&from_lists, aliases[i]));
    for (size_t i = 0; i < from_lists.n; i++) {
        assert_string_equal(from_lists.item[i], from_limits.item[i]);
        if (i == 0) continue;
        char members[200];
        snprintf(members, sizeof members, "\"notRetryable\": [\"%s\"]", from_lists.item[i]);
        if (!loads(members)) fail_msg("listed, but notRetryable refuses %s", from_lists.item[i]);
        snprintf(members, sizeof members, "\"classLimits\": {\"%s\": 1}", from_lists.item[i]);
        if (!loads(members)) fail_msg("listed, but classLimits refuses %s", from_lists.item[i]);
    }
    /* The status grammar's edges, and spellings no list prints. */
    assert_true(loads("\"notRetryable\": [\"HTTP_100\", \"HTTP_599\"]"));
    const char *refused[] = {"HTTP_099", "HTTP_600", "HTTP_5xx", "timeout", "HTTP_50", "HTTP_5030", ""};
    for (size_t i = 0; i < COUNT(refused); i++) {
        char members[200];
        snprintf(members, sizeof members, "\"notRetryable\": [\"%s\"]", refused[i]);
        if (loads(members)) fail_msg("%s is listed nowhere but loads", refused[i]);
    }
}

/* The names a refusal of `members` lists between `open` and `close` are exactly names[0..n), in order, and a lock
 * that writes each of them where `member_fmt` puts it (one %s) loads. */
static void list_equals(const char *members, const char *open, const char *close, const char *member_fmt,
                        const char *const *names, size_t n) {
    char msg[1100], inner[1100];
    list l;
    refusal(members, msg, sizeof msg);
    const char *s = strstr(msg, open), *e = s ? strstr(s, close) : NULL;
    if (s == NULL || e == NULL) fail_msg("no \"%s…%s\" in: %s", open, close, msg);
    snprintf(inner, sizeof inner, "%.*s", (int)(e - s - (long)strlen(open)), s + strlen(open));
    split(inner, &l);
    assert_int_equal(l.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(l.item[i], names[i]);
        char member[200];
        snprintf(member, sizeof member, member_fmt, names[i]);
        if (!loads(member)) fail_msg("listed, but refused: %s", member);
    }
}

static void test_jitter_list_equals_rf_jitters(void **state) {
    (void)state;
#define X_JITTER(name, str) str,
    static const char *const jitters[] = {RF_JITTERS(X_JITTER)};
    list_equals("\"backoff\": {\"jitter\": \"NOPE\"}", "must be one of ", ", got \"NOPE\"",
                "\"backoff\": {\"jitter\": \"%s\"}", jitters, COUNT(jitters));
}

static void test_wait_header_list_equals_rf_wait_headers(void **state) {
    (void)state;
#define X_HEADER(name, str) str,
    static const char *const headers[] = {RF_WAIT_HEADERS(X_HEADER)};
    list_equals("\"retryAfter\": {\"headers\": [\"NOPE\"]}", "(supported: ", ")",
                "\"retryAfter\": {\"headers\": [\"%s\"]}", headers, COUNT(headers));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_lists_equal_what_the_parsers_accept),
        cmocka_unit_test(test_jitter_list_equals_rf_jitters),
        cmocka_unit_test(test_wait_header_list_equals_rf_wait_headers),
    };
    return cmocka_run_group_tests_name("vocabulary lists", tests, NULL, NULL);
}
