/* retryfreeze-serve: sleeps that end early when the server stops, so SIGTERM never waits out a
 * --stall-ms or delay= in some connection thread. */
#ifndef SRV_STOP_H
#define SRV_STOP_H

#include <pthread.h>

struct srv_stop {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC */
    int stopping;
};

/* Returns 0, or -1 on failure. */
int srv_stop_init(struct srv_stop *s);
void srv_stop_free(struct srv_stop *s);
/* Wakes every sleeper, now and later. */
void srv_stop_now(struct srv_stop *s);
/* Sleeps ms milliseconds. Returns 0 after the full sleep, -1 if the server is stopping. */
int srv_stop_sleep_ms(struct srv_stop *s, long ms);

#endif
