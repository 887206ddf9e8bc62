/*
 * The attempt ledger (retryfreeze/ledger.h): the exact line format, write -> read round trips, torn and
 * corrupt lines, over-long lines, I/O errors and refused arguments. Files live in a fresh directory under
 * $TMPDIR (or /tmp), removed at the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/ledger.h"
#include "ledger_sample.h"

#define TMP_FILES_TAG "rf-test-ledger"
#include "tmp_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SAFE ((int64_t)1 << 53)

#define assert_contains(haystack, needle)                                     \
    do {                                                                      \
        if (!strstr((haystack), (needle))) {                                  \
            fail_msg("\"%s\" does not contain \"%s\"", (haystack), (needle)); \
        }                                                                     \
    } while (0)

static void write_bytes(const char *path, const char *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static long file_size(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long)st.st_size;
}

/* The record of the known-format test: two tries, the first with a Retry-After (ledger_sample.h). */
static rf_ledger_record sample(void) { return ledger_sample(); }

static const char SAMPLE_LINE[] =
    "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"POST /v1/jobs\",\"method\":\"POST\",\"path\":\"/v1/jobs\","
    "\"key\":\"k-1\",\"policy\":\"sha256:0123abcd\",\"attempts\":2,\"elapsed_ms\":1234,\"outcome\":\"success\","
    "\"reason\":\"success\",\"ok\":true,\"status\":201,\"body_len\":17,\"tries\":["
    "{\"class\":\"HTTP_503\",\"status\":503,\"elapsed_ms\":20,\"delay_ms\":0,\"reason\":\"pinned-status\","
    "\"retry_after\":\"1\"},"
    "{\"class\":\"SUCCESS\",\"status\":201,\"elapsed_ms\":30,\"delay_ms\":1000,\"reason\":\"success\","
    "\"retry_after\":null}]}";

static void assert_records_equal(const rf_ledger_record *a, const rf_ledger_record *b) {
    assert_int_equal(a->ts_ms, b->ts_ms);
    assert_string_equal(a->route, b->route);
    assert_string_equal(a->method, b->method);
    assert_string_equal(a->path, b->path);
    if (a->key || b->key) {
        assert_non_null(a->key);
        assert_non_null(b->key);
        assert_string_equal(a->key, b->key);
    }
    assert_string_equal(a->policy, b->policy);
    assert_int_equal(a->attempts, b->attempts);
    assert_int_equal(a->elapsed_ms, b->elapsed_ms);
    assert_string_equal(a->outcome, b->outcome);
    assert_string_equal(a->reason, b->reason);
    assert_int_equal(a->ok, b->ok);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->body_len, b->body_len);
    assert_int_equal(a->n_tries, b->n_tries);
    for (size_t i = 0; i < a->n_tries; i++) {
        const rf_ledger_try *x = &a->tries[i], *y = &b->tries[i];
        assert_string_equal(x->class_name, y->class_name);
        assert_int_equal(x->status, y->status);
        assert_int_equal(x->elapsed_ms, y->elapsed_ms);
        assert_int_equal(x->delay_ms, y->delay_ms);
        assert_string_equal(x->reason, y->reason);
        if (x->retry_after || y->retry_after) {
            assert_non_null(x->retry_after);
            assert_non_null(y->retry_after);
            assert_string_equal(x->retry_after, y->retry_after);
        }
        assert_int_equal(x->timeout_ms, y->timeout_ms);
        assert_int_equal(x->not_sent, y->not_sent);
        for (int h = -2; h < RF_WAIT_HEADER_COUNT; h++) {
            const char *u = h == -2 ? x->transport : h == -1 ? x->date : x->wait[h];
            const char *v = h == -2 ? y->transport : h == -1 ? y->date : y->wait[h];
            assert_true((u == NULL) == (v == NULL));
            if (u) assert_string_equal(u, v);
        }
        assert_true((x->peer == NULL) == (y->peer == NULL));
        if (x->peer) assert_string_equal(x->peer, y->peer);
    }
}

static void append_ok(rf_ledger *l, const rf_ledger_record *rec) {
    rf_error err = {0};
    rf_status st = rf_ledger_append(l, rec, &err);
    if (st != RF_OK) {
        fail_msg("append failed (%d): %s: %s", (int)st, err.path, err.message);
    }
}

static rf_ledger_reader *reader_open_ok(const char *path) {
    rf_ledger_reader *r = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_reader_open(path, &r, &err), RF_OK);
    assert_non_null(r);
    return r;
}

static void expect_next(rf_ledger_reader *r, rf_ledger_record *rec, rf_ledger_read_status want, rf_error *err) {
    memset(err, 0, sizeof *err);
    rf_ledger_read_status got = rf_ledger_reader_next(r, rec, err);
    if (got != want) {
        fail_msg("reader_next: want %d, got %d (line %d: %s)", (int)want, (int)got, err->line, err->message);
    }
}

/* ---- the line format ---- */

static void test_format_known_record(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    char buf[2048];
    rf_error err = {0};
    long n = rf_ledger_format(&rec, buf, sizeof buf, &err);
    assert_int_equal(n, (long)strlen(SAMPLE_LINE));
    assert_string_equal(buf, SAMPLE_LINE);
}

/* tries[].retry_after_header: written after retry_after only when set, read back by the fast and the general
 * parser (any key order), absent in older lines, and refused when it is not a string. */
static void test_retry_after_header(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    rec.tries[0].retry_after = "250";
    rec.tries[0].retry_after_header = "retry-after-ms";
    char buf[2048];
    rf_error err = {0};
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_non_null(strstr(buf, "\"reason\":\"pinned-status\",\"retry_after\":\"250\","
                                "\"retry_after_header\":\"retry-after-ms\"},"));
    assert_non_null(strstr(buf, "\"reason\":\"success\",\"retry_after\":null}]}")); /* unset: not written */
    /* The same try with its keys in another order goes through the general parser. */
    char reordered[4096];
    snprintf(reordered, sizeof reordered, "%s\n%s\n", buf,
             "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":\"/x\","
             "\"key\":null,\"policy\":\"sha256:0123abcd\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":"
             "\"terminal\",\"reason\":\"server-pushback\",\"ok\":false,\"status\":503,\"body_len\":0,\"tries\":"
             "[{\"retry_after_header\":\"grpc-retry-pushback-ms\",\"class\":\"HTTP_503\",\"status\":503,"
             "\"elapsed_ms\":5,\"delay_ms\":0,\"reason\":\"server-pushback\",\"retry_after\":\"-1\"}]}");
    const char *path = tmp_file("hint.jsonl");
    write_bytes(path, reordered, strlen(reordered));
    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&rec, &got);
    assert_string_equal(got.tries[0].retry_after_header, "retry-after-ms");
    assert_null(got.tries[1].retry_after_header);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_string_equal(got.tries[0].retry_after_header, "grpc-retry-pushback-ms");
    assert_string_equal(got.tries[0].retry_after, "-1");
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    /* Not a string: corrupt, naming the field. */
    const char *bad = "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":"
                      "\"/x\",\"key\":null,\"policy\":\"sha256:0\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":"
                      "\"terminal\",\"reason\":\"success\",\"ok\":false,\"status\":503,\"body_len\":0,\"tries\":"
                      "[{\"class\":\"HTTP_503\",\"status\":503,\"elapsed_ms\":5,\"delay_ms\":0,\"reason\":"
                      "\"success\",\"retry_after\":\"1\",\"retry_after_header\":7}]}\n";
    write_bytes(path, bad, strlen(bad));
    r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_non_null(strstr(err.message, "retry_after_header"));
    rf_ledger_reader_close(r);
    unlink(path);
}

static char *mutate(const char *from, const char *to);
static void expect_corrupt_middle(const char *middle, const char *message);

/* A try's replay facts (timeout_ms, transport, not_sent, wait, date): written after retry_after_header only when set,
 * in that order, read back the same by the fast and the general parser (any key order), zero in older lines, and
 * refused when they are not what they say, by the writer and by the reader. */
