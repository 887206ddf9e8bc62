/*
 * The baseline for `retryfreeze soak` (bench/client/bench_soak.sh): the plain libcurl multi loop of multi_loop.h
 * sending the same requests with the same concurrency and keep-alive, no policy, no ledger, bodies discarded (soak's
 * default flow reads no response). "The same requests" means the same bytes and the same libcurl settings: GET
 * /v1/jobs/<i>, i = 1..N, with the headers soak's client sends (User-Agent "retryfreeze/<version> libcurl/<version>";
 * with KEY_PREFIX, "Idempotency-Key: <KEY_PREFIX>-<i>"), a 5 s per-request timeout and CURLOPT_NOSIGNAL. Prints
 * requests per second and CPU microseconds per request of the loop (getrusage); bench/client/bench_soak.sh times the
 * whole process.
 * Usage: bench_multi BASE_URL REQUESTS CONCURRENCY [KEY_PREFIX [USER_AGENT]]
 */
#include "multi_loop.h"

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: bench_multi BASE_URL REQUESTS CONCURRENCY [KEY_PREFIX [USER_AGENT]]\n");
        return 2;
    }
    bench_multi_opts o = {.base = argv[1],
                          .n = atol(argv[2]),
                          .conc = atol(argv[3]),
                          .key_prefix = argc > 4 && argv[4][0] ? argv[4] : NULL,
                          .user_agent = argc > 5 ? argv[5] : NULL};
    if (o.n < 1 || o.conc < 1 || o.conc > 4096) return 2;
    bench_multi_result r;
    if (!bench_multi_run(&o, &r)) {
        fprintf(stderr, "bench_multi: out of memory\n");
        return 1;
    }
    printf("plain libcurl multi: %ld requests (%ld failed), concurrency %ld: %.0f req/s, %.1f us CPU/request\n", o.n,
           r.failed, o.conc, (double)o.n / r.wall_s, 1e6 * r.cpu_s / (double)o.n);
    return r.failed ? 1 : 0;
}
