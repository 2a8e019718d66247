// SPDX-License-Identifier: MIT
/* `ddpc run` options into a ddpc_launch_config. Every option takes `--name VALUE` or `--name=VALUE`
 * and accepts '_' for '-' (torchrun spells them both ways); PROGRAM starts after `--` or at the
 * first argument that is not an option. Invariant: on success every field is in range. */
#include "launch/launch_impl.h"

#include <ddpc/device.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ddpc_launch_config ddpc_launch_config_default(void)
{
    ddpc_launch_config c;
    memset(&c, 0, sizeof c);
    c.nproc_per_node = 1;
    c.nnodes = 1;
    c.backend = DDPC_BACKEND_AUTO;
    c.monitor_interval_s = 0.1;
    c.stop_grace_s = 3.0;
    c.rdzv_timeout_s = 60.0;
    c.agent_timeout_s = 30.0;
    snprintf(c.master_addr, sizeof c.master_addr, "127.0.0.1");
    c.out = stdout;
    c.err = stderr;
    return c;
}

bool ddpc_launch_per_node(const ddpc_launch_config *cfg)
{
    return cfg->nnodes > 1 && cfg->master_addr_set && cfg->hostfile[0] == '\0' &&
           cfg->backend != DDPC_BACKEND_MPI;
}

bool ddpc_launch_uses_mpirun(const ddpc_launch_config *cfg)
{
    return cfg->hostfile[0] != '\0' || cfg->backend == DDPC_BACKEND_MPI ||
           (cfg->nnodes > 1 && !ddpc_launch_per_node(cfg));
}

static ddpc_status parse_int(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi)
        return ddpc_errorf(DDPC_EINVAL, "%s: '%s' is not an integer in [%d, %d]", opt, v, lo, hi);
    *out = (int)x;
    return DDPC_OK;
}

static ddpc_status parse_seconds(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno != 0 || !(x >= lo && x <= hi))
        return ddpc_errorf(DDPC_EINVAL, "%s: '%s' is not a number of seconds in [%g, %g]", opt, v,
                           lo, hi);
    *out = x;
    return DDPC_OK;
}

static ddpc_status copy_str(const char *opt, const char *v, char *dst, size_t cap)
{
    if (*v == '\0' || strlen(v) >= cap)
        return ddpc_errorf(DDPC_EINVAL, "%s: '%s' is empty or longer than %zu characters", opt, v,
                           cap - 1);
    memcpy(dst, v, strlen(v) + 1);
    return DDPC_OK;
}

static ddpc_status parse_nproc(const char *v, int *out)
{
    if (strcmp(v, "auto") == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *out = n > 0 ? (int)n : 1;
        return DDPC_OK;
    }
    if (strcmp(v, "gpu") == 0) { /* torchrun's meaning: one worker per visible GPU */
        char why[200] = "";
        int n = ddpc_cuda_devices(why, sizeof why);
        if (n <= 0)
            return ddpc_errorf(DDPC_EINVAL, "--nproc-per-node gpu: %s", why);
        *out = n;
        return DDPC_OK;
    }
    if (parse_int("--nproc-per-node", v, 1, 4096, out) != DDPC_OK)
        return ddpc_errorf(DDPC_EINVAL,
                           "--nproc-per-node: '%s' is not 'auto', 'gpu' or an integer in "
                           "[1, 4096]",
                           v);
    return DDPC_OK;
}

static ddpc_status parse_backend(const char *v, ddpc_backend *out)
{
    if (strcmp(v, "shm") == 0)
        *out = DDPC_BACKEND_SHM;
    else if (strcmp(v, "mpi") == 0)
        *out = DDPC_BACKEND_MPI;
    else if (strcmp(v, "gloo") == 0)
        *out = DDPC_BACKEND_GLOO;
    else if (strcmp(v, "nccl") == 0)
        *out = DDPC_BACKEND_NCCL;
    else
        return ddpc_errorf(DDPC_EINVAL, "--backend: '%s' is not 'shm', 'mpi', 'gloo' or 'nccl'",
                           v);
    return DDPC_OK;
}