static void test_replay_facts(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    rec.tries[0].timeout_ms = 2000;
    rec.tries[0].wait[RF_WAIT_RETRY_AFTER] = "1";
    rec.tries[0].wait[RF_WAIT_RATELIMIT] = "\"default\";r=0;t=30";
    rec.tries[0].date = "Sun, 29 Nov 2026 17:20:01 GMT";
    rec.tries[1].timeout_ms = 1500;
    rec.tries[1].transport = "tls";
    rec.tries[1].not_sent = true;
    char buf[2048];
    rf_error err = {0};
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_non_null(strstr(buf,
                           "\"retry_after\":\"1\",\"timeout_ms\":2000,\"wait\":{\"retry-after\":\"1\","
                           "\"ratelimit\":\"\\\"default\\\";r=0;t=30\"},\"date\":\"Sun, 29 Nov 2026 17:20:01 GMT\"},"));
    assert_non_null(strstr(buf, "\"retry_after\":null,\"timeout_ms\":1500,\"transport\":\"tls\",\"not_sent\":true}]}"));
    /* The same facts with the keys in another order (the general parser), then an older line: all zero. */
    char lines[8192];
    snprintf(lines, sizeof lines, "%s\n%s\n%s\n", buf,
             "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":\"/x\","
             "\"key\":null,\"policy\":\"sha256:0123abcd\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":"
             "\"terminal\",\"reason\":\"status-not-retryable\",\"ok\":false,\"status\":0,\"body_len\":0,\"tries\":"
             "[{\"date\":\"d\",\"wait\":{\"grpc-retry-pushback-ms\":\"5\",\"retry-after-ms\":\"7\"},\"not_sent\":false,"
             "\"transport\":\"timeout\",\"timeout_ms\":0,\"class\":\"TIMEOUT\",\"status\":0,\"elapsed_ms\":5,"
             "\"delay_ms\":0,\"reason\":\"status-not-retryable\",\"retry_after\":null}]}",
             SAMPLE_LINE);
    const char *path = tmp_file("facts.jsonl");
    write_bytes(path, lines, strlen(lines));
    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&rec, &got);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    const rf_ledger_try *t = &got.tries[0];
    assert_int_equal(t->timeout_ms, 0);
    assert_string_equal(t->transport, "timeout");
    assert_false(t->not_sent);
    assert_string_equal(t->wait[RF_WAIT_GRPC_RETRY_PUSHBACK_MS], "5");
    assert_string_equal(t->wait[RF_WAIT_RETRY_AFTER_MS], "7");
    assert_null(t->wait[RF_WAIT_RETRY_AFTER]);
    assert_string_equal(t->date, "d");
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    for (size_t i = 0; i < got.n_tries; i++) {
        assert_int_equal(got.tries[i].timeout_ms, 0);
        assert_null(got.tries[i].transport);
        assert_false(got.tries[i].not_sent);
        assert_null(got.tries[i].date);
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) assert_null(got.tries[i].wait[h]);
    }
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    unlink(path);
    /* The reader refuses what the writer would not write. */
    static const struct {
        const char *from, *to, *message;
    } bad[] = {
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"timeout_ms\":-5",
         "\"$.tries[0].timeout_ms\" must be an integer"},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"transport\":\"slow\"",
         "field \"$.tries[0].transport\" must be a transport outcome, got \"slow\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"not_sent\":1",
         "field \"$.tries[0].not_sent\" must be a boolean"},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"wait\":{\"x-wait\":\"1\"}",
         "unknown wait header \"$.tries[0].wait.x-wait\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"wait\":{\"retry-after\":1}",
         "field \"$.tries[0].wait.retry-after\" must be a string"},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"wait\":[]", "field \"$.tries[0].wait\" must be an object"},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"date\":null", "field \"$.tries[0].date\" must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *line = mutate(bad[i].from, bad[i].to);
        expect_corrupt_middle(line, bad[i].message);
        free(line);
    }
    /* The writer refuses a negative timeout, an unknown transport and a wait header that is not UTF-8. */
    rf_ledger_record w = sample();
    w.tries[1].timeout_ms = -1;
    assert_int_equal(rf_ledger_format(&w, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "$.tries[1].timeout_ms");
    w = sample();
    w.tries[0].transport = "slow";
    assert_int_equal(rf_ledger_format(&w, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "$.tries[0].transport");
    w = sample();
    w.tries[0].wait[RF_WAIT_RATELIMIT_RESET] = "\xff";
    assert_int_equal(rf_ledger_format(&w, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "$.tries[0].wait.ratelimit-reset");
}

/* A try's peer: written last in the try only when set, read back by the fast and the general parser (any key order),
 * NULL in older lines; refused by the writer and the reader when it is not "host:port" with a port 1..65535. */
static void test_try_peer(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    rec.tries[0].peer = "10.0.0.7:8080";
    rec.tries[0].date = "Sun, 29 Nov 2026 17:20:01 GMT";
    rec.tries[1].peer = "[2001:db8::1]:443";
    char buf[2048];
    rf_error err = {0};
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_non_null(strstr(buf, "\"date\":\"Sun, 29 Nov 2026 17:20:01 GMT\",\"peer\":\"10.0.0.7:8080\"},"));
    assert_non_null(strstr(buf, "\"retry_after\":null,\"peer\":\"[2001:db8::1]:443\"}]}"));
    char lines[8192];
    snprintf(lines, sizeof lines, "%s\n%s\n%s\n", buf,
             "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":\"/x\","
             "\"key\":null,\"policy\":\"sha256:0123abcd\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":"
             "\"terminal\",\"reason\":\"status-not-retryable\",\"ok\":false,\"status\":0,\"body_len\":0,\"tries\":"
             "[{\"peer\":\"up.example:65535\",\"class\":\"TIMEOUT\",\"status\":0,\"elapsed_ms\":5,"
             "\"delay_ms\":0,\"reason\":\"status-not-retryable\",\"retry_after\":null}]}",
             SAMPLE_LINE);
    const char *path = tmp_file("peer.jsonl");
    write_bytes(path, lines, strlen(lines));
    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&rec, &got);
    assert_string_equal(got.tries[0].peer, "10.0.0.7:8080");
    assert_string_equal(got.tries[1].peer, "[2001:db8::1]:443");
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_string_equal(got.tries[0].peer, "up.example:65535");
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    for (size_t i = 0; i < got.n_tries; i++) assert_null(got.tries[i].peer);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    unlink(path);
    static const struct {
        const char *from, *to, *message;
    } bad[] = {
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":8080", "field \"$.tries[0].peer\" must be a string"},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\"10.0.0.7\"",
         "field \"$.tries[0].peer\" must be \"host:port\" (port 1..65535), got \"10.0.0.7\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\"10.0.0.7:0\"", "must be \"host:port\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\"10.0.0.7:65536\"", "must be \"host:port\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\":80\"", "must be \"host:port\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\"a b:80\"", "must be \"host:port\""},
        {"\"retry_after\":\"1\"", "\"retry_after\":\"1\",\"peer\":\"h:080\"", "must be \"host:port\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *line = mutate(bad[i].from, bad[i].to);
        expect_corrupt_middle(line, bad[i].message);
        free(line);
    }
    static const char *const bad_peers[] = {"10.0.0.7", "10.0.0.7:", "10.0.0.7:0", "10.0.0.7:99999", ":443",
                                            "h:4a3",    "h\n:443",   "h:+443",     "h:0443"};
    for (size_t i = 0; i < sizeof bad_peers / sizeof bad_peers[0]; i++) {
        rf_ledger_record w = sample();
        w.tries[1].peer = bad_peers[i];
        assert_int_equal(rf_ledger_format(&w, buf, sizeof buf, &err), -1);
        assert_string_equal(err.path, "$.tries[1].peer");
        assert_false(rf_ledger_peer_ok(bad_peers[i], strlen(bad_peers[i])));
    }
    assert_true(rf_ledger_peer_ok("127.0.0.1:1", 11));
    assert_false(rf_ledger_peer_ok(NULL, 0));
    /* Every byte value in a host: refused exactly for controls and space (0x00..0x20), '"', '\\' and DEL. */
    for (int b = 0; b < 256; b++) {
        const char peer[] = {'h', (char)b, 'h', ':', '8', '0'};
        const bool bad_byte = b <= 0x20 || b == '"' || b == '\\' || b == 0x7f;
        assert_int_equal(rf_ledger_peer_ok(peer, sizeof peer), !bad_byte);
    }
    /* The port is what follows the last ':' (a host may hold colons, as an IPv6 address in brackets does). */
    static const char *const ports_ok[] = {"[::1]:443", "a:b:65535", "h::1", "h:99999:8"};
    for (size_t i = 0; i < sizeof ports_ok / sizeof ports_ok[0]; i++) {
        assert_true(rf_ledger_peer_ok(ports_ok[i], strlen(ports_ok[i])));
    }
    static const char *const ports_bad[] = {"h:123456", "h:1234567", "h:80:", "h:65536", "h:8a0", ":80"};
    for (size_t i = 0; i < sizeof ports_bad / sizeof ports_bad[0]; i++) {
        assert_false(rf_ledger_peer_ok(ports_bad[i], strlen(ports_bad[i])));
    }
}

