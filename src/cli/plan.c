// SPDX-License-Identifier: MIT
/* `ddpc plan CONFIG [--nproc N] [--bytes] [key=value ...]`: the memory plan of a config at N
 * ranks (default: the launcher's world size, or 1), for every zero.stage; exits 1 with the
 * refusal message when the configured plan does not fit its limit. Options may come anywhere
 * after CONFIG; everything else is a key=value override. */
#include "cli/cli.h"

#include <ddpc/train.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage_to(FILE *f, int rc)
{
    fprintf(f, "usage: ddpc plan CONFIG [--nproc N] [--bytes] [key=value ...] [--flag VALUE ...]\n"
               "Prints the per-rank memory plan of CONFIG at every ZeRO stage (docs/memory.md).\n");
    return rc;
}

static int usage(void)
{
    return usage_to(stderr, 2);
}

/* Moves the options out of argv (keeping CONFIG and the overrides, in order). */
static int parse_options(int *argc, char **argv, long *nproc, bool *exact)
{
    int kept = 0;
    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], "--bytes") == 0) {
            *exact = true;
        } else if (strcmp(argv[i], "--nproc") == 0) {
            char *end = NULL;
            if (i + 1 >= *argc)
                return usage();
            *nproc = strtol(argv[++i], &end, 10);
            if (*end != '\0' || *nproc < 1 || *nproc > (1 << 20)) {
                fprintf(stderr,
                        "ddpc plan: --nproc takes a number of ranks from 1 to %d, got "
                        "'%s'\n",
                        1 << 20, argv[i]);
                return 2;
            }
        } else if (ddpc_cli_is_help(argv[i])) {
            return usage_to(stdout, -1); /* -1: printed, exit 0 */
        } else {
            argv[kept++] = argv[i];
        }
    }
    *argc = kept;
    return 0;
}

int ddpc_cli_plan(int argc, char **argv)
{
    long nproc = 0;
    bool exact = false;
    int rc = parse_options(&argc, argv, &nproc, &exact);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (argc < 1)
        return usage();
    char name[256];
    ddpc_config *cfg = NULL;
    rc = ddpc_cli_load_config(argc, argv, &cfg, name, sizeof name);
    if (rc == DDPC_CLI_HELP)
        return usage_to(stdout, 0);
    if (rc != 0)
        return rc == 1 ? ddpc_cli_fail("plan") : rc;
    ddpc_trainer *t = NULL;
    if (ddpc_trainer_create_plan(&t, cfg, name, (int)nproc) != DDPC_OK)
        rc = ddpc_cli_config_fail("plan", cfg);
    else if ((rc = ddpc_cli_check_flags("plan", cfg)) == 0 &&
             (ddpc_config_check_unused(cfg) != DDPC_OK ||
              ddpc_trainer_print_plan(t, stdout, exact) != DDPC_OK))
        rc = ddpc_cli_fail("plan");
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(cfg);
    return rc;
}
