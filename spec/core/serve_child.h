/*
 * retryfreeze-serve as a child process of a C test: started on a free loopback port (--port 0: the kernel
 * picks it, so it is free) with --max-seconds 120 as a bound should the test die without stopping it, and
 * its base URL read from the one line it prints when it listens ("listening on 127.0.0.1:PORT", serve/main.c).
 * Header-only: each test that needs it is its own program.
 */
#ifndef RF_SPEC_SERVE_CHILD_H
#define RF_SPEC_SERVE_CHILD_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Stops a child serve_child_start started (SIGTERM) and reaps it; a pid <= 0 is ignored. */
static void serve_child_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* Starts program (retryfreeze-serve); writes "http://127.0.0.1:PORT" into url (cap bytes). Returns the child's
 * pid, or -1 when it could not start or did not say it listens (then it is stopped; url is undefined). */
static pid_t serve_child_start(const char *program, char *url, size_t cap) {
    int out[2];
    if (pipe(out) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execl(program, program, "--port", "0", "--max-seconds", "120", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char line[128] = {0};
    size_t n = 0;
    while (n < sizeof line - 1 && read(out[0], line + n, 1) == 1 && line[n] != '\n') n++;
    line[n] = '\0';
    close(out[0]);
    const char *port = strrchr(line, ':');
    if (strncmp(line, "listening on 127.0.0.1:", 23) != 0 || port == NULL) {
        serve_child_stop(pid);
        return -1;
    }
    snprintf(url, cap, "http://127.0.0.1:%s", port + 1);
    return pid;
}

#endif