/* A hedged request's tries: start_ms, hedge and fate written after the others only when a fate is set, read back by
 * the fast and the general parser (any key order), absent in every other line; refused when they do not come
 * together, when the fate is not one, or when start_ms is out of range; the writer refuses the same. */
static void test_hedge_fields(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    rec.tries[0].start_ms = 0;
    rec.tries[0].fate = "cancelled";
    rec.tries[1].start_ms = 100;
    rec.tries[1].hedge = true;
    rec.tries[1].fate = "winner";
    char buf[2048];
    rf_error err = {0};
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_non_null(strstr(buf, "\"retry_after\":\"1\",\"start_ms\":0,\"fate\":\"cancelled\"},"));
    assert_non_null(strstr(buf, "\"retry_after\":null,\"start_ms\":100,\"hedge\":true,\"fate\":\"winner\"}]}"));
    char both[4096];
    snprintf(both, sizeof both, "%s\n%s\n", buf,
             "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":\"/x\","
             "\"key\":null,\"policy\":\"sha256:0123abcd\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":"
             "\"success\",\"reason\":\"success\",\"ok\":true,\"status\":200,\"body_len\":0,\"tries\":"
             "[{\"fate\":\"winner\",\"hedge\":true,\"start_ms\":7,\"class\":\"HTTP_200\",\"status\":200,"
             "\"elapsed_ms\":5,\"delay_ms\":0,\"reason\":\"success\",\"retry_after\":null}]}");
    const char *path = tmp_file("hedge.jsonl");
    write_bytes(path, both, strlen(both));
    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&rec, &got);
    assert_string_equal(got.tries[0].fate, "cancelled");
    assert_int_equal(got.tries[0].start_ms, 0);
    assert_false(got.tries[0].hedge);
    assert_string_equal(got.tries[1].fate, "winner");
    assert_int_equal(got.tries[1].start_ms, 100);
    assert_true(got.tries[1].hedge);
    expect_next(r, &got, RF_LEDGER_RECORD, &err); /* another key order: the general parser */
    assert_string_equal(got.tries[0].fate, "winner");
    assert_int_equal(got.tries[0].start_ms, 7);
    assert_true(got.tries[0].hedge);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    /* Lines without them (every request that never hedged) read back as no fate. */
    rec = sample();
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_null(strstr(buf, "fate"));
    assert_null(strstr(buf, "start_ms"));
    /* Refused by the reader, naming the field. */
    static const struct {
        const char *tail, *says;
    } bad[] = {
        {"\"start_ms\":3}]}", "start_ms"},               /* without a fate */
        {"\"hedge\":true}]}", "hedge"},                  /* without a fate */
        {"\"start_ms\":3,\"fate\":\"lost\"}]}", "fate"}, /* not a fate */
        {"\"start_ms\":3,\"fate\":\"none\"}]}", "fate"}, /* never written */
        {"\"fate\":\"winner\"}]}", "start_ms"},          /* without its start */
        {"\"start_ms\":-1,\"fate\":\"winner\"}]}", "start_ms"},
        {"\"start_ms\":3,\"hedge\":1,\"fate\":\"winner\"}]}", "hedge"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[1024];
        snprintf(line, sizeof line,
                 "{\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\",\"path\":\"/x\","
                 "\"key\":null,\"policy\":\"sha256:0\",\"attempts\":1,\"elapsed_ms\":5,\"outcome\":\"success\","
                 "\"reason\":\"success\",\"ok\":true,\"status\":200,\"body_len\":0,\"tries\":[{\"class\":"
                 "\"HTTP_200\",\"status\":200,\"elapsed_ms\":5,\"delay_ms\":0,\"reason\":\"success\","
                 "\"retry_after\":null,%s\n",
                 bad[i].tail);
        write_bytes(path, line, strlen(line));
        r = reader_open_ok(path);
        expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
        if (strstr(err.message, bad[i].says) == NULL) fail_msg("case %zu: %s", i, err.message);
        rf_ledger_reader_close(r);
    }
    unlink(path);
    /* Refused by the writer: a fate that is not one, start_ms without a fate, a start out of range. */
    rec = sample();
    rec.tries[1].fate = "lost";
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) < 0);
    assert_string_equal(err.path, "$.tries[1].fate");
    rec.tries[1].fate = NULL;
    rec.tries[1].hedge = true;
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) < 0);
    assert_string_equal(err.path, "$.tries[1].fate");
    rec.tries[1].hedge = false;
    rec.tries[1].fate = "failed";
    rec.tries[1].start_ms = -5;
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) < 0);
    assert_non_null(strstr(err.message, "start_ms"));
}

static void test_format_key_null_and_timestamps(void **state) {
    (void)state;
    static const struct {
        int64_t ts_ms;
        const char *text;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1709164800000, "2024-02-29T00:00:00.000Z"},   /* leap day */
        {951782400999, "2000-02-29T00:00:00.999Z"},    /* leap century */
        {253402300799999, "9999-12-31T23:59:59.999Z"}, /* the last one */
    };
    rf_ledger_record rec = sample();
    rec.key = NULL;
    rec.n_tries = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[1024], want[1024];
        rf_error err = {0};
        rec.ts_ms = cases[i].ts_ms;
        snprintf(want, sizeof want,
                 "{\"ts\":\"%s\",\"route\":\"POST /v1/jobs\",\"method\":\"POST\",\"path\":\"/v1/jobs\","
                 "\"key\":null,\"policy\":\"sha256:0123abcd\",\"attempts\":2,\"elapsed_ms\":1234,"
                 "\"outcome\":\"success\",\"reason\":\"success\",\"ok\":true,\"status\":201,\"body_len\":17,"
                 "\"tries\":[]}",
                 cases[i].text);
        assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
        assert_string_equal(buf, want);
    }
}

/* cJSON's number printer would write 1e+15 and 9.00719925474099e+15 here. */
static void test_format_integers_stay_integers(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    char buf[2048];
    rf_error err = {0};
    rec.elapsed_ms = 1000000000000000;
    rec.body_len = MAX_SAFE;
    rec.tries[0].delay_ms = -MAX_SAFE;
    rec.tries[1].elapsed_ms = 1500000000000000;
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_contains(buf, "\"elapsed_ms\":1000000000000000,");
    assert_contains(buf, "\"body_len\":9007199254740992,");
    assert_contains(buf, "\"delay_ms\":-9007199254740992,");
    assert_contains(buf, "\"elapsed_ms\":1500000000000000,");
    assert_null(strstr(buf, "e+"));
}

static void test_format_escapes_strings(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    char buf[2048];
    rf_error err = {0};
    rec.path = "/a\"b\\c\x01\n\xc3\xa9";
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_contains(buf, "\"path\":\"/a\\\"b\\\\c\\u0001\\n\xc3\xa9\",");
}

