/*
 * Fuzz target: the ledger reader (rf_ledger_reader_open/next) on arbitrary file contents. The input is
 * written to a memfd and read back through /proc/self/fd/N, the reader's only entry point being a path.
 * Invariants:
 *   - the reader ends (END, TORN or ERROR) after at most one answer per line, never crashes or leaks;
 *     after it ends, every call answers END again;
 *   - line numbers count up by one per answer, one answer per line; TORN for the last line only when the file
 *     does not end in a newline, and further up only for a line that starts as a record does (a fragment a
 *     later writer terminated), after which the reader reads on; CORRUPT and TORN name the line and say why;
 *   - a record has every required string, at most RF_LEDGER_MAX_TRIES tries, and each try its class and
 *     reason;
 *   - what the reader accepts the writer can write: rf_ledger_format of the record succeeds, and reading
 *     that line back gives the same record (a field-by-field comparison);
 *   - the writer's line is JSON to cJSON too, with the same strings: the writer escapes by hand (for speed) and
 *     the reader has a fast path of its own, so neither may be the only judge of the other;
 *   - every record the reader accepts replays (retryfreeze/replay.h) under a candidate lock with a retry budget
 *     and several wait headers, a queue of 3 waiting requests and one sample enough to draw from: each is counted
 *     once as recorded and once as predicted (seed-harness records as recorded only).
 */
#define _GNU_SOURCE
#include "fuzz.h"

#include "retryfreeze/ledger.h"
#include "retryfreeze/replay.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

static char *line_buf;       /* rf_ledger_format's output: RF_LEDGER_MAX_LINE + 1 bytes, allocated once */
static rf_policy *candidate; /* the replay's candidate, loaded once */

static const char CANDIDATE[] =
    "{\"version\":1,\"defaults\":{\"perAttemptTimeoutMs\":300,\"totalBudgetMs\":2000,\"maxAttempts\":4,"
    "\"retryable\":[\"HTTP_5XX\",\"HTTP_429\",\"TIMEOUT\",\"CONNECT_RESET\"]},\"routes\":[{\"endpoint\":\"POST "
    "/v1/jobs\"},{\"endpoint\":\"GET /*\",\"retryAfter\":{\"headers\":[\"retry-after\",\"retry-after-ms\","
    "\"x-ratelimit-reset\"]}}],\"retryBudget\":{\"maxTokens\":5,\"tokenRatio\":0.1}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (line_buf == NULL) line_buf = malloc((size_t)RF_LEDGER_MAX_LINE + 2);
    FZ_CHECK(line_buf != NULL, "out of memory");
    rf_error err;
    if (candidate == NULL)
        FZ_CHECK(rf_policy_load_buffer(CANDIDATE, sizeof CANDIDATE - 1, &candidate, &err) == RF_OK, "candidate: %s: %s",
                 err.path, err.message);
    return 0;
}

/* A file holding data[0..size); writes its /proc path into path. Returns the descriptor. */
static int memfile(const void *data, size_t size, char path[64]) {
    int fd = memfd_create("ledger", MFD_CLOEXEC);
    FZ_CHECK(fd >= 0, "memfd_create failed");
    const char *p = data;
    size_t left = size;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        FZ_CHECK(n > 0, "write to memfd failed");
        p += n;
        left -= (size_t)n;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

static bool same_str(const char *a, const char *b) { return (a == NULL) == (b == NULL) && (!a || !strcmp(a, b)); }

/* The writer redacts the path's query values: up to and including the first '?' the path is kept, and a path
 * without '?' is kept whole. Exact equality (redacted == false) holds for a record that was written once. */
static bool same_path(const char *a, const char *b, bool redacted) {
    const char *q = strchr(a, '?');
    if (!redacted || q == NULL) return strcmp(a, b) == 0;
    return strncmp(a, b, (size_t)(q - a) + 1) == 0;
}

static void check_same_record(const rf_ledger_record *a, const rf_ledger_record *b, bool redacted) {
    FZ_CHECK(a->ts_ms == b->ts_ms && same_str(a->route, b->route) && same_str(a->method, b->method) &&
                 same_path(a->path, b->path, redacted) && same_str(a->key, b->key) && same_str(a->policy, b->policy) &&
                 a->attempts == b->attempts && a->elapsed_ms == b->elapsed_ms && same_str(a->outcome, b->outcome) &&
                 same_str(a->reason, b->reason) && a->ok == b->ok && a->status == b->status &&
                 a->body_len == b->body_len && a->n_tries == b->n_tries,
             "the record changes when written and read back");
    for (size_t i = 0; i < a->n_tries; i++) {
        const rf_ledger_try *x = &a->tries[i], *y = &b->tries[i];
        FZ_CHECK(same_str(x->class_name, y->class_name) && x->status == y->status && x->elapsed_ms == y->elapsed_ms &&
                     x->delay_ms == y->delay_ms && same_str(x->reason, y->reason) &&
                     same_str(x->retry_after, y->retry_after) &&
                     same_str(x->retry_after_header, y->retry_after_header) && x->timeout_ms == y->timeout_ms &&
                     same_str(x->transport, y->transport) && x->not_sent == y->not_sent && same_str(x->date, y->date) &&
                     same_str(x->peer, y->peer),
                 "try %zu changes when written and read back", i);
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++)
            FZ_CHECK(same_str(x->wait[h], y->wait[h]), "try %zu: wait header %d changes when written and read back", i,
                     h);
    }
}

