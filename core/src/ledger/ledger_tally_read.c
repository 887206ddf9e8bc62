/*
 * Feeding a ledger file into a tally (rf_ledger_tally_read, retryfreeze/ledger_tally.h): the reader streams the
 * records through its fixed window, each is counted as it comes, and nothing of a record outlives its line.
 */
#include "ledger_internal.h"
#include "retryfreeze/ledger_tally.h"

#include <string.h>

rf_status rf_ledger_tally_read(rf_ledger_tally *t, const char *path, long after_line, bool skip_corrupt,
                               rf_tally_file *file, rf_error *err) {
    rf_tally_file local;
    if (file == NULL) file = &local;
    memset(file, 0, sizeof *file);
    if (t == NULL) {
        rfi_ledger_error(err, "t", 0, 0, "t is NULL");
        return RF_EINVAL;
    }
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
            if (!skipped && !rfi_ledger_tally_record(t, &rec, rec.host)) {
                rfi_ledger_error(err, path, 0, 0, "out of memory tallying ledger %s", path);
                st = RF_ENOMEM;
            }
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
    if (st == RF_OK) rfi_ledger_tally_lines(t, file);
    return st;
}
