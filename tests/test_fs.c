/* Tests for src/core/fs.c: the whole-file reader every module uses (config, checkpoints, report)
 * — contents, the empty file, a file that does not exist with and without `missing`, the size
 * limit, a directory, a pipe read to its end (and over the limit), a failing allocator — and
 * mkdir -p; and the regular-files-only door (ddpc_open_regular) refusing FIFOs and devices. */
#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include "check.h"

#include <signal.h>
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
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