/* The string member name of obj equals want (NULL: the member is absent or null). */
static bool json_str_is(const cJSON *obj, const char *name, const char *want) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (want == NULL) return m == NULL || cJSON_IsNull(m);
    return cJSON_IsString(m) && strcmp(m->valuestring, want) == 0;
}

/* line[0..len) parsed by cJSON: one object whose strings are rec's (the path is redacted, so left out). */
static void check_cjson_agrees(const rf_ledger_record *rec, const char *line, long len) {
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, (size_t)len, &end, 0);
    FZ_CHECK(obj != NULL && cJSON_IsObject(obj) && end == line + len, "cJSON does not read the writer's line\n  %.*s",
             (int)len, line);
    FZ_CHECK(json_str_is(obj, "route", rec->route) && json_str_is(obj, "method", rec->method) &&
                 json_str_is(obj, "key", rec->key) && json_str_is(obj, "policy", rec->policy) &&
                 json_str_is(obj, "outcome", rec->outcome) && json_str_is(obj, "reason", rec->reason),
             "cJSON reads other strings from the writer's line\n  %.*s", (int)len, line);
    const cJSON *tries = cJSON_GetObjectItemCaseSensitive(obj, "tries");
    FZ_CHECK(cJSON_IsArray(tries) && (size_t)cJSON_GetArraySize(tries) == rec->n_tries, "cJSON: tries");
    for (size_t i = 0; i < rec->n_tries; i++) {
        const cJSON *t = cJSON_GetArrayItem(tries, (int)i);
        FZ_CHECK(json_str_is(t, "class", rec->tries[i].class_name) && json_str_is(t, "reason", rec->tries[i].reason) &&
                     json_str_is(t, "retry_after", rec->tries[i].retry_after) &&
                     json_str_is(t, "transport", rec->tries[i].transport) && json_str_is(t, "date", rec->tries[i].date),
                 "cJSON reads other strings in try %zu\n  %.*s", i, (int)len, line);
        const cJSON *wait = cJSON_GetObjectItemCaseSensitive(t, "wait");
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++)
            FZ_CHECK(wait ? json_str_is(wait, rf_wait_header_name((rf_wait_header)h), rec->tries[i].wait[h])
                          : rec->tries[i].wait[h] == NULL,
                     "cJSON reads other wait headers in try %zu\n  %.*s", i, (int)len, line);
    }
    cJSON_Delete(obj);
}

/* Writes rec with rf_ledger_format and reads the line back with a second reader; then once more from what was
 * read back, which must come back exactly (the redaction of query values is idempotent). */
static void check_round_trip(const rf_ledger_record *rec, long line, bool first) {
    rf_error err;
    memset(&err, 0, sizeof err);
    long len = rf_ledger_format(rec, line_buf, (size_t)RF_LEDGER_MAX_LINE + 1, &err);
    /* Redaction may lengthen a path by up to 256 bytes: a line near the limit may then be refused as too long. */
    if (len < 0 && first && strchr(rec->path, '?') != NULL && strcmp(err.path, "$") == 0) return;
    FZ_CHECK(len >= 0, "line %ld was read as a record, but the writer refuses it: %s: %s", line, err.path, err.message);
    check_cjson_agrees(rec, line_buf, len);
    line_buf[len] = '\n';
    char path[64];
    int fd = memfile(line_buf, (size_t)len + 1, path);
    rf_ledger_reader *r = NULL;
    FZ_CHECK(rf_ledger_reader_open(path, &r, &err) == RF_OK, "reopen: %s", err.message);
    rf_ledger_record back;
    rf_ledger_read_status st = rf_ledger_reader_next(r, &back, &err);
    FZ_CHECK(st == RF_LEDGER_RECORD, "the writer's line for line %ld does not read back (%d: %s)\n  %.*s", line,
             (int)st, err.message, (int)len, line_buf);
    check_same_record(rec, &back, first);
    if (first) check_round_trip(&back, line, false);
    FZ_CHECK(rf_ledger_reader_next(r, &back, &err) == RF_LEDGER_END, "more than one line written");
    rf_ledger_reader_close(r);
    close(fd);
}

