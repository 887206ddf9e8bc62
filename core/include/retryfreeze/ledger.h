/*
 * The attempt ledger: append-only JSONL, one line per logical request (see docs/design.md).
 * Writer: one write(2) per line on an O_APPEND descriptor, so lines from several processes never interleave.
 * Repair: a writer that opens a file whose last byte is not a newline first ends the fragment with one
 * write(2) of "\n", and after its own short write it starts its next line with "\n" (in that line's single
 * write), so a new line is never glued onto a fragment. The check holds an exclusive flock(2) (one checker at a
 * time) and takes a last byte for a fragment only when the file has not grown once the writes in progress have
 * ended, so a line another writer is still copying into the file is never taken for a fragment; appends take no
 * lock (docs/reliability.md, "Crash and load tests of the ledger").
 * Reader: streams lines in constant memory; a torn line (a crash or a full disk mid-write) is reported, not
 * fatal, and the reader reads on; a corrupt line is an error naming its line number.
 * Never stores a body or a header value other than the wait headers (Retry-After, …) and, beside them, Date.
 *
 * Line format (JSON, UTF-8, fields always in this order, all present):
 *   {"ts":"2026-11-29T17:20:01.123Z","route":"POST /v1/jobs","method":"POST","path":"/v1/jobs",
 *    "key":null,"policy":"sha256:…","attempts":2,"elapsed_ms":130,"outcome":"success","reason":"success",
 *    "ok":true,"status":200,"body_len":17,"tries":[{"class":"HTTP_503","status":503,"elapsed_ms":20,
 *    "delay_ms":0,"reason":"pinned-status","retry_after":"1","retry_after_header":"retry-after",
 *    "timeout_ms":2000,"wait":{"retry-after":"1"},"date":"Sun, 29 Nov 2026 17:20:01 GMT"},…]}
 * retry_after_header is written only when set (a line without it reads as NULL). So are a hedged request's
 * "start_ms", "hedge" and "fate", after it (…,"start_ms":100,"hedge":true,"fate":"winner"), absent from other
 * requests' tries; and then a try's replay facts, in this order: "timeout_ms" (> 0), "transport" (not "ok"),
 * "not_sent" (true), "grpc_status" (the response's grpc-status, 1..16), "wait" (the wait headers the response carried,
 * in RF_WAIT_HEADERS order) and "date" (the response's Date, with a wait header), then "peer" (the "host:port" the try
 * went to): a line of an older writer lacks them and reads with them zeroed. After tries come, only when set,
 * "host":"web-3" (a writer writes its host on every line), "budget":"shared" (which retry budget the request used),
 * and what the request's caller propagated: "inbound_deadline_ms":300 and "inbound_attempt":2. Integers are written as
 * integer tokens and must lie within ±2^53 (exact in a JSON double).
 *
 * Threads: no global state. An rf_ledger or rf_ledger_reader may be used by one thread at a time; distinct
 * objects are independent. Any number of rf_ledger objects, in one or many processes, may append to the
 * same file: each line is a single write(2) with O_APPEND, which a local file system applies whole
 * (not so on NFS, where O_APPEND is emulated).
 */
#ifndef RETRYFREEZE_LEDGER_H
#define RETRYFREEZE_LEDGER_H

#include "retryfreeze/common.h"
#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The route of a record read from a line of the seed's Python harness ({"key", "attempts", "elapsed_s",
 * "last": {"status", "body_len", "verdict"}, "ok"}), which the reader accepts line by line beside its own
 * form (docs/evidence.md "Seed-harness lines"): such a record has this route, empty method, path and policy,
 * ts_ms 0, no tries, and outcome/reason success/success or failed/seed-harness.
 */
#define RF_LEDGER_HARNESS_ROUTE "(seed harness)"

/* Longest ledger line the writer produces and the reader accepts, newline excluded. */
#define RF_LEDGER_MAX_LINE (1024 * 1024)
/* Most tries one record holds: RF_MAX_TRIES of the client (attempts, at most 10 in a lock, plus followed
 * redirects). */
#define RF_LEDGER_MAX_TRIES 32

/* Longest try peer ("host:port": a host of up to 253 bytes, ':', a port of up to 5 digits) plus its NUL. */
#define RF_LEDGER_PEER_MAX 260

