/*
 * A hostile Redis for the tests of the shared retry budget's deadline. It speaks enough RESP (the Redis
 * serialization protocol) to answer what the budget sends (AUTH, SELECT, SCRIPT LOAD, EVALSHA, GET, PTTL) and
 * misbehaves on purpose, in one of these modes:
 *   ok       every reply whole, at once (the control: the budget must work against it)
 *   drip     each reply one byte every INTERVAL_MS (default 20): never a pause long enough for a per-read
 *            timeout, so only a deadline over the whole reply stops it
 *   stall    the first half of each reply, then nothing, the connection kept open
 *   garbage  bytes that are not RESP (an HTTP answer)
 *   silent   reads the commands, never answers
 *   backlog  never accepts; the listen queue is filled by the server's own connections first, so a new
 *            connect(2) is never answered (its SYN is dropped) and the client waits in the TCP handshake
 *   huge-bulk   declares a bulk string of 2 000 000 000 bytes ("$2000000000"), then floods bytes until the
 *               client closes: a client that buffers what a reply declares grows without bound
 *   huge-array  declares an array of 2 000 000 000 elements ("*2000000000"), then floods elements (":1")
 *   long-line   a status line ("+") that never ends: bytes and no CRLF until the client closes
 * and, for a TLS client (rediss://), three servers that read its ClientHello and then hold the handshake:
 *   tls-silent  never answers it
 *   tls-stall   answers with the first bytes of a ServerHello record (RFC 8446 §5.1), then nothing
 *   tls-drip    announces a full-size handshake record and sends it one byte every INTERVAL_MS, never ending
 * MODE:CMD misbehaves only on CMD's replies and answers the others whole: drip:EVALSHA loads the script at
 * once and drips the decision, as a slow Redis with a warm connection does.
 *
 * usage: fake_resp PORT MODE[:CMD] [INTERVAL_MS]   (no :CMD for the tls- modes)
 * Listens on 127.0.0.1:PORT (0: a port the kernel picks), prints "PORT\n" on stdout once it listens, and serves
 * until SIGTERM, or for 10 minutes at most (a test that died cannot leave it behind). Exit 2 on bad usage,
 * 1 when it cannot listen (the message names the port).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LIFETIME_S 600

typedef enum {
    MODE_OK,
    MODE_DRIP,
    MODE_STALL,
    MODE_GARBAGE,
    MODE_SILENT,
    MODE_BACKLOG,
    MODE_HUGE_BULK,
    MODE_HUGE_ARRAY,
    MODE_LONG_LINE,
    MODE_TLS_SILENT,
    MODE_TLS_STALL,
    MODE_TLS_DRIP
} mode;

static const char *const MODE_NAMES[] = {"ok",        "drip",       "stall",     "garbage",    "silent",    "backlog",
                                         "huge-bulk", "huge-array", "long-line", "tls-silent", "tls-stall", "tls-drip"};

typedef struct config {
    mode how;
    char only[32]; /* misbehave on this command's replies only; "" for all */
    int interval_ms;
} config;

static config cfg;

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Parses a decimal number ending in CRLF at buf[*at..len); false when incomplete or malformed. */
static bool number_line(const char *buf, size_t len, size_t *at, long *out) {
    long v = 0;
    size_t i = *at;
    bool digits = false;
    while (i < len && buf[i] >= '0' && buf[i] <= '9') {
        v = v * 10 + (buf[i++] - '0');
        digits = true;
        if (v > 100000000) return false;
    }
    if (!digits || i + 1 >= len || buf[i] != '\r' || buf[i + 1] != '\n') return false;
    *at = i + 2;
    *out = v;
    return true;
}

/*
 * One whole command at the start of buf, as hiredis sends it (an array of bulk strings): its length, and its
 * name in name (the first bulk string); 0 while incomplete; -1 when it is not such a command.
 */
static long parse_command(const char *buf, size_t len, char *name, size_t name_cap) {
    size_t at = 1;
    long n;
    if (len == 0) return 0;
    if (buf[0] != '*') return -1;
    if (!number_line(buf, len, &at, &n)) return memchr(buf, '\n', len) ? -1 : 0;
    for (long i = 0; i < n; i++) {
        long blen;
        if (at >= len) return 0;
        if (buf[at] != '$') return -1;
        at++;
        if (!number_line(buf, len, &at, &blen)) return 0;
        if (at + (size_t)blen + 2 > len) return 0;
        if (i == 0) {
            size_t c = (size_t)blen < name_cap - 1 ? (size_t)blen : name_cap - 1;
            memcpy(name, buf + at, c);
            name[c] = '\0';
        }
        at += (size_t)blen + 2;
    }
    return (long)at;
}

/* The reply a working Redis would give to the command (the values are fixed: the client only parses them). */
static const char *reply_to(const char *name) {
    if (strcasecmp(name, "AUTH") == 0 || strcasecmp(name, "SELECT") == 0) return "+OK\r\n";
    if (strcasecmp(name, "SCRIPT") == 0) return "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n";
    if (strcasecmp(name, "EVALSHA") == 0) return ":9000\r\n";
    if (strcasecmp(name, "GET") == 0) return "$4\r\n7500\r\n";
    if (strcasecmp(name, "PTTL") == 0) return ":60000\r\n";
    return "-ERR unknown command\r\n";
}

/* Sends head, then fill over and over until the peer stops reading (closes): a flood. Always false. */
static bool flood(int fd, const char *head, const char *fill) {
    if (!send_all(fd, head, strlen(head))) return false;
    char chunk[65536];
    const size_t n = strlen(fill), whole = sizeof chunk / n * n;
    for (size_t i = 0; i < whole; i += n) memcpy(chunk + i, fill, n);
    while (send_all(fd, chunk, whole)) {}
    return false;
}

