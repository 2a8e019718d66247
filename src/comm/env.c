// SPDX-License-Identifier: MIT
/* Rank discovery: which launcher started this process and where it sits in the job, from the
 * launchers' environment variables (docs/distributed.md, "Rank discovery"). The first family
 * present wins, innermost launcher first: torchrun/ddpc run > Open MPI > MPICH/PMI > SLURM step.
 * Only the winning family's rank variables are read; every value read is validated strictly, and
 * *out is written only when the whole environment made sense. */
#include <ddpc/comm.h>
#include <ddpc/store.h>

#include "comm/env_impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One integer variable: `name` is the variable it came from (or the primary name when unset). */
typedef struct {
    const char *name, *text;
    int v;
    bool set;
} field;

/* What a family says; resolve() turns it into a ddpc_comm_env. */
typedef struct {
    field rank, world, local_rank, local_world, node_rank, num_nodes;
} ranks;

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* SLURM numbers its batch, extern and interactive steps above this (SLURM_MAX_NORMAL_STEP_ID);
 * a process in one of them was not started by srun as one task of a parallel step. */
#define SLURM_MAX_NORMAL_STEP_ID 0xfffffff0ull

static ddpc_status parse_int(const char *name, const char *s, int min, int *out)
{
    const char *p = s;
    bool neg = *p == '-';
    if (neg)
        p++;
    long long v = 0;
    const char *digits = p;
    for (; *p >= '0' && *p <= '9'; p++)
        v = v > INT_MAX ? v : v * 10 + (*p - '0');
    if (p == digits || *p != '\0')
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is not a number", name, s);
    if (neg)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is negative", name, s);
    if (v > INT_MAX)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is too large (at most %d)", name, s, INT_MAX);
    if (v < min)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s must be at least %d", name, s, min);
    *out = (int)v;
    return DDPC_OK;
}

/* Reads the first of `names` that is set into f; f->set stays false when none is. */
static ddpc_status read_int(const char *const *envp, const char *const *names, int min, field *f)
{
    *f = (field){.name = names[0]};
    for (; *names; names++) {
        const char *s = ddpc_comm_env_lookup(envp, *names);
        if (s) {
            f->name = *names;
            f->text = s;
            f->set = true;
            return parse_int(*names, s, min, &f->v);
        }
    }
    return DDPC_OK;
}

static const char *first_set(const char *const *envp, const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *s = ddpc_comm_env_lookup(envp, *names);
        if (s) {
            if (which)
                *which = *names;
            return s;
        }
    }
    return NULL;
}

static ddpc_status copy_str(const char *name, const char *s, char *dst, size_t cap)
{
    size_t n = strlen(s);
    if (n >= cap)
        return ddpc_errorf(DDPC_EINVAL, "%s=%.40s... is longer than %zu bytes", name, s, cap - 1);
    memcpy(dst, s, n + 1);
    return DDPC_OK;
}

/* Local world size when the family did not give it: the ranks spread evenly over the nodes. */
static ddpc_status derive_local_world(const ranks *r, int *local_world)
{
    int nodes = r->num_nodes.set ? r->num_nodes.v : 1;
    if (nodes <= 1) {
        *local_world = r->world.v;
        return DDPC_OK;
    }
    if (r->world.v % nodes != 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s is not set and %s=%d ranks do not divide evenly over %s=%d nodes, "
                           "so the ranks on this node are unknown",
                           r->local_world.name, r->world.name, r->world.v, r->num_nodes.name,
                           nodes);
    *local_world = r->world.v / nodes;
    return DDPC_OK;
}

