/*
 * Requests per second through the client against a plain libcurl easy loop (one reused handle, the same
 * URL, the same GET), all against the same loopback upstream in the same run. Prints ratios. (Ledger appends
 * against a raw write(2): bench/evidence/bench_ledger.c.)
 *
 * Variants, interleaved request by request (the order rotating) so that any drift of the machine or the
 * upstream hits them alike; each request is timed on its own:
 *   plain libcurl      curl_easy_perform on one reused easy handle, body collected into a reused buffer
 *   rf_client_request  the C client (rf_request built once, response cleared each time)
 *   client:request     the Lua client, driven from bench/client/bench_client.lua in an embedded Lua state
 *   + ledger           rf_client_request with a ledger (one JSONL line per request)
 * Reported per variant: req/s and mean from the total time; the p50 of the single request times (robust
 * to other processes taking the CPU); both as ratios to plain libcurl. RF_BENCH_VERBOSE=1 adds per-round
 * means and p10/p50/p90/p99/max on stderr.
 *
 * Usage: bench_client BASE_URL [LUA_SCRIPT [rounds [requests_per_round]]]
 *   BASE_URL    the project's upstream, e.g. http://127.0.0.1:PORT (retryfreeze-serve answers 200 to all)
 *   LUA_SCRIPT  bench/client/bench_client.lua, or "-" to leave out the Lua variant; `require "retryfreeze"` must
 *               resolve through LUA_PATH / LUA_CPATH
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/client.h"
#include "../lib/bench_temp.h"
#include "retryfreeze/ledger.h"
#include "retryfreeze/policy.h"

#include <curl/curl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PATH "/bench"
#define MAX_ROUNDS 64

/* One route for GET /bench: a 200 is a success after one attempt, so the client makes exactly one request.
 * The Lua variant loads the same text. */
static const char LOCK[] = "{\"endpoint\":\"GET /bench\",\"maxAttempts\":2,\"perAttemptTimeoutMs\":2000,"
                           "\"totalBudgetMs\":5000,\"retryable\":[\"HTTP_503\"]}";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_client: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* ---- the baseline: a plain libcurl easy loop --------------------------------------------------------- */

typedef struct plain {
    CURL *easy;
    char data[64 * 1024];
    size_t len;
} plain;

static size_t plain_write(char *data, size_t size, size_t n, void *ud) {
    plain *p = ud;
    size_t len = size * n;
    if (len > sizeof p->data - p->len) return 0;
    memcpy(p->data + p->len, data, len);
    p->len += len;
    return len;
}

static void plain_init(plain *p, const char *url) {
    p->easy = curl_easy_init();
    if (p->easy == NULL) die("curl_easy_init failed", NULL);
    curl_easy_setopt(p->easy, CURLOPT_URL, url);
    curl_easy_setopt(p->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, plain_write);
    curl_easy_setopt(p->easy, CURLOPT_WRITEDATA, p);
}

static void plain_one(plain *p) {
    p->len = 0;
    CURLcode rc = curl_easy_perform(p->easy);
    long status = 0;
    curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) die("plain libcurl request failed", curl_easy_strerror(rc));
}

/* ---- the C client -------------------------------------------------------------------------------- */

static void client_one(rf_client *c) {
    static const rf_request req = {.method = "GET", .path = PATH};
    rf_response r = {0};
    rf_error err;
    if (rf_client_request(c, &req, NULL, NULL, &r, &err) != RF_OK) die("rf_client_request failed", err.message);
    if (!r.ok || r.status != 200 || r.attempts != 1)
        die("rf_client_request: not a 200 in one attempt", rf_reason_name(r.reason));
    if (r.ledger_error[0]) die("ledger append failed", r.ledger_error);
    rf_response_clear(&r);
}

/* ---- the Lua client: bench/client/bench_client.lua returns a function that makes one checked request ---- */

typedef struct lua_side {
    lua_State *L;
    int one; /* registry reference of the request function */
} lua_side;

static void lua_init(lua_side *ls, const char *script, const char *base) {
    ls->L = luaL_newstate();
    if (ls->L == NULL) die("luaL_newstate failed", NULL);
    luaL_openlibs(ls->L);
    if (luaL_loadfile(ls->L, script) != LUA_OK) die("cannot load the Lua bench", lua_tostring(ls->L, -1));
    lua_pushstring(ls->L, base);
    lua_pushstring(ls->L, PATH);
    lua_pushstring(ls->L, LOCK);
    if (lua_pcall(ls->L, 3, 1, 0) != LUA_OK) die("the Lua bench failed to start", lua_tostring(ls->L, -1));
    if (lua_type(ls->L, -1) != LUA_TFUNCTION) die("the Lua bench must return a function", NULL);
    ls->one = luaL_ref(ls->L, LUA_REGISTRYINDEX);
}

static void lua_one(lua_side *ls) {
    lua_rawgeti(ls->L, LUA_REGISTRYINDEX, ls->one);
    if (lua_pcall(ls->L, 0, 0, 0) != LUA_OK) die("client:request failed", lua_tostring(ls->L, -1));
}

/* ---- helpers ------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts a copy). */
static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, sizeof *v * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* ---- main ---------------------------------------------------------------------------------------- */

enum { V_PLAIN, V_C, V_LUA, V_LEDGER, V_COUNT };

