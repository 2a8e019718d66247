// SPDX-License-Identifier: MIT
/* `ddpc run [options] -- PROGRAM [ARGS...]`: parses the options, refuses a nested launch, and hands
 * the job to the launch layer (include/ddpc/launch.h), whose exit code becomes ours. Usage errors
 * and a nested launch exit 2 with one line on stderr. */
#include "cli/cli.h"

#include <ddpc/launch.h>

#include <stdio.h>

extern char **environ;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: ddpc run [options] [--] PROGRAM [ARGS...]\n"
           "Starts PROGRAM as a group of workers with torchrun's environment (RANK, WORLD_SIZE,\n"
           "MASTER_ADDR, MASTER_PORT, ...); see docs/launcher.md.\n"
           "  --nproc-per-node N|auto|gpu  workers on this host (auto: online CPUs; gpu: visible\n"
           "                            GPUs; default 1)\n"
           "  --backend shm|mpi|gloo|nccl  exported as DDPC_BACKEND (mpi goes through mpirun)\n"
           "  --max-restarts K          restart the whole group up to K times (default 0)\n"
           "  --monitor-interval S      seconds between checks of the workers (default 0.1)\n"
           "  --log-dir DIR             DIR/attempt_K/rank_R.log per worker, not the console\n"
           "  --tee                     also copy worker lines to the console as '[rank r/w] ...'\n"
           "  --master-addr A           rendezvous address (default 127.0.0.1)\n"
           "  --master-port P           rendezvous port (default: a free port)\n"
           "  --run-id ID               job id given to workers (default: unique)\n"
           "  --collective-timeout S    exported as DDPC_COLLECTIVE_TIMEOUT\n"
           "  --nnodes N, --node-rank R hosts in the job, this host's index; with --master-addr\n"
           "                            and --master-port, run 'ddpc run' on each host\n"
           "  --rdzv-timeout S          several hosts: wait S s for all to join (default 60)\n"
           "  --agent-timeout S         several hosts: a launcher silent S s is lost (default 30)\n"
           "  --hostfile FILE           run on the hosts of FILE through mpirun\n"
           "torchrun's spellings (docs/launcher.md):\n"
           "  --standalone              this host alone on a free port (the default anyway)\n"
           "  --rdzv-endpoint H[:P]     = --master-addr H --master-port P (P default 29400)\n"
           "  --rdzv-backend c10d|static  accepted (ddpc's own store serves); etcd refused\n"
           "  --rdzv-id ID              = --run-id ID\n"
           "  --nnodes N:N              = --nnodes N (no elastic MIN:MAX ranges)\n");
}

int ddpc_cli_run(int argc, char **argv)
{
    ddpc_launch_config cfg = ddpc_launch_config_default();
    if (ddpc_launch_parse_args(argc, argv, &cfg) != DDPC_OK) {
        fprintf(stderr, "ddpc run: %s\n", ddpc_last_error());
        return 2;
    }
    if (cfg.help) {
        usage(stdout);
        return 0;
    }
    const char *const *envp = (const char *const *)environ;
    if (ddpc_launch_check_nested(envp) != DDPC_OK) {
        fprintf(stderr, "ddpc run: %s\n", ddpc_last_error());
        return 2;
    }
    int code = 1;
    ddpc_status s = ddpc_launch_run(&cfg, envp, &code);
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc run: %s\n", ddpc_last_error());
        return s == DDPC_EINVAL ? 2 : 1;
    }
    return code;
}