static ddpc_status resolve_local(const ranks *r, ddpc_comm_env *e)
{
    e->layout_known = r->local_world.set || r->num_nodes.set;
    if (r->local_world.set) {
        if (r->local_world.v > e->world_size)
            return ddpc_errorf(DDPC_EINVAL, "%s=%s is larger than %s=%d", r->local_world.name,
                               r->local_world.text, r->world.name, e->world_size);
        e->local_world_size = r->local_world.v;
        snprintf(e->local_world_from, sizeof e->local_world_from, "%s", r->local_world.name);
    } else {
        DDPC_TRY(derive_local_world(r, &e->local_world_size));
        if (r->num_nodes.set)
            snprintf(e->local_world_from, sizeof e->local_world_from, "%s / %s", r->world.name,
                     r->num_nodes.name);
    }
    if (r->local_rank.set) {
        if (r->local_rank.v >= e->local_world_size && r->local_world.set)
            return ddpc_errorf(DDPC_EINVAL, "%s=%s is not below %s=%d", r->local_rank.name,
                               r->local_rank.text, r->local_world.name, e->local_world_size);
        if (r->local_rank.v >= e->local_world_size)
            return ddpc_errorf(DDPC_EINVAL,
                               "%s=%s is not below %d, the ranks on this node (%s is "
                               "not set)",
                               r->local_rank.name, r->local_rank.text, e->local_world_size,
                               r->local_world.name);
        e->local_rank = r->local_rank.v;
    } else {
        /* launchers number ranks contiguously per node (torchrun, srun's block distribution) */
        e->local_rank = e->rank % e->local_world_size;
    }
    return DDPC_OK;
}

static ddpc_status resolve_nodes(const ranks *r, ddpc_comm_env *e)
{
    int w = e->world_size, lw = e->local_world_size;
    e->num_nodes = r->num_nodes.set ? r->num_nodes.v : (w % lw == 0 ? w / lw : 1);
    if (r->node_rank.set) {
        if (r->node_rank.v >= e->num_nodes)
            return ddpc_errorf(DDPC_EINVAL, "%s=%s is not below the job's %d nodes (%s)",
                               r->node_rank.name, r->node_rank.text, e->num_nodes,
                               r->num_nodes.set ? r->num_nodes.name : "world / local world size");
        e->node_rank = r->node_rank.v;
    } else {
        e->node_rank = (w == lw * e->num_nodes) ? e->rank / lw : 0;
    }
    return DDPC_OK;
}

/* Turns a family's fields into rank, world, local and node numbers, rejecting contradictions. */
static ddpc_status resolve(const ranks *r, ddpc_comm_env *e)
{
    if (!r->world.set) {
        const field *f = r->rank.set         ? &r->rank
                         : r->local_rank.set ? &r->local_rank
                                             : &r->local_world;
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is set without %s", f->name, f->text, r->world.name);
    }
    if (!r->rank.set && r->world.v != 1)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is set without %s", r->world.name, r->world.text,
                           r->rank.name);
    e->world_size = r->world.v;
    e->rank = r->rank.set ? r->rank.v : 0;
    if (e->rank >= e->world_size)
        return ddpc_errorf(DDPC_EINVAL, "%s=%d is not below %s=%d", r->rank.name, e->rank,
                           r->world.name, e->world_size);
    DDPC_TRY(resolve_local(r, e));
    return resolve_nodes(r, e);
}

static ddpc_status torchrun(const char *const *envp, ddpc_comm_env *e)
{
    ranks r;
    DDPC_TRY(read_int(envp, NAMES("RANK"), 0, &r.rank));
    DDPC_TRY(read_int(envp, NAMES("WORLD_SIZE"), 1, &r.world));
    DDPC_TRY(read_int(envp, NAMES("LOCAL_RANK"), 0, &r.local_rank));
    DDPC_TRY(read_int(envp, NAMES("LOCAL_WORLD_SIZE"), 1, &r.local_world));
    DDPC_TRY(read_int(envp, NAMES("GROUP_RANK"), 0, &r.node_rank));
    DDPC_TRY(read_int(envp, NAMES("GROUP_WORLD_SIZE"), 1, &r.num_nodes));
    return resolve(&r, e);
}

