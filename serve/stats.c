/* retryfreeze-serve: stats counters and their JSON. */
#include "stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void srv_stats_count(struct srv_stats *st, enum srv_fault_kind kind, int status) {
    st->requests++;
    switch (kind) {
    case SRV_FAULT_STATUS:
        if (status >= 100 && status <= 599) st->by_status[status]++;
        break;
    case SRV_FAULT_TIMEOUT: st->timeouts++; break;
    case SRV_FAULT_RESET: st->resets++; break;
    case SRV_FAULT_EMPTY: st->empties++; break;
    case SRV_FAULT_CUT: st->by_status[200]++; break; /* a 200 whose body the connection cut short */
    }
}

struct out {
    char *p;
    size_t cap, len;
    int overflow;
};

static void put(struct out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = o->overflow ? 0 : vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len)
        o->overflow = 1;
    else
        o->len += (size_t)n;
}

int srv_stats_json(const struct srv_stats *st, uint64_t keys, char *out, size_t cap) {
    struct out o = {out, cap, 0, cap == 0};
    put(&o, "{\"requests\":%" PRIu64 ",\"by_status\":{", st->requests);
    for (int s = 100; s <= 599; s++)
        if (st->by_status[s] != 0) put(&o, "\"%d\":%" PRIu64 ",", s, st->by_status[s]);
    put(&o, "\"reset\":%" PRIu64 ",\"empty\":%" PRIu64 ",\"timeout\":%" PRIu64 "},", st->resets, st->empties,
        st->timeouts);
    put(&o, "\"executions\":%" PRIu64 ",\"duplicate_executions\":%" PRIu64 ",\"keys\":%" PRIu64, st->executions,
        st->duplicate_executions, keys);
    put(&o, ",\"max_in_flight\":%" PRIu64 "}", st->max_in_flight);
    return o.overflow || o.len > INT32_MAX ? -1 : (int)o.len;
}