/* One attempt of a logical request, as recorded in the ledger's "tries" array. */
typedef struct rf_ledger_try {
    const char *class_name;         /* failure class token, e.g. "HTTP_503", "TIMEOUT" */
    int status;                     /* HTTP status, 0 when none was received */
    int64_t elapsed_ms;             /* duration of this attempt on the wire */
    int64_t delay_ms;               /* backoff slept before this attempt (0 for the first) */
    const char *reason;             /* reason of the verdict taken after this attempt */
    const char *retry_after;        /* the raw value of this attempt's wait header (Retry-After by default), or NULL
                                       (JSON null) */
    const char *retry_after_header; /* which wait header retry_after came from ("retry-after", "retry-after-ms",
                                       …; docs/lock.md#wait-headers), or NULL: the key is then not written */
    /* A hedged request's (gRPC A6 hedging: attempts in flight at once), written only when set, so the tries of a
     * request that never hedged are byte-identical to those of earlier versions (which read back as -1/false/NULL): */
    int64_t start_ms; /* when it started, ms after the request's first attempt (0..2^53); 0 without a fate */
    bool hedge;       /* started by the hedging delay beside attempts in flight ("hedge":true); false: not written */
    const char *fate; /* "winner", "cancelled" or "failed" (RF_TRY_FATES); NULL: not written */
    /* The facts a replay of the request under another lock needs (retryfreeze/replay.h), each written only when
     * set, so a record that leaves them zeroed is written as before; a line of an older writer reads with them
     * zeroed. */
    int64_t timeout_ms;    /* the per-try timeout the attempt ran with, > 0; 0: not recorded */
    const char *transport; /* the transport outcome when it was not "ok" (an RF_TRANSPORTS name), else NULL */
    bool not_sent;         /* no byte of the request left (a transparent retry may follow), else false */
    /* Every wait header (RF_WAIT_HEADERS, indexed by rf_wait_header) the response carried, raw, whether or not its
     * route read it; NULL: absent (or not recorded). */
    const char *wait[RF_WAIT_HEADER_COUNT];
    const char *date; /* the response's Date header when it carried a wait header, else NULL */
    /* The peer the try went to, "host:port" (an IPv6 host in brackets: "[::1]:8080"; port 1..65535), written last
     * and only when set (a transport that knows it: the gateway, the curl client); NULL: not recorded. */
    const char *peer;
    int grpc_status; /* the response's grpc-status 1..16 ("grpc_status"), 0 when absent or OK (not written) */
} rf_ledger_try;

/*
 * One ledger record: a logical request. Strings are borrowed: the writer copies them into the line; the
 * reader's strings live until the next rf_ledger_reader_next or rf_ledger_reader_close.
 * key is NULL when the request carried no idempotency key (written as JSON null); every other string is
 * required (NULL is RF_EINVAL) and must be valid UTF-8.
 */
typedef struct rf_ledger_record {
    int64_t ts_ms; /* wall-clock Unix time in ms when the request finished; written as RFC 3339 UTC with ms;
                      0 .. 253402300799999 (9999-12-31T23:59:59.999Z) */
    const char *route;
    const char *method;
    const char *path;
    const char *key;
    const char *policy; /* policy digest, "sha256:<hex>" */
    int attempts;
    int64_t elapsed_ms;
    const char *outcome; /* success, terminal, exhausted, deadline, throttled, refused */
    const char *reason;
    bool ok;
    int status;
    int64_t body_len;
    size_t n_tries;
    rf_ledger_try tries[RF_LEDGER_MAX_TRIES];
    /* Optional, written after tries only when set (older lines have neither): */
    const char *host;   /* who wrote the line; rf_ledger_append fills in the ledger's host when NULL */
    const char *budget; /* the retry budget the request used: "local", "shared", "local-fallback"; NULL = none */
    /* What the request's caller propagated (retryfreeze/propagation.h), written after budget only when present
     * (older lines have neither): */
    bool has_inbound_deadline;   /* "inbound_deadline_ms" is written */
    int64_t inbound_deadline_ms; /* the ms the caller had left, 0..2^53 */
    int inbound_attempt;         /* the caller's attempt number, 1..INT_MAX; 0 = none (not written) */
} rf_ledger_record;