static ddpc_status openmpi(const char *const *envp, ddpc_comm_env *e)
{
    ranks r;
    DDPC_TRY(read_int(envp, NAMES("OMPI_COMM_WORLD_RANK"), 0, &r.rank));
    DDPC_TRY(read_int(envp, NAMES("OMPI_COMM_WORLD_SIZE"), 1, &r.world));
    DDPC_TRY(read_int(envp, NAMES("OMPI_COMM_WORLD_LOCAL_RANK"), 0, &r.local_rank));
    DDPC_TRY(read_int(envp, NAMES("OMPI_COMM_WORLD_LOCAL_SIZE"), 1, &r.local_world));
    /* OMPI_COMM_WORLD_NODE_RANK is a process's rank on its node across all jobs, not a node index;
     * the node index is derived (block mapping, mpirun's default) */
    r.node_rank = (field){.name = "node index"};
    DDPC_TRY(read_int(envp, NAMES("OMPI_MCA_orte_num_nodes"), 1, &r.num_nodes));
    DDPC_TRY(resolve(&r, e));
    const char *which = NULL;
    const char *id = first_set(envp, NAMES("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"), &which);
    return id ? copy_str(which, id, e->run_id, sizeof e->run_id) : DDPC_OK;
}

/* A task of an srun step: SLURM_PROCID and a normal step id are set. A batch script (sbatch) or
 * an salloc shell also has SLURM_PROCID=0 and SLURM_NTASKS=N but no step id (or a special one),
 * and must run as one process rather than wait for N-1 peers that will never come. */
static bool slurm_step_present(const char *const *envp, const char **step)
{
    if (!ddpc_comm_env_lookup(envp, "SLURM_PROCID"))
        return false;
    const char *s = first_set(envp, NAMES("SLURM_STEP_ID", "SLURM_STEPID"), NULL);
    if (!s)
        return false;
    unsigned long long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9' && v <= SLURM_MAX_NORMAL_STEP_ID; p++)
        v = v * 10 + (unsigned)(*p - '0');
    if (step)
        *step = s;
    /* a malformed id still counts as a step, so that parsing reports it */
    return !(p != s && *p == '\0' && v > SLURM_MAX_NORMAL_STEP_ID);
}

