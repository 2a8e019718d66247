// SPDX-License-Identifier: MIT
/* Tests for src/data/task_assign.c: the PI0-RIPT seed's rule (task t on rank t mod world), the
 * refusals with their numbers, and the sharing of tasks when replicate is on (docs/data.md). */
#include <ddpc/sampler.h>

#include <string.h>

#include "check.h"

/* Whether assign(T, W, m, rep) gives `want` (W rows of T characters '0'/'1'). */
static int gives(int T, int W, int m, bool rep, const char *want)
{
    unsigned char holds[64];
    if (ddpc_task_assign(T, W, m, rep, holds) != DDPC_OK) {
        fprintf(stderr, "refused: %s\n", ddpc_last_error());
        return 0;
    }
    char got[65];
    for (int i = 0; i < T * W; i++)
        got[i] = (char)('0' + holds[i]);
    got[T * W] = '\0';
    if (strcmp(got, want) != 0)
        fprintf(stderr, "T %d W %d m %d: got %s, want %s\n", T, W, m, got, want);
    return strcmp(got, want) == 0;
}

static void test_seed_rule(void)
{
    /* 5 tasks on 2 ranks: rank 0 tasks 0 2 4, rank 1 tasks 1 3 (the seed's i % world). */
    CHECK(gives(5, 2, 1, false,
                "10101"
                "01010"));
    CHECK(gives(4, 2, 2, false,
                "1010"
                "0101"));
    CHECK(gives(3, 1, 3, false, "111"));
    CHECK(gives(9, 4, 2, false,
                "100010001"
                "010001000"
                "001000100"
                "000100010"));
}

static void test_refusals(void)
{
    unsigned char holds[64];
    CHECK(ddpc_task_assign(1, 2, 1, false, holds) == DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "1 task cannot give each of 2 ranks 1 task of its own: "
                                          "that needs 2 tasks (2 ranks x min_tasks_per_rank 1)");
    CHECK(ddpc_task_assign(5, 3, 2, false, holds) == DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "5 tasks cannot give each of 3 ranks 2 tasks of its "
                                          "own: that needs 6 tasks");
    CHECK(ddpc_task_assign(2, 2, 3, true, holds) == DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "2 tasks cannot give any rank min_tasks_per_rank 3");
    CHECK(ddpc_task_assign(0, 2, 1, true, holds) == DDPC_EINVAL);
}

static void test_replicate(void)
{
    /* 1 task, 2 ranks: both train it. */
    CHECK(gives(1, 2, 1, true,
                "1"
                "1"));
    /* 3 tasks, 2 ranks, 2 each: rank 0 has 0 2; rank 1 has 1 and adds 0 (one holder, like 2,
     * first in the list). */
    CHECK(gives(3, 2, 2, true,
                "101"
                "110"));
    /* 3 tasks, 4 ranks: rank 3 has none; every task has one holder, so it adds the first. */
    CHECK(gives(3, 4, 1, true,
                "100"
                "010"
                "001"
                "100"));
    /* 2 tasks, 3 ranks, 2 each: everyone holds both. */
    CHECK(gives(2, 3, 2, true,
                "11"
                "11"
                "11"));
    /* Enough tasks: replicate changes nothing. */
    CHECK(gives(5, 2, 2, true,
                "10101"
                "01010"));
}

int main(void)
{
    RUN_TEST(test_seed_rule);
    RUN_TEST(test_refusals);
    RUN_TEST(test_replicate);
    return check_summary();
}
