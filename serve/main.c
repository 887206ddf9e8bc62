/* retryfreeze-serve — the fault-injecting test upstream for retryfreeze.
 *
 * A standalone HTTP/1.1 server (libmicrohttpd, a thread per connection, so a stalled answer never
 * blocks another connection) that listens on 127.0.0.1 only and answers every request with the
 * failure a test asks for. It is a test tool: it never links libretryfreeze and is never part of
 * what users embed.
 *
 * USAGE
 *   retryfreeze-serve [--port N] [--faults SPEC] [--seed S] [--stall-ms MS] [--max-seconds SEC]
 *                     [--max-keys N] [--help] [--version]
 *   Options take "--opt VALUE" or "--opt=VALUE".
 *   --port N          0..65535; 0 (default) lets the kernel pick a free port.
 *   --faults SPEC     random faults for attempts without a script (default: none).
 *   --seed S          seed of the random faults, 0..2^64-1 (default 1).
 *   --stall-ms MS     how long a "timeout" stalls before answering 200, 0..86400000 (default 10000).
 *   --max-seconds SEC exit by itself after SEC seconds, 0..31536000 (default 0 = never).
 *   --max-keys N      most sequences tracked at once, 1..100000000 (default 1000000).
 *   Started, it prints exactly one line "listening on 127.0.0.1:PORT" to stdout and flushes; log
 *   lines go to stderr. SIGTERM, SIGINT or --max-seconds: stop at once (stalls and delays are cut
 *   short), exit 0. A bad argument: a message naming it on stderr, exit 2. Cannot listen: exit 1.
 *
 * ATTEMPTS AND SEQUENCES
 *   Every request to a path other than /__stats and /__reset is an attempt; its body, if any, is
 *   read in full and dropped. Attempts belong to a sequence: the Idempotency-Key header when
 *   present, else method + path (without the query) + the X-Fault-Script text. n is the attempt
 *   number within the sequence (1, 2, ...).
 *
 * SCRIPTED FAULTS: request header  X-Fault-Script: STEP,STEP,...
 *   Attempt n of a sequence plays step n; once the script is used up every attempt gets 200.
 *   STEP = NAME *(";" PARAM), spaces around steps and parameters ignored.
 *   NAME:  NNN      that status, 200..599 (204 and 304 without content). No 1xx: those are
 *                   interim responses, and libmicrohttpd cannot send one as the final answer
 *          ok       200
 *          timeout  stall --stall-ms, then 200 (the client should have given up by then)
 *          reset    abort the connection with a TCP RST (curl: exit 56)
 *          empty    close the connection without any response (curl: exit 52)
 *          cut      200 with Content-Length 1000, then close after 100 bytes of body (curl: exit 18);
 *                   it executes (the work was done, the answer was cut); scripts only
 *   PARAM: delay=MS               sleep MS (0..3600000) before the step; any step
 *          retry-after=VALUE      Retry-After: VALUE, verbatim (NNN and ok only). VALUE is bare text
 *                                 up to "," or ";" (may be invalid on purpose: "soon", "-5"), or a
 *                                 "quoted string" that may hold "," and ";" (escapes: \" and \\).
 *                                 At most 256 bytes, no control characters, not empty
 *                                 (libmicrohttpd refuses an empty header value)
 *          retry-after-date=N     Retry-After: the IMF-fixdate N seconds from now; N may be
 *                                 negative (a date in the past); NNN and ok only
 *          header=NAME:VALUE      the response header NAME: VALUE, verbatim (NNN and ok only), for the wait
 *                                 signals a client may read (retry-after-ms, ratelimit, grpc-retry-pushback-ms,
 *                                 …). Quote the whole NAME:VALUE to hold "," or ";". Up to 4 per step (with
 *                                 header-epoch); the same NAME twice sends two field lines. Not a header the
 *                                 server sets itself (Content-Length, Content-Type, Transfer-Encoding,
 *                                 Connection, Date), nor Retry-After (use retry-after=)
 *          header-epoch=NAME:N    the header NAME: the Unix time N seconds from now, in seconds (N may be
 *                                 negative), as x-ratelimit-reset sends it
 *   A script that does not parse: 400 text/plain naming the problem, and a log line.
 *   Example: "503;retry-after=1,503,200" -> 503 (Retry-After: 1), 503, 200, then 200 ...
 *
 * RANDOM FAULTS: --faults "503=0.2,429=0.05,500=0.02,timeout=0.02,reset=0.01,empty=0.01,ra=1"
 *   Each attempt without a script draws once from a xoshiro256** generator seeded from --seed, the
 *   request's sequence identity (its Idempotency-Key, or method + path + script) and its attempt number in
 *   that sequence: the same seed and the same requests give the same faults, in any arrival order.
 *   Tokens NAME=P with NAME one of NNN (200..599), timeout, reset, empty and P a decimal 0..1 with
 *   at most 9 decimals; slow=P:MS (or P:MSms, MS 1..3600000) is a timeout that stalls MS ms instead of
 *   --stall-ms (a slow tail: the work has not started, so it counts as timeout and never executes);
 *   the probabilities must sum to at most 1; the rest is 200. ra=N adds
 *   Retry-After: N to random 503 and 429 answers. Unknown or repeated tokens, bad numbers: exit 2.
 *   Attempts with a script never draw, so they do not shift the random sequence.
 *
 * ANSWERS
 *   2xx (for every method, POST included; ok is 200): {"ok":true,"n":N} as application/json.
 *   Other statuses: {"ok":false,"status":S,"n":N}. Every response carries a Date header
 *   (libmicrohttpd adds it). Refusals (bad script 400, table full 503) are text/plain.
 *
 * SIDE EFFECTS AND STATS
 *   An attempt executes when the server decides to answer it 2xx (a cut 200 included); a timeout
 *   (stalled before the work started), reset and empty do not. Counted when decided, before any
 *   delay or stall. An execution of an Idempotency-Key that executed before is a duplicate.
 *
 *   GET /__stats -> {"requests":N,"by_status":{"200":n,...,"reset":n,"empty":n,"timeout":n},
 *                    "executions":N,"duplicate_executions":N,"keys":N,"max_in_flight":N}
 *     requests: attempts (refused ones included); by_status: outcomes decided — the statuses seen,
 *     ascending, then reset/empty/timeout always (a timeout's late 200 counts only as timeout);
 *     keys: distinct Idempotency-Keys tracked; max_in_flight: the most attempts being answered at once (from
 *     admission, delay and stall included, until the answer is queued: a client sees no answer before that).
 *     /__stats and /__reset are never counted. Other methods: 405.
 *   POST /__reset -> {"ok":true}: forgets stats and sequences and reseeds the generator, so what
 *     follows replays like a fresh server.
 *
 * BOUNDS
 *   At most --max-keys sequences and 64 MiB of identities; an attempt that would start another
 *   one is answered 503 text/plain (counted) with a log line, until /__reset. An identity (key, or
 *   method + path + script) longer than 4095 bytes: 400. At most 512 connections at once (a
 *   thread each); an idle kept-alive connection is closed after 300 s.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handler.h"

#ifndef RF_VERSION_STRING
#define RF_VERSION_STRING "unknown"
#endif

#define MAX_KEY_BYTES ((size_t)64 << 20)

static const char usage[] =
    "usage: retryfreeze-serve [--port N] [--faults SPEC] [--seed S] [--stall-ms MS]\n"
    "                         [--max-seconds SEC] [--max-keys N] [--help] [--version]\n"
    "\n"
    "Fault-injecting HTTP test upstream for retryfreeze. Listens on 127.0.0.1 only and prints\n"
    "\"listening on 127.0.0.1:PORT\" once started. Exits 0 on SIGTERM/SIGINT or after\n"
    "--max-seconds, 2 on a bad argument.\n"
    "\n"
    "  --port N           0..65535, 0 = any free port (default 0)\n"
    "  --faults SPEC      random faults for unscripted attempts, e.g.\n"
    "                     \"503=0.2,429=0.05,500=0.02,timeout=0.02,reset=0.01,empty=0.01,ra=1\"\n"
    "                     NNN|timeout|reset|empty=P with NNN 200..599 and P decimal 0..1,\n"
    "                     summing to <= 1 (the rest is 200); slow=P:MS stalls MS ms before\n"
    "                     the work, then 200 (a slow tail); ra=N adds Retry-After: N to\n"
    "                     random 503 and 429. Default: no faults\n"
    "  --seed S           seed of the random faults (default 1); POST /__reset reseeds\n"
    "  --stall-ms MS      how long a timeout stalls before answering 200 (default 10000)\n"
    "  --max-seconds SEC  exit after SEC seconds; 0 = never (default 0)\n"
    "  --max-keys N       most sequences tracked; past it attempts get 503 (default 1000000)\n"
    "\n"
    "Request header X-Fault-Script: STEP,STEP,... plays one step per attempt of a sequence\n"
    "(the Idempotency-Key, else method + path + script), then 200 once used up.\n"
    "  STEP  = NNN (200..599) | ok | timeout | reset | empty | cut, then any of\n"
    "          ;delay=MS  ;retry-after=VALUE (verbatim, or \"quoted\")  ;retry-after-date=N\n"
    "          ;header=NAME:VALUE (a response header, verbatim; up to 4)  ;header-epoch=NAME:N (Unix s)\n"
    "  timeout stalls --stall-ms then 200; reset aborts with a TCP RST; empty closes unanswered;\n"
    "  cut answers 200 with Content-Length 1000 and closes after 100 bytes (it executes).\n"
    "  e.g. X-Fault-Script: 503;retry-after=1,503,200\n"
    "\n"
    "Answers: 2xx {\"ok\":true,\"n\":N} (200 for every method); others {\"ok\":false,...}.\n"
    "GET /__stats: {\"requests\",\"by_status\",\"executions\",\"duplicate_executions\",\"keys\",\"max_in_flight\"}\n"
    "(an attempt executes when answered 2xx; a key executing again is a duplicate).\n"
    "POST /__reset: clear stats and sequences, reseed.\n";

struct options {
    unsigned port;
    struct srv_fault_spec faults;
    uint64_t seed;
    long stall_ms;
    long max_seconds;
    size_t max_keys;
};

static int bad(const char *name, const char *what, const char *value) {
    fprintf(stderr, "retryfreeze-serve: %s: %s, got '%s' (see --help)\n", name, what, value);
    return -1;
}

static int number(const char *name, const char *value, uint64_t min, uint64_t max, uint64_t *out) {
    char what[96];
    snprintf(what, sizeof what, "expected an integer %llu..%llu", (unsigned long long)min, (unsigned long long)max);
    if (srv_parse_uint(value, strlen(value), max, out) != 0 || *out < min) return bad(name, what, value);
    return 0;
}

/* Returns 0 to run, 1 after --help/--version, -1 on a bad argument (already reported). */
static int parse_args(int argc, char **argv, struct options *o) {
    char err[320];
    uint64_t v;
    srv_faults_parse("", &o->faults, err, sizeof err);
    o->port = 0;
    o->seed = 1;
    o->stall_ms = 10000;
    o->max_seconds = 0;
    o->max_keys = 1000000;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(arg, "--version") == 0) {
            puts("retryfreeze-serve " RF_VERSION_STRING);
            return 1;
        }
        static const char *const names[] = {"--port",        "--faults",   "--seed", "--stall-ms",
                                            "--max-seconds", "--max-keys", NULL};
        const char *name = NULL, *value = NULL;
        for (int k = 0; names[k] != NULL; k++) {
            size_t n = strlen(names[k]);
            if (strncmp(arg, names[k], n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
                name = names[k];
                value = arg[n] == '=' ? arg + n + 1 : NULL;
            }
        }
        if (name == NULL) {
            fprintf(stderr, "retryfreeze-serve: unknown argument '%s' (see --help)\n", arg);
            return -1;
        }
        if (value == NULL) {
            if (i + 1 == argc) {
                fprintf(stderr, "retryfreeze-serve: %s needs a value (see --help)\n", name);
                return -1;
            }
            value = argv[++i];
        }
        if (strcmp(name, "--port") == 0) {
            if (number(name, value, 0, 65535, &v) != 0) return -1;
            o->port = (unsigned)v;
        } else if (strcmp(name, "--faults") == 0) {
            if (srv_faults_parse(value, &o->faults, err, sizeof err) != 0) {
                fprintf(stderr, "retryfreeze-serve: --faults: %s (see --help)\n", err);
                return -1;
            }
        } else if (strcmp(name, "--seed") == 0) {
            if (number(name, value, 0, UINT64_MAX, &v) != 0) return -1;
            o->seed = v;
        } else if (strcmp(name, "--stall-ms") == 0) {
            if (number(name, value, 0, 86400000, &v) != 0) return -1;
            o->stall_ms = (long)v;
        } else if (strcmp(name, "--max-seconds") == 0) {
            if (number(name, value, 0, 31536000, &v) != 0) return -1;
            o->max_seconds = (long)v;
        } else {
            if (number(name, value, 1, 100000000, &v) != 0) return -1;
            o->max_keys = (size_t)v;
        }
    }
    return 0;
}

