// SPDX-License-Identifier: MIT
/* `ddpc train CONFIG [key=value ...]`: builds the trainer, rejects unknown keys, runs. */
#include "cli/cli.h"

#include <ddpc/train.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int usage(FILE *f, int rc)
{
    fprintf(f, "usage: ddpc train CONFIG [key=value ...] [--flag VALUE ...]\n"
               "Trains, validates, tests or predicts as CONFIG (YAML) says; key=value overrides "
               "any key (docs/config.md).\n"
               "--local-rank N (--local_rank=N), as torch.distributed.launch passes it, is checked "
               "against LOCAL_RANK.\n");
    ddpc_cli_print_flags(f);
    return rc;
}

int ddpc_cli_train(int argc, char **argv)
{
    int rc = ddpc_cli_take_local_rank(&argc, argv); /* the legacy launcher's flag */
    if (rc != 0)
        return rc;
    if (argc < 1)
        return usage(stderr, 2);
    char name[256];
    ddpc_config *cfg = NULL;
    rc = ddpc_cli_load_config(argc, argv, &cfg, name, sizeof name);
    if (rc == DDPC_CLI_HELP)
        return usage(stdout, 0);
    if (rc != 0)
        return rc == 1 ? ddpc_cli_fail("train") : rc;
    ddpc_trainer *t = NULL;
    rc = 0;
    if (ddpc_trainer_create(&t, cfg, name) != DDPC_OK)
        rc = ddpc_cli_config_fail("train", cfg);
    else if ((rc = ddpc_cli_check_flags("train", cfg)) == 0 &&
             ddpc_config_check_unused(cfg) != DDPC_OK)
        rc = ddpc_cli_fail("train");
    if (rc == 0) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        ddpc_trainer_set_log(t, stdout);
        if (ddpc_trainer_run(t) != DDPC_OK)
            rc = ddpc_cli_fail("train");
    }
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(cfg);
    return rc;
}