static void check_record(const rf_ledger_record *rec, long line) {
    FZ_CHECK(rec->route && rec->method && rec->path && rec->policy && rec->outcome && rec->reason,
             "line %ld: a record with a NULL required string", line);
    FZ_CHECK(rec->n_tries <= RF_LEDGER_MAX_TRIES, "line %ld: %zu tries", line, rec->n_tries);
    for (size_t i = 0; i < rec->n_tries; i++)
        FZ_CHECK(rec->tries[i].class_name && rec->tries[i].reason, "line %ld: try %zu without class or reason", line,
                 i);
}

/* The first byte of 1-based line n of data, or NULL. */
static const char *line_start(const uint8_t *data, size_t size, long n) {
    const char *p = (const char *)data, *end = p + size;
    for (long i = 1; i < n && p != NULL; i++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (p != NULL) p++;
    }
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (line_buf == NULL || candidate == NULL) LLVMFuzzerInitialize(NULL, NULL);
    char path[64];
    int fd = memfile(data, size, path);
    long newlines = 0;
    for (size_t i = 0; i < size; i++) newlines += data[i] == '\n';
    bool ends_in_newline = size > 0 && data[size - 1] == '\n';
    long lines = newlines + (size > 0 && !ends_in_newline ? 1 : 0);

    rf_ledger_reader *r = NULL;
    rf_error err;
    memset(&err, 0, sizeof err);
    FZ_CHECK(rf_ledger_reader_open(path, &r, &err) == RF_OK, "open: %s", err.message);
    rf_ledger_record rec;
    long answers = 0, records = 0, harness = 0;
    rf_ledger_read_status st;
    const rf_replay_options ro = {.seed = size, .min_samples = 1, .replicates = 2, .pending = 3};
    rf_replay *replay = NULL;
    FZ_CHECK(rf_replay_new(candidate, &ro, &replay, &err) == RF_OK, "replay: %s", err.message);
    for (;;) {
        memset(&err, 0, sizeof err);
        st = rf_ledger_reader_next(r, &rec, &err);
        if (st == RF_LEDGER_END || st == RF_LEDGER_ERROR) break;
        answers++;
        FZ_CHECK(answers <= lines, "%ld answers for %ld lines", answers, lines);
        long line = rf_ledger_reader_line(r);
        FZ_CHECK(line == answers, "answer %ld is for line %ld", answers, line);
        if (st == RF_LEDGER_RECORD) {
            check_record(&rec, line);
            check_round_trip(&rec, line, true);
            records++;
            harness += strcmp(rec.route, RF_LEDGER_HARNESS_ROUTE) == 0 && rec.method[0] == '\0';
            FZ_CHECK(rf_replay_add(replay, &rec, &err) == RF_OK, "line %ld: replay: %s: %s", line, err.path,
                     err.message);
            continue;
        }
        FZ_CHECK(st == RF_LEDGER_CORRUPT || st == RF_LEDGER_TORN, "status %d", (int)st);
        FZ_CHECK(err.line == line && err.message[0] != '\0', "line %ld: a refusal without its line (%d) or a reason",
                 line, err.line);
        if (st == RF_LEDGER_TORN && !(line == lines && !ends_in_newline)) {
            /* Further up, only a record's start cut short is torn: the line begins as every record does. */
            const char *start = line_start(data, size, line);
            FZ_CHECK(start != NULL && (size_t)((const char *)data + size - start) >= 1 && start[0] == '{',
                     "torn line %ld of %ld is no record's start", line, lines);
        }
    }
    FZ_CHECK(st != RF_LEDGER_ERROR, "a read error on a memfd: %s", err.message);
    FZ_CHECK(answers == lines, "%ld answers for %ld lines", answers, lines);
    FZ_CHECK(rf_ledger_reader_next(r, &rec, &err) == RF_LEDGER_END, "the reader did not stay at its end");
    FZ_CHECK(rf_replay_finish(replay, &err) == RF_OK, "replay finish: %s", err.message);
    rf_tally_scope whole;
    rf_ledger_tally_whole(rf_replay_recorded(replay), &whole);
    FZ_CHECK(whole.figures.requests == records, "%lld recorded of %ld records", (long long)whole.figures.requests,
             records);
    rf_ledger_tally_whole(rf_replay_predicted(replay), &whole);
    FZ_CHECK(whole.figures.requests == records - harness, "%lld predicted of %ld records (%ld seed-harness)",
             (long long)whole.figures.requests, records, harness);
    rf_replay_info info;
    rf_replay_summary(replay, &info);
    FZ_CHECK(info.exact + info.modelled + info.unmodelled + info.no_route == records - harness,
             "predictions by kind do not add up to the records");
    rf_replay_free(replay);
    rf_ledger_reader_close(r);
    close(fd);
    return 0;
}
