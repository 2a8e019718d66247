// SPDX-License-Identifier: MIT
/* Tests for the hang recorder (src/comm/flight.c) through the process-group front end over a fake
 * backend: the ring keeps the last DDPC_FLIGHT_ENTRIES collectives across wraparound, each with
 * its op, dtype, count and the caller's phase when it was issued (also for async work, which runs
 * on the comm thread); the first failure writes DIR/rank<k>.json with the error, the entries
 * oldest first, the failed one last, and nothing when no directory is set. */
#include "comm/pg_front.h"

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int64_t fail_at_seq;
    int phases_seen[DDPC_PHASE_COUNT];
} fake_state;

static ddpc_status fake_run(void *state, const ddpc__coll *c)
{
    fake_state *f = state;
    if ((int64_t)c->seq == f->fail_at_seq)
        return ddpc_errorf(DDPC_ETIMEOUT, "%s #%llu timed out after 1 s: rank 1 \"never\" arrived",
                           ddpc__coll_name(c->kind), (unsigned long long)c->seq);
    if (c->send != c->recv)
        memcpy(c->recv, c->send, c->count * ddpc_dtype_size(c->dtype));
    return DDPC_OK;
}

static void fake_destroy(void *state)
{
    (void)state;
}

static void fake_phase(void *state, int phase)
{
    ((fake_state *)state)->phases_seen[phase]++;
}

static const ddpc__pg_backend fake_ops = {"fake", fake_run, fake_destroy, fake_phase, NULL};

static ddpc_pg *fake_pg(fake_state *f, int rank)
{
    memset(f, 0, sizeof *f);
    f->fail_at_seq = -1;
    ddpc_comm_env e;
    memset(&e, 0, sizeof e);
    e.world_size = e.local_world_size = 2;
    e.num_nodes = 1;
    e.rank = e.local_rank = rank;
    ddpc_pg *pg = NULL;
    CHECK_EQ_INT(ddpc__pg_create_with(&e, DDPC_BACKEND_SHM, 1.0, &fake_ops, f, &pg), DDPC_OK);
    return pg;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_ring_and_dump(void)
{
    char dir[] = "/tmp/ddpc_flight_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[128], path[192];
    snprintf(sub, sizeof sub, "%s/run/flight", dir); /* created on the failure */
    snprintf(path, sizeof path, "%s/rank1.json", sub);

    fake_state f;
    ddpc_pg *pg = fake_pg(&f, 1);
    CHECK_EQ_INT(ddpc_pg_set_flight_dir(pg, sub), DDPC_OK);
    float x[3] = {1, 2, 3};
    ddpc_pg_set_phase(pg, DDPC_PHASE_FORWARD);
    for (int i = 0; i < 69; i++)
        CHECK_EQ_INT(ddpc_pg_all_reduce(pg, x, x, 3, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    CHECK(access(path, F_OK) != 0); /* nothing written while healthy */
    CHECK_EQ_INT(f.phases_seen[DDPC_PHASE_FORWARD], 1);

    /* async work runs on the comm thread but keeps the phase it was issued in */
    ddpc_pg_set_phase(pg, DDPC_PHASE_BACKWARD);
    ddpc_work *w = NULL;
    CHECK_EQ_INT(ddpc_pg_iall_reduce(pg, x, x, 3, DDPC_DTYPE_F32, DDPC_REDUCE_SUM, &w), DDPC_OK);
    CHECK_EQ_INT(ddpc_work_wait(w), DDPC_OK);
    ddpc_work_destroy(w);

    f.fail_at_seq = 70;
    ddpc_pg_set_phase(pg, DDPC_PHASE_OPTIMIZER);
    double d = 0;
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, &d, 1, DDPC_DTYPE_F64, 0), DDPC_ETIMEOUT);
    const char *msg = ddpc_last_error();
    CHECK(strstr(msg, "broadcast #70 timed out") != NULL);
    CHECK(strstr(msg, "flight") == NULL); /* the dump leaves the message as it was */

    const char *j = slurp(path);
    CHECK(j != NULL);
    if (j) {
        CHECK(strstr(j,
                     "\"rank\": 1, \"world\": 2, \"backend\": \"shm\", \"phase\": \"optimizer\"") !=
              NULL);
        CHECK(strstr(j, "rank 1 \\\"never\\\" arrived") != NULL); /* the error, escaped */
        CHECK_EQ_INT(count(j, "{\"seq\": "), DDPC_FLIGHT_ENTRIES);
        CHECK(strstr(j, "{\"seq\": 6,") == NULL); /* 71 issued: 0..6 fell out of the ring */
        CHECK(strstr(j,
                     "[\n  {\"seq\": 7, \"op\": \"all_reduce\", \"dtype\": \"f32\", \"count\": 3, "
                     "\"phase\": \"forward\", \"state\": \"done\"") != NULL);
        CHECK(strstr(j, "{\"seq\": 69, \"op\": \"all_reduce\", \"dtype\": \"f32\", \"count\": 3, "
                        "\"phase\": \"backward\", \"state\": \"done\"") != NULL);
        CHECK(strstr(j, "{\"seq\": 70, \"op\": \"broadcast\", \"dtype\": \"f64\", \"count\": 1, "
                        "\"phase\": \"optimizer\", \"state\": \"failed\"") != NULL);
        CHECK(strstr(j, "\"end_s\": null}\n]}") != NULL);
        CHECK_EQ_INT(count(j, "\"state\": \"done\""), DDPC_FLIGHT_ENTRIES - 1);
    }
    ddpc_pg_destroy(pg);

    /* without a directory: the same failure writes nothing */
    pg = fake_pg(&f, 0);
    f.fail_at_seq = 0;
    CHECK_EQ_INT(ddpc_pg_broadcast(pg, &d, 1, DDPC_DTYPE_F64, 0), DDPC_ETIMEOUT);
    snprintf(path, sizeof path, "%s/rank0.json", sub);
    CHECK(access(path, F_OK) != 0);
    ddpc_pg_destroy(pg);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_phase_names(void)
{
    CHECK(strcmp(ddpc_phase_name(DDPC_PHASE_BACKWARD), "backward") == 0);
    CHECK(strcmp(ddpc_phase_name(DDPC_PHASE_CHECKPOINT), "checkpoint") == 0);
    CHECK(strcmp(ddpc_phase_name(DDPC_PHASE_COUNT), "unknown") == 0);
    ddpc_pg_set_phase(NULL, DDPC_PHASE_DATA); /* no group (one process, no dist): a no-op */
}

int main(void)
{
    RUN_TEST(test_ring_and_dump);
    RUN_TEST(test_phase_names);
    return check_summary();
}
