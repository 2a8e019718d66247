// SPDX-License-Identifier: MIT
/* The several-machine path: `ddpc run --hostfile FILE` (or --nnodes N inside a SLURM allocation, or
 * --backend mpi) becomes one Open MPI mpirun command that starts every rank with the mpi backend.
 * MPI worlds only form under mpirun, so this path replaces the launcher process with mpirun, which
 * then owns failure handling (it aborts the whole job when one rank fails). */
#include "launch/launch_impl.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { HOSTFILE_LINE_MAX = 4096, SLOTS_MAX = 65536 };

/* Reads one line (without its newline) into buf; *len is its full length, which may exceed
 * cap - 1 (the rest is dropped). False at end of file. */
static bool read_line(FILE *f, char *buf, size_t cap, size_t *len)
{
    int c;
    size_t n = 0;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (n + 1 < cap)
            buf[n] = (char)c;
        n++;
    }
    buf[n + 1 < cap ? n : cap - 1] = '\0';
    *len = n;
    return c != EOF || n > 0;
}

/* One "key=N" after the host: Open MPI's slots and max_slots, N in [1, SLOTS_MAX]. */
static ddpc_status check_option(const char *path, int line, const char *opt)
{
    const char *eq = strchr(opt, '=');
    size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
    bool known =
        (klen == 5 && strncmp(opt, "slots", 5) == 0) ||
        (klen == 9 && (strncmp(opt, "max_slots", 9) == 0 || strncmp(opt, "max-slots", 9) == 0));
    char show[64];
    if (!eq || !known)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s:%d: '%s' is not slots=N or max_slots=N (the hostfile's lines are "
                           "'HOST [slots=N] [max_slots=N]')",
                           path, line, ddpc__host_shown(opt, show, sizeof show));
    char *end = NULL;
    errno = 0;
    long v = strtol(eq + 1, &end, 10);
    if (eq[1] == '\0' || *end != '\0' || errno != 0 || v < 1 || v > SLOTS_MAX)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%d: %.*s '%s' is not an integer in [1, %d]", path,
                           line, (int)klen, opt, ddpc__host_shown(eq + 1, show, sizeof show),
                           SLOTS_MAX);
    return DDPC_OK;
}

/* Checks one line (host, options); the host goes to *host ("" for a blank or comment line). */
static ddpc_status parse_line(const char *path, int line, char *buf, size_t len, char **host)
{
    char *hash = strchr(buf, '#');
    if (hash)
        *hash = '\0';
    char *p = buf + strspn(buf, " \t\r");
    size_t hlen = strcspn(p, " \t\r");
    *host = p;
    if (len >= HOSTFILE_LINE_MAX && !hash && p + hlen == buf + HOSTFILE_LINE_MAX - 1) {
        /* the host runs into the dropped part: longer than any host name can be */
        char show[64];
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s:%d: host name '%s' is longer than %d characters; DNS names have at "
                           "most 253",
                           path, line, ddpc__host_shown(p, show, sizeof show),
                           HOSTFILE_LINE_MAX - 1);
    }
    if (len >= HOSTFILE_LINE_MAX && !hash)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%d: the line is %zu characters long (at most %d)",
                           path, line, len, HOSTFILE_LINE_MAX - 1);
    if (hlen == 0)
        return DDPC_OK;
    char *rest = p + hlen;
    if (*rest)
        *rest++ = '\0';
    char why[512];
    if (!ddpc__host_check(p, why, sizeof why))
        return ddpc_errorf(DDPC_EFORMAT, "%s:%d: %s", path, line, why);
    char *save = NULL;
    for (char *opt = strtok_r(rest, " \t\r", &save); opt; opt = strtok_r(NULL, " \t\r", &save))
        DDPC_TRY(check_option(path, line, opt));
    return DDPC_OK;
}

