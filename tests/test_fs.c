// SPDX-License-Identifier: MIT
/* Tests for src/core/fs.c: the whole-file reader every module uses (config, checkpoints, report)
 * — contents, the empty file, a file that does not exist with and without `missing`, the size
 * limit, a directory, a pipe read to its end (and over the limit), a failing allocator, a scanner
 * stopping an endless stream — mkdir -p, the regular-files-only door (ddpc_open_regular) refusing
 * FIFOs and devices, the atomic-replace door (links followed, modes kept, a FIFO, directory or
 * link loop refused; a secret 0600 throughout) and job locks (refusal message, removal, a dead
 * holder), and the one write loop (ddpc_fd_write_all). */
#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ_INT(fwrite(text, 1, n, f), n);
    fclose(f);
}

static void test_read_contents(void)
{
    char p[512];
    path_of(p, sizeof p, "a.txt");
    write_file(p, "line 1\nline\0 2\n", 15);
    char *text = NULL;
    size_t len = 99;
    bool missing = true;
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, &missing, &text, &len), DDPC_OK);
    CHECK(!missing);
    CHECK_EQ_INT(len, 15);
    CHECK(text && memcmp(text, "line 1\nline\0 2\n", 15) == 0 && text[15] == '\0');
    ddpc_free(text);
    /* at the limit exactly: read; one byte over: refused, naming the file and the limit */
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 15, NULL, &text, &len), DDPC_OK);
    ddpc_free(text);
    CHECK_EQ_INT(ddpc_read_file(p, "state file", 14, NULL, &text, &len), DDPC_EFORMAT);
    CHECK(text == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "state file '");
    CHECK_STR_CONTAINS(ddpc_last_error(), "a.txt' is larger than 14 bytes");
}

static void test_read_empty(void)
{
    char p[512];
    path_of(p, sizeof p, "empty");
    write_file(p, "", 0);
    char *text = NULL;
    size_t len = 99;
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, NULL, &text, &len), DDPC_OK);
    CHECK_EQ_INT(len, 0);
    CHECK(text && text[0] == '\0');
    ddpc_free(text);
}

static void test_read_missing(void)
{
    char p[512], want[640];
    path_of(p, sizeof p, "nope.yaml");
    char *text = (char *)p;
    size_t len = 99;
    bool missing = false;
    ddpc_clear_error();
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, &missing, &text, &len), DDPC_OK);
    CHECK(missing && text == NULL && len == 0);
    CHECK_EQ_INT(ddpc_last_error()[0], '\0'); /* the caller says what the absence means */
    CHECK_EQ_INT(ddpc_read_file(p, "config", 0, NULL, &text, &len), DDPC_EIO);
    snprintf(want, sizeof want, "cannot open config '%s': No such file or directory", p);
    CHECK(strcmp(ddpc_last_error(), want) == 0);
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, NULL, &text, &len), DDPC_EIO);
    snprintf(want, sizeof want, "cannot open '%s': No such file or directory", p);
    CHECK(strcmp(ddpc_last_error(), want) == 0);
}

static void test_read_directory(void)
{
    char *text = NULL;
    size_t len = 0;
    bool missing = true;
    CHECK_EQ_INT(ddpc_read_file(dir, NULL, 0, &missing, &text, &len), DDPC_EIO);
    CHECK(!missing && text == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "it is a directory");
}

/* A child writes n bytes ('a' + i % 26) into the FIFO at p; returns its pid. */
static pid_t feed_fifo(const char *p, size_t n)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = fopen(p, "wb");
        for (size_t i = 0; f && i < n; i++)
            fputc('a' + (int)(i % 26), f);
        _exit(f && fclose(f) == 0 ? 0 : 1);
    }
    return pid;
}