/*
 * Whether s[0..len) is a try's peer as the ledger records it: "host:port", a host of 1..253 bytes with no control
 * byte, space, '"' or '\\' (an IPv6 address in brackets, "[::1]"), ':', and a port 1..65535 in decimal without a
 * leading zero. s may be NULL only with len 0 (false).
 */
RF_API bool rf_ledger_peer_ok(const char *s, size_t len);

typedef enum rf_ledger_fsync { RF_LEDGER_FSYNC_NONE = 0, RF_LEDGER_FSYNC_LINE = 1 } rf_ledger_fsync;

typedef struct rf_ledger rf_ledger;

/*
 * Opens (creating with mode 0644 if needed) a ledger for appending, O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC (O_WRONLY
 * when only writing is permitted, without the torn-line check) through rf_input_open (retryfreeze/input.h):
 * a regular file only. When the file's last byte is not a newline (a torn line), one "\n" is written first.
 * On success *out is set; the caller closes it with rf_ledger_close. Errors: RF_EINVAL (NULL path; not a
 * regular file: "cannot open ledger PATH: it is a FIFO, not a regular file"), RF_EIO (open failed, or the torn
 * line could not be ended: err->message has strerror, err->path the file), RF_ENOMEM.
 */
RF_API rf_status rf_ledger_open(const char *path, rf_ledger_fsync fsync_mode, rf_ledger **out, rf_error *err);

/*
 * Formats rec as one JSON object line and appends it with a single write(2); with RF_LEDGER_FSYNC_LINE,
 * fsync(2) follows. A short write or an error (ENOSPC, EBADF, EIO…) returns RF_EIO with strerror in
 * err->message; a short write is reported as such (the reader will see a torn line). Never retries a
 * partial write (that could interleave with another process). err->path is the file for RF_EIO. After a short
 * write, the next append starts with the "\n" that ends the fragment, in the same single write(2).
 * RF_EINVAL (err->path names the field, e.g. "$.tries[1].reason"): NULL l or rec, a required string NULL or
 * not UTF-8, ts_ms out of range, an integer outside ±2^53, more than RF_LEDGER_MAX_TRIES tries, or a line
 * longer than RF_LEDGER_MAX_LINE. RF_ENOMEM. Nothing is written unless RF_OK or RF_EIO is returned.
 */
RF_API rf_status rf_ledger_append(rf_ledger *l, const rf_ledger_record *rec, rf_error *err);

/*
 * Appends the n records recs[0..n) as n lines, in order, with one write(2) per batch of lines instead of one per
 * line (then one fsync(2), with RF_LEDGER_FSYNC_LINE): for a caller holding several finished records at once, such
 * as the client's requests reported by one rf_client_run (the write(2) per line was the largest part of
 * an append). Each line is whole and lines of other writers never land inside it (one O_APPEND write, as for
 * rf_ledger_append); a batch is cut at RF_LEDGER_BATCH_BYTES (a longer line goes alone). status[i] is what
 * rf_ledger_append would have returned for record i: RF_EINVAL or RF_ENOMEM leaves that record out (the others
 * are still written); RF_EIO when the write(2) of its batch failed or ended before its line did (a short write:
 * the lines before the cut are written whole and RF_OK, the next starts with the "\n" ending the fragment), or
 * when fsync failed. errs[i] (errs may be NULL) then says why, as rf_ledger_append's err would. The observer is
 * called for each line written whole, in order. Returns the number of lines written whole; status must hold n
 * entries (NULL l, recs or status: returns 0 and writes nothing).
 */
RF_API size_t rf_ledger_append_batch(rf_ledger *l, const rf_ledger_record *const *recs, size_t n, rf_status *status,
                                     rf_error *errs);

/* Most bytes rf_ledger_append_batch puts in one write(2) (a single longer line still goes whole, alone). */
#define RF_LEDGER_BATCH_BYTES (256 * 1024)

/* A long-running host that holds its lines (rf_ledger_hold: the gateway, Lua or the nginx module): the bytes it holds
 * by default, and how long a held line waits at most before the host's timer writes it (default, and at most). */
#define RF_LEDGER_HOLD_DEFAULT_BYTES 65536
#define RF_LEDGER_FLUSH_DEFAULT_MS 200
#define RF_LEDGER_FLUSH_MAX_MS 60000