/* Checks every line and adds each line's host to *hosts unless already there. */
static ddpc_status collect_hosts(FILE *f, const char *path, char ***hosts, int *n)
{
    char buf[HOSTFILE_LINE_MAX];
    size_t len;
    for (int line = 1; read_line(f, buf, sizeof buf, &len); line++) {
        char *p;
        DDPC_TRY(parse_line(path, line, buf, len, &p));
        if (p[0] == '\0')
            continue;
        bool seen = false;
        for (int i = 0; i < *n && !seen; i++)
            seen = strcmp((*hosts)[i], p) == 0;
        if (!seen)
            DDPC_TRY(ddpc__strv_push(hosts, n, p));
    }
    if (ferror(f))
        return ddpc_errorf(DDPC_EIO, "cannot read hostfile '%s': %s", path, strerror(errno));
    return DDPC_OK;
}

ddpc_status ddpc__hostfile_hosts(const char *path, int *hosts)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ddpc_errorf(DDPC_EIO, "cannot read hostfile '%s': %s", path, strerror(errno));
    char **names = NULL;
    int n = 0;
    ddpc_status s = collect_hosts(f, path, &names, &n);
    fclose(f);
    ddpc__strv_free(names);
    if (s == DDPC_OK && n == 0)
        s = ddpc_errorf(DDPC_EFORMAT, "hostfile '%s' names no host", path);
    if (s == DDPC_OK)
        *hosts = n;
    return s;
}