/* A secret in the path's query (?api_key=SECRET) never reaches the ledger; the names stay. */
static void test_format_redacts_query_values(void **state) {
    (void)state;
    static const struct {
        const char *path, *recorded;
    } cases[] = {
        {"/echo/2?api_key=SECRET", "/echo/2?api_key=REDACTED"},
        {"/a?x=1&token=abc&flag&&y=", "/a?x=REDACTED&token=REDACTED&REDACTED&&y=REDACTED"},
        {"/a?", "/a?"},
        {"/a?=v", "/a?=REDACTED"},
        {"/a/b", "/a/b"},
        {"/a?k=v?w=x", "/a?k=REDACTED"},
        {"/a?b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b&b", "/a?REDACTED"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rf_ledger_record rec = sample();
        char buf[2048], want[256];
        rf_error err = {0};
        rec.path = cases[i].path;
        assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
        snprintf(want, sizeof want, "\"path\":\"%s\",", cases[i].recorded);
        assert_contains(buf, want);
        assert_null(strstr(buf, "SECRET"));
    }
}

static void test_format_buffer_capacity(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    size_t len = strlen(SAMPLE_LINE);
    char *buf = malloc(len + 1);
    rf_error err = {0};
    assert_non_null(buf);
    assert_int_equal(rf_ledger_format(&rec, buf, len, &err), -1);
    assert_string_equal(err.path, "buf");
    assert_contains(err.message, "needs");
    assert_int_equal(rf_ledger_format(&rec, buf, len + 1, &err), (long)len);
    assert_string_equal(buf, SAMPLE_LINE);
    free(buf);
}

/* ---- write, then read ---- */

static void test_round_trip(void **state) {
    (void)state;
    const char *path = tmp_file("round-trip.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    rf_ledger_record recs[4];

    recs[0] = sample();
    recs[1] = sample(); /* key null, no retry_after anywhere, failure */
    recs[1].key = NULL;
    recs[1].tries[0].retry_after = NULL;
    recs[1].ok = false;
    recs[1].outcome = "exhausted";
    recs[1].reason = "max-attempts";
    recs[1].status = 503;
    recs[2] = sample(); /* every try with a Retry-After, the integer extremes, escapes, UTF-8 */
    recs[2].n_tries = RF_LEDGER_MAX_TRIES;
    recs[2].attempts = RF_LEDGER_MAX_TRIES; /* one try per attempt, or the reader counts the line corrupt */
    for (size_t i = 0; i < RF_LEDGER_MAX_TRIES; i++) {
        recs[2].tries[i] = (rf_ledger_try){.class_name = "HTTP_429",
                                           .status = 429,
                                           .elapsed_ms = (int64_t)i,
                                           .delay_ms = MAX_SAFE,
                                           .reason = "pinned-status",
                                           .retry_after = "Sun, 06 Nov 1994 08:49:37 GMT"};
    }
    recs[2].elapsed_ms = MAX_SAFE;
    recs[2].body_len = -MAX_SAFE;
    recs[2].path = "/q/a=\"1\"&b=\\\t\xe2\x82\xac\xf0\x9f\x98\x80"; /* no "?": nothing redacted */
    recs[3] = sample();                                             /* refused before any attempt: no tries */
    recs[3].n_tries = 0;
    recs[3].attempts = 0;
    recs[3].ts_ms = 0;
    recs[3].status = 0;
    recs[3].outcome = "refused";
    recs[3].reason = "no-route";

    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_LINE, &l, &err), RF_OK);
    for (size_t i = 0; i < 4; i++) {
        append_ok(l, &recs[i]);
    }
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);

    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    for (size_t i = 0; i < 4; i++) {
        expect_next(r, &got, RF_LEDGER_RECORD, &err);
        assert_int_equal(rf_ledger_reader_line(r), (long)i + 1);
        assert_records_equal(&got, &recs[i]);
    }
    assert_int_equal(rf_ledger_reader_line(r), 4);
    expect_next(r, &got, RF_LEDGER_END, &err);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

/* Every line names its writer: the machine's hostname by default, the host set by rf_ledger_set_host, or
 * the record's own; "" writes no host field. A host with a space or control character is refused. */
static void test_host_written(void **state) {
    (void)state;
    const char *path = tmp_file("host.jsonl");
    rf_ledger_record rec = sample();
    rf_error err = {0};
    char host[RF_LEDGER_MAX_HOST + 1] = "";
    assert_int_equal(gethostname(host, sizeof host - 1), 0);
    rf_ledger *l = NULL;
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    append_ok(l, &rec); /* the hostname */
    assert_int_equal(rf_ledger_set_host(l, "web-1", &err), RF_OK);
    append_ok(l, &rec);
    rec.host = "from-record";
    append_ok(l, &rec);
    assert_int_equal(rf_ledger_set_host(l, "has space", &err), RF_EINVAL);
    assert_int_equal(rf_ledger_set_host(l, "tab\there", &err), RF_EINVAL);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    rf_ledger_reader *r = NULL;
    assert_int_equal(rf_ledger_reader_open(path, &r, &err), RF_OK);
    const char *want[] = {host, "web-1", "from-record"};
    for (int i = 0; i < 3; i++) {
        rf_ledger_record got;
        assert_int_equal(rf_ledger_reader_next(r, &got, &err), RF_LEDGER_RECORD);
        assert_non_null(got.host);
        assert_string_equal(got.host, want[i]);
        assert_null(got.budget);
    }
    rf_ledger_reader_close(r);
}

/* What rf_ledger_observe's observer saw: how many calls, the last record's fields and host. */
typedef struct observed {
    int calls;
    int attempts;
    char route[64], host[64];
    bool host_null;
} observed;

static void observe(void *ud, const rf_ledger_record *rec, const char *host) {
    observed *o = ud;
    o->calls++;
    o->attempts = rec->attempts;
    snprintf(o->route, sizeof o->route, "%s", rec->route);
    o->host_null = host == NULL;
    snprintf(o->host, sizeof o->host, "%s", host ? host : "");
}

/* The observer hears of every whole append, with the host the line carries (the record's, else the ledger's,
 * NULL for none), and of nothing the writer refused; NULL removes it. */
static void test_observer(void **state) {
    (void)state;
    const char *path = tmp_file("observed.jsonl");
    rf_ledger_record rec = sample();
    rf_error err = {0};
    observed o = {0};
    rf_ledger *l = NULL;
    assert_int_equal(rf_ledger_observe(NULL, observe, &o, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_set_host(l, "web-1", &err), RF_OK);
    append_ok(l, &rec); /* before: not observed */
    assert_int_equal(rf_ledger_observe(l, observe, &o, &err), RF_OK);
    rec.attempts = 2;
    append_ok(l, &rec);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.attempts, 2);
    assert_string_equal(o.route, rec.route);
    assert_string_equal(o.host, "web-1");
    rec.host = "from-record";
    append_ok(l, &rec);
    assert_int_equal(o.calls, 2);
    assert_string_equal(o.host, "from-record");
    rec.host = NULL;
    assert_int_equal(rf_ledger_set_host(l, "", &err), RF_OK);
    append_ok(l, &rec);
    assert_int_equal(o.calls, 3);
    assert_true(o.host_null);
    rec.reason = "\xff not UTF-8"; /* refused: nothing written, nothing observed */
    assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EINVAL);
    assert_int_equal(o.calls, 3);
    rec = sample();
    assert_int_equal(rf_ledger_observe(l, NULL, NULL, &err), RF_OK);
    append_ok(l, &rec);
    assert_int_equal(o.calls, 3);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
}

/* Appending reopens and appends; nothing is truncated. */
static void test_append_keeps_earlier_lines(void **state) {
    (void)state;
    const char *path = tmp_file("reopen.jsonl");
    rf_ledger_record rec = sample();
    rf_error err = {0};
    mode_t old_mask = umask(022);
    for (int round = 0; round < 3; round++) {
        rf_ledger *l = NULL;
        assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
        assert_int_equal(rf_ledger_set_host(l, "", &err), RF_OK); /* exactly SAMPLE_LINE: no host field */
        append_ok(l, &rec);
        assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    }
    assert_int_equal(file_size(path), 3 * (long)(strlen(SAMPLE_LINE) + 1));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    umask(old_mask);
}

