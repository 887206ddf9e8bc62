/*
 * The route index (core/src/engine/route_index.c) against a scan over every route (spec/core/route_oracle.h,
 * written from docs/lock.md): random locks whose literals come from a pool a matcher could confuse (case variants,
 * "%2A" and "%2a", placeholder-like strings, shared prefixes, lengths around a word), {param}s, a last "*", methods
 * of several lengths, up to 20 segments; random requests with empty segments, trailing slashes, '?' and '#' (holding
 * '/'), no leading '/', RF_OTHER_SEGMENT and RF_OTHER_METHOD. rf_policy_match (and through it rf_decide and
 * rf_budget) and every answer of rf_policy_next_segment must equal the scan's; a lock with two routes of one shape
 * must be refused naming the pair the scan finds first. Seeded (RF_ROUTE_SEEDS=N runs seeds 1..N, default 6) and
 * bounded by counts, not by time. Also: the route limit, and a duplicate found among 10 000 routes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "retryfreeze/decide.h"
#include "route_oracle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOCKS_PER_SEED 150
#define REQUESTS_PER_LOCK 200
#define PREFIXES_PER_LOCK 40
#define ROUTE_LIMIT 10000 /* docs/lock.md: the most routes a lock may hold */

/* splitmix64: the test's own seeded choices. */
static unsigned pick(void *src, unsigned n) {
    uint64_t *s = src, z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (unsigned)((z ^ (z >> 31)) % n);
}

/* A random lock that loads: each duplicate the scan finds must be refused by the loader, naming the same pair;
 * the duplicate is then dropped and the lock loaded again. */
static rf_policy *random_policy(ro_lock *g, uint64_t *rng) {
    ro_random_lock(g, pick(rng, 10) == 0 ? RO_MAX_ROUTES : 24, pick, rng);
    for (;;) {
        ro_lock_text(g);
        rf_policy *p = NULL;
        rf_error err;
        rf_status st = rf_policy_load_buffer(g->text, strlen(g->text), &p, &err);
        size_t dup, earlier;
        if (!ro_first_duplicate(g, &dup, &earlier)) {
            if (st != RF_OK)
                fail_msg("a lock without duplicates is refused: %s: %s\n%s", err.path, err.message, g->text);
            return p;
        }
        assert_int_equal(st, RF_EINVAL);
        char want_path[64], want_message[64];
        snprintf(want_path, sizeof want_path, "$.routes[%zu].endpoint", dup);
        snprintf(want_message, sizeof want_message, "duplicates $.routes[%zu] ", earlier);
        if (strcmp(err.path, want_path) != 0 || strstr(err.message, want_message) == NULL)
            fail_msg("want %s: …%s…, got %s: %s\n%s", want_path, want_message, err.path, err.message, g->text);
        ro_drop(g, dup);
    }
}

static void dump_routes(const rf_policy *p) {
    for (size_t i = 0; i < rf_policy_route_count(p); i++) {
        rf_route_view v;
        rf_policy_route(p, i, &v);
        print_message("  route %zu: %s\n", i, v.endpoint);
    }
}

/* rf_policy_match, rf_decide and rf_budget route a request where the scan does. */
static void check_request(const rf_policy *p, const ro_route *routes, size_t n, const char *method, const char *path,
                          uint64_t seed, int lock) {
    size_t mlen = strlen(method), plen = strlen(path);
    long want = ro_match(routes, n, method, mlen, path, plen);
    long got = rf_policy_match(p, method, mlen, path, plen);
    if (got != want) {
        dump_routes(p);
        fail_msg("seed %llu, lock %d: %s \"%s\" is routed to %ld by the index, %ld by the scan",
                 (unsigned long long)seed, lock, method, path, got, want);
    }
    for (const char *c = method; *c; c++)
        if (*c >= 'a' && *c <= 'z') return; /* refused before routing (test_decide) */
    if (plen == 0) return;
    rf_facts f = {.method = method, .method_len = mlen, .path = path, .path_len = plen, .status = 503, .attempts = 1};
    rf_verdict v;
    rf_error err;
    if (rf_decide(p, &f, NULL, NULL, &v, &err) != RF_OK)
        fail_msg("%s \"%s\": rf_decide refused: %s: %s", method, path, err.path, err.message);
    assert_int_equal(v.route, want);
    rf_attempt_budget b;
    assert_int_equal(rf_budget(p, method, mlen, path, plen, 0, 0, &b, &err), RF_OK);
    assert_int_equal(b.route, want);
}

/* Every answer of rf_policy_next_segment after prefix equals the scan's, in the same order. */
static void check_prefix(const rf_policy *p, const ro_route *routes, size_t n, const char *method, const char *prefix,
                         uint64_t seed, int lock) {
    size_t mlen = strlen(method), plen = strlen(prefix), got_cursor = 0, want_cursor = 0;
    for (int step = 0;; step++) {
        rf_next_segment got, want;
        memset(&got, 0, sizeof got);
        memset(&want, 0, sizeof want);
        int g = rf_policy_next_segment(p, method, mlen, prefix, plen, &got_cursor, &got);
        int w = ro_next(routes, n, method, mlen, prefix, plen, &want_cursor, &want);
        bool same =
            g == w && got_cursor == want_cursor &&
            (g != 1 || (got.route == want.route && got.kind == want.kind && got.literal_len == want.literal_len &&
                        (got.literal == NULL) == (want.literal == NULL) &&
                        (got.literal == NULL || memcmp(got.literal, want.literal, got.literal_len) == 0)));
        if (!same) {
            dump_routes(p);
            fail_msg(
                "seed %llu, lock %d: %s after \"%s\", answer %d: the index says %d (route %zu, kind %d, \"%.*s\"), "
                "the scan %d (route %zu, kind %d, \"%.*s\")",
                (unsigned long long)seed, lock, method, prefix, step, g, got.route, (int)got.kind, (int)got.literal_len,
                got.literal ? got.literal : "", w, want.route, (int)want.kind, (int)want.literal_len,
                want.literal ? want.literal : "");
        }
        if (g != 1) return;
    }
}

