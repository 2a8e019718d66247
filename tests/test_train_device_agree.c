// SPDX-License-Identifier: MIT
/* Every rank's device must be of one kind (train/trainer_device.c's ddpc__device_agree over the
 * kinds the ranks exchanged): all CPUs or all GPUs pass; a mix is refused with one line naming
 * the first rank of each kind, whichever comes first, the same line for every rank. */
#include "check.h"

#include "train/trainer_device.h"

#include <ddpc/device.h>

static void test_one_kind_passes(void)
{
    const int32_t cpus[4] = {DDPC_DEVICE_CPU, DDPC_DEVICE_CPU, DDPC_DEVICE_CPU, DDPC_DEVICE_CPU};
    const int32_t gpus[3] = {DDPC_DEVICE_CUDA, DDPC_DEVICE_CUDA, DDPC_DEVICE_CUDA};
    CHECK_EQ_INT(ddpc__device_agree(cpus, 4), DDPC_OK);
    CHECK_EQ_INT(ddpc__device_agree(gpus, 3), DDPC_OK);
    CHECK_EQ_INT(ddpc__device_agree(gpus, 1), DDPC_OK);
}

static void test_mix_is_refused_naming_both(void)
{
    const int32_t a[4] = {DDPC_DEVICE_CUDA, DDPC_DEVICE_CUDA, DDPC_DEVICE_CPU, DDPC_DEVICE_CPU};
    CHECK_EQ_INT(ddpc__device_agree(a, 4), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "device: rank 0 trains on cuda but rank 2 on cpu");
    CHECK_STR_CONTAINS(ddpc_last_error(), "every rank must use the same kind of device");
    CHECK(strchr(ddpc_last_error(), '\n') == NULL);
    /* The CPU rank first: still the first rank of each kind. */
    const int32_t b[3] = {DDPC_DEVICE_CPU, DDPC_DEVICE_CPU, DDPC_DEVICE_CUDA};
    CHECK_EQ_INT(ddpc__device_agree(b, 3), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "device: rank 2 trains on cuda but rank 0 on cpu");
}

int main(void)
{
    RUN_TEST(test_one_kind_passes);
    RUN_TEST(test_mix_is_refused_naming_both);
    return check_summary();
}
