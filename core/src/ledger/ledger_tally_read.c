/*
 * Reading a ledger file record by record (rfi_ledger_read_each), and feeding it into a tally
 * (rf_ledger_tally_read, retryfreeze/ledger_tally.h): the reader streams the records through its fixed window,
 * each is handed on as it comes, and nothing of a record outlives its line. Every whole-file reader of the core
 * (the tally, the replay) reads through the one loop here, so torn, corrupt and skipped lines mean one thing.
 */
#include "ledger_internal.h"
#include "retryfreeze/ledger_tally.h"

#include <string.h>

rf_status rfi_ledger_read_each(const char *path, long after_line, bool skip_corrupt, rf_tally_file *file,
                               rfi_ledger_record_fn each, void *ctx, rf_error *err) {
    memset(file, 0, sizeof *file);
    rf_ledger_reader *r;
    rf_status st = rf_ledger_reader_open(path, &r, err);
    if (st != RF_OK) return st;
    rf_error line_err;
    for (bool reading = true; reading && st == RF_OK;) {
        rf_ledger_record rec;
        rf_ledger_read_status rs = rf_ledger_reader_next(r, &rec, &line_err);
        bool skipped = rf_ledger_reader_line(r) <= after_line; /* read, never counted nor judged */
        switch (rs) {
        case RF_LEDGER_RECORD:
            if (!skipped) st = each(ctx, &rec, err);
            break;
        case RF_LEDGER_CORRUPT:
            if (skipped) break;
            if (!skip_corrupt) {
                if (err) *err = line_err;
                st = RF_EINVAL;
            }
            file->corrupt_lines++;
            break;
        case RF_LEDGER_TORN: /* a write cut short: counted, and the reader reads on */
            if (file->first_torn == 0) file->first_torn = line_err.line;
            file->torn_lines++;
            break;
        case RF_LEDGER_ERROR:
            if (err) *err = line_err;
            st = RF_EIO;
            break;
        case RF_LEDGER_END: reading = false; break;
        }
    }
    file->lines = rf_ledger_reader_line(r);
    rf_ledger_reader_close(r);
    return st;
}

typedef struct {
    rf_ledger_tally *t;
    const char *path;
} tally_ctx;

static rf_status tally_one(void *ctx, const rf_ledger_record *rec, rf_error *err) {
    const tally_ctx *c = ctx;
    if (rfi_ledger_tally_record(c->t, rec, rec->host)) return RF_OK;
    rfi_ledger_error(err, c->path, 0, 0, "out of memory tallying ledger %s", c->path);
    return RF_ENOMEM;
}

rf_status rf_ledger_tally_read(rf_ledger_tally *t, const char *path, long after_line, bool skip_corrupt,
                               rf_tally_file *file, rf_error *err) {
    rf_tally_file local;
    if (file == NULL) file = &local;
    memset(file, 0, sizeof *file);
    if (t == NULL) {
        rfi_ledger_error(err, "t", 0, 0, "t is NULL");
        return RF_EINVAL;
    }
    tally_ctx c = {.t = t, .path = path};
    rf_status st = rfi_ledger_read_each(path, after_line, skip_corrupt, file, tally_one, &c, err);
    if (st == RF_OK) rfi_ledger_tally_lines(t, file);
    return st;
}