ddpc_status ddpc__mpirun_argv(const ddpc_launch_config *cfg, const char *mpirun, int nnodes,
                              bool as_root, int omp_threads, char ***out)
{
    char **v = NULL;
    int n = 0;
    ddpc_status s = ddpc__strv_push(&v, &n, mpirun);
#define PUSH(expr)                                                                                 \
    do {                                                                                           \
        if (s == DDPC_OK)                                                                          \
            s = (expr);                                                                            \
    } while (0)
    PUSH(ddpc__strv_push(&v, &n, "-np"));
    PUSH(ddpc__strv_pushf(&v, &n, "%d", cfg->nproc_per_node * nnodes));
    if (cfg->hostfile[0]) {
        PUSH(ddpc__strv_push(&v, &n, "--hostfile"));
        PUSH(ddpc__strv_push(&v, &n, cfg->hostfile));
    }
    PUSH(ddpc__strv_push(&v, &n, "--map-by"));
    PUSH(ddpc__strv_pushf(&v, &n, "ppr:%d:node", cfg->nproc_per_node));
    if (as_root)
        PUSH(ddpc__strv_push(&v, &n, "--allow-run-as-root"));
    PUSH(ddpc__strv_push(&v, &n, "--oversubscribe"));
    if (cfg->log_dir[0]) {
        PUSH(ddpc__strv_push(&v, &n, "--output-filename"));
        PUSH(ddpc__strv_push(&v, &n, cfg->log_dir));
    }
    if (cfg->tee)
        PUSH(ddpc__strv_push(&v, &n, "--tag-output"));
    PUSH(ddpc__strv_push(&v, &n, "-x"));
    PUSH(ddpc__strv_push(&v, &n, "DDPC_BACKEND=mpi"));
    if (cfg->collective_timeout_s > 0) {
        PUSH(ddpc__strv_push(&v, &n, "-x"));
        PUSH(ddpc__strv_pushf(&v, &n, "DDPC_COLLECTIVE_TIMEOUT=%g", cfg->collective_timeout_s));
    }
    if (omp_threads > 0) {
        PUSH(ddpc__strv_push(&v, &n, "-x"));
        PUSH(ddpc__strv_pushf(&v, &n, "OMP_NUM_THREADS=%d", omp_threads));
    }
    for (int i = 0; i < cfg->argc; i++)
        PUSH(ddpc__strv_push(&v, &n, cfg->argv[i]));
#undef PUSH
    if (s != DDPC_OK) {
        ddpc__strv_free(v);
        return s;
    }
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc__mpirun_nodes(const ddpc_launch_config *cfg, const char *const *envp, int *nnodes)
{
    if (cfg->node_rank != 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "--node-rank %d: with mpirun, run 'ddpc run' once, on one "
                           "host; mpirun starts the ranks on every host",
                           cfg->node_rank);
    if (cfg->max_restarts > 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "--max-restarts %d is not available when mpirun runs the "
                           "job: mpirun aborts the whole job at the first failure",
                           cfg->max_restarts);
    *nnodes = cfg->nnodes;
    if (cfg->hostfile[0]) {
        int hosts = 0;
        DDPC_TRY(ddpc__hostfile_hosts(cfg->hostfile, &hosts));
        if (cfg->nnodes > hosts)
            return ddpc_errorf(DDPC_EINVAL, "--nnodes %d but hostfile '%s' names %d host(s)",
                               cfg->nnodes, cfg->hostfile, hosts);
        if (cfg->nnodes == 1)
            *nnodes = hosts;
        return DDPC_OK;
    }
    /* Inside a SLURM allocation Open MPI's mpirun takes the hosts from SLURM itself; we only
     * check that the allocation has enough of them. */
    const char *nodelist = ddpc_comm_env_lookup(envp, "SLURM_JOB_NODELIST");
    if (cfg->nnodes > 1 && !nodelist)
        return ddpc_errorf(DDPC_EINVAL,
                           "--nnodes %d needs the hosts: run 'ddpc run --nnodes %d --node-rank R "
                           "--master-addr A --master-port P' on each host, give --hostfile FILE, "
                           "or run inside a SLURM allocation (salloc/sbatch; or 'srun PROGRAM' "
                           "with the mpi backend)",
                           cfg->nnodes, cfg->nnodes);
    if (cfg->nnodes > 1) {
        int hosts = 0;
        DDPC_TRY(ddpc_comm_env_slurm_hosts(envp, &hosts));
        if (cfg->nnodes > hosts)
            return ddpc_errorf(DDPC_EINVAL,
                               "--nnodes %d but the SLURM allocation "
                               "(SLURM_JOB_NODELIST=%s) has %d host(s)",
                               cfg->nnodes, nodelist, hosts);
    }
    return DDPC_OK;
}

static void print_command(FILE *f, char *const *argv)
{
    fputs("ddpc run: exec", f);
    for (int i = 0; argv[i]; i++) {
        bool plain =
            argv[i][0] != '\0' && strspn(argv[i], "abcdefghijklmnopqrstuvwxyz"
                                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                  "0123456789-_./=:,+@%") == strlen(argv[i]);
        fprintf(f, plain ? " %s" : " '%s'", argv[i]);
    }
    fputc('\n', f);
    fflush(f);
}

ddpc_status ddpc__mpirun_exec(const ddpc_launch_config *cfg, const char *const *envp)
{
    int nnodes = 1;
    DDPC_TRY(ddpc__mpirun_nodes(cfg, envp, &nnodes));
    char mpirun[4096];
    if (ddpc__find_program("mpirun", envp, mpirun, sizeof mpirun) != DDPC_OK)
        return ddpc_errorf(DDPC_EINVAL,
                           "mpirun was not found in PATH: --hostfile, --nnodes > 1 "
                           "and --backend mpi hand the job to Open MPI's mpirun (install "
                           "openmpi-bin or load your MPI module)");
    char program[4096];
    DDPC_TRY(ddpc__find_program(cfg->argv[0], envp, program, sizeof program));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int omp = ddpc__omp_threads(envp, cfg->nproc_per_node, cpus > 0 ? (int)cpus : 1);
    char **argv = NULL;
    DDPC_TRY(ddpc__mpirun_argv(cfg, mpirun, nnodes, geteuid() == 0, omp, &argv));
    print_command(cfg->err, argv);
    execve(mpirun, argv, (char *const *)envp);
    int e = errno;
    ddpc__strv_free(argv);
    return ddpc_errorf(DDPC_EIO, "cannot execute '%s': %s", mpirun, strerror(e));
}
