/*
 * Fuzz target: the route index against a scan over every route (spec/core/route_oracle.h, written from
 * docs/lock.md). The bytes choose a lock (up to 40 endpoints from a pool of literals a matcher could confuse,
 * {param}s, a last "*", methods of several lengths), then requests and prefixes.
 * Invariants:
 *   - a lock with two endpoints of one shape is refused, naming the first that repeats an earlier one and that one;
 *     any other generated lock loads;
 *   - rf_policy_match routes every request where the scan does;
 *   - rf_policy_next_segment gives, answer by answer, what the scan gives.
 */
#include "fuzz.h"

#include "../spec/core/route_oracle.h"

static unsigned pick(void *src, unsigned n) { return (unsigned)fz_pick(src, n); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ro_lock g;
    static ro_route routes[RO_MAX_ROUTES];
    fz_in in = {data, size};
    ro_random_lock(&g, 40, pick, &in);
    rf_policy *p = NULL;
    for (;;) {
        ro_lock_text(&g);
        rf_error err;
        memset(&err, 0, sizeof err);
        rf_status st = rf_policy_load_buffer(g.text, strlen(g.text), &p, &err);
        size_t dup, earlier;
        if (!ro_first_duplicate(&g, &dup, &earlier)) {
            FZ_CHECK(st == RF_OK, "a lock without duplicates is refused: %s: %s\n  %s", err.path, err.message, g.text);
            break;
        }
        char want_path[64], want_message[64];
        snprintf(want_path, sizeof want_path, "$.routes[%zu].endpoint", dup);
        snprintf(want_message, sizeof want_message, "duplicates $.routes[%zu] ", earlier);
        FZ_CHECK(st == RF_EINVAL && strcmp(err.path, want_path) == 0 && strstr(err.message, want_message) != NULL,
                 "want %s: ...%s..., got %d %s: %s\n  %s", want_path, want_message, (int)st, err.path, err.message,
                 g.text);
        ro_drop(&g, dup);
    }
    size_t n = ro_load(p, routes, RO_MAX_ROUTES);
    while (in.n > 0) {
        char text[512];
        const char *method = ro_random_method(pick, &in);
        size_t mlen = strlen(method);
        if (pick(&in, 4) != 0) {
            ro_random_path(text, sizeof text, pick, &in);
            long want = ro_match(routes, n, method, mlen, text, strlen(text));
            long got = rf_policy_match(p, method, mlen, text, strlen(text));
            FZ_CHECK(got == want, "%s \"%s\": the index routes to %ld, the scan to %ld\n  %s", method, text, got, want,
                     g.text);
            continue;
        }
        ro_random_prefix(text, sizeof text, pick, &in);
        size_t got_cursor = 0, want_cursor = 0;
        for (;;) {
            rf_next_segment got, want;
            memset(&got, 0, sizeof got);
            memset(&want, 0, sizeof want);
            int gr = rf_policy_next_segment(p, method, mlen, text, strlen(text), &got_cursor, &got);
            int wr = ro_next(routes, n, method, mlen, text, strlen(text), &want_cursor, &want);
            FZ_CHECK(gr == wr && got_cursor == want_cursor &&
                         (gr != 1 ||
                          (got.route == want.route && got.kind == want.kind && got.literal_len == want.literal_len &&
                           (got.literal == NULL) == (want.literal == NULL) &&
                           (got.literal == NULL || memcmp(got.literal, want.literal, got.literal_len) == 0))),
                     "%s after \"%s\": the index says %d (route %zu, kind %d), the scan %d (route %zu, kind %d)\n  %s",
                     method, text, gr, got.route, (int)got.kind, wr, want.route, (int)want.kind, g.text);
            if (gr != 1) break;
        }
    }
    rf_policy_free(p);
    return 0;
}