/* Waits for SIGTERM/SIGINT (blocked in every thread) or the --max-seconds deadline. */
static void wait_for_stop(const sigset_t *set, long max_seconds) {
    struct timespec now, deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += max_seconds;
    for (;;) {
        int sig;
        if (max_seconds == 0) {
            if (sigwait(set, &sig) == 0) {
                fprintf(stderr, "retryfreeze-serve: stopping on signal %d\n", sig);
                return;
            }
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct timespec left = {deadline.tv_sec - now.tv_sec, deadline.tv_nsec - now.tv_nsec};
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        if (left.tv_sec < 0) break;
        sig = sigtimedwait(set, NULL, &left);
        if (sig > 0) {
            fprintf(stderr, "retryfreeze-serve: stopping on signal %d\n", sig);
            return;
        }
        if (errno == EAGAIN) break;
    }
    fprintf(stderr, "retryfreeze-serve: stopping after --max-seconds %ld\n", max_seconds);
}

int main(int argc, char **argv) {
    struct options o;
    int parsed = parse_args(argc, argv, &o);
    if (parsed != 0) return parsed > 0 ? 0 : 2;

    /* Block the stop signals before any thread exists, so only sigwait sees them. Writes to a
     * client that went away must not kill the server. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL);

    struct srv_upstream up;
    struct srv_stop stop;
    if (srv_upstream_init(&up, &o.faults, o.seed, o.max_keys, MAX_KEY_BYTES) != 0) {
        fprintf(stderr, "retryfreeze-serve: out of memory\n");
        return 1;
    }
    if (srv_stop_init(&stop) != 0) {
        fprintf(stderr, "retryfreeze-serve: cannot set up stop signalling\n");
        srv_upstream_free(&up);
        return 1;
    }
    struct srv_handler handler = {&up, &stop, o.stall_ms};

    /* Loopback only: this server answers whatever a request asks for. */
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    /* A thread per connection: a stalled or delayed answer holds up its own connection only. Poll,
     * not select, so descriptors past FD_SETSIZE cannot break it. */
    unsigned flags = (unsigned)(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL);
    errno = 0;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o.port, NULL, NULL, srv_handle, &handler, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "retryfreeze-serve: cannot listen on 127.0.0.1:%u: %s\n", o.port,
                errno ? strerror(errno) : "libmicrohttpd refused to start");
        srv_stop_free(&stop);
        srv_upstream_free(&up);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on 127.0.0.1:%u\n", info ? (unsigned)info->port : o.port);
    fflush(stdout);

    wait_for_stop(&set, o.max_seconds);
    srv_stop_now(&stop); /* first, so MHD_stop_daemon need not wait out a stall */
    MHD_stop_daemon(d);
    srv_stop_free(&stop);
    srv_upstream_free(&up);
    return 0;
}