static void test_read_pipe(void)
{
    char p[512];
    path_of(p, sizeof p, "fifo");
    CHECK_EQ_INT(mkfifo(p, 0600), 0);
    /* 3 pages and a bit: the reader starts at one page and grows */
    const size_t n = 3 * 4096 + 123;
    pid_t pid = feed_fifo(p, n);
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, NULL, &text, &len), DDPC_OK);
    CHECK_EQ_INT(len, n);
    bool same = text != NULL;
    for (size_t i = 0; same && i < n; i++)
        same = text[i] == 'a' + (int)(i % 26);
    CHECK(same && text[n] == '\0');
    ddpc_free(text);
    int status = 0;
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    /* a pipe has no size to check first: the limit stops the read */
    pid = feed_fifo(p, 10000);
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 5000, NULL, &text, &len), DDPC_EFORMAT);
    CHECK(text == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "is larger than 5000 bytes");
    kill(pid, SIGKILL); /* it may wait on a pipe nobody reads now */
    waitpid(pid, &status, 0);
}

static void test_read_out_of_memory(void)
{
    char p[512];
    path_of(p, sizeof p, "a.txt");
    int64_t live = ddpc_alloc_live();
    char *text = NULL;
    size_t len = 0;
    ddpc_alloc_fail_after(0);
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, NULL, &text, &len), DDPC_ENOMEM);
    ddpc_alloc_fail_after(-1);
    CHECK(text == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "out of memory reading '");
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

static void test_mkdirs(void)
{
    char p[512];
    path_of(p, sizeof p, "x/y/z");
    CHECK_EQ_INT(ddpc_mkdirs(p), DDPC_OK);
    CHECK_EQ_INT(ddpc_mkdirs(p), DDPC_OK); /* again: nothing to do */
    struct stat st;
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    path_of(p, sizeof p, "a.txt/sub");
    CHECK_EQ_INT(ddpc_mkdirs(p), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "a.txt': a file is in the way");
}

/* The regular-files-only door: a regular file reads as ddpc_read_file reads it; a FIFO without
 * a writer, a device and a directory are refused at once (a hang fails the test's timeout), each
 * named with what it is; a missing file is reported through `missing`. */
static void test_read_regular(void)
{
    char p[300], *text = NULL;
    size_t len = 0;
    bool missing = true;
    path_of(p, sizeof p, "regular.txt");
    write_file(p, "abc\n", 4);
    CHECK_EQ_INT(ddpc_read_regular_file(p, NULL, 16, &missing, &text, &len), DDPC_OK);
    CHECK(!missing && len == 4 && text && strcmp(text, "abc\n") == 0);
    ddpc_free(text);
    CHECK_EQ_INT(ddpc_read_regular_file(p, NULL, 3, NULL, &text, &len), DDPC_EFORMAT);
    path_of(p, sizeof p, "door.fifo");
    CHECK(mkfifo(p, 0600) == 0);
    CHECK_EQ_INT(ddpc_read_regular_file(p, "state", 0, &missing, &text, &len), DDPC_EIO);
    CHECK(!missing && text == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "door.fifo': it is a FIFO, not a regular file");
    CHECK_STR_CONTAINS(ddpc_last_error(), "cannot read state '");
    int fd = 7;
    uint64_t size = 7;
    CHECK_EQ_INT(ddpc_open_regular("/dev/zero", NULL, NULL, &fd, &size), DDPC_EIO);
    CHECK(fd == -1 && size == 0);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'/dev/zero': it is a character device");
    CHECK_EQ_INT(ddpc_open_regular(dir, NULL, NULL, &fd, &size), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "it is a directory, not a regular file");
    path_of(p, sizeof p, "absent");
    CHECK_EQ_INT(ddpc_open_regular(p, NULL, &missing, &fd, &size), DDPC_OK);
    CHECK(missing && fd == -1);
    CHECK_EQ_INT(ddpc_open_regular(p, NULL, NULL, &fd, &size), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "No such file or directory");
}

/* Stops a scanned read at the first 'x'. */
static ddpc_status stop_at_x(void *ctx, const char *bytes, size_t n)
{
    size_t *seen = ctx;
    *seen += n;
    return memchr(bytes, 'x', n) ? ddpc_errorf(DDPC_EFORMAT, "an x") : DDPC_OK;
}

