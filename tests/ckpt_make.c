// SPDX-License-Identifier: MIT
/* Test helper for tests/cli_ckpt.sh: `ckpt_make DIR` trains a small mlp with AdamW and saves
 * three checkpoints (steps 10, 20, 30; epochs 0, 1, 2) into DIR with keep = 0. */
#include <ddpc/checkpoint.h>

#include <stdio.h>

#include "ckpt_testutil.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ckpt_make DIR\n");
        return 2;
    }
    ddpc_model *m = ckpt_small_model(1);
    ddpc_optim *o = ckpt_make_optim(DDPC_OPTIM_ADAMW, m ? ddpc_model_num_params(m) : 0);
    if (!m || !o)
        return 1;
    for (int64_t step = 10; step <= 30; step += 10) {
        ckpt_train(m, o, 10, (uint32_t)step);
        ddpc_ckpt_state s = {.step = step, .epoch = step / 10 - 1, .epoch_step = 0,
                             .samples_seen = step * 8, .global_batch = 8, .world = 2, .seed = 7,
                             .config = "model:\n  type: mlp\n  hidden: [8]\noptim:\n  type: adamw\n"};
        if (ddpc_ckpt_save(argv[1], m, o, &s, 0, NULL, 0) != DDPC_OK) {
            fprintf(stderr, "ckpt_make: %s\n", ddpc_last_error());
            return 1;
        }
    }
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
    return 0;
}