static ddpc_status slurm_ranks(const char *const *envp, ranks *r)
{
    DDPC_TRY(read_int(envp, NAMES("SLURM_PROCID"), 0, &r->rank));
    DDPC_TRY(read_int(envp, NAMES("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), 1, &r->world));
    DDPC_TRY(read_int(envp, NAMES("SLURM_LOCALID"), 0, &r->local_rank));
    DDPC_TRY(read_int(envp, NAMES("SLURM_STEP_NODEID", "SLURM_NODEID"), 0, &r->node_rank));
    DDPC_TRY(read_int(envp, NAMES("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"), 1,
                      &r->num_nodes));
    r->local_world = (field){.name = "SLURM_STEP_TASKS_PER_NODE"};
    const char *which = NULL;
    const char *tpn =
        first_set(envp, NAMES("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"), &which);
    if (tpn) {
        int node = r->node_rank.set ? r->node_rank.v : 0;
        r->local_world = (field){.name = which, .text = tpn, .set = true};
        DDPC_TRY(ddpc__slurm_tasks_on_node(which, tpn, node, &r->local_world.v));
    }
    return DDPC_OK;
}

/* "job.step" from SLURM_JOB_ID and the step id. */
static ddpc_status slurm_run_id(const char *const *envp, const char *step, ddpc_comm_env *e)
{
    const char *which = "SLURM_JOB_ID";
    const char *job = first_set(envp, NAMES("SLURM_JOB_ID", "SLURM_JOBID"), &which);
    if (!job)
        return copy_str("SLURM_STEP_ID", step, e->run_id, sizeof e->run_id);
    int n = snprintf(e->run_id, sizeof e->run_id, "%s.%s", job, step);
    if (n < 0 || (size_t)n >= sizeof e->run_id)
        return ddpc_errorf(DDPC_EINVAL, "%s=%.40s... is longer than %zu bytes", which, job,
                           sizeof e->run_id - 2 - strlen(step));
    return DDPC_OK;
}

static ddpc_status slurm(const char *const *envp, ddpc_comm_env *e)
{
    const char *step = NULL;
    slurm_step_present(envp, &step);
    const char *which =
        ddpc_comm_env_lookup(envp, "SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
    size_t digits = strspn(step, "0123456789");
    if (digits == 0 || step[digits] != '\0') /* ids are unsigned 32-bit: above INT_MAX is fine */
        return ddpc_errorf(DDPC_EINVAL, "%s=%s is not a number", which, step);
    ranks r;
    DDPC_TRY(slurm_ranks(envp, &r));
    DDPC_TRY(resolve(&r, e));
    DDPC_TRY(slurm_run_id(envp, step, e));
    if (ddpc_comm_env_lookup(envp, "MASTER_ADDR"))
        return DDPC_OK; /* given explicitly; read with the other common variables */
    const char *list = first_set(
        envp, NAMES("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"), &which);
    return list ? ddpc__slurm_hostlist_first(which, list, e->master_addr, sizeof e->master_addr)
                : DDPC_OK;
}

/* MPICH's Hydra, Intel MPI and Cray PALS give the local layout; srun --mpi=pmi2 gives only
 * PMI_RANK/PMI_SIZE, so the layout then comes from the SLURM step describing the same task. */
static ddpc_status pmi(const char *const *envp, ddpc_comm_env *e)
{
    ranks r;
    DDPC_TRY(read_int(envp, NAMES("PMI_RANK"), 0, &r.rank));
    DDPC_TRY(read_int(envp, NAMES("PMI_SIZE"), 1, &r.world));
    DDPC_TRY(read_int(envp, NAMES("MPI_LOCALRANKID", "PMI_LOCAL_RANK"), 0, &r.local_rank));
    DDPC_TRY(read_int(envp, NAMES("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"), 1, &r.local_world));
    r.node_rank = (field){.name = "node index"};
    r.num_nodes = (field){.name = "number of nodes"};
    const char *step = NULL;
    bool in_step = slurm_step_present(envp, &step);
    if (!r.local_rank.set && !r.local_world.set && in_step) {
        ranks s;
        DDPC_TRY(slurm_ranks(envp, &s));
        if (s.rank.v == r.rank.v && s.world.set && s.world.v == r.world.v) {
            r.local_rank = s.local_rank;
            r.local_world = s.local_world;
            r.node_rank = s.node_rank;
            r.num_nodes = s.num_nodes;
        }
    }
    DDPC_TRY(resolve(&r, e));
    const char *id = ddpc_comm_env_lookup(envp, "PMI_JOBID");
    if (id)
        return copy_str("PMI_JOBID", id, e->run_id, sizeof e->run_id);
    return in_step ? slurm_run_id(envp, step, e) : DDPC_OK;
}

/* ddpc_backend_parse, with the variable's name in front of its message. */
static ddpc_status parse_backend(const char *s, ddpc_backend *out)
{
    ddpc_status st = ddpc_backend_parse(s, out);
    if (st != DDPC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(st, "DDPC_BACKEND=%s: %s", s, why);
    }
    return DDPC_OK;
}

static ddpc_status parse_timeout(const char *s, double *out)
{
    char *end = NULL;
    double t = (s[0] >= '0' && s[0] <= '9') || s[0] == '.' ? strtod(s, &end) : 0.0;
    if (!end || *end != '\0' || strpbrk(s, "xXnN") || !isfinite(t) || t <= 0.0)
        return ddpc_errorf(DDPC_EINVAL,
                           "DDPC_COLLECTIVE_TIMEOUT=%s is not a positive number of "
                           "seconds",
                           s);
    *out = t;
    return DDPC_OK;
}

/* Variables honoured whichever family gave the rank. */
static ddpc_status common(const char *const *envp, ddpc_comm_env *e)
{
    const char *s;
    field f;
    if ((s = ddpc_comm_env_lookup(envp, "MASTER_ADDR")))
        DDPC_TRY(copy_str("MASTER_ADDR", s, e->master_addr, sizeof e->master_addr));
    DDPC_TRY(read_int(envp, NAMES("MASTER_PORT"), 0, &f));
    if (f.set && (f.v < 1 || f.v > 65535))
        return ddpc_errorf(DDPC_EINVAL, "MASTER_PORT=%s is outside 1..65535", f.text);
    e->master_port = f.set ? f.v : 0;
    DDPC_TRY(read_int(envp, NAMES("TORCHELASTIC_RESTART_COUNT"), 0, &f));
    e->restart_count = f.v;
    DDPC_TRY(read_int(envp, NAMES("TORCHELASTIC_MAX_RESTARTS"), 0, &f));
    e->max_restarts = f.v;
    if ((s = ddpc_comm_env_lookup(envp, "TORCHELASTIC_RUN_ID")))
        DDPC_TRY(copy_str("TORCHELASTIC_RUN_ID", s, e->run_id, sizeof e->run_id));
    /* read here so that rank discovery stays the one reader of the environment; the trainer
     * leaves a thread count the user (or the launcher) set alone */
    if ((s = ddpc_comm_env_lookup(envp, "OMP_NUM_THREADS")))
        snprintf(e->omp_num_threads, sizeof e->omp_num_threads, "%s", s);
    if ((s = ddpc_comm_env_lookup(envp, "DDPC_BACKEND")))
        DDPC_TRY(parse_backend(s, &e->backend));
    if ((s = ddpc_comm_env_lookup(envp, "DDPC_COLLECTIVE_TIMEOUT")))
        DDPC_TRY(parse_timeout(s, &e->timeout_s));
    e->nested_launcher = ddpc_comm_env_lookup(envp, "TORCHELASTIC_RUN_ID") != NULL ||
                         ddpc_comm_env_lookup(envp, "DDPC_LAUNCHER") != NULL;
    /* torchrun's agent serves the store itself and says so to its workers (as torch reads it) */
    s = ddpc_comm_env_lookup(envp, "TORCHELASTIC_USE_AGENT_STORE");
    e->agent_store = s && (strcmp(s, "True") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0);
    e->ddpc_launcher = ddpc_comm_env_lookup(envp, "DDPC_LAUNCHER") != NULL;
    bool found;
    DDPC_TRY(ddpc_store_token_load(envp, e->store_token, sizeof e->store_token, &found));
    if ((s = ddpc_comm_env_lookup(envp, "DDPC_STORE_BIND")))
        DDPC_TRY(copy_str("DDPC_STORE_BIND", s, e->store_bind, sizeof e->store_bind));
    return DDPC_OK;
}

static bool any_set(const char *const *envp, const char *const *names)
{
    return first_set(envp, names, NULL) != NULL;
}

ddpc_comm_env ddpc_comm_env_single(void)
{
    return (ddpc_comm_env){.source = DDPC_COMM_SOURCE_NONE,
                           .world_size = 1,
                           .local_world_size = 1,
                           .num_nodes = 1,
                           .backend = DDPC_BACKEND_AUTO};
}

/* How a family names its rank and world size, and who sets them, for the families check. */
typedef struct {
    ddpc_comm_source source;
    const char *rank_var, *world_var, *who;
} family_desc;

static family_desc describe(const char *const *envp, ddpc_comm_source src)
{
    switch (src) {
    case DDPC_COMM_SOURCE_TORCHRUN:
        return (family_desc){src, "RANK", "WORLD_SIZE", "torchrun style"};
    case DDPC_COMM_SOURCE_OPENMPI:
        return (family_desc){src, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"};
    case DDPC_COMM_SOURCE_PMI:
        return (family_desc){src, "PMI_RANK", "PMI_SIZE", "an MPI launcher's PMI"};
    default:
        return (family_desc){src, "SLURM_PROCID",
                             ddpc_comm_env_lookup(envp, "SLURM_STEP_NUM_TASKS")
                                 ? "SLURM_STEP_NUM_TASKS"
                                 : "SLURM_NTASKS",
                             "srun"};
    }
}

/* Torchrun-style variables that no launcher marked (no TORCHELASTIC_RUN_ID: a platform injected
 * them, or they are a stale export) must say what an MPI-style launcher whose variables are also
 * present says, when that launcher started more than one process: otherwise each of its processes
 * runs alone as an independent job (RANK=0 WORLD_SIZE=1 under mpirun -np 2: both "succeed"),
 * which is an error naming both. Launchers themselves nest legitimately with other numbers
 * (torchrun inside srun; mpirun's remote daemons are an srun step of their own), so marked
 * variables and the MPI families are not compared. A losing family whose values do not parse is
 * ignored, as before. */
static ddpc_status check_families(const char *const *envp, const ddpc_comm_env *w)
{
    static const ddpc_comm_source order[] = {DDPC_COMM_SOURCE_OPENMPI, DDPC_COMM_SOURCE_PMI,
                                             DDPC_COMM_SOURCE_SLURM};
    if (w->source != DDPC_COMM_SOURCE_TORCHRUN ||
        ddpc_comm_env_lookup(envp, "TORCHELASTIC_RUN_ID") != NULL)
        return DDPC_OK;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        ddpc_comm_source src = order[i];
        bool present = src == DDPC_COMM_SOURCE_OPENMPI
                           ? any_set(envp, NAMES("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"))
                       : src == DDPC_COMM_SOURCE_PMI ? any_set(envp, NAMES("PMI_RANK", "PMI_SIZE"))
                                                     : slurm_step_present(envp, NULL);
        if (!present)
            continue;
        ddpc_comm_env o = ddpc_comm_env_single();
        ddpc_status st = src == DDPC_COMM_SOURCE_OPENMPI ? openmpi(envp, &o)
                         : src == DDPC_COMM_SOURCE_PMI   ? pmi(envp, &o)
                                                         : slurm(envp, &o);
        if (st != DDPC_OK) {
            ddpc_clear_error();
            continue;
        }
        if (o.world_size <= 1 || (o.rank == w->rank && o.world_size == w->world_size))
            continue;
        family_desc fw = describe(envp, w->source), fo = describe(envp, src);
        return ddpc_errorf(DDPC_EINVAL,
                           "%s=%d %s=%d (%s) disagree with %s=%d %s=%d (%s): %s started %d "
                           "processes that would not form one job; unset the stale %s variables "
                           "or start the program under one launcher only",
                           fw.rank_var, w->rank, fw.world_var, w->world_size, fw.who, fo.rank_var,
                           o.rank, fo.world_var, o.world_size, fo.who, fo.who, o.world_size,
                           fw.who);
    }
    return DDPC_OK;
}

ddpc_status ddpc_comm_env_parse(const char *const *envp, ddpc_comm_env *out)
{
    ddpc_comm_env e = ddpc_comm_env_single();
    if (any_set(envp, NAMES("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))) {
        e.source = DDPC_COMM_SOURCE_TORCHRUN;
        DDPC_TRY(torchrun(envp, &e));
    } else if (any_set(envp, NAMES("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"))) {
        e.source = DDPC_COMM_SOURCE_OPENMPI;
        DDPC_TRY(openmpi(envp, &e));
    } else if (any_set(envp, NAMES("PMI_RANK", "PMI_SIZE"))) {
        e.source = DDPC_COMM_SOURCE_PMI;
        DDPC_TRY(pmi(envp, &e));
    } else if (slurm_step_present(envp, NULL)) {
        e.source = DDPC_COMM_SOURCE_SLURM;
        DDPC_TRY(slurm(envp, &e));
    }
    if (e.source != DDPC_COMM_SOURCE_NONE)
        DDPC_TRY(check_families(envp, &e));
    DDPC_TRY(common(envp, &e));
    *out = e;
    return DDPC_OK;
}

ddpc_status ddpc_comm_env_discover(ddpc_comm_env *out)
{
    return ddpc_comm_env_parse(ddpc__env_process(), out);
}