/* Enough lines to cross the reader's window several times. */
static void test_many_lines_cross_the_window(void **state) {
    (void)state;
    const char *path = tmp_file("many.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    rf_ledger_record rec = sample();
    char p[64];
    enum { N = 12000 };

    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    for (int i = 0; i < N; i++) {
        snprintf(p, sizeof p, "/n/%d", i);
        rec.path = p;
        append_ok(l, &rec);
    }
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_true(file_size(path) > 4L * RF_LEDGER_MAX_LINE);

    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    for (int i = 0; i < N; i++) {
        expect_next(r, &got, RF_LEDGER_RECORD, &err);
        snprintf(p, sizeof p, "/n/%d", i);
        assert_string_equal(got.path, p);
    }
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

/* ---- torn, corrupt and over-long lines ---- */

static void test_torn_last_line(void **state) {
    (void)state;
    const char *path = tmp_file("torn.jsonl");
    char text[4096];
    rf_error err = {0};
    rf_ledger_record got;

    /* A whole line, then the first 150 bytes of the next one: a crash mid-write. */
    snprintf(text, sizeof text, "%s\n%.150s", SAMPLE_LINE, SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_TORN, &err);
    assert_int_equal(err.line, 2);
    assert_int_equal(rf_ledger_reader_line(r), 2);
    assert_string_equal(err.path, path);
    assert_contains(err.message, "torn");
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);

    /* Torn inside a multi-byte character: invalid UTF-8 at the end is a torn write too. */
    snprintf(text, sizeof text, "%s\n{\"ts\":\"\xe2\x82", SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_TORN, &err);
    assert_int_equal(err.line, 2);
    rf_ledger_reader_close(r);
}

static void test_last_line_without_newline_that_parses(void **state) {
    (void)state;
    const char *path = tmp_file("no-newline.jsonl");
    char text[4096];
    rf_error err = {0};
    rf_ledger_record got, want = sample();

    snprintf(text, sizeof text, "%s\n%s", SAMPLE_LINE, SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&got, &want);
    assert_int_equal(rf_ledger_reader_line(r), 2);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);

    /* Valid JSON but not a record, without a newline: corrupt, not torn. */
    write_bytes(path, "{\"ts\":1}", 8);
    r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_int_equal(err.line, 1);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

static void test_empty_file(void **state) {
    (void)state;
    const char *path = tmp_file("empty.jsonl");
    rf_error err = {0};
    rf_ledger_record got;
    write_bytes(path, "", 0);
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_END, &err);
    assert_int_equal(rf_ledger_reader_line(r), 0);
    rf_ledger_reader_close(r);
}

/* Returns SAMPLE_LINE with the first `from` replaced by `to` (caller frees). */
static char *mutate(const char *from, const char *to) {
    const char *at = strstr(SAMPLE_LINE, from);
    assert_non_null(at);
    size_t head = (size_t)(at - SAMPLE_LINE), from_len = strlen(from), to_len = strlen(to);
    size_t tail = strlen(at + from_len);
    char *s = malloc(head + to_len + tail + 1);
    assert_non_null(s);
    memcpy(s, SAMPLE_LINE, head);
    memcpy(s + head, to, to_len);
    memcpy(s + head + to_len, at + from_len, tail + 1);
    return s;
}