/*
 * Text from the wire (a request's path, a header's value) made fit for a ledger line, which takes only UTF-8: s[0..
 * len) with each byte that belongs to no well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate,
 * nothing above U+10FFFF) replaced by U+FFFD, one per byte; every other byte kept. Writes at most cap - 1 bytes and a
 * NUL into out (when cap > 0; a sequence that does not fit whole is left out). Returns the length of the whole
 * repaired text, without its NUL: call it with cap 0 (out may then be NULL) to size out. Allocates nothing.
 */
RF_API size_t rf_utf8_repair(const char *s, size_t len, char *out, size_t cap);

/*
 * Holds l's lines in memory and writes them as one batch of whole lines, for a host that appends many short
 * requests (a proxy's worker): one write(2) per batch instead of one per line. From now on rf_ledger_append formats
 * each line after the held ones and returns RF_OK without writing; the held lines go out in one write(2) on
 * O_APPEND (then one fsync(2) with RF_LEDGER_FSYNC_LINE) when the next line would take them past max_bytes (a line
 * longer than max_bytes goes alone, at once), at rf_ledger_flush, at rf_ledger_append_batch (first, so the order
 * stays), and at rf_ledger_close. A held line is in the file only after one of those: the host bounds the delay by
 * calling rf_ledger_flush (on a timer and before it exits); a crash loses what was held. An RF_EIO from the write
 * of held lines is returned by the call that made it (rf_ledger_append: the record being appended stays held; err
 * says how many held lines were lost). Lines held in one process are never written by another: a child forked
 * while lines were held drops them at its first append or flush (its parent writes them).
 * max_bytes: 1..RF_LEDGER_BATCH_BYTES, or 0 to stop holding (the held lines are written first: rf_ledger_flush's
 * result). RF_EINVAL: NULL l, max_bytes over RF_LEDGER_BATCH_BYTES, or an observer is set (rf_ledger_observe: an
 * observer is told of each line as it is written, with its record, which a held line no longer has).
 */
RF_API rf_status rf_ledger_hold(rf_ledger *l, size_t max_bytes, rf_error *err);

/*
 * Writes the lines rf_ledger_hold made l hold, with one write(2) (RF_OK and nothing written when none are held).
 * RF_EIO: the write failed or was cut short (a full disk): the lines before the cut are whole in the file, the
 * others are lost (err says how many), and the next write starts with the "\n" ending the fragment, as for
 * rf_ledger_append; or fsync(2) failed. RF_EINVAL: NULL l.
 */
RF_API rf_status rf_ledger_flush(rf_ledger *l, rf_error *err);

/* The number of lines l holds (rf_ledger_hold), not yet written; 0 for NULL. */
RF_API size_t rf_ledger_held(const rf_ledger *l);

/*
 * An observer of a ledger's appends (rf_ledger_observe): called by rf_ledger_append after each line it wrote
 * whole (RF_OK), with the record as given and the host the line carries (the record's, else the ledger's; NULL
 * when the line has none). What it receives is what a reader of that line gets back (the writer refuses what
 * it cannot write exactly), so a count kept here equals a count read from the file. The record and its
 * strings are the caller's, valid for the call only. It runs inside rf_ledger_append, on the appending thread:
 * it must return (no longjmp) and must not append to, close or re-observe the same ledger.
 */
typedef void (*rf_ledger_observer)(void *ud, const rf_ledger_record *rec, const char *host);

/*
 * Sets l's observer: fn(ud, rec, host) after every whole append from now on; NULL fn removes it. One at a time:
 * a later call replaces the earlier. RF_EINVAL: NULL l, or a non-NULL fn while l holds lines (rf_ledger_hold).
 */
RF_API rf_status rf_ledger_observe(rf_ledger *l, rf_ledger_observer fn, void *ud, rf_error *err);

/* Longest host name a ledger records. */
#define RF_LEDGER_MAX_HOST 255

/*
 * Sets the host written on each of l's lines whose record has no host of its own. A new ledger starts with
 * this machine's name (gethostname(2)); "" writes no host field. RF_EINVAL: NULL l or host, a host over
 * RF_LEDGER_MAX_HOST bytes or not printable ASCII.
 */
