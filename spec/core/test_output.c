/*
 * Output files (retryfreeze/output.h), each kind of thing a path can point at:
 *   - a regular file is replaced whole, keeps its mode, and leaves no temporary file behind; a new file is made;
 *   - symlinks (absolute, relative from another directory, a chain, a dangling one) are written through: the
 *     target gets the content and every link stays a link;
 *   - a directory, a FIFO (without blocking), a character device (a copy of /dev/null of the test's own where it
 *     may make one: a broken writer run as root would replace /dev/null itself), a socket, a symlink to any of them, a
 * path ending in "/" and a symlink loop are refused with the path and the kind in the message, and left as they were;
 *   - "-": standard output for a whole file, refused for appending; appending writes through a symlink;
 *   - a writer killed at random moments (SIGKILL, 30 times, 8 MiB each) leaves the old content or the new,
 *     never a mix or a part.
 */
#define _XOPEN_SOURCE 700 /* mknod(2), S_IFCHR */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/output.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static const char *at(const char *name) {
    static char paths[8][160];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file's whole content (at most 255 bytes), "" when it cannot be read. */
static const char *content(const char *path) {
    static char buf[256];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f == NULL) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A character device: the test's own copy of /dev/null where it may make one (as root, where a broken writer
 * would replace /dev/null itself: a rename over it succeeds), else /dev/null, which only root could replace. */
static const char *null_device(void) {
    static char p[160];
    snprintf(p, sizeof p, "%s/null", dir);
    return mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0 ? p : "/dev/null";
}

static bool is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* How many names in the test directory start with ".": temporary files left behind. */
static int hidden_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/rf-output-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static rf_status write_text(const char *path, const char *text, rf_error *err) {
    return rf_output_write(path, text, strlen(text), "report", err);
}

static void test_regular_files_are_replaced_whole(void **state) {
    (void)state;
    rf_error err;
    const char *file = at("report.html");
    put(file, "old content, longer than the new");
    chmod(file, 0640);
    assert_int_equal(write_text(file, "new", &err), RF_OK);
    assert_string_equal(content(file), "new");
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640); /* the target's mode, not the temporary file's 0600 */
    assert_int_equal(write_text(at("fresh.html"), "made", &err), RF_OK);
    assert_string_equal(content(at("fresh.html")), "made");
    assert_int_equal(rf_output_write(at("empty.html"), NULL, 0, "report", &err), RF_OK);
    assert_string_equal(content(at("empty.html")), "");
    assert_int_equal(hidden_files(), 0);
    /* A directory that does not exist: an error naming the path, nothing made. */
    assert_int_equal(write_text(at("no/such/dir.html"), "x", &err), RF_EIO);
    assert_non_null(strstr(err.message, "cannot write report "));
    assert_non_null(strstr(err.message, "no/such/dir.html: No such file or directory"));
}

static void test_symlinks_are_written_through(void **state) {
    (void)state;
    rf_error err;
    assert_int_equal(mkdir(at("sub"), 0755), 0);
    put(at("sub/target.html"), "old");
    /* Absolute, relative from another directory, and a chain of both. */
    assert_int_equal(symlink(at("sub/target.html"), at("abs.html")), 0);
    assert_int_equal(symlink("sub/target.html", at("rel.html")), 0);
    assert_int_equal(symlink("target.html", at("sub/inner.html")), 0);
    assert_int_equal(symlink("sub/inner.html", at("chain.html")), 0);
    const char *links[] = {"abs.html", "rel.html", "chain.html"};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        char text[32];
        snprintf(text, sizeof text, "through %s", links[i]);
        assert_int_equal(write_text(at(links[i]), text, &err), RF_OK);
        assert_true(is_link(at(links[i])));
        assert_string_equal(content(at("sub/target.html")), text);
    }
    assert_true(is_link(at("sub/inner.html")));
    /* A dangling link: its target is made, the link stays. */
    assert_int_equal(symlink("sub/later.html", at("dangling.html")), 0);
    assert_int_equal(write_text(at("dangling.html"), "made through", &err), RF_OK);
    assert_true(is_link(at("dangling.html")));
    assert_string_equal(content(at("sub/later.html")), "made through");
    assert_int_equal(hidden_files(), 0);
}

/* Refused with RF_EINVAL, the message holding `says`, and the path left as it was (checked by the caller). */
static void refused(const char *path, const char *says) {
    rf_error err;
    assert_int_equal(write_text(path, "never", &err), RF_EINVAL);
    if (strstr(err.message, says) == NULL) fail_msg("\"%s\" does not say \"%s\"", err.message, says);
    assert_non_null(strstr(err.message, path));
    assert_int_equal(rf_output_check(path, RF_OUTPUT_REPLACE, "report", &err), RF_EINVAL);
}