static void test_read_scan_stops(void)
{
    char p[512], *text = NULL;
    size_t len = 0, seen = 0;
    path_of(p, sizeof p, "scan.txt");
    write_file(p, "abc\ndef\n", 8);
    CHECK_EQ_INT(ddpc_read_file_scan(p, NULL, 0, NULL, stop_at_x, &seen, &text, &len), DDPC_OK);
    CHECK_EQ_INT(seen, 8); /* every byte seen, once */
    CHECK_EQ_INT(len, 8);
    ddpc_free(text);
    /* A stream that never ends (the bytes of /dev/zero and then 'x's) stops at the scanner's
     * first error, having read a bounded amount, and returns nothing. */
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        char buf[4096];
        memset(buf, 'x', sizeof buf);
        while (write(fds[1], buf, sizeof buf) > 0)
            ;
        _exit(0);
    }
    close(fds[1]);
    char src[64];
    snprintf(src, sizeof src, "/dev/fd/%d", fds[0]);
    seen = 0;
    text = (char *)1;
    CHECK_EQ_INT(ddpc_read_file_scan(src, NULL, 0, NULL, stop_at_x, &seen, &text, &len),
                 DDPC_EFORMAT);
    CHECK(text == NULL);
    CHECK(seen > 0 && seen <= 8192);
    close(fds[0]); /* the writer gets EPIPE / SIGPIPE and ends */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

