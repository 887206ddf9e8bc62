/* retryfreeze-serve: counters behind GET /__stats. Not thread-safe: upstream.c holds its mutex. */
#ifndef SRV_STATS_H
#define SRV_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "faults.h"

struct srv_stats {
    uint64_t requests;       /* attempts, including refused ones; never /__stats or /__reset */
    uint64_t by_status[600]; /* responses sent, by status (200..599 used) */
    uint64_t resets, empties, timeouts;
    uint64_t executions;           /* 2xx decided, timeouts included */
    uint64_t duplicate_executions; /* executions of an Idempotency-Key that had executed before */
    uint64_t max_in_flight;        /* most attempts being answered at once (admitted, answer not yet queued) */
};

/* Counts one attempt answered as kind/status. */
void srv_stats_count(struct srv_stats *st, enum srv_fault_kind kind, int status);

/* Enough for every status counted at once. */
#define SRV_STATS_JSON_MAX 32768

/* Writes {"requests":N,"by_status":{...},"executions":N,"duplicate_executions":N,"keys":N,"max_in_flight":N}.
 * by_status lists the statuses seen in ascending order, then "reset", "empty" and "timeout"
 * (always present). Returns the length, or -1 if cap is too small. */
int srv_stats_json(const struct srv_stats *st, uint64_t keys, char *out, size_t cap);

#endif