static void test_what_is_not_a_regular_file_is_refused(void **state) {
    (void)state;
    assert_int_equal(mkdir(at("adir"), 0755), 0);
    assert_int_equal(mkfifo(at("fifo"), 0644), 0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", at("sock"));
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(symlink("adir", at("to-dir")), 0);
    assert_int_equal(symlink("fifo", at("to-fifo")), 0);
    const char *null = null_device();
    assert_int_equal(symlink(null, at("to-null")), 0);
    assert_int_equal(symlink("loop-b", at("loop-a")), 0);
    assert_int_equal(symlink("loop-a", at("loop-b")), 0);

    refused(at("adir"), "it is a directory, not a regular file");
    refused(at("fifo"), "it is a FIFO, not a regular file (- writes to standard output)"); /* and did not block */
    refused(null, "it is a character device, not a regular file");
    refused(at("sock"), "it is a socket, not a regular file");
    refused(at("to-dir"), "to-dir (\xe2\x86\x92 "); /* the message names where the link led */
    refused(at("to-dir"), "adir): it is a directory");
    refused(at("to-fifo"), "it is a FIFO");
    refused(at("to-null"), "): it is a character device");
    refused(at("adir/"), "the path names a directory (it ends in /)");
    rf_error err;
    assert_int_equal(write_text(at("loop-a"), "never", &err), RF_EIO);
    assert_non_null(strstr(err.message, "Too many levels of symbolic links"));
    assert_int_equal(write_text("", "never", &err), RF_EINVAL);
    assert_string_equal(err.message, "cannot write report '': the path is empty");

    struct stat st;
    assert_int_equal(stat(at("adir"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(stat(at("fifo"), &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(lstat(at("sock"), &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_true(is_link(at("to-dir")) && is_link(at("to-fifo")) && is_link(at("to-null")));
    assert_int_equal(stat(null, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(hidden_files(), 0);
    close(s);
}

static void test_dash_and_appending(void **state) {
    (void)state;
    rf_error err;
    /* "-" is standard output for a whole file: redirect fd 1 to a file for the check. */
    const char *captured = at("stdout.txt");
    int fd = open(captured, O_WRONLY | O_CREAT | O_TRUNC, 0644), saved = dup(STDOUT_FILENO);
    fflush(stdout);
    dup2(fd, STDOUT_FILENO);
    rf_status st = write_text("-", "to standard output", &err);
    dup2(saved, STDOUT_FILENO);
    close(fd);
    close(saved);
    assert_int_equal(st, RF_OK);
    assert_string_equal(content(captured), "to standard output");
    assert_int_equal(rf_output_check("-", RF_OUTPUT_REPLACE, "report", &err), RF_OK);

    int out = -1;
    assert_int_equal(rf_output_open_append("-", O_WRONLY, "ledger", &out, &err), RF_EINVAL);
    assert_string_equal(err.message, "cannot open ledger -: standard output cannot be appended to and read back as a "
                                     "ledger; name a file (./- for one called -)");
    assert_int_equal(out, -1);
    assert_int_equal(rf_output_check("-", RF_OUTPUT_APPEND, "ledger", &err), RF_EINVAL);
    /* Appending through a symlink: the target grows, the link stays. */
    put(at("log-target.jsonl"), "line 1\n");
    assert_int_equal(symlink("log-target.jsonl", at("log.jsonl")), 0);
    assert_int_equal(rf_output_open_append(at("log.jsonl"), O_WRONLY, "ledger", &out, &err), RF_OK);
    assert_int_equal(write(out, "line 2\n", 7), 7);
    close(out);
    assert_true(is_link(at("log.jsonl")));
    assert_string_equal(content(at("log-target.jsonl")), "line 1\nline 2\n");
    /* Appending to what is not a regular file: refused, naming the path; a FIFO without blocking. */
    assert_int_equal(mkfifo(at("pipe"), 0644), 0);
    assert_int_equal(rf_output_open_append(at("pipe"), O_WRONLY, "ledger", &out, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "pipe: it is a FIFO, not a regular file"));
    const char *null = null_device();
    assert_int_equal(rf_output_open_append(null, O_RDWR, "ledger", &out, &err), RF_EINVAL);
    char want[256];
    snprintf(want, sizeof want, "cannot open ledger %s: it is a character device, not a regular file", null);
    assert_string_equal(err.message, want);
    assert_int_equal(rf_output_open_append(dir, O_WRONLY, "pairing log", &out, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "it is a directory, not a regular file"));
    assert_int_equal(rf_output_open_append(at("x"), O_RDONLY, "ledger", &out, &err), RF_EINVAL);
}

/* ---- a writer killed at any moment ---------------------------------------------------------------------- */

#define KILLS 30
#define BIG (8u << 20)

static void test_a_killed_writer_leaves_old_or_new(void **state) {
    (void)state;
    const char *file = at("killed.html");
    char *big = malloc(BIG);
    assert_non_null(big);
    memset(big, 'N', BIG);
    put(file, "OLD");
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int saw_old = 0, saw_new = 0, leftovers = 0;
    for (int i = 0; i < KILLS; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            rf_error err;
            for (;;) rf_output_write(file, big, BIG, "report", &err);
        }
        nanosleep(&(struct timespec){.tv_nsec = (rand() % 40) * 1000000L}, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        leftovers += hidden_files(); /* the killed writer's temporary file: removed, it is 8 MiB */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -f %s/.killed.html.rf-*.tmp", dir);
        assert_int_equal(system(cmd), 0);
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        if (st.st_size == 3) {
            assert_string_equal(content(file), "OLD");
            saw_old++;
        } else {
            assert_int_equal(st.st_size, BIG); /* never a part: the rename is the only way in */
            FILE *f = fopen(file, "rb");
            char *back = malloc(BIG);
            assert_int_equal(fread(back, 1, BIG, f), BIG);
            fclose(f);
            assert_memory_equal(back, big, BIG);
            free(back);
            saw_new++;
            put(file, "OLD");
        }
    }
    printf("killed writer, %d times: the old content %d times, the new %d times, never a part; %d temporary files "
           "left behind\n",
           KILLS, saw_old, saw_new, leftovers);
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_regular_files_are_replaced_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_are_written_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_is_not_a_regular_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dash_and_appending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_killed_writer_leaves_old_or_new, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
