// SPDX-License-Identifier: MIT
/* ddpc_safetensors_write from several processes at once: two writers replace the same path over
 * and over while a reader opens it. Each writer's file carries its identity and a sequence number
 * in __metadata__ and data derived from them, so a file mixing two writers' bytes is caught.
 * A shared fixed temporary name ("<path>.tmp") fails this: writers truncate and rename each
 * other's half-written files. */
#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define N_FLOATS (64 * 1024)
#define ROUNDS 150

static char tmpdir[256], path[300];

static float value_of(int writer, int seq, size_t i)
{
    return (float)(writer * 100000 + seq) + (float)(i % 7) * 0.125f;
}

/* Child: ROUNDS writes of distinct contents; exit status = number of failed writes (capped). */
static int writer_main(int writer)
{
    float *data = malloc(N_FLOATS * sizeof(float));
    if (!data)
        return 100;
    int failed = 0;
    for (int seq = 0; seq < ROUNDS; seq++) {
        for (size_t i = 0; i < N_FLOATS; i++)
            data[i] = value_of(writer, seq, i);
        ddpc_st_tensor t = {.name = "x", .ndim = 2, .shape = {256, N_FLOATS / 256}, .data = data};
        char w[16], q[16];
        snprintf(w, sizeof w, "%d", writer);
        snprintf(q, sizeof q, "%d", seq);
        const char *keys[] = {"writer", "seq"};
        const char *vals[] = {w, q};
        if (ddpc_safetensors_write(path, &t, 1, keys, vals, 2) != DDPC_OK) {
            fprintf(stderr, "writer %d: %s\n", writer, ddpc_last_error());
            failed++;
        }
    }
    free(data);
    return failed > 100 ? 100 : failed;
}

/* 0 if the file at path is complete and holds exactly one writer's data for one sequence number;
 * 1 if it does not exist yet; -1 otherwise. *writer gets whose it is. */
static int check_file(int *writer)
{
    if (access(path, F_OK) != 0)
        return 1;
    ddpc_safetensors *f = NULL;
    if (ddpc_safetensors_open(&f, path) != DDPC_OK) {
        fprintf(stderr, "reader: %s\n", ddpc_last_error());
        return -1;
    }
    int rc = 0;
    const char *w = ddpc_safetensors_metadata(f, "writer");
    const char *q = ddpc_safetensors_metadata(f, "seq");
    ddpc_st_info info;
    if (!w || !q || ddpc_safetensors_find(f, "x", &info) != DDPC_OK ||
        info.nbytes != N_FLOATS * sizeof(float))
        rc = -1;
    else {
        *writer = atoi(w);
        int seq = atoi(q);
        const float *x = info.data;
        for (size_t i = 0; i < N_FLOATS && rc == 0; i++)
            if (x[i] != value_of(*writer, seq, i)) {
                fprintf(stderr, "reader: writer %d seq %d holds a foreign value at %zu\n", *writer,
                        seq, i);
                rc = -1;
            }
    }
    ddpc_safetensors_close(f);
    return rc;
}

static int count_leftovers(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && strcmp(e->d_name, "m.safetensors") != 0) {
            fprintf(stderr, "leftover: %s\n", e->d_name);
            n++;
        }
    if (d)
        closedir(d);
    return n;
}

static void test_concurrent_writers(void)
{
    pid_t pids[2];
    for (int w = 0; w < 2; w++) {
        pids[w] = fork();
        if (pids[w] == 0)
            _exit(writer_main(w + 1));
    }
    int bad_reads = 0, good_reads = 0, writer = 0;
    bool done[2] = {false, false};
    int status[2] = {0, 0};
    while (!done[0] || !done[1]) {
        int r = check_file(&writer);
        bad_reads += r < 0;
        good_reads += r == 0;
        for (int w = 0; w < 2; w++)
            if (!done[w] && waitpid(pids[w], &status[w], WNOHANG) == pids[w])
                done[w] = true;
    }
    for (int w = 0; w < 2; w++) {
        CHECK(WIFEXITED(status[w]));
        CHECK_EQ_INT(WEXITSTATUS(status[w]), 0); /* every write reported success */
    }
    CHECK_EQ_INT(bad_reads, 0);
    writer = 0;
    CHECK_EQ_INT(check_file(&writer), 0); /* the final file is one writer's complete data */
    CHECK(writer == 1 || writer == 2);
    CHECK_EQ_INT(count_leftovers(), 0); /* no temporary file survives */
    printf("    %d consistent reads while writing\n", good_reads);
}

/* A failed write (here: a directory where the file should go) leaves no temporary file behind. */
static void test_failed_write_cleans_up(void)
{
    char dirpath[400];
    snprintf(dirpath, sizeof dirpath, "%s/adir", tmpdir);
    CHECK_EQ_INT(mkdir(dirpath, 0755), 0);
    float one = 1.0f;
    ddpc_st_tensor t = {.name = "x", .ndim = 1, .shape = {1}, .data = &one};
    CHECK_EQ_INT(ddpc_safetensors_write(dirpath, &t, 1, NULL, NULL, 0), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "adir");
    rmdir(dirpath);
    CHECK_EQ_INT(count_leftovers(), 0);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_stw_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    RUN_TEST(test_concurrent_writers);
    RUN_TEST(test_failed_write_cleans_up);
    unlink(path);
    rmdir(tmpdir);
    return check_summary();
}