/* Sends the reply to one command as the mode says; false once the connection is to be dropped or held. */
static bool answer(int fd, const char *name) {
    const char *r = reply_to(name);
    size_t n = strlen(r);
    if (cfg.only[0] != '\0' && strcasecmp(cfg.only, name) != 0) return send_all(fd, r, n);
    switch (cfg.how) {
    case MODE_OK: return send_all(fd, r, n);
    case MODE_DRIP:
        for (size_t i = 0; i < n; i++) {
            if (!send_all(fd, r + i, 1)) return false;
            if (i + 1 < n) sleep_ms(cfg.interval_ms);
        }
        return true;
    case MODE_STALL: send_all(fd, r, n / 2); return false;
    case MODE_GARBAGE: {
        static const char junk[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        send_all(fd, junk, sizeof junk - 1);
        return true;
    }
    case MODE_HUGE_BULK: return flood(fd, "$2000000000\r\n", "x");
    case MODE_HUGE_ARRAY: return flood(fd, "*2000000000\r\n", ":1\r\n");
    case MODE_LONG_LINE: return flood(fd, "+", "x");
    case MODE_SILENT:
    case MODE_BACKLOG:
    case MODE_TLS_SILENT: /* the tls- modes never get here: hold_handshake serves them */
    case MODE_TLS_STALL:
    case MODE_TLS_DRIP: return false;
    }
    return false;
}

/* Holds a connection open without answering until the peer closes it. */
static void hold(int fd) {
    char sink[4096];
    while (recv(fd, sink, sizeof sink, 0) > 0) {}
}

/*
 * A TLS server that holds the handshake: reads the client's first flight (its ClientHello), then answers as the
 * mode says. A TLS record starts with its type (22: handshake), version (3,3) and length (RFC 8446 §5.1); a
 * ServerHello's handshake header is type 2 and a 24-bit length (§4).
 */
static void hold_handshake(int fd) {
    char hello[4096];
    if (recv(fd, hello, sizeof hello, 0) <= 0) return;
    static const char partial[] = "\x16\x03\x03\x00\x5a\x02\x00\x00\x56\x03\x03\x5f\x1d\x2a";
    static const char endless[] = "\x16\x03\x03\x40\x00\x02\x00\x3f\xfc\x03\x03";
    if (cfg.how == MODE_TLS_STALL) {
        send_all(fd, partial, sizeof partial - 1);
    } else if (cfg.how == MODE_TLS_DRIP) {
        if (!send_all(fd, endless, sizeof endless - 1)) return;
        for (char zero = 0; send_all(fd, &zero, 1);) sleep_ms(cfg.interval_ms);
        return;
    }
    hold(fd);
}

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    if (cfg.how >= MODE_TLS_SILENT) {
        hold_handshake(fd);
        close(fd);
        return NULL;
    }
    char buf[65536];
    size_t used = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + used, sizeof buf - used, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        used += (size_t)r;
        char name[32];
        long n;
        bool go_on = true;
        while (go_on && (n = parse_command(buf, used, name, sizeof name)) > 0) {
            go_on = answer(fd, name);
            memmove(buf, buf + n, used - (size_t)n);
            used -= (size_t)n;
        }
        if (n < 0 || used == sizeof buf) break; /* not RESP, or a command longer than the buffer: drop it */
        if (!go_on) {
            hold(fd);
            break;
        }
    }
    close(fd);
    return NULL;
}

/* Fills the listen queue of the socket on port with connections of our own (kept open), until a new connect(2)
 * is no longer answered within 200 ms: from then on every client's SYN is dropped. */
static void fill_backlog(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 64; i++) {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (c < 0) return;
        if (connect(c, (struct sockaddr *)&a, sizeof a) == 0) continue;
        struct pollfd p = {.fd = c, .events = POLLOUT};
        if (errno != EINPROGRESS || poll(&p, 1, 200) == 0) return; /* this one waits: the queue is full */
    }
}

static int usage(void) {
    fprintf(stderr, "usage: fake_resp PORT ok|drip|stall|garbage|silent|backlog[:COMMAND]|tls-silent|tls-stall|"
                    "tls-drip [INTERVAL_MS]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) return usage();
    char *end;
    long port = strtol(argv[1], &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) return usage();
    const char *colon = strchr(argv[2], ':');
    size_t mlen = colon ? (size_t)(colon - argv[2]) : strlen(argv[2]);
    bool known = false;
    for (size_t i = 0; i < sizeof MODE_NAMES / sizeof *MODE_NAMES; i++) {
        if (strlen(MODE_NAMES[i]) == mlen && strncmp(MODE_NAMES[i], argv[2], mlen) == 0) {
            cfg.how = (mode)i;
            known = true;
        }
    }
    if (!known || (colon && (strlen(colon + 1) >= sizeof cfg.only || cfg.how >= MODE_TLS_SILENT))) return usage();
    if (colon) snprintf(cfg.only, sizeof cfg.only, "%s", colon + 1);
    cfg.interval_ms = argc == 4 ? atoi(argv[3]) : 20;
    if (cfg.interval_ms < 1 || cfg.interval_ms > 10000) return usage();

    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, cfg.how == MODE_BACKLOG ? 0 : 64) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "fake_resp: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return 1;
    }
    alarm(LIFETIME_S);
    if (cfg.how == MODE_BACKLOG) fill_backlog(ntohs(a.sin_port));
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    if (cfg.how == MODE_BACKLOG) {
        for (;;) pause();
    }
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return 1;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(t);
    }
}