static void test_index_equals_scan(void **state) {
    (void)state;
    const char *env = getenv("RF_ROUTE_SEEDS");
    int seeds = env ? atoi(env) : 6;
    static ro_lock g;
    static ro_route routes[RO_MAX_ROUTES];
    long requests = 0, prefixes = 0, routed = 0;
    for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
        uint64_t rng = seed;
        for (int lock = 0; lock < LOCKS_PER_SEED; lock++) {
            rf_policy *p = random_policy(&g, &rng);
            size_t n = ro_load(p, routes, RO_MAX_ROUTES);
            for (int r = 0; r < REQUESTS_PER_LOCK; r++) {
                char path[512];
                const char *method = ro_random_method(pick, &rng);
                if (pick(&rng, 3) == 0) { /* a route's own pattern, its params filled */
                    rf_route_view v;
                    rf_policy_route(p, pick(&rng, (unsigned)n), &v);
                    method = v.method;
                    snprintf(path, sizeof path, "%s", v.pattern);
                    for (char *c = path; (c = strchr(c, '{')) != NULL;) {
                        char *end = strchr(c, '}');
                        memmove(c + 1, end + 1, strlen(end + 1) + 1);
                        *c = 'x';
                    }
                } else {
                    ro_random_path(path, sizeof path, pick, &rng);
                }
                check_request(p, routes, n, method, path, seed, lock);
                routed += ro_match(routes, n, method, strlen(method), path, strlen(path)) >= 0;
                requests++;
            }
            for (int r = 0; r < PREFIXES_PER_LOCK; r++) {
                char prefix[512];
                ro_random_prefix(prefix, sizeof prefix, pick, &rng);
                check_prefix(p, routes, n, ro_random_method(pick, &rng), prefix, seed, lock);
                prefixes++;
            }
            rf_policy_free(p);
        }
    }
    print_message("%d seeds: %ld requests (%ld routed), %ld prefixes, the index equal to the scan\n", seeds, requests,
                  routed, prefixes);
    assert_true(routed > requests / 10); /* the adversary reaches routes, not only refusals */
}

/* The text of a lock of n routes: "GET /s<k>/items", "GET /s<k>/items/{id}", … */
static char *big_lock(int n, const char *last) {
    size_t cap = 256 + (size_t)n * 64;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t len = (size_t)snprintf(s, cap,
                                  "{\"version\":1,\"defaults\":{\"maxAttempts\":2,\"perAttemptTimeoutMs\":100,"
                                  "\"totalBudgetMs\":1000,\"retryable\":[\"HTTP_503\"]},\"routes\":[");
    static const char *const shapes[] = {"GET /s%d/items", "GET /s%d/items/{id}", "PUT /s%d/items/{id}", "GET /s%d/*"};
    for (int k = 0; k < n; k++) {
        char endpoint[64];
        snprintf(endpoint, sizeof endpoint, shapes[k % 4], k / 4);
        if (k == n - 1 && last != NULL) snprintf(endpoint, sizeof endpoint, "%s", last);
        len += (size_t)snprintf(s + len, cap - len, "%s{\"endpoint\":\"%s\"}", k ? "," : "", endpoint);
    }
    snprintf(s + len, cap - len, "]}");
    return s;
}

/* docs/lock.md: up to 10 000 routes, each routed; one more is refused. */
static void test_route_limit(void **state) {
    (void)state;
    char *text = big_lock(ROUTE_LIMIT, NULL);
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_OK);
    assert_int_equal(rf_policy_route_count(p), ROUTE_LIMIT);
    static const struct {
        const char *method, *path, *endpoint;
    } cases[] = {{"GET", "/s0/items", "GET /s0/items"},
                 {"GET", "/s2499/items/7?x", "GET /s2499/items/{id}"},
                 {"PUT", "/s1234/items/7", "PUT /s1234/items/{id}"},
                 {"GET", "/s1234/other/x", "GET /s1234/*"},
                 {"GET", "/s1234", "GET /s1234/*"},
                 {"PUT", "/s1234/items", NULL},
                 {"GET", "/s2500/items", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long r = rf_policy_match(p, cases[i].method, strlen(cases[i].method), cases[i].path, strlen(cases[i].path));
        if (cases[i].endpoint == NULL) {
            assert_int_equal(r, -1);
            continue;
        }
        rf_route_view v;
        assert_int_equal(rf_policy_route(p, (size_t)r, &v), RF_OK);
        assert_string_equal(v.endpoint, cases[i].endpoint);
    }
    rf_policy_free(p);
    free(text);
    text = big_lock(ROUTE_LIMIT + 1, NULL);
    p = NULL;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_EINVAL);
    assert_null(p);
    assert_string_equal(err.path, "$.routes");
    assert_string_equal(err.message, "more than 10000 routes");
    free(text);
}

/* A duplicate shape among 10 000 routes: the last route repeats route 1's shape under another param name. */
static void test_duplicate_among_many(void **state) {
    (void)state;
    char *text = big_lock(ROUTE_LIMIT, "GET /s0/items/{other}");
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_EINVAL);
    assert_string_equal(err.path, "$.routes[9999].endpoint");
    assert_string_equal(err.message,
                        "endpoint \"GET /s0/items/{other}\" duplicates $.routes[1] (\"GET /s0/items/{id}\")");
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_equals_scan),
        cmocka_unit_test(test_route_limit),
        cmocka_unit_test(test_duplicate_among_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