int main(int argc, char **argv) {
    if (argc < 2 || argc > 5) die("usage: bench_client BASE_URL [LUA_SCRIPT|- [rounds [requests_per_round]]]", NULL);
    const char *base = argv[1];
    const char *script = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
    int rounds = argc > 3 ? atoi(argv[3]) : 7;
    long n = argc > 4 ? atol(argv[4]) : 2000;
    if (rounds < 1 || rounds > MAX_ROUNDS || n < 1) die("bad rounds or requests", NULL);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rf_policy *policy = NULL;
    rf_error err;
    if (rf_policy_load_buffer(LOCK, strlen(LOCK), &policy, &err) != RF_OK) die("lock", err.message);
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, PATH);

    plain p;
    plain_init(&p, url);
    rf_client *c = NULL, *cl = NULL;
    rf_client_options o = {.policy = policy, .base_url = base, .rng_seed = 1};
    if (rf_client_new(&o, &c, &err) != RF_OK) die("rf_client_new", err.message);
    char *ledger_path = bench_temp_path("bench_client", "ledger");
    rf_ledger *ledger = NULL;
    if (rf_ledger_open(ledger_path, RF_LEDGER_FSYNC_NONE, &ledger, &err) != RF_OK) die("rf_ledger_open", err.message);
    o.ledger = ledger;
    if (rf_client_new(&o, &cl, &err) != RF_OK) die("rf_client_new", err.message);
    lua_side ls = {0};
    if (script) lua_init(&ls, script, base);

    /* Warm-up: connections open, caches warm. */
    for (int i = 0; i < 200; i++) {
        plain_one(&p);
        client_one(c);
        client_one(cl);
        if (script) lua_one(&ls);
    }

    static const char *const names[V_COUNT] = {"plain libcurl", "rf_client_request", "client:request (Lua)",
                                               "  + ledger (C)"};
    static const char *const notes[V_COUNT] = {"one reused easy handle", "C", "a fresh request table each call",
                                               "rf_client_request, one JSONL line per request"};
    /* Per request times (for the medians) and per round sums (for the throughput ratios). */
    size_t total = (size_t)rounds * (size_t)n;
    double *sample[V_COUNT], sum[V_COUNT][MAX_ROUNDS], ratio[V_COUNT][MAX_ROUNDS];
    for (int v = 0; v < V_COUNT; v++)
        if ((sample[v] = malloc(sizeof(double) * total)) == NULL) die("out of memory", NULL);
    for (int i = 0; i < rounds; i++) {
        for (int v = 0; v < V_COUNT; v++) sum[v][i] = 0;
        for (long j = 0; j < n; j++) {
            for (long k = 0; k < V_COUNT; k++) {
                int v = (int)((j + k) % V_COUNT);
                double t0 = now_s();
                switch (v) {
                case V_PLAIN: plain_one(&p); break;
                case V_C: client_one(c); break;
                case V_LUA:
                    if (!script) continue;
                    lua_one(&ls);
                    break;
                default: client_one(cl); break;
                }
                double dt = now_s() - t0;
                sum[v][i] += dt;
                sample[v][(size_t)i * (size_t)n + (size_t)j] = dt;
            }
        }
        for (int v = 0; v < V_COUNT; v++) ratio[v][i] = sum[v][i] / sum[V_PLAIN][i];
        if (getenv("RF_BENCH_VERBOSE")) {
            fprintf(stderr, "round %d: mean", i + 1);
            for (int v = 0; v < V_COUNT; v++) fprintf(stderr, " %.1f us", sum[v][i] / (double)n * 1e6);
            fprintf(stderr, "\n");
        }
    }
    double p50[V_COUNT], all_sum[V_COUNT];
    for (int v = 0; v < V_COUNT; v++) {
        if (v == V_LUA && !script) continue;
        qsort(sample[v], total, sizeof(double), cmp_double);
        p50[v] = sample[v][total / 2];
        if (getenv("RF_BENCH_VERBOSE"))
            fprintf(stderr, "%s: p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f us\n", names[v],
                    sample[v][total / 10] * 1e6, p50[v] * 1e6, sample[v][total * 9 / 10] * 1e6,
                    sample[v][total * 99 / 100] * 1e6, sample[v][total - 1] * 1e6);
        all_sum[v] = 0;
        for (int i = 0; i < rounds; i++) all_sum[v] += sum[v][i];
    }
    printf("client: GET %s%s, %d rounds x %ld requests per variant, interleaved request by request\n", base, PATH,
           rounds, n);
    printf("  %-22s %8s %8s %8s %11s %11s\n", "variant", "req/s", "mean us", "p50 us", "p50 ratio", "mean ratio");
    for (int v = 0; v < V_COUNT; v++) {
        if (v == V_LUA && !script) continue;
        double rp = p50[v] / p50[V_PLAIN], rm = median(ratio[v], rounds);
        printf("  %-22s %8.0f %8.1f %8.1f %10.3fx %10.3fx", names[v], (double)total / all_sum[v],
               all_sum[v] / (double)total * 1e6, p50[v] * 1e6, rp, rm);
        if (v == V_PLAIN)
            printf("  (%s)\n", notes[v]);
        else
            printf("  overhead %+5.1f %% p50, %+5.1f %% mean  (%s)\n", (rp - 1) * 100, (rm - 1) * 100, notes[v]);
    }
    printf("  p50 ratio: median request time over plain libcurl's (robust to preemption by other processes);\n"
           "  mean ratio: median over rounds of (round time / plain's round time), i.e. throughput. Target < 5 %%.\n");
    for (int v = 0; v < V_COUNT; v++) free(sample[v]);

    if (script) lua_close(ls.L);
    rf_client_free(c);
    rf_client_free(cl);
    rf_ledger_close(ledger, &err);
    unlink(ledger_path);
    free(ledger_path);
    curl_easy_cleanup(p.easy);

    rf_policy_free(policy);
    curl_global_cleanup();
    return 0;
}
