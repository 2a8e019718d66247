// SPDX-License-Identifier: MIT
/* src/kernels/cuda/candidates.cu's reading of DDPC_CUDA_CANDIDATES: a candidate runs only when
 * the list names it as a whole item or says "all"; an empty or absent list names none. */
#include "cuda_emu.h"

#include "../src/kernels/cuda/candidates.cu"

#include "check.h"

static void test_named(void)
{
    CHECK(!candidate_named(nullptr, "flash2"));
    CHECK(!candidate_named("", "flash2"));
    CHECK(candidate_named("all", "flash2"));
    CHECK(!candidate_named("all,", "flash2")); /* "all" only alone */
    CHECK(candidate_named("flash2", "flash2"));
    CHECK(candidate_named("other,flash2", "flash2"));
    CHECK(candidate_named("flash2,other", "other"));
    CHECK(candidate_named("a,flash2,b", "flash2"));
    CHECK(!candidate_named("flash", "flash2"));
    CHECK(!candidate_named("flash2", "flash"));
    CHECK(!candidate_named("flash20,xflash2", "flash2"));
    CHECK(candidate_named("flash20,flash2", "flash2"));
    CHECK(!candidate_named("flash2", ""));
}

int main(void)
{
    RUN_TEST(test_named);
    return check_summary();
}