/* Line 2 is `middle`: expect a record, CORRUPT at line 2 naming what is wrong, then the record of line 3. */
static void expect_corrupt_middle(const char *middle, const char *message) {
    const char *path = tmp_file("corrupt.jsonl");
    size_t cap = 2 * sizeof SAMPLE_LINE + strlen(middle) + 4;
    char *text = malloc(cap);
    rf_error err = {0};
    rf_ledger_record got, want = sample();

    assert_non_null(text);
    snprintf(text, cap, "%s\n%s\n%s\n", SAMPLE_LINE, middle, SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    free(text);
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_int_equal(err.line, 2);
    assert_string_equal(err.path, path);
    assert_contains(err.message, message);
    assert_null(got.route); /* nothing half-filled */
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_int_equal(rf_ledger_reader_line(r), 3);
    assert_records_equal(&got, &want);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

static void test_corrupt_middle_line(void **state) {
    (void)state;
    expect_corrupt_middle("this is not json", "not valid JSON");
    expect_corrupt_middle("", "empty line");
    expect_corrupt_middle("[1,2]", "must be a JSON object");
    expect_corrupt_middle("{\"a\":1} x", "unexpected text after the value");

    char line[sizeof SAMPLE_LINE + 8];
    int head = (int)(strstr(SAMPLE_LINE, "\"tries\":[") - SAMPLE_LINE) + (int)strlen("\"tries\":");
    snprintf(line, sizeof line, "%.*s{}}", head, SAMPLE_LINE);
    expect_corrupt_middle(line, "field \"$.tries\" must be an array, got an object");
}

static void test_corrupt_fields(void **state) {
    (void)state;
    static const struct {
        const char *from, *to, *message;
    } cases[] = {
        {"\"policy\":\"sha256:0123abcd\",", "", "missing field \"$.policy\""},
        {"\"attempts\":2", "\"attempts\":\"2\"", "field \"$.attempts\" must be an integer, got a string"},
        {"\"attempts\":2", "\"attempts\":2.5", "field \"$.attempts\" must be an integer in int range, got 2.5"},
        /* the value as the line wrote it (shortest round-trip form), not 2.2999999999999998 */
        {"\"attempts\":2", "\"attempts\":2.3", "field \"$.attempts\" must be an integer in int range, got 2.3"},
        {"\"status\":201,\"body", "\"status\":4294967296,\"body", "field \"$.status\" must be an integer"},
        {"\"elapsed_ms\":1234", "\"elapsed_ms\":18014398509481984", "\"$.elapsed_ms\" must be an integer in +-2^53"},
        {"\"ok\":true", "\"ok\":1", "field \"$.ok\" must be a boolean, got a number"},
        {"\"key\":\"k-1\"", "\"key\":7", "field \"$.key\" must be a string or null, got a number"},
        {"\"route\":\"POST /v1/jobs\"", "\"route\":null", "field \"$.route\" must be a string, got null"},
        {"\"ts\":\"2026-11-29T17:20:01.123Z\"", "\"ts\":\"2026-11-29T17:20:01Z\"", "field \"$.ts\" must be RFC 3339"},
        {"\"ts\":\"2026-11-29T17:20:01.123Z\"", "\"ts\":\"2026-02-29T17:20:01.123Z\"", "field \"$.ts\""},
        {"\"ts\":\"2026-11-29T17:20:01.123Z\"", "\"ts\":1795972801123", "field \"$.ts\" must be a string"},
        {"\"body_len\":17", "\"body_len\":17,\"body\":\"secret\"", "unknown field \"$.body\""},
        {"\"route\":\"POST /v1/jobs\"", "\"route\":\"POST /v1/jobs\",\"route\":\"x\"", "duplicate field \"$.route\""},
        {"\"tries\":[", "\"tries\":[5,", "field \"$.tries[0]\" must be an object, got a number"},
        {"\"status\":503,", "", "missing field \"$.tries[0].status\""},
        {"\"delay_ms\":1000", "\"delay_ms\":-1.5", "field \"$.tries[1].delay_ms\" must be an integer"},
        {"\"retry_after\":\"1\"", "\"retry_after\":1", "field \"$.tries[0].retry_after\" must be a string or null"},
        {"\"reason\":\"pinned-status\"", "\"reason\":\"pinned-status\",\"body\":\"\"",
         "unknown field \"$.tries[0].body\""},
        {"\"path\":\"/v1/jobs\"", "\"path\":\"/v1\\u0000/jobs\"", "the escape \\u0000"},
        {"\"path\":\"/v1/jobs\"", "\"path\":\"/v1\x01/jobs\"", "raw control character"},
        {"\"path\":\"/v1/jobs\"", "\"path\":\"/v1\xff/jobs\"", "invalid UTF-8"},
        {"\"path\":\"/v1/jobs\"", "\"path\":\"/v1\xed\xa0\x80/jobs\"", "invalid UTF-8"}, /* a surrogate */
        {"\"path\":\"/v1/jobs\"", "\"path\":\"/v1\\ud800/jobs\"", "not valid JSON"},     /* a lone surrogate escape */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *line = mutate(cases[i].from, cases[i].to);
        expect_corrupt_middle(line, cases[i].message);
        free(line);
    }
}

/* What the request's caller propagated: written after the tries (and host and budget) only when present, read back
 * by the fast and the general parser alike; a line without them reads as none; a bad value is corrupt, named. */
static void test_inbound_fields(void **state) {
    (void)state;
    rf_ledger_record rec = sample();
    rec.budget = "local";
    rec.has_inbound_deadline = true;
    rec.inbound_deadline_ms = 300;
    rec.inbound_attempt = 2;
    char buf[2048];
    rf_error err = {0};
    assert_true(rf_ledger_format(&rec, buf, sizeof buf, &err) > 0);
    assert_non_null(strstr(buf, "\"budget\":\"local\",\"inbound_deadline_ms\":300,\"inbound_attempt\":2}"));
    rf_ledger_record zero = sample();
    char plain[2048];
    assert_true(rf_ledger_format(&zero, plain, sizeof plain, &err) > 0);
    assert_null(strstr(plain, "inbound")); /* absent: the line of before, byte for byte */
    /* the same fields in another order: the general parser */
    char text[8192];
    snprintf(text, sizeof text, "%s\n%s\n%s\n", buf, plain,
             "{\"inbound_attempt\":7,\"ts\":\"2026-11-29T17:20:01.123Z\",\"route\":\"GET /x\",\"method\":\"GET\","
             "\"path\":\"/x\",\"key\":null,\"policy\":\"sha256:0\",\"attempts\":0,\"elapsed_ms\":5,\"outcome\":"
             "\"terminal\",\"reason\":\"inbound-retry\",\"ok\":false,\"status\":503,\"body_len\":0,\"tries\":[],"
             "\"inbound_deadline_ms\":0}");
    const char *path = tmp_file("inbound.jsonl");
    write_bytes(path, text, strlen(text));
    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_records_equal(&rec, &got);
    assert_true(got.has_inbound_deadline);
    assert_int_equal(got.inbound_deadline_ms, 300);
    assert_int_equal(got.inbound_attempt, 2);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_false(got.has_inbound_deadline);
    assert_int_equal(got.inbound_attempt, 0);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_true(got.has_inbound_deadline);
    assert_int_equal(got.inbound_deadline_ms, 0);
    assert_int_equal(got.inbound_attempt, 7);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    unlink(path);
    /* refused when written, named */
    rec.inbound_deadline_ms = -1;
    assert_int_equal(rf_ledger_format(&rec, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "$.inbound_deadline_ms");
    rec.inbound_deadline_ms = 300;
    rec.inbound_attempt = -2;
    assert_int_equal(rf_ledger_format(&rec, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "$.inbound_attempt");
    /* refused when read, named */
    static const struct {
        const char *to, *message;
    } bad[] = {
        {"],\"inbound_attempt\":0}", "field \"$.inbound_attempt\" must be an integer in 1..2147483647, got 0"},
        {"],\"inbound_attempt\":\"2\"}",
         "field \"$.inbound_attempt\" must be an integer in 1..2147483647, got a string"},
        {"],\"inbound_deadline_ms\":-5}", "field \"$.inbound_deadline_ms\" must be an integer in 0..2^53, got -5"},
        {"],\"inbound_deadline_ms\":1.5}", "field \"$.inbound_deadline_ms\" must be an integer in 0..2^53, got 1.5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *line = mutate("]}", bad[i].to);
        expect_corrupt_middle(line, bad[i].message);
        free(line);
    }
}

static void test_retry_after_may_be_omitted(void **state) {
    (void)state;
    const char *path = tmp_file("omitted.jsonl");
    char *line = mutate(",\"retry_after\":null", "");
    rf_error err = {0};
    rf_ledger_record got;
    write_bytes(path, line, strlen(line));
    free(line);
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_int_equal(got.n_tries, 2);
    assert_string_equal(got.tries[0].retry_after, "1");
    assert_null(got.tries[1].retry_after);
    rf_ledger_reader_close(r);
}

static void test_too_many_tries_in_a_line(void **state) {
    (void)state;
    static const char try_json[] =
        "{\"class\":\"HTTP_503\",\"status\":503,\"elapsed_ms\":1,\"delay_ms\":0,\"reason\":\"pinned-status\"}";
    const char *start = strstr(SAMPLE_LINE, "\"tries\":[");
    size_t head = (size_t)(start - SAMPLE_LINE) + strlen("\"tries\":[");
    size_t cap = head + (RF_LEDGER_MAX_TRIES + 1) * sizeof try_json + 8;
    char *line = malloc(cap);
    assert_non_null(line);
    memcpy(line, SAMPLE_LINE, head);
    line[head] = '\0';
    for (int i = 0; i <= RF_LEDGER_MAX_TRIES; i++) {
        strcat(line, i ? "," : "");
        strcat(line, try_json);
    }
    strcat(line, "]}");
    expect_corrupt_middle(line, "more than RF_LEDGER_MAX_TRIES");
    free(line);
}

static void test_over_long_line(void **state) {
    (void)state;
    const char *path = tmp_file("long.jsonl");
    size_t line_len = sizeof SAMPLE_LINE - 1;
    /* line 1: one byte too long; line 2: a record; line 3: 3 MiB of junk; line 4: a record; line 5: too long,
       no newline, at the end of the file */
    size_t long1 = RF_LEDGER_MAX_LINE + 1, long3 = 3u * RF_LEDGER_MAX_LINE, long5 = RF_LEDGER_MAX_LINE + 7;
    size_t total = long1 + 1 + line_len + 1 + long3 + 1 + line_len + 1 + long5;
    char *text = malloc(total), *p = text;
    rf_error err = {0};
    rf_ledger_record got;

    assert_non_null(text);
    memset(p, 'x', long1);
    p += long1;
    *p++ = '\n';
    memcpy(p, SAMPLE_LINE, line_len);
    p += line_len;
    *p++ = '\n';
    memset(p, '{', long3);
    p += long3;
    *p++ = '\n';
    memcpy(p, SAMPLE_LINE, line_len);
    p += line_len;
    *p++ = '\n';
    memset(p, '"', long5);
    p += long5;
    assert_int_equal((size_t)(p - text), total);
    write_bytes(path, text, total);
    free(text);

    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_int_equal(err.line, 1);
    assert_string_equal(err.path, path);
    assert_contains(err.message, "longer than RF_LEDGER_MAX_LINE");
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_int_equal(rf_ledger_reader_line(r), 2);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_int_equal(err.line, 3);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_int_equal(rf_ledger_reader_line(r), 4);
    expect_next(r, &got, RF_LEDGER_CORRUPT, &err);
    assert_int_equal(err.line, 5);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

/* The writer accepts a line of exactly RF_LEDGER_MAX_LINE bytes, the reader reads it; one more is refused. */
static void test_longest_line(void **state) {
    (void)state;
    const char *path = tmp_file("longest.jsonl");
    rf_ledger_record rec = sample();
    char small[2048];
    rf_error err = {0};
    rf_ledger *l = NULL;

    rec.path = "";
    long base = rf_ledger_format(&rec, small, sizeof small, &err);
    assert_true(base > 0);
    size_t path_len = RF_LEDGER_MAX_LINE - (size_t)base;
    char *long_path = malloc(path_len + 2);
    assert_non_null(long_path);
    memset(long_path, 'p', path_len + 1);
    long_path[path_len] = '\0';
    rec.path = long_path;

    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_set_host(l, "", &err), RF_OK); /* the line is exactly what rf_ledger_format gave */
    append_ok(l, &rec);
    long_path[path_len] = 'p'; /* one byte more */
    long_path[path_len + 1] = '\0';
    assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EINVAL);
    assert_string_equal(err.path, "$");
    assert_contains(err.message, "more than RF_LEDGER_MAX_LINE");
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(file_size(path), RF_LEDGER_MAX_LINE + 1);

    rf_ledger_reader *r = reader_open_ok(path);
    rf_ledger_record got;
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    assert_int_equal(strlen(got.path), path_len);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
    free(long_path);
}

/* ---- I/O errors ---- */

/* Reads path expecting: a record, TORN at line 2 (naming the file), a record at line 3, the end. */
static void expect_record_torn_record(const char *path) {
    rf_error err = {0};
    rf_ledger_record got, want = sample();
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_TORN, &err);
    assert_int_equal(err.line, 2);
    assert_string_equal(err.path, path);
    assert_contains(err.message, "torn");
    expect_next(r, &got, RF_LEDGER_RECORD, &err); /* the reader reads on */
    assert_int_equal(rf_ledger_reader_line(r), 3);
    assert_records_equal(&got, &want);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

/* After a crash mid-append, the next writer's first line was glued onto the fragment. */
static void test_writer_terminates_a_torn_last_line(void **state) {
    (void)state;
    const char *path = tmp_file("repair.jsonl");
    char text[4096];
    rf_ledger_record rec = sample();
    rf_ledger *l = NULL;
    rf_error err = {0};

    snprintf(text, sizeof text, "%s\n%.150s", SAMPLE_LINE, SAMPLE_LINE); /* a crash mid-write */
    write_bytes(path, text, strlen(text));
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(file_size(path), (long)strlen(text) + 1); /* one "\n", at open */
    append_ok(l, &rec);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    expect_record_torn_record(path);

    /* A file that ends in a newline, or is empty, is left as it is. */
    long size = file_size(path);
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(file_size(path), size);
    write_bytes(path, "", 0);
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(file_size(path), 0);
}

/* A torn fragment in the middle (left by a writer older than the repair, then terminated) is TORN, not CORRUPT;
 * a line that is not the start of a ledger line stays CORRUPT. */
static void test_torn_fragment_in_the_middle(void **state) {
    (void)state;
    const char *path = tmp_file("middle.jsonl");
    char text[4096];
    snprintf(text, sizeof text, "%s\n%.200s\n%s\n", SAMPLE_LINE, SAMPLE_LINE, SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    expect_record_torn_record(path);
    /* Cut inside a multi-byte character. */
    snprintf(text, sizeof text, "%s\n{\"ts\":\"\xe2\x82\n%s\n", SAMPLE_LINE, SAMPLE_LINE);
    write_bytes(path, text, strlen(text));
    expect_record_torn_record(path);
    expect_corrupt_middle("{\"ts\":\"2026\"} and more {", "not valid JSON");
    expect_corrupt_middle("{\"other\":", "not valid JSON");
}

/* Sets the file size limit (RLIMIT_FSIZE), a full disk at a chosen byte; SIGXFSZ ignored, so write(2) is short
 * or fails with EFBIG. */
static void set_fsize_limit(rlim_t bytes) {
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = bytes;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* A full-disk test's state: the file size limit to restore, the SIGXFSZ handler before, one line's size. */
typedef struct full_disk {
    struct rlimit saved;
    void (*old)(int);
    long one;
} full_disk;

/* Starts a full-disk test: skips it when the file size limit could not be raised back, ignores SIGXFSZ (so that
 * write(2) is short or fails with EFBIG), opens path and appends rec (one line: fd->one bytes). */
static rf_ledger *full_disk_open(const char *path, const rf_ledger_record *rec, full_disk *fd) {
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &fd->saved), 0);
    if (fd->saved.rlim_max != RLIM_INFINITY && fd->saved.rlim_max < 1 << 20) skip();
    fd->old = signal(SIGXFSZ, SIG_IGN);
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    append_ok(l, rec);
    fd->one = file_size(path);
    return l;
}

/* A full disk cuts a line short; once space is back, the same writer terminates the fragment in the one write(2)
 * of its next line, and a new writer does it at open. */
static void test_full_disk_then_freed(void **state) {
    (void)state;
    const char *path = tmp_file("full.jsonl");
    rf_ledger_record rec = sample();
    rf_error err = {0};
    full_disk fd;
    rf_ledger *l = full_disk_open(path, &rec, &fd);
    const long one = fd.one;
    set_fsize_limit((rlim_t)one + 100); /* the disk fills 100 bytes into the second line */
    assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EIO);
    assert_contains(err.message, "short write");
    assert_int_equal(file_size(path), one + 100);
    assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EIO); /* still full: nothing written */
    assert_int_equal(file_size(path), one + 100);
    set_fsize_limit(fd.saved.rlim_cur); /* space is back */
    append_ok(l, &rec);
    assert_int_equal(file_size(path), one + 100 + 1 + one); /* "\n" + the line, in one write */
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    expect_record_torn_record(path);

    /* The same with a new writer after the full disk. */
    l = NULL;
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    append_ok(l, &rec);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    path = tmp_file("full2.jsonl");
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    append_ok(l, &rec);
    set_fsize_limit((rlim_t)one + 100);
    assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EIO);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    set_fsize_limit(fd.saved.rlim_cur);
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    append_ok(l, &rec);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    expect_record_torn_record(path);
    signal(SIGXFSZ, fd.old);
}

