/*
 * The ledger reader: streams lines through a fixed window of RF_LEDGER_MAX_LINE + 1 bytes (one line and
 * its newline), so memory stays constant whatever the file size. A line that fills the window without a
 * newline is over-long: reported as RF_LEDGER_CORRUPT, then skipped up to its newline. The last line of the
 * file without a newline is a record if it parses, RF_LEDGER_TORN if its bytes are not JSON (a crash
 * mid-write), and RF_LEDGER_CORRUPT if it is JSON but not a record. A line further up that is a record's
 * start cut short (a fragment a later writer terminated, see ledger_write.c) is RF_LEDGER_TORN too, and the
 * reader reads on.
 */
#define _POSIX_C_SOURCE 200809L
#include "ledger_internal.h"
#include "retryfreeze/input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW ((size_t)RF_LEDGER_MAX_LINE + 1)

struct rf_ledger_reader {
    int fd;
    char *buf; /* WINDOW bytes; unread bytes are buf[start..end) */
    size_t start, end;
    long line;                   /* 1-based number of the line last returned */
    bool eof;                    /* read(2) returned 0 */
    bool skipping;               /* inside an over-long line already reported: discard up to its newline */
    rf_ledger_read_status final; /* RF_LEDGER_RECORD while reading; END or ERROR once stopped */
    cJSON *tree;                 /* the last record's parse tree: its strings are the record's */
    char path[];                 /* for error reports */
};

rf_status rf_ledger_reader_open(const char *path, rf_ledger_reader **out, rf_error *err) {
    if (!path || !out) {
        rfi_ledger_error(err, path ? "out" : "path", 0, 0, "%s is NULL", path ? "out" : "path");
        return RF_EINVAL;
    }
    *out = NULL;
    size_t path_len = strlen(path);
    rf_ledger_reader *r = malloc(sizeof *r + path_len + 1);
    char *buf = malloc(WINDOW);
    if (!r || !buf) {
        free(r);
        free(buf);
        rfi_ledger_error(err, path, 0, 0, "out of memory opening ledger %s", path);
        return RF_ENOMEM;
    }
    int fd;
    rf_status st = rf_input_open(path, O_RDONLY, "ledger", &fd, err); /* regular files only: a FIFO never blocks */
    if (st != RF_OK) {
        free(r);
        free(buf);
        return st;
    }
    memcpy(r->path, path, path_len + 1);
    r->fd = fd;
    r->buf = buf;
    r->start = r->end = 0;
    r->line = 0;
    r->eof = r->skipping = false;
    r->final = RF_LEDGER_RECORD;
    r->tree = NULL;
    *out = r;
    return RF_OK;
}

/*
 * Whether a line that is not JSON is the start of a writer's line cut short: it begins as every record does
 * ({"ts":"), and its outermost object never closes (brackets counted outside strings). A torn write leaves
 * exactly that; anything else (text after a closed object, another opening) stays corrupt.
 */
static bool is_fragment(const char *line, size_t len) {
    static const char head[] = "{\"ts\":\"";
    if (len < sizeof head - 1 || memcmp(line, head, sizeof head - 1) != 0)
        return len > 0 && len < sizeof head - 1 && memcmp(line, head, len) == 0;
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth <= 0) return false;
        }
    }
    return depth > 0;
}

/* Whether reason s is one of RF_REASONS that retries (1), one that stops (0), or no reason of this build (-1). */
static int reason_retries(const char *s) {
#define RF_X_RETRIES(name, str, retry) \
    if (strcmp(s, str) == 0) return retry;
    RF_REASONS(RF_X_RETRIES)
#undef RF_X_RETRIES
    return -1;
}

/*
 * The record's own counts agree (both readers, the writer's fast form and any other, pass here): its attempts are
 * its tries, one per HTTP request the writer records (a seed-harness line, which has no tries, aside); and a
 * request that never hedged (no try has a fate) ends at the first try whose verdict stopped it: a success or
 * any other stop is its last try. A hedged request's tries are in the order they ended, so a cancelled attempt may
 * follow the winner. false and why for a record that contradicts itself: replay and stats would count tries the
 * request never made, or attempts it never recorded.
 */
static bool coherent(const rf_ledger_record *rec, char *why, size_t why_cap) {
    if (strcmp(rec->route, RF_LEDGER_HARNESS_ROUTE) == 0) return true;
    if (rec->attempts < 0 || (size_t)rec->attempts != rec->n_tries) {
        snprintf(why, why_cap, "\"$.attempts\" is %d but \"$.tries\" has %zu: one try per attempt", rec->attempts,
                 rec->n_tries);
        return false;
    }
    for (size_t i = 0; i < rec->n_tries; i++)
        if (rec->tries[i].fate != NULL) return true;
    for (size_t i = 0; i + 1 < rec->n_tries; i++) {
        if (reason_retries(rec->tries[i].reason) == 0) {
            snprintf(why, why_cap,
                     "\"$.tries[%zu].reason\" is \"%.40s\", which ends the request, but %zu more tries follow", i,
                     rec->tries[i].reason, rec->n_tries - i - 1);
            return false;
        }
    }
    return true;
}

