/* retryfreeze-serve: interruptible sleeps on a monotonic condition variable. */
#define _POSIX_C_SOURCE 200809L
#include "stop.h"

#include <time.h>

int srv_stop_init(struct srv_stop *s) {
    pthread_condattr_t attr;
    s->stopping = 0;
    if (pthread_condattr_init(&attr) != 0) return -1;
    /* A wall-clock jump must not shorten or stretch a stall. */
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&s->cond, &attr) != 0 ? -1 : 0;
    pthread_condattr_destroy(&attr);
    if (rc != 0) return -1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        pthread_cond_destroy(&s->cond);
        return -1;
    }
    return 0;
}

void srv_stop_free(struct srv_stop *s) {
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

void srv_stop_now(struct srv_stop *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int srv_stop_sleep_ms(struct srv_stop *s, long ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    /* 0 is a wakeup, maybe spurious: wait on. ETIMEDOUT (or any error) ends the sleep. */
    while (!s->stopping && rc == 0) rc = pthread_cond_timedwait(&s->cond, &s->lock, &until);
    int stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stopping ? -1 : 0;
}