/* A batch is the lines rf_ledger_append would write one by one, in order, each whole: the same bytes as
 * separate appends; a refused record is left out (its own error), the others written and observed. */
static void test_batch_writes_the_lines_of_separate_appends(void **state) {
    (void)state;
    const char *one_path = tmp_file("one-by-one.jsonl");
    rf_ledger_record recs[70];
    const rf_ledger_record *ptrs[71];
    rf_status status[71];
    rf_error errs[71];
    for (int i = 0; i < 70; i++) {
        recs[i] = sample();
        recs[i].attempts = i + 1; /* every line differs */
        ptrs[i] = &recs[i];
    }
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(one_path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    for (int i = 0; i < 70; i++)
        if (i != 5) append_ok(l, &recs[i]);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);

    const char *batch_path = tmp_file("batch.jsonl");
    recs[5].reason = "\xff not UTF-8"; /* refused: left out, the others written */
    ptrs[70] = NULL;                   /* a NULL record: refused alike */
    observed o = {0};
    assert_int_equal(rf_ledger_open(batch_path, RF_LEDGER_FSYNC_LINE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_observe(l, observe, &o, &err), RF_OK);
    assert_int_equal(rf_ledger_append_batch(l, ptrs, 71, status, errs), 69); /* 70 - 1 over BATCH_LINES: 2 writes */
    assert_int_equal(rf_ledger_append_batch(l, ptrs, 0, status, NULL), 0);
    assert_int_equal(rf_ledger_append_batch(NULL, ptrs, 1, status, NULL), 0);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    for (int i = 0; i < 71; i++) assert_int_equal(status[i], i == 5 || i == 70 ? RF_EINVAL : RF_OK);
    assert_string_equal(errs[5].path, "$.reason");
    assert_string_equal(errs[70].path, "rec");
    assert_int_equal(o.calls, 69);
    assert_int_equal(o.attempts, 70); /* the last one observed last */

    FILE *a = fopen(one_path, "rb"), *b = fopen(batch_path, "rb");
    assert_non_null(a);
    assert_non_null(b);
    static char abuf[1 << 16], bbuf[1 << 16];
    size_t an = fread(abuf, 1, sizeof abuf, a), bn = fread(bbuf, 1, sizeof bbuf, b);
    fclose(a);
    fclose(b);
    assert_true(an > 0 && an < sizeof abuf);
    assert_int_equal(an, bn);
    assert_memory_equal(abuf, bbuf, an);
}

/* A full disk cuts a batch: the lines before the cut are whole (RF_OK, observed), the cut one and those after
 * are RF_EIO; once space is back the next batch ends the fragment first, and the reader reads on. */
static void test_batch_cut_by_a_full_disk(void **state) {
    (void)state;
    const char *path = tmp_file("batch-full.jsonl");
    rf_ledger_record recs[3] = {sample(), sample(), sample()};
    const rf_ledger_record *ptrs[3] = {&recs[0], &recs[1], &recs[2]};
    rf_status status[3];
    rf_error errs[3];
    rf_error err = {0};
    full_disk fd;
    rf_ledger *l = full_disk_open(path, &recs[0], &fd);
    const long one = fd.one;
    observed o = {0};
    assert_int_equal(rf_ledger_observe(l, observe, &o, &err), RF_OK);
    set_fsize_limit((rlim_t)(2 * one + 100)); /* the disk fills 100 bytes into the batch's second line */
    assert_int_equal(rf_ledger_append_batch(l, ptrs, 3, status, errs), 1);
    assert_int_equal(status[0], RF_OK);
    assert_int_equal(status[1], RF_EIO);
    assert_int_equal(status[2], RF_EIO);
    assert_contains(errs[1].message, "short write");
    assert_int_equal(o.calls, 1);
    assert_int_equal(file_size(path), 2 * one + 100);
    set_fsize_limit(fd.saved.rlim_cur); /* space is back */
    assert_int_equal(rf_ledger_append_batch(l, ptrs, 1, status, errs), 1);
    assert_int_equal(file_size(path), 2 * one + 100 + 1 + one); /* "\n" + the line, in one write */
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    signal(SIGXFSZ, fd.old);

    rf_ledger_record got;
    rf_ledger_reader *r = reader_open_ok(path);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_TORN, &err);
    expect_next(r, &got, RF_LEDGER_RECORD, &err);
    expect_next(r, &got, RF_LEDGER_END, &err);
    rf_ledger_reader_close(r);
}

