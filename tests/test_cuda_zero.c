// SPDX-License-Identifier: MIT
/* ZeRO stages 1 to 3 on a real GPU: zero_device_testutil.h's checks with the model on this rank's
 * GPU, the reducer's collectives on a group with cuda=true (two ranks sharing GPU 0: host staging
 * over shm, as NCCL refuses a shared GPU; nccl where each rank has a GPU) and the sharded gradient
 * norm's double on a host group beside it (reducer host_pg). Stage 1 must give stage 0's bits,
 * stages 2 and 3 within 1e-6; device memory outside a rank's chunks reads zero between steps;
 * warm steps make no device allocation; the same with bf16 communication (within 1e-2). Ranks are
 * forked children and the parent never touches CUDA. Skips (exit 77, saying why) without a GPU;
 * the same checks on a stand-in table run everywhere: tests/test_parallel_zero_device.c. */
#include "check.h"
#include "gpu_count_testutil.h"
#include "spawn.h"
#include "zero_device_testutil.h"

static const ddpc_kernel_table *gpu_table(int local_rank)
{
    const ddpc_kernel_table *t = NULL;
    if (ddpc_device_select(DDPC_DEVICE_CUDA, local_rank, &t) != DDPC_OK) {
        fprintf(stderr, "rank %d: %s\n", local_rank, ddpc_last_error());
        return NULL;
    }
    return t;
}

static void test_stages_on_the_gpu(void)
{
    zdev_setup s = {.table = gpu_table, .device_port = spawn_free_port()};
    CHECK_EQ_INT(spawn_ranks(2, 100.0, zdev_rank_stages, &s), 0);
    s.accum = 2;
    s.device_port = spawn_free_port();
    CHECK_EQ_INT(spawn_ranks(2, 100.0, zdev_rank_stages, &s), 0);
}

static void test_bf16_on_the_gpu(void)
{
    zdev_setup s = {.table = gpu_table, .device_port = spawn_free_port(), .bf16 = true};
    CHECK_EQ_INT(spawn_ranks(2, 100.0, zdev_rank_stages, &s), 0);
}

int main(void)
{
    int gpus = gpu_count_in_child();
    if (gpus <= 0)
        return 77;
    printf("%d GPU(s) visible\n", gpus);
    RUN_TEST(test_stages_on_the_gpu);
    RUN_TEST(test_bf16_on_the_gpu);
    return check_summary();
}