static void test_out_replaces_regular_files_only(void)
{
    char p[512], link[512], t[512];
    path_of(p, sizeof p, "out.txt");
    CHECK_EQ_INT(ddpc_fs_write_file(p, NULL, "new\n", 4), DDPC_OK);
    chmod(p, 0600);
    CHECK_EQ_INT(ddpc_fs_write_file(p, NULL, "newer\n", 6), DDPC_OK);
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600); /* the replaced file's mode */
    /* A chain of links, the last one relative: the final target is replaced, links stay. */
    path_of(link, sizeof link, "l1");
    CHECK(symlink("out.txt", link) == 0);
    path_of(t, sizeof t, "l2");
    CHECK(symlink(link, t) == 0);
    CHECK_EQ_INT(ddpc_fs_write_file(t, "x", "linked\n", 7), DDPC_OK);
    CHECK(lstat(t, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    char *text = NULL;
    size_t len;
    CHECK_EQ_INT(ddpc_read_file(p, NULL, 0, NULL, &text, &len), DDPC_OK);
    CHECK_STR_CONTAINS(text ? text : "", "linked");
    ddpc_free(text);
    /* A dangling link: its target is created. */
    path_of(link, sizeof link, "dangling");
    CHECK(symlink("made.txt", link) == 0);
    CHECK_EQ_INT(ddpc_fs_write_file(link, NULL, "m", 1), DDPC_OK);
    path_of(t, sizeof t, "made.txt");
    CHECK(stat(t, &st) == 0 && S_ISREG(st.st_mode));
    /* A loop of links, a FIFO, a directory: refused, left as they were. */
    path_of(link, sizeof link, "loop");
    CHECK(symlink("loop", link) == 0);
    CHECK_EQ_INT(ddpc_fs_write_file(link, NULL, "m", 1), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "symbolic links");
    path_of(t, sizeof t, "out.fifo");
    CHECK(mkfifo(t, 0600) == 0);
    CHECK_EQ_INT(ddpc_fs_write_file(t, "weights_out", "m", 1), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "weights_out '");
    CHECK_STR_CONTAINS(ddpc_last_error(), "out.fifo': it is a FIFO, not a regular file");
    CHECK(stat(t, &st) == 0 && S_ISFIFO(st.st_mode));
    path_of(t, sizeof t, "out.dir");
    CHECK(mkdir(t, 0700) == 0);
    CHECK_EQ_INT(ddpc_fs_write_file(t, NULL, "m", 1), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "it is a directory");
}

/* A secret's temporary is 0600 while it is written, and the file stays 0600 after replacing a
 * file that others could read (the token file of `ddpc run`, src/launch/token_file.c). */
static void test_out_secret_is_private(void)
{
    char p[512];
    path_of(p, sizeof p, "secret.txt");
    write_file(p, "old\n", 4);
    chmod(p, 0644);
    ddpc_fs_out o;
    CHECK_EQ_INT(ddpc_fs_out_open_secret(&o, p, "a secret"), DDPC_OK);
    struct stat st;
    CHECK(stat(o.tmp, &st) == 0 && (st.st_mode & 0777) == 0600);
    fputs("token\n", o.f);
    CHECK_EQ_INT(ddpc_fs_out_commit(&o, false), DDPC_OK);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    unlink(p);
    CHECK_EQ_INT(ddpc_fs_out_open_secret(&o, p, "a secret"), DDPC_OK);
    CHECK(stat(o.tmp, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_EQ_INT(ddpc_fs_out_commit(&o, false), DDPC_OK);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    unlink(p);
}

static void test_lock(void)
{
    char p[512];
    path_of(p, sizeof p, "job.lock");
    ddpc_fs_lock *a = NULL, *b = NULL;
    CHECK_EQ_INT(ddpc_fs_lock_acquire(p, "thing", "T", "stop it", true, &a), DDPC_OK);
    /* Another open file description is another holder, even in this process. */
    CHECK_EQ_INT(ddpc_fs_lock_acquire(p, "thing", "T", "stop it", true, &b), DDPC_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "thing 'T' is in use by another job (pid %ld); stop it",
             (long)getpid());
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    ddpc_fs_lock_release(a);
    CHECK(access(p, F_OK) != 0); /* removed on release */
    CHECK_EQ_INT(ddpc_fs_lock_acquire(p, "thing", "T", "stop it", false, &b), DDPC_OK);
    ddpc_fs_lock_release(b);
    CHECK(access(p, F_OK) == 0); /* kept */
    /* A holder that dies releases the lock. */
    pid_t child = fork();
    if (child == 0) {
        ddpc_fs_lock *c = NULL;
        _exit(ddpc_fs_lock_acquire(p, "thing", "T", "stop it", false, &c) == DDPC_OK ? 0 : 1);
    }
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ_INT(ddpc_fs_lock_acquire(p, "thing", "T", "stop it", false, &a), DDPC_OK);
    ddpc_fs_lock_release(a);
    ddpc_fs_lock_release(NULL);
}

/* The one write loop: a file gets every byte; a large write through a pipe is completed across
 * short writes by a reader; a socket whose peer closed is EPIPE, not a fatal SIGPIPE. */
static void test_fd_write_all(void)
{
    char path[512];
    path_of(path, sizeof path, "fd_write");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(ddpc_fd_write_all(fd, "hello", 5) == 0);
    close(fd);
    char back[8] = {0};
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(back, 1, sizeof back, f) == 5 && memcmp(back, "hello", 5) == 0);
    if (f)
        fclose(f);

    enum { BIG = 1 << 20 }; /* larger than a pipe's buffer: the writer must loop */
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t child = fork();
    if (child == 0) {
        close(p[1]);
        size_t total = 0;
        char buf[4096];
        ssize_t got;
        while ((got = read(p[0], buf, sizeof buf)) > 0)
            total += (size_t)got;
        _exit(total == BIG ? 0 : 1);
    }
    close(p[0]);
    char *big = calloc(BIG, 1);
    CHECK(big != NULL);
    CHECK(ddpc_fd_write_all(p[1], big, BIG) == 0);
    close(p[1]);
    free(big);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    CHECK(ddpc_fd_write_all(sv[0], "x", 1) == EPIPE); /* alive: no SIGPIPE */
    close(sv[0]);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddpc_test_fs_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(test_read_contents);
    RUN_TEST(test_read_empty);
    RUN_TEST(test_read_missing);
    RUN_TEST(test_read_directory);
    RUN_TEST(test_read_pipe);
    RUN_TEST(test_read_out_of_memory);
    RUN_TEST(test_mkdirs);
    RUN_TEST(test_read_regular);
    RUN_TEST(test_read_scan_stops);
    RUN_TEST(test_out_replaces_regular_files_only);
    RUN_TEST(test_out_secret_is_private);
    RUN_TEST(test_lock);
    RUN_TEST(test_fd_write_all);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