RF_API rf_status rf_ledger_set_host(rf_ledger *l, const char *host, rf_error *err);

/* Writes the lines l holds (rf_ledger_hold), closes the descriptor and frees l (always, even on error); NULL is a
 * no-op. Returns RF_EIO if writing the held lines (rf_ledger_flush) or close(2) reported an error. */
RF_API rf_status rf_ledger_close(rf_ledger *l, rf_error *err);

/*
 * Formats rec as the ledger's JSON line (no trailing newline) into buf of size cap, NUL-terminated.
 * Returns the length written (without the NUL), or -1 when buf is NULL, it does not fit (cap must be at
 * least length + 1) or a field is invalid (err says which, as for rf_ledger_append).
 */
RF_API long rf_ledger_format(const rf_ledger_record *rec, char *buf, size_t cap, rf_error *err);

typedef struct rf_ledger_reader rf_ledger_reader;

typedef enum rf_ledger_read_status {
    RF_LEDGER_RECORD = 0,  /* *rec holds the next record */
    RF_LEDGER_END = 1,     /* no more lines */
    RF_LEDGER_TORN = 2,    /* a write cut short (the last line without newline that does not parse, or a record's
                              start ended by a later writer's "\n"); err names the line; read on */
    RF_LEDGER_CORRUPT = 3, /* a line that does not parse, or lacks a required field (err: line, path) */
    RF_LEDGER_ERROR = 4    /* reading failed (err->message has strerror) or r/rec is NULL; stop */
} rf_ledger_read_status;

/*
 * Opens path for streaming reads ("-" is not special); the caller closes it with rf_ledger_reader_close.
 * RF_EINVAL (NULL path or out; not a regular file — a FIFO, a device, a directory — refused without
 * blocking, see rf_input_open), RF_EIO when it cannot be opened, RF_ENOMEM.
 * Memory: a fixed window of RF_LEDGER_MAX_LINE + 1 bytes plus the current record, whatever the file size.
 */
RF_API rf_status rf_ledger_reader_open(const char *path, rf_ledger_reader **out, rf_error *err);

/*
 * Reads the next record. err->line holds the 1-based line number for RF_LEDGER_CORRUPT and RF_LEDGER_TORN,
 * err->path the file, err->message what is wrong (naming the field, e.g. `missing field "$.policy"`).
 * A corrupt line does not stop the reader: a later call continues with the next line (for --skip-corrupt).
 * Corrupt: an empty line; bytes that are not JSON text (invalid UTF-8, NUL, raw control characters or
 * \u0000 in strings); a missing, unknown, duplicate or ill-typed field; a fractional or out-of-range integer;
 * a line longer than RF_LEDGER_MAX_LINE (skipped up to its newline). Only key, tries[].retry_after and
 * tries[].retry_after_header may be null; the last two may also be absent, and so may a try's replay facts
 * (timeout_ms 0..2^53, transport one of RF_TRANSPORTS, not_sent a boolean, wait an object of RF_WAIT_HEADERS names
 * to strings, date a string, peer "host:port" with a port 1..65535), which then read as zero or NULL. A line with an
 * "elapsed_s" field is read as a seed-harness line (RF_LEDGER_HARNESS_ROUTE), just as strictly. The last line without a
 * newline: RF_LEDGER_RECORD if it is a valid record, RF_LEDGER_TORN if it is not JSON text (a crash mid-write). A line
 * further up that is not JSON but starts as a record does ({"ts":") and never closes its object is RF_LEDGER_TORN too
 * (a fragment a later writer ended); the next call reads on. After RF_LEDGER_END every call returns RF_LEDGER_END;
 * after RF_LEDGER_ERROR, RF_LEDGER_ERROR.
 */
RF_API rf_ledger_read_status rf_ledger_reader_next(rf_ledger_reader *r, rf_ledger_record *rec, rf_error *err);

/* The 1-based number of the line last returned; 0 before the first and for NULL. */
RF_API long rf_ledger_reader_line(const rf_ledger_reader *r);

/* Closes and frees; NULL is a no-op. */
RF_API void rf_ledger_reader_close(rf_ledger_reader *r);

#ifdef __cplusplus
}
#endif
#endif
