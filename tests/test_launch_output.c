// SPDX-License-Identifier: MIT
/* Tests for src/launch/output.c: the ring of recent lines and line assembly from pipe chunks
 * (whole lines only, prefixes on the console, long lines cut, a partial last line completed). */
#include <ddpc/alloc.h>

#include "check.h"
#include "launch/launch_impl.h"

static void test_ring_keeps_the_last_lines(void)
{
    ddpc__line_ring r;
    memset(&r, 0, sizeof r);
    ddpc__ring_push(&r, "first\n", 6);
    CHECK_EQ_INT(r.count, 1);
    CHECK(strcmp(ddpc__ring_line(&r, 0), "first") == 0);
    char line[32];
    for (int i = 0; i < 45; i++) {
        int n = snprintf(line, sizeof line, "line %d\n", i);
        ddpc__ring_push(&r, line, (size_t)n);
    }
    CHECK_EQ_INT(r.count, DDPC__RING_LINES);
    CHECK(strcmp(ddpc__ring_line(&r, 0), "line 25") == 0);
    CHECK(strcmp(ddpc__ring_line(&r, DDPC__RING_LINES - 1), "line 44") == 0);
    char big[2000];
    memset(big, 'x', sizeof big);
    ddpc__ring_push(&r, big, sizeof big);
    CHECK_EQ_INT((int)strlen(ddpc__ring_line(&r, DDPC__RING_LINES - 1)), DDPC__RING_LINE_MAX - 1);
}

/* Reads back what a FILE* received. */
static void contents(FILE *f, char *buf, size_t cap)
{
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
}

static void test_lines_are_forwarded_whole(void)
{
    int64_t live = ddpc_alloc_live();
    FILE *log = tmpfile(), *con = tmpfile();
    ddpc__line_ring ring;
    memset(&ring, 0, sizeof ring);
    ddpc__line_sink sink = {.log = log, .console = con, .prefix = "[rank 1/2] ", .ring = &ring};
    ddpc__line_buf b = {0};
    const char *chunks[] = {"hel", "lo\nwor", "ld\n", "a\nb\nc", "", "d"};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(ddpc__line_feed(&b, chunks[i], strlen(chunks[i]), &sink), DDPC_OK);
    char buf[256];
    contents(con, buf, sizeof buf);
    CHECK(strcmp(buf, "[rank 1/2] hello\n[rank 1/2] world\n[rank 1/2] a\n[rank 1/2] b\n") == 0);
    ddpc__line_flush(&b, &sink); /* "cd" had no newline: completed at end of stream */
    contents(con, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "[rank 1/2] b\n[rank 1/2] cd\n");
    contents(log, buf, sizeof buf);
    CHECK(strcmp(buf, "hello\nworld\na\nb\ncd\n") == 0);
    CHECK_EQ_INT(ring.count, 5);
    CHECK(strcmp(ddpc__ring_line(&ring, 4), "cd") == 0);
    /* A line that already carries its rank's prefix (the library's logging) keeps just one; the
     * prefix elsewhere in a line does not count. */
    const char *own = "[rank 1/2] own\nx[rank 1/2] y\n";
    CHECK_EQ_INT(ddpc__line_feed(&b, own, strlen(own), &sink), DDPC_OK);
    contents(con, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "cd\n[rank 1/2] own\n[rank 1/2] x[rank 1/2] y\n");
    CHECK(strstr(buf, "[rank 1/2] [rank 1/2]") == NULL);
    ddpc__line_flush(&b, &sink);
    CHECK(b.buf == NULL);
    fclose(log);
    fclose(con);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

static void test_long_lines_are_cut(void)
{
    FILE *log = tmpfile();
    ddpc__line_sink sink = {.log = log};
    ddpc__line_buf b = {0};
    size_t n = 2 * DDPC__LINE_MAX + 10;
    char *big = malloc(n + 1);
    memset(big, 'y', n);
    big[n] = '\n';
    /* Fed in odd-sized pieces, as pipes deliver them. */
    for (size_t off = 0; off < n + 1; off += 7000) {
        size_t k = n + 1 - off < 7000 ? n + 1 - off : 7000;
        CHECK_EQ_INT(ddpc__line_feed(&b, big + off, k, &sink), DDPC_OK);
    }
    ddpc__line_flush(&b, &sink);
    fflush(log);
    rewind(log);
    int lines = 0, c;
    long chars = 0;
    while ((c = fgetc(log)) != EOF) {
        lines += c == '\n';
        chars += c == 'y';
    }
    CHECK_EQ_INT(lines, 3);
    CHECK_EQ_INT(chars, (long)n);
    free(big);
    fclose(log);
}

static void test_feed_out_of_memory(void)
{
    ddpc__line_sink sink = {0};
    ddpc__line_buf b = {0};
    ddpc_alloc_fail_after(0);
    ddpc_status s = ddpc__line_feed(&b, "partial", 7, &sink);
    ddpc_alloc_fail_after(-1);
    CHECK_EQ_INT(s, DDPC_ENOMEM);
    CHECK_EQ_INT(ddpc__line_feed(&b, "whole\n", 6, &sink), DDPC_OK); /* needs no buffer */
    ddpc__line_flush(&b, &sink);
}

int main(void)
{
    RUN_TEST(test_ring_keeps_the_last_lines);
    RUN_TEST(test_lines_are_forwarded_whole);
    RUN_TEST(test_long_lines_are_cut);
    RUN_TEST(test_feed_out_of_memory);
    return check_summary();
}
