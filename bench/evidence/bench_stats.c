/*
 * The C reader's floor for bench_stats.lua: streams a ledger through rf_ledger_reader_next and sums attempts,
 * nothing else (no Lua, no tables, no statistics). `retryfreeze stats` can never be faster than this.
 * Usage: bench_stats LEDGER → prints "lines <n> cpu_s <seconds> vmhwm_kb <peak resident KiB>".
 */
#include <retryfreeze/ledger.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Peak resident set size (VmHWM) in KiB from /proc/self/status, or -1 where there is none. */
static long vmhwm_kb(void) {
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (!f) {
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0 && sscanf(line + 6, "%ld", &kb) != 1) {
            kb = -1;
        }
    }
    fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    rf_ledger_reader *r = NULL;
    rf_ledger_record rec;
    rf_error err;
    long lines = 0;
    long long attempts = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: bench_stats LEDGER\n");
        return 2;
    }
    clock_t t0 = clock();
    if (rf_ledger_reader_open(argv[1], &r, &err) != RF_OK) {
        fprintf(stderr, "bench_stats: %s\n", err.message);
        return 2;
    }
    rf_ledger_read_status st;
    while ((st = rf_ledger_reader_next(r, &rec, &err)) == RF_LEDGER_RECORD) {
        lines++;
        attempts += rec.attempts;
    }
    rf_ledger_reader_close(r);
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (st != RF_LEDGER_END) {
        fprintf(stderr, "bench_stats: %s:%d: %s\n", argv[1], err.line, err.message);
        return 1;
    }
    printf("lines %ld cpu_s %.3f vmhwm_kb %ld attempts %lld\n", lines, cpu, vmhwm_kb(), attempts);
    return 0;
}