/* Applies one option that takes a value; `name` is normalised ("--nproc-per-node"). */
static ddpc_status apply(ddpc_launch_config *c, const char *name, const char *v)
{
    bool torchrun;
    DDPC_TRY(ddpc__torchrun_option(c, name, v, &torchrun));
    if (torchrun)
        return DDPC_OK;
    if (strcmp(name, "--nproc-per-node") == 0)
        return parse_nproc(v, &c->nproc_per_node);
    if (strcmp(name, "--nnodes") == 0)
        return parse_int(name, v, 1, 65536, &c->nnodes);
    if (strcmp(name, "--node-rank") == 0)
        return parse_int(name, v, 0, 65535, &c->node_rank);
    if (strcmp(name, "--backend") == 0)
        return parse_backend(v, &c->backend);
    if (strcmp(name, "--max-restarts") == 0)
        return parse_int(name, v, 0, 1000000, &c->max_restarts);
    if (strcmp(name, "--monitor-interval") == 0)
        return parse_seconds(name, v, 0.001, 60.0, &c->monitor_interval_s);
    if (strcmp(name, "--collective-timeout") == 0)
        return parse_seconds(name, v, 0.001, 1e7, &c->collective_timeout_s);
    if (strcmp(name, "--log-dir") == 0)
        return copy_str(name, v, c->log_dir, sizeof c->log_dir);
    if (strcmp(name, "--master-addr") == 0) {
        char why[512];
        if (!ddpc__host_check(v, why, sizeof why)) /* it reaches workers, ssh and mpirun */
            return ddpc_errorf(DDPC_EINVAL, "--master-addr: %s", why);
        c->master_addr_set = true;
        return copy_str(name, v, c->master_addr, sizeof c->master_addr);
    }
    if (strcmp(name, "--rdzv-timeout") == 0)
        return parse_seconds(name, v, 0.1, 86400.0, &c->rdzv_timeout_s);
    if (strcmp(name, "--agent-timeout") == 0)
        return parse_seconds(name, v, 1.0, 86400.0, &c->agent_timeout_s);
    if (strcmp(name, "--master-port") == 0)
        return parse_int(name, v, 1, 65535, &c->master_port);
    if (strcmp(name, "--hostfile") == 0)
        return copy_str(name, v, c->hostfile, sizeof c->hostfile);
    if (strcmp(name, "--run-id") == 0) {
        if (!ddpc__run_id_valid(v))
            return ddpc_errorf(DDPC_EINVAL,
                               "--run-id: '%s' is not 1 to 100 characters of "
                               "letters, digits, '.', '_' and '-'",
                               v);
        return copy_str(name, v, c->run_id, sizeof c->run_id);
    }
    return ddpc_errorf(DDPC_EINVAL, "unknown option '%s' (try 'ddpc run --help')", name);
}

static bool takes_value(const char *name)
{
    static const char *const names[] = {
        "--nproc-per-node", "--nnodes",           "--node-rank",          "--backend",
        "--max-restarts",   "--monitor-interval", "--collective-timeout", "--log-dir",
        "--master-addr",    "--master-port",      "--hostfile",           "--run-id",
        "--rdzv-timeout",   "--agent-timeout",    "--rdzv-endpoint",      "--rdzv-backend",
        "--rdzv-id",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static bool is_flag(const char *name)
{
    return strcmp(name, "--tee") == 0 || strcmp(name, "--help") == 0 ||
           strcmp(name, "--standalone") == 0;
}

/* Splits "--some_opt=value" into a normalised name ("--some-opt") and the value (or NULL). */
static ddpc_status split_option(const char *arg, char *name, size_t cap, const char **value)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    if (n >= cap)
        return ddpc_errorf(DDPC_EINVAL, "unknown option '%.60s...' (try 'ddpc run --help')", arg);
    for (size_t i = 0; i < n; i++)
        name[i] = (i >= 2 && arg[i] == '_') ? '-' : arg[i];
    name[n] = '\0';
    *value = eq ? eq + 1 : NULL;
    return DDPC_OK;
}

static ddpc_status check_combination(const ddpc_launch_config *c)
{
    if (c->node_rank >= c->nnodes)
        return ddpc_errorf(DDPC_EINVAL, "--node-rank %d must be below --nnodes %d", c->node_rank,
                           c->nnodes);
    if (c->help)
        return DDPC_OK;
    DDPC_TRY(ddpc__torchrun_check(c));
    /* Every host must find node 0's store at the same place, so nothing here may be picked. */
    if (ddpc_launch_per_node(c) && c->master_port == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "--nnodes %d with --master-addr starts one launcher per host: give "
                           "--master-port P too, the same on every host",
                           c->nnodes);
    if (ddpc_launch_per_node(c) && c->agent_timeout_s <= c->monitor_interval_s)
        return ddpc_errorf(DDPC_EINVAL,
                           "--agent-timeout %g s must be longer than --monitor-interval %g s",
                           c->agent_timeout_s, c->monitor_interval_s);
    if (c->argc == 0)
        return ddpc_errorf(DDPC_EINVAL, "no PROGRAM given (usage: ddpc run [options] -- PROGRAM "
                                        "[ARGS...])");
    return DDPC_OK;
}

ddpc_status ddpc_launch_parse_args(int argc, char *const *argv, ddpc_launch_config *cfg)
{
    int i = 0;
    while (i < argc) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(arg, "-h") == 0) {
            cfg->help = true;
            i++;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (arg[0] == '-')
                return ddpc_errorf(DDPC_EINVAL, "unknown option '%s' (try 'ddpc run --help')", arg);
            break;
        }
        char name[64];
        const char *value = NULL;
        DDPC_TRY(split_option(arg, name, sizeof name, &value));
        i++;
        if (is_flag(name)) {
            if (value)
                return ddpc_errorf(DDPC_EINVAL, "%s takes no value (got '%s')", name, value);
            if (strcmp(name, "--tee") == 0)
                cfg->tee = true;
            else if (strcmp(name, "--standalone") == 0)
                cfg->standalone = true;
            else
                cfg->help = true;
            continue;
        }
        if (!takes_value(name))
            return ddpc_errorf(DDPC_EINVAL, "unknown option '%s' (try 'ddpc run --help')", name);
        if (!value) {
            if (i >= argc)
                return ddpc_errorf(DDPC_EINVAL, "%s needs a value", name);
            value = argv[i++];
        }
        DDPC_TRY(apply(cfg, name, value));
    }
    cfg->argc = argc - i;
    cfg->argv = argv + i;
    return check_combination(cfg);
}
