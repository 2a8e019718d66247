// SPDX-License-Identifier: MIT
/* Two process groups in one process over the job's store, as a GPU run makes them (the host
 * group, then the device group under run id "<id>.cuda"): rank 0 serves the store once and both
 * groups rendezvous on it, whichever is destroyed first. Launched by hand (rank 0 serves at
 * MASTER_PORT) and under torchrun's agent (ddpc's store on the next port). Before the store was
 * shared, the second group's rank 0 failed to bind the port its first group held. */
#include "comm_shm_testutil.h"

#include <ddpc/comm.h>

typedef struct {
    bool second_first; /* destroy the second group first */
} order;

static void all_reduce_on(ddpc_pg *pg, int rank, float salt)
{
    float v[8];
    for (int i = 0; i < 8; i++)
        v[i] = (float)(rank + 1) * salt + (float)i;
    CHECK_EQ_INT(ddpc_pg_all_reduce(pg, v, v, 8, DDPC_DTYPE_F32, DDPC_REDUCE_SUM), DDPC_OK);
    for (int i = 0; i < 8; i++)
        CHECK(v[i] == 3.0f * salt + 2.0f * (float)i); /* ranks 0 and 1: (1 + 2) salt + 2 i */
}

static void rank_two_groups(const ddpc_comm_env *e, void *arg)
{
    const order *o = arg;
    ddpc_comm_env second = *e;
    snprintf(second.run_id, sizeof second.run_id, "%.100s.cuda", e->run_id);
    ddpc_pg *host = join(e);
    ddpc_pg *device = host ? join(&second) : NULL;
    if (!host || !device) {
        ddpc_pg_destroy(host);
        return;
    }
    all_reduce_on(host, e->rank, 1.0f);
    all_reduce_on(device, e->rank, 10.0f);
    all_reduce_on(host, e->rank, 100.0f);
    CHECK_EQ_INT(ddpc_pg_barrier(host), DDPC_OK);
    if (o->second_first) {
        ddpc_pg_destroy(device);
        all_reduce_on(host, e->rank, 1000.0f); /* the shared server still serves the first */
        ddpc_pg_destroy(host);
    } else {
        ddpc_pg_destroy(host);
        all_reduce_on(device, e->rank, 1000.0f);
        ddpc_pg_destroy(device);
    }
}

static void two_groups(bool agent, bool second_first)
{
    ddpc_comm_env e = base_env(2);
    e.backend = DDPC_BACKEND_GLOO;
    snprintf(e.master_addr, sizeof e.master_addr, "127.0.0.1");
    e.master_port = agent ? free_port_pair() : free_port();
    e.agent_store = agent; /* torchrun: its agent holds MASTER_PORT, ddpc's store the next */
    set_run_id(&e, agent ? "shared-agent" : "shared");
    order o = {second_first};
    int codes[2];
    run_ranks(2, &e, rank_two_groups, &o, 60, codes);
    expect_all_ok(2, codes);
}

static void test_by_hand_second_destroyed_first(void)
{
    two_groups(false, true);
}

static void test_by_hand_first_destroyed_first(void)
{
    two_groups(false, false);
}

static void test_under_torchrun_agent(void)
{
    two_groups(true, true);
}

int main(void)
{
    if (!ddpc_backend_available(DDPC_BACKEND_GLOO)) {
        printf("SKIP: this build has no gloo backend\n");
        return 77;
    }
    RUN_TEST(test_by_hand_second_destroyed_first);
    RUN_TEST(test_by_hand_first_destroyed_first);
    RUN_TEST(test_under_torchrun_agent);
    return check_summary();
}