/* Turns line number r->line (len bytes at line, newline excluded) into the caller's answer. */
static rf_ledger_read_status answer(rf_ledger_reader *r, char *line, size_t len, bool last, rf_ledger_record *rec,
                                    rf_error *err) {
    char why[320];
    int column;

    column = 0;
    if (rfi_ledger_parse_fast(line, len, rec)) { /* the writer's own form: no tree */
        if (coherent(rec, why, sizeof why)) return RF_LEDGER_RECORD;
        rfi_ledger_error(err, r->path, r->line, column, "%s", why);
        return RF_LEDGER_CORRUPT;
    }
    switch (rfi_ledger_parse_line(line, len, rec, &r->tree, why, sizeof why, &column)) {
    case RFI_LEDGER_PARSED:
        if (coherent(rec, why, sizeof why)) return RF_LEDGER_RECORD;
        break;
    case RFI_LEDGER_NOT_JSON:
        if (last) {
            rfi_ledger_error(err, r->path, r->line, column,
                             "the last line has no newline and is %s: a write torn by a crash", why);
            return RF_LEDGER_TORN;
        }
        if (is_fragment(line, len)) {
            rfi_ledger_error(err, r->path, r->line, column,
                             "torn line: the start of a record cut short (a crash or a full disk mid-append), "
                             "ended by a later writer; skipped");
            return RF_LEDGER_TORN;
        }
        break;
    case RFI_LEDGER_BAD_FIELD: break;
    }
    rfi_ledger_error(err, r->path, r->line, column, "%s", why);
    return RF_LEDGER_CORRUPT;
}

rf_ledger_read_status rf_ledger_reader_next(rf_ledger_reader *r, rf_ledger_record *rec, rf_error *err) {
    if (!r || !rec) {
        rfi_ledger_error(err, r ? "rec" : "r", 0, 0, "%s is NULL", r ? "rec" : "r");
        return RF_LEDGER_ERROR;
    }
    cJSON_Delete(r->tree); /* the previous record's strings end here */
    r->tree = NULL;
    rfi_ledger_record_clear(rec);
    if (r->final == RF_LEDGER_ERROR) {
        rfi_ledger_error(err, r->path, r->line, 0, "the reader of ledger %s stopped after a read error", r->path);
    }
    if (r->final != RF_LEDGER_RECORD) {
        return r->final;
    }
    for (;;) {
        char *first = r->buf + r->start;
        char *newline = memchr(first, '\n', r->end - r->start);
        if (newline) {
            size_t len = (size_t)(newline - first);
            r->start += len + 1;
            if (r->skipping) { /* the rest of an over-long line */
                r->skipping = false;
                continue;
            }
            r->line++;
            return answer(r, first, len, false, rec, err);
        }
        if (r->skipping) {
            r->start = r->end = 0;
        } else if (r->start > 0) { /* slide the partial line to the front */
            memmove(r->buf, first, r->end - r->start);
            r->end -= r->start;
            r->start = 0;
        }
        if (r->end == WINDOW) {
            r->line++;
            r->skipping = true;
            r->start = r->end = 0;
            rfi_ledger_error(err, r->path, r->line, 0, "the line is longer than RF_LEDGER_MAX_LINE (%d bytes)",
                             RF_LEDGER_MAX_LINE);
            return RF_LEDGER_CORRUPT;
        }
        if (r->eof) {
            r->final = RF_LEDGER_END;
            if (r->end == 0) {
                return RF_LEDGER_END;
            }
            size_t len = r->end;
            r->start = r->end = 0;
            r->line++;
            return answer(r, r->buf, len, true, rec, err);
        }
        ssize_t n;
        do {
            n = read(r->fd, r->buf + r->end, WINDOW - r->end);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            r->final = RF_LEDGER_ERROR;
            rfi_ledger_errno_error(err, r->path, errno, "cannot read ledger");
            return RF_LEDGER_ERROR;
        }
        if (n == 0) {
            r->eof = true;
        } else {
            r->end += (size_t)n;
        }
    }
}

long rf_ledger_reader_line(const rf_ledger_reader *r) { return r ? r->line : 0; }

void rf_ledger_reader_close(rf_ledger_reader *r) {
    if (!r) {
        return;
    }
    cJSON_Delete(r->tree);
    close(r->fd); /* read-only: nothing to lose if close reports an error */
    free(r->buf);
    free(r);
}