static void test_open_errors(void **state) {
    (void)state;
    rf_ledger *l = (rf_ledger *)&l; /* must be reset to NULL */
    rf_ledger_reader *r = (rf_ledger_reader *)&r;
    rf_error err = {0};

    assert_int_equal(rf_ledger_open(tmp_dir, RF_LEDGER_FSYNC_NONE, &l, &err), RF_EINVAL);
    assert_null(l);
    assert_string_equal(err.path, tmp_dir);
    assert_contains(err.message, "is a directory, not a regular file");

    assert_int_equal(rf_ledger_open("/nonexistent-rf-dir/ledger.jsonl", RF_LEDGER_FSYNC_NONE, &l, &err), RF_EIO);
    /* path is the file and the message one sentence naming it once (docs/c-api.md, "Conventions") */
    assert_string_equal(err.path, "/nonexistent-rf-dir/ledger.jsonl");
    assert_string_equal(err.message, "cannot open ledger /nonexistent-rf-dir/ledger.jsonl: No such file or directory");

    assert_int_equal(rf_ledger_reader_open(tmp_dir, &r, &err), RF_EINVAL);
    assert_null(r);
    assert_contains(err.message, "is a directory, not a regular file");
    assert_int_equal(rf_ledger_reader_open("/nonexistent-rf-dir/ledger.jsonl", &r, &err), RF_EIO);
    assert_string_equal(err.path, "/nonexistent-rf-dir/ledger.jsonl");
    assert_string_equal(err.message, "cannot open ledger /nonexistent-rf-dir/ledger.jsonl: No such file or directory");
}

/* A FIFO blocked the reader (and a writer) forever; devices are no ledgers either. */
static void test_regular_files_only(void **state) {
    (void)state;
    const char *fifo = tmp_file("ledger.fifo");
    rf_ledger *l = NULL;
    rf_ledger_reader *r = NULL;
    rf_error err = {0};
    alarm(20); /* a blocking open would hang the test: make it fail instead */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(rf_ledger_reader_open(fifo, &r, &err), RF_EINVAL);
    assert_null(r);
    assert_string_equal(err.path, fifo);
    assert_contains(err.message, "is a FIFO, not a regular file");
    assert_int_equal(rf_ledger_open(fifo, RF_LEDGER_FSYNC_NONE, &l, &err), RF_EINVAL);
    assert_null(l);
    assert_contains(err.message, "is a FIFO, not a regular file");
    assert_int_equal(rf_ledger_reader_open("/dev/zero", &r, &err), RF_EINVAL);
    assert_contains(err.message, "is a character device, not a regular file");
    assert_int_equal(rf_ledger_open("/dev/full", RF_LEDGER_FSYNC_NONE, &l, &err), RF_EINVAL);
    assert_contains(err.message, "is a character device, not a regular file");
    alarm(0);
}

static void test_read_only_file(void **state) {
    (void)state;
    const char *path = tmp_file("read-only.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    if (geteuid() == 0) {
        skip(); /* root writes through 0444 */
    }
    write_bytes(path, "", 0);
    assert_int_equal(chmod(path, 0444), 0);
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_EIO);
    assert_contains(err.message, "Permission denied");
}

/* ---- refused arguments ---- */

static void test_null_arguments(void **state) {
    (void)state;
    const char *path = tmp_file("null.jsonl");
    rf_ledger_record rec = sample(), got;
    rf_ledger *l = NULL;
    rf_ledger_reader *r = NULL;
    rf_error err = {0};
    char buf[2048];

    assert_int_equal(rf_ledger_open(NULL, RF_LEDGER_FSYNC_NONE, &l, &err), RF_EINVAL);
    assert_string_equal(err.path, "path");
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, NULL, &err), RF_EINVAL);
    assert_string_equal(err.path, "out");
    assert_int_equal(rf_ledger_open(path, (rf_ledger_fsync)7, &l, &err), RF_EINVAL);
    assert_string_equal(err.path, "fsync_mode");
    assert_int_equal(rf_ledger_append(NULL, &rec, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_append(NULL, &rec, NULL), RF_EINVAL); /* err may be NULL */
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_append(l, NULL, &err), RF_EINVAL);
    assert_string_equal(err.path, "rec");
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(rf_ledger_close(NULL, &err), RF_OK);
    assert_int_equal(file_size(path), 0);

    assert_int_equal(rf_ledger_format(NULL, buf, sizeof buf, &err), -1);
    assert_string_equal(err.path, "rec");
    assert_int_equal(rf_ledger_format(&rec, NULL, 0, &err), -1);
    assert_string_equal(err.path, "buf");

    assert_int_equal(rf_ledger_reader_open(NULL, &r, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_reader_open(path, NULL, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_reader_next(NULL, &got, &err), RF_LEDGER_ERROR);
    assert_string_equal(err.path, "r");
    r = reader_open_ok(path);
    assert_int_equal(rf_ledger_reader_next(r, NULL, &err), RF_LEDGER_ERROR);
    assert_string_equal(err.path, "rec");
    rf_ledger_reader_close(r);
    rf_ledger_reader_close(NULL);
    assert_int_equal(rf_ledger_reader_line(NULL), 0);
}

static void test_refused_values(void **state) {
    (void)state;
    const char *path = tmp_file("refused.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    static const struct {
        int what;
        const char *field;
    } cases[] = {
        {0, "$.elapsed_ms"},
        {1, "$.body_len"},
        {2, "$.tries[1].delay_ms"},
        {3, "$.tries[0].elapsed_ms"},
        {4, "$.ts"},
        {5, "$.ts"},
        {6, "$.tries"},
        {7, "$.route"},
        {8, "$.tries[1].reason"},
        {9, "$.path"},
        {10, "$.tries[0].retry_after"},
        {11, "$.tries[0].class"},
    };

    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rf_ledger_record rec = sample();
        char buf[2048];
        switch (cases[i].what) {
        case 0: rec.elapsed_ms = MAX_SAFE + 1; break;
        case 1: rec.body_len = -MAX_SAFE - 1; break;
        case 2: rec.tries[1].delay_ms = INT64_MAX; break;
        case 3: rec.tries[0].elapsed_ms = INT64_MIN; break;
        case 4: rec.ts_ms = -1; break;
        case 5: rec.ts_ms = 253402300800000; break; /* year 10000 */
        case 6: rec.n_tries = RF_LEDGER_MAX_TRIES + 1; break;
        case 7: rec.route = NULL; break;
        case 8: rec.tries[1].reason = NULL; break;
        case 9: rec.path = "/v1/\xc3\x28"; break;              /* invalid UTF-8 */
        case 10: rec.tries[0].retry_after = "\xc0\xaf"; break; /* overlong "/" */
        case 11: rec.tries[0].class_name = NULL; break;
        }
        memset(&err, 0, sizeof err);
        assert_int_equal(rf_ledger_append(l, &rec, &err), RF_EINVAL);
        assert_string_equal(err.path, cases[i].field);
        assert_contains(err.message, cases[i].field);
        assert_int_equal(rf_ledger_format(&rec, buf, sizeof buf, &err), -1);
        assert_string_equal(err.path, cases[i].field);
    }
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(file_size(path), 0); /* nothing was written */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_known_record),
        cmocka_unit_test(test_retry_after_header),
        cmocka_unit_test(test_replay_facts),
        cmocka_unit_test(test_hedge_fields),
        cmocka_unit_test(test_inbound_fields),
        cmocka_unit_test(test_format_key_null_and_timestamps),
        cmocka_unit_test(test_format_integers_stay_integers),
        cmocka_unit_test(test_format_escapes_strings),
        cmocka_unit_test(test_format_redacts_query_values),
        cmocka_unit_test(test_format_buffer_capacity),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_try_peer),
        cmocka_unit_test(test_append_keeps_earlier_lines),
        cmocka_unit_test(test_host_written),
        cmocka_unit_test(test_many_lines_cross_the_window),
        cmocka_unit_test(test_torn_last_line),
        cmocka_unit_test(test_last_line_without_newline_that_parses),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_corrupt_middle_line),
        cmocka_unit_test(test_corrupt_fields),
        cmocka_unit_test(test_retry_after_may_be_omitted),
        cmocka_unit_test(test_too_many_tries_in_a_line),
        cmocka_unit_test(test_over_long_line),
        cmocka_unit_test(test_longest_line),
        cmocka_unit_test(test_writer_terminates_a_torn_last_line),
        cmocka_unit_test(test_torn_fragment_in_the_middle),
        cmocka_unit_test(test_full_disk_then_freed),
        cmocka_unit_test(test_batch_writes_the_lines_of_separate_appends),
        cmocka_unit_test(test_batch_cut_by_a_full_disk),
        cmocka_unit_test(test_regular_files_only),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_observer),
        cmocka_unit_test(test_read_only_file),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_refused_values),
    };
    return cmocka_run_group_tests_name("ledger", tests, tmp_files_setup, tmp_files_teardown);
}
