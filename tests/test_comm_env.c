// SPDX-License-Identifier: MIT
/* Tests for rank discovery (src/comm/env.c) and SLURM's list syntax (src/comm/slurm_lists.c):
 * each launcher family, the precedence between every pair, the sbatch trap, explicit variables,
 * and every malformed or contradictory case with the message it must give. */
#include <ddpc/comm.h>

#include "check.h"
#include "comm/env_impl.h"

#include <stdlib.h>

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Parses envp, expecting success. */
static ddpc_comm_env ok_env(const char *const *envp)
{
    ddpc_comm_env e;
    memset(&e, 0x5a, sizeof e);
    ddpc_status s = ddpc_comm_env_parse(envp, &e);
    if (s != DDPC_OK) {
        fprintf(stderr, "unexpected error: %s\n", ddpc_last_error());
        CHECK_EQ_INT(s, DDPC_OK);
    }
    return e;
}

/* Parses envp, expecting DDPC_EINVAL whose message contains `want`, and *out untouched. */
static void bad_env(const char *const *envp, const char *want)
{
    ddpc_comm_env e = ddpc_comm_env_single();
    e.rank = 77;
    ddpc_clear_error();
    CHECK_EQ_INT(ddpc_comm_env_parse(envp, &e), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    CHECK_EQ_INT(e.rank, 77);
}

static void check_layout(ddpc_comm_env e, int rank, int world, int lrank, int lworld, int node,
                         int nodes)
{
    CHECK_EQ_INT(e.rank, rank);
    CHECK_EQ_INT(e.world_size, world);
    CHECK_EQ_INT(e.local_rank, lrank);
    CHECK_EQ_INT(e.local_world_size, lworld);
    CHECK_EQ_INT(e.node_rank, node);
    CHECK_EQ_INT(e.num_nodes, nodes);
}

static void test_single_process_defaults(void)
{
    ddpc_comm_env s = ddpc_comm_env_single();
    CHECK_EQ_INT(s.source, DDPC_COMM_SOURCE_NONE);
    check_layout(s, 0, 1, 0, 1, 0, 1);
    CHECK_EQ_INT(s.master_port, 0);
    CHECK(s.master_addr[0] == '\0' && s.run_id[0] == '\0');
    CHECK_EQ_INT(s.backend, DDPC_BACKEND_AUTO);
    CHECK(s.timeout_s == 0.0 && !s.nested_launcher);
    CHECK_EQ_INT(s.restart_count, 0);
    CHECK_EQ_INT(s.max_restarts, 0);

    ddpc_comm_env e = ok_env(ENV("PATH=/usr/bin", "HOME=/root", "RANKING=3"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_NONE);
    check_layout(e, 0, 1, 0, 1, 0, 1);
    e = ok_env((const char *const[]){NULL});
    check_layout(e, 0, 1, 0, 1, 0, 1);

    e = ok_env(ENV("WORLD_SIZE=1"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_TORCHRUN);
    check_layout(e, 0, 1, 0, 1, 0, 1);
}

static void test_torchrun_family(void)
{
    ddpc_comm_env e = ok_env(ENV("RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=2",
                                 "GROUP_RANK=1", "GROUP_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1",
                                 "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=1",
                                 "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RUN_ID=job-7"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_TORCHRUN);
    check_layout(e, 3, 8, 1, 2, 1, 4);
    CHECK(strcmp(e.master_addr, "10.0.0.1") == 0);
    CHECK_EQ_INT(e.master_port, 29500);
    CHECK_EQ_INT(e.restart_count, 1);
    CHECK_EQ_INT(e.max_restarts, 3);
    CHECK(strcmp(e.run_id, "job-7") == 0);
    CHECK(e.nested_launcher);

    /* no LOCAL_*: one node */
    e = ok_env(ENV("RANK=1", "WORLD_SIZE=2"));
    check_layout(e, 1, 2, 1, 2, 0, 1);
    CHECK(!e.nested_launcher);
    /* LOCAL_WORLD_SIZE without LOCAL_RANK: contiguous ranks per node */
    e = ok_env(ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4"));
    check_layout(e, 5, 8, 1, 4, 1, 2);
    /* uneven nodes: node count unknown -> 1, node index 0 */
    e = ok_env(ENV("RANK=4", "WORLD_SIZE=5", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"));
    check_layout(e, 4, 5, 1, 2, 0, 1);
}

static void test_openmpi_family(void)
{
    /* as Open MPI 4.1's mpirun -np 4 exports them (two nodes of two) */
    ddpc_comm_env e = ok_env(ENV(
        "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_NODE_RANK=1", "OMPI_MCA_orte_num_nodes=2",
        "OMPI_MCA_ess_base_jobid=1086521345", "PMIX_NAMESPACE=1086521345", "PMIX_RANK=3"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_OPENMPI);
    check_layout(e, 3, 4, 1, 2, 1, 2);
    CHECK(strcmp(e.run_id, "1086521345") == 0);
    CHECK(!e.nested_launcher);
    /* Open MPI 5 (PRRTE): no ess jobid, the PMIx namespace names the job */
    e = ok_env(
        ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=prterun-vm-123@1"));
    check_layout(e, 0, 2, 0, 2, 0, 1);
    CHECK(strcmp(e.run_id, "prterun-vm-123@1") == 0);
}

static void test_pmi_family(void)
{
    /* MPICH's Hydra */
    ddpc_comm_env e = ok_env(
        ENV("PMI_RANK=2", "PMI_SIZE=4", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2", "PMI_FD=5"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_PMI);
    check_layout(e, 2, 4, 0, 2, 1, 2);
    CHECK(e.run_id[0] == '\0');
    /* Cray PALS names */
    e = ok_env(ENV("PMI_RANK=1", "PMI_SIZE=2", "PMI_LOCAL_RANK=1", "PMI_LOCAL_SIZE=2"));
    check_layout(e, 1, 2, 1, 2, 0, 1);
    /* srun --mpi=pmi2: the layout comes from the SLURM step describing the same task */
    e = ok_env(ENV("PMI_RANK=3", "PMI_SIZE=4", "PMI_JOBID=77.0", "SLURM_PROCID=3",
                   "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=4", "SLURM_LOCALID=1", "SLURM_NODEID=1",
                   "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_JOB_ID=77"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_PMI);
    check_layout(e, 3, 4, 1, 2, 1, 2);
    CHECK(strcmp(e.run_id, "77.0") == 0);
}

static void test_slurm_family(void)
{
    ddpc_comm_env e = ok_env(ENV(
        "SLURM_PROCID=5", "SLURM_STEP_ID=0", "SLURM_STEPID=0", "SLURM_STEP_NUM_TASKS=6",
        "SLURM_NTASKS=6", "SLURM_LOCALID=1", "SLURM_NODEID=2", "SLURM_STEP_NUM_NODES=3",
        "SLURM_JOB_NUM_NODES=4", "SLURM_STEP_TASKS_PER_NODE=2(x3)",
        "SLURM_STEP_NODELIST=node[07-09]", "SLURM_JOB_NODELIST=node[06-09]", "SLURM_JOB_ID=1234"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_SLURM);
    check_layout(e, 5, 6, 1, 2, 2, 3);
    CHECK(strcmp(e.master_addr, "node07") == 0);
    CHECK(strcmp(e.run_id, "1234.0") == 0);
    CHECK_EQ_INT(e.master_port, 0);
    /* uneven nodes from the tasks-per-node list; job node list when no step list */
    e = ok_env(ENV("SLURM_PROCID=4", "SLURM_STEPID=3", "SLURM_NTASKS=5", "SLURM_LOCALID=1",
                   "SLURM_NODEID=1", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=3,2",
                   "SLURM_JOB_NODELIST=gpu7,cpu[1-2]", "SLURM_JOBID=9"));
    check_layout(e, 4, 5, 1, 2, 1, 2);
    CHECK(strcmp(e.master_addr, "gpu7") == 0);
    CHECK(strcmp(e.run_id, "9.3") == 0);
    /* no tasks-per-node list: even split */
    e = ok_env(ENV("SLURM_PROCID=3", "SLURM_STEP_ID=1", "SLURM_NTASKS=4", "SLURM_NNODES=2"));
    check_layout(e, 3, 4, 1, 2, 1, 2);
    bad_env(ENV("SLURM_PROCID=3", "SLURM_STEP_ID=1", "SLURM_NTASKS=5", "SLURM_NNODES=2"),
            "do not divide evenly");
    /* MASTER_ADDR given explicitly wins over the node list (which is then not even parsed) */
    e = ok_env(ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=bad[",
                   "MASTER_ADDR=head", "MASTER_PORT=1234"));
    CHECK(strcmp(e.master_addr, "head") == 0);
    CHECK_EQ_INT(e.master_port, 1234);
}

/* sbatch runs the batch script as SLURM_PROCID=0 with the job's SLURM_NTASKS, but no srun step:
 * it must be a single process, not rank 0 of a job whose peers never start. */
static void test_sbatch_trap(void)
{
    ddpc_comm_env e = ok_env(ENV(
        "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NPROCS=4", "SLURM_LOCALID=0", "SLURM_NODEID=0",
        "SLURM_JOB_ID=200505", "SLURM_JOB_NODELIST=gnode[10,20,25,37]", "SLURM_NNODES=4",
        "SLURM_JOB_NUM_NODES=4", "SLURM_TASKS_PER_NODE=1(x4)", "ENVIRONMENT=BATCH"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_NONE);
    check_layout(e, 0, 1, 0, 1, 0, 1);
    CHECK(e.master_addr[0] == '\0' && e.run_id[0] == '\0');
    /* the special step ids of the batch (0xfffffffb), extern and interactive steps */
    const char *special[] = {"SLURM_STEP_ID=4294967291", "SLURM_STEP_ID=4294967292",
                             "SLURM_STEP_ID=4294967290"};
    for (int i = 0; i < 3; i++) {
        e = ok_env(ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", special[i]));
        CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_NONE);
        CHECK_EQ_INT(e.world_size, 1);
    }
    /* the largest normal step id is a step */
    e = ok_env(ENV("SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_STEP_ID=4294967280"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_SLURM);
    CHECK_EQ_INT(e.world_size, 4);
    /* mpirun inside the batch script: Open MPI wins over the inherited batch variables */
    e = ok_env(ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "OMPI_COMM_WORLD_RANK=2",
                   "OMPI_COMM_WORLD_SIZE=3"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_OPENMPI);
    check_layout(e, 2, 3, 2, 3, 0, 1);
}

/* Nested the way launchers nest: each inner world at least as large as the outer ones (every
 * outer process joins the inner job), and the torchrun variables marked by a launcher. */
#define TORCH "RANK=4", "WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=t"
#define OMPI "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=7"
#define PMI "PMI_RANK=2", "PMI_SIZE=6"
#define SLURM "SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=5"

static void check_winner(const char *const *envp, ddpc_comm_source src, int rank, int world)
{
    ddpc_comm_env e = ok_env(envp);
    CHECK_EQ_INT(e.source, src);
    CHECK_EQ_INT(e.rank, rank);
    CHECK_EQ_INT(e.world_size, world);
}

static void test_precedence_every_pair(void)
{
    check_winner(ENV(OMPI, TORCH), DDPC_COMM_SOURCE_TORCHRUN, 4, 8);
    check_winner(ENV(PMI, TORCH), DDPC_COMM_SOURCE_TORCHRUN, 4, 8);
    check_winner(ENV(SLURM, TORCH), DDPC_COMM_SOURCE_TORCHRUN, 4, 8);
    check_winner(ENV(PMI, OMPI), DDPC_COMM_SOURCE_OPENMPI, 3, 7);
    check_winner(ENV(SLURM, OMPI), DDPC_COMM_SOURCE_OPENMPI, 3, 7);
    check_winner(ENV(SLURM, PMI), DDPC_COMM_SOURCE_PMI, 2, 6);
    check_winner(ENV(SLURM, PMI, OMPI, TORCH), DDPC_COMM_SOURCE_TORCHRUN, 4, 8);
    check_winner(ENV(SLURM), DDPC_COMM_SOURCE_SLURM, 1, 5);
    /* a losing family's variables are not read, even malformed */
    check_winner(ENV(TORCH, "OMPI_COMM_WORLD_RANK=abc", "PMI_SIZE=-1", "SLURM_STEP_ID=x"),
                 DDPC_COMM_SOURCE_TORCHRUN, 4, 8);
}

/* Launcher families that disagree: the case (a stale RANK=0 WORLD_SIZE=1 under mpirun
 * -np 2 made two independent single-rank jobs that both exited 0) and its relatives. */
static void test_families_disagree(void)
{
    bad_env(ENV("RANK=0", "WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"),
            "RANK=0 WORLD_SIZE=1 (torchrun style) disagree with OMPI_COMM_WORLD_RANK=1 "
            "OMPI_COMM_WORLD_SIZE=2 (mpirun): mpirun started 2 processes");
    /* rank 0 of mpirun's world too: the world sizes still differ */
    bad_env(ENV("RANK=0", "WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"),
            "(torchrun style) disagree with OMPI_COMM_WORLD_RANK=0");
    /* injected variables (no launcher marked them) must say what the MPI launcher says */
    bad_env(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "PMI_RANK=2", "PMI_SIZE=4"),
            "RANK=1 WORLD_SIZE=4 (torchrun style) disagree with PMI_RANK=2 PMI_SIZE=4 (an MPI "
            "launcher's PMI)");
    bad_env(ENV("RANK=0", "WORLD_SIZE=1", "SLURM_PROCID=1", "SLURM_STEP_ID=3",
                "SLURM_STEP_NUM_TASKS=2", "SLURM_NTASKS=2"),
            "disagree with SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 (srun)");
    /* launchers nest with other numbers: marked torchrun variables and MPI families are not
     * compared (mpirun -np 2 in a 4-node allocation: its remote daemons are a 4-task srun step) */
    check_winner(ENV("RANK=0", "WORLD_SIZE=1", "TORCHELASTIC_RUN_ID=x", "SLURM_PROCID=0",
                     "SLURM_STEP_ID=0", "SLURM_NTASKS=2"),
                 DDPC_COMM_SOURCE_TORCHRUN, 0, 1);
    check_winner(ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=3",
                     "SLURM_STEP_ID=1", "SLURM_NTASKS=4"),
                 DDPC_COMM_SOURCE_OPENMPI, 0, 2);
    /* agreeing families are fine: a launcher that sets both, srun --mpi=pmi2 */
    check_winner(ENV("RANK=1", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"),
                 DDPC_COMM_SOURCE_TORCHRUN, 1, 2);
    check_winner(
        ENV("PMI_RANK=1", "PMI_SIZE=2", "SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=2"),
        DDPC_COMM_SOURCE_PMI, 1, 2);
    /* legitimate nesting: torchrun in each of 2 srun tasks, 4 workers each; mpirun in one task */
    check_winner(ENV("RANK=5", "WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=j", "SLURM_PROCID=1",
                     "SLURM_STEP_ID=0", "SLURM_NTASKS=2"),
                 DDPC_COMM_SOURCE_TORCHRUN, 5, 8);
    check_winner(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=0",
                     "SLURM_STEP_ID=0", "SLURM_NTASKS=1"),
                 DDPC_COMM_SOURCE_OPENMPI, 3, 4);
    /* an outer launcher of one process cannot split a job: injected variables under it are fine */
    check_winner(ENV("RANK=1", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1"),
                 DDPC_COMM_SOURCE_TORCHRUN, 1, 2);
    /* an sbatch script (no step) is not a launcher of the job */
    check_winner(ENV("RANK=0", "WORLD_SIZE=1", "SLURM_PROCID=0", "SLURM_NTASKS=4"),
                 DDPC_COMM_SOURCE_TORCHRUN, 0, 1);
}

static void test_explicit_variables(void)
{
    ddpc_comm_env e = ok_env(ENV("DDPC_BACKEND=mpi", "DDPC_COLLECTIVE_TIMEOUT=2.5",
                                 "DDPC_LAUNCHER=1", "MASTER_ADDR=localhost", "MASTER_PORT=65535"));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_NONE);
    CHECK_EQ_INT(e.backend, DDPC_BACKEND_MPI);
    CHECK(e.timeout_s == 2.5);
    CHECK(e.nested_launcher);
    CHECK_EQ_INT(e.master_port, 65535);
    e = ok_env(ENV("DDPC_BACKEND=shm", "DDPC_COLLECTIVE_TIMEOUT=300", "MASTER_PORT=1"));
    CHECK_EQ_INT(e.backend, DDPC_BACKEND_SHM);
    CHECK(e.timeout_s == 300.0);
    CHECK_EQ_INT(e.master_port, 1);
    e = ok_env(ENV("DDPC_BACKEND=auto", "DDPC_COLLECTIVE_TIMEOUT=.5"));
    CHECK_EQ_INT(e.backend, DDPC_BACKEND_AUTO);
    CHECK(e.timeout_s == 0.5);
    /* TORCHELASTIC_RUN_ID names the run whichever family gave the rank */
    e = ok_env(ENV(OMPI, "OMPI_MCA_ess_base_jobid=5", "TORCHELASTIC_RUN_ID=mine"));
    CHECK(strcmp(e.run_id, "mine") == 0);
}

static void test_malformed_numbers(void)
{
    bad_env(ENV("WORLD_SIZE=abc", "RANK=0"), "WORLD_SIZE=abc is not a number");
    bad_env(ENV("RANK=1x", "WORLD_SIZE=2"), "RANK=1x is not a number");
    bad_env(ENV("RANK=", "WORLD_SIZE=2"), "RANK= is not a number");
    bad_env(ENV("RANK= 1", "WORLD_SIZE=2"), "RANK= 1 is not a number");
    bad_env(ENV("RANK=+1", "WORLD_SIZE=2"), "RANK=+1 is not a number");
    bad_env(ENV("RANK=-1", "WORLD_SIZE=2"), "RANK=-1 is negative");
    bad_env(ENV("RANK=-", "WORLD_SIZE=2"), "RANK=- is not a number");
    bad_env(ENV("RANK=0", "WORLD_SIZE=99999999999999999999999"), "is too large");
    bad_env(ENV("RANK=0", "WORLD_SIZE=2147483648"), "WORLD_SIZE=2147483648 is too large");
    bad_env(ENV("RANK=0", "WORLD_SIZE=0"), "WORLD_SIZE=0 must be at least 1");
    bad_env(ENV("RANK=0", "WORLD_SIZE=1", "LOCAL_WORLD_SIZE=0"), "LOCAL_WORLD_SIZE=0 must be");
    bad_env(ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=two"),
            "OMPI_COMM_WORLD_SIZE=two is not a number");
    bad_env(ENV("PMI_RANK=x", "PMI_SIZE=2"), "PMI_RANK=x is not a number");
    bad_env(ENV("SLURM_PROCID=0", "SLURM_STEP_ID=abc", "SLURM_NTASKS=2"),
            "SLURM_STEP_ID=abc is not a number");
    bad_env(ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=2x"),
            "SLURM_NTASKS=2x is not a number");
    bad_env(ENV("TORCHELASTIC_RESTART_COUNT=-1"), "TORCHELASTIC_RESTART_COUNT=-1 is negative");
    bad_env(ENV("TORCHELASTIC_MAX_RESTARTS=z"), "TORCHELASTIC_MAX_RESTARTS=z is not a number");
}

static void test_contradictions(void)
{
    bad_env(ENV("RANK=4", "WORLD_SIZE=4"), "RANK=4 is not below WORLD_SIZE=4");
    bad_env(ENV("WORLD_SIZE=2"), "WORLD_SIZE=2 is set without RANK");
    bad_env(ENV("RANK=0"), "RANK=0 is set without WORLD_SIZE");
    bad_env(ENV("LOCAL_RANK=0"), "LOCAL_RANK=0 is set without WORLD_SIZE");
    bad_env(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"),
            "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
    bad_env(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=8"),
            "LOCAL_WORLD_SIZE=8 is larger than WORLD_SIZE=4");
    bad_env(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=4"), "LOCAL_RANK=4 is not below");
    bad_env(
        ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=2", "GROUP_WORLD_SIZE=2"),
        "GROUP_RANK=2 is not below the job's 2 nodes");
    bad_env(ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=4"),
            "OMPI_COMM_WORLD_RANK=5 is not below OMPI_COMM_WORLD_SIZE=4");
    bad_env(ENV("PMI_RANK=0"), "PMI_RANK=0 is set without PMI_SIZE");
    bad_env(ENV("SLURM_PROCID=2", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_NTASKS=8"),
            "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2");
    bad_env(ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_NODEID=2",
                "SLURM_STEP_TASKS_PER_NODE=2(x2)"),
            "SLURM_STEP_TASKS_PER_NODE=2(x2) names 2 nodes, but this is node 2");
    bad_env(
        ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_STEP_TASKS_PER_NODE=2(x"),
        "SLURM_STEP_TASKS_PER_NODE=2(x is not a valid tasks-per-node list");
    bad_env(
        ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=node[01-"),
        "SLURM_STEP_NODELIST=node[01- is not a valid host list");
}

static void test_malformed_explicit_variables(void)
{
    bad_env(ENV("MASTER_PORT=0"), "MASTER_PORT=0 is outside 1..65535");
    bad_env(ENV("MASTER_PORT=65536"), "MASTER_PORT=65536 is outside 1..65535");
    bad_env(ENV("MASTER_PORT=http"), "MASTER_PORT=http is not a number");
    bad_env(ENV("DDPC_BACKEND=ucc"), "DDPC_BACKEND=ucc: unknown backend 'ucc'");
    bad_env(ENV("DDPC_BACKEND="), "DDPC_BACKEND=: unknown backend ''");
    const char *timeouts[] = {"0", "-1", "abc", "inf", "nan", "1e400", " 5", "5s", "0x10", ""};
    for (int i = 0; i < 10; i++) {
        char var[64], want[160];
        snprintf(var, sizeof var, "DDPC_COLLECTIVE_TIMEOUT=%s", timeouts[i]);
        snprintf(want, sizeof want, "%s is not a positive number of seconds", var);
        bad_env(ENV(var), want);
    }
    char addr[300] = "MASTER_ADDR=";
    memset(addr + 12, 'a', 270);
    addr[282] = '\0';
    bad_env(ENV(addr), "MASTER_ADDR=aaaa");
    bad_env(ENV(addr), "is longer than 255 bytes");
    char run[200] = "TORCHELASTIC_RUN_ID=";
    memset(run + 20, 'r', 150);
    run[170] = '\0';
    bad_env(ENV(run), "is longer than 127 bytes");
}

static void test_hostlist(void)
{
    struct {
        const char *list, *first;
        int count;
    } good[] = {{"node[01-04,07],gpu7", "node01", 6},
                {"gpu7", "gpu7", 1},
                {"a,b,c", "a", 3},
                {"n[8-10]", "n8", 3},
                {"n[008-010]", "n008", 3},
                {"rack[1-2]-n[3-5]", "rack1-n3", 6},
                {"n[5]", "n5", 1},
                {"nid[001000-001001].ib", "nid001000.ib", 2},
                {"x_y.z-1", "x_y.z-1", 1},
                {"n[0-999999999]", "n0", 1000000000}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char first[256];
        int count = 0;
        CHECK_EQ_INT(ddpc__slurm_hostlist_first("L", good[i].list, first, sizeof first), DDPC_OK);
        CHECK(strcmp(first, good[i].first) == 0);
        CHECK_EQ_INT(ddpc__slurm_hostlist_count("L", good[i].list, &count), DDPC_OK);
        CHECK_EQ_INT(count, good[i].count);
    }
    const char *bad[] = {"",         "node[",         "node[]", "node[1-]", "node[3-1]", "node]",
                         "node[1,]", "a,,b",          "a,",     ",a",       "no de",     "n[1-2",
                         "n[a]",     "n[1234567890]", "n[[1]]", "n[1]]",    "n[-1]",     "n[1-2-3]",
                         "n\t1",     "n[1;2]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char first[256] = "unchanged";
        ddpc_clear_error();
        CHECK_EQ_INT(ddpc__slurm_hostlist_first("SLURM_JOB_NODELIST", bad[i], first, sizeof first),
                     DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "is not a valid host list");
        CHECK(strcmp(first, "unchanged") == 0);
    }
    char longname[300];
    memset(longname, 'h', 256);
    longname[256] = '\0';
    char first[256];
    CHECK_EQ_INT(ddpc__slurm_hostlist_first("L", longname, first, sizeof first), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "longer than 255 bytes");
    CHECK_EQ_INT(ddpc__slurm_hostlist_first("L", "node[01-02]", first, 6), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc__slurm_hostlist_first("L", "node[01-02]", first, 7), DDPC_OK);
    CHECK(strcmp(first, "node01") == 0);
}

static void test_tasks_per_node(void)
{
    int want[] = {2, 2, 2, 1};
    for (int node = 0; node < 4; node++) {
        int t = 0;
        CHECK_EQ_INT(ddpc__slurm_tasks_on_node("T", "2(x3),1", node, &t), DDPC_OK);
        CHECK_EQ_INT(t, want[node]);
    }
    int t = 0;
    CHECK_EQ_INT(ddpc__slurm_tasks_on_node("T", "4", 0, &t), DDPC_OK);
    CHECK_EQ_INT(t, 4);
    CHECK_EQ_INT(ddpc__slurm_tasks_on_node("T", "2(x3),1", 4, &t), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "names 4 nodes, but this is node 4");
    const char *bad[] = {"",    "2(x",  "2(x3",   "0", "2(x0)",  "2,,1",
                         "2x3", "2(3)", "2(x3),", "a", "2(x3)1", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(ddpc__slurm_tasks_on_node("T", bad[i], 0, &t), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), "is not a valid tasks-per-node list");
    }
}

static void test_discover_reads_process_environment(void)
{
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "3", 1);
    ddpc_comm_env e;
    CHECK_EQ_INT(ddpc_comm_env_discover(&e), DDPC_OK);
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_TORCHRUN);
    CHECK_EQ_INT(e.rank, 2);
    CHECK_EQ_INT(e.world_size, 3);
    setenv("WORLD_SIZE", "abc", 1);
    CHECK_EQ_INT(ddpc_comm_env_discover(&e), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "WORLD_SIZE=abc is not a number");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
}

/* srun without an MPI plugin (SLURM's default MpiDefault=none) gives Open MPI no PMI server: its
 * MPI_Init aborts, so the mpi backend refuses first and names 'srun --mpi=pmix'. Seen on a real
 * one-machine SLURM (tests/cli_slurm.sh): `srun -n 2 ddpc train` printed a page of Open MPI
 * text. */
static void test_slurm_mpi_check(void)
{
#define STEP "SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=7"
    ddpc_comm_env e = ok_env(ENV(STEP));
    CHECK_EQ_INT(e.source, DDPC_COMM_SOURCE_SLURM);
    ddpc_clear_error();
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP), &e, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "this srun step started its 2 tasks without an MPI "
                                          "plugin (SLURM_MPI_TYPE=unset)");
    CHECK_STR_CONTAINS(ddpc_last_error(), "'srun --mpi=pmix'");
    CHECK_STR_CONTAINS(ddpc_last_error(), "DDPC_BACKEND=shm when all tasks share one node");
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP, "SLURM_MPI_TYPE=none"), &e, true), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "(SLURM_MPI_TYPE=none)");
    /* what srun --mpi=pmix sets (seen under slurm-wlm 22.05 with PMIx 4.2) */
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP, "SLURM_MPI_TYPE=pmix", "PMIX_RANK=1",
                                           "PMIX_NAMESPACE=slurm.pmix.7.0"),
                                       &e, true),
                 DDPC_OK);
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP, "PMIX_NAMESPACE=slurm.pmix.7.0"), &e, true),
                 DDPC_OK);
    /* another plugin ddpc does not know: MPI may manage */
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP, "SLURM_MPI_TYPE=cray_shasta"), &e, true), DDPC_OK);
    /* MPICH and others may use SLURM's PMI-1 library, which needs no plugin */
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV(STEP), &e, false), DDPC_OK);
    /* a single task needs no peers; pmi2 (PMI_RANK) and mpirun are other families */
    ddpc_comm_env one = ok_env(ENV("SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=1"));
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ENV("SLURM_PROCID=0"), &one, true), DDPC_OK);
    const char *const *pmi2 = ENV(STEP, "PMI_RANK=1", "PMI_SIZE=2", "SLURM_MPI_TYPE=pmi2");
    ddpc_comm_env p = ok_env(pmi2);
    CHECK_EQ_INT(ddpc__slurm_mpi_check(pmi2, &p, true), DDPC_OK);
    const char *const *ompi = ENV(STEP, "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2");
    ddpc_comm_env o = ok_env(ompi);
    CHECK_EQ_INT(ddpc__slurm_mpi_check(ompi, &o, true), DDPC_OK);
    /* torchrun variables inside the step (ddpc run refuses there, torchrun does not): shm */
    const char *const *torch = ENV(STEP, "RANK=1", "WORLD_SIZE=2");
    ddpc_comm_env t = ok_env(torch);
    CHECK_EQ_INT(ddpc__slurm_mpi_check(torch, &t, true), DDPC_OK);
#undef STEP
}

static void test_known_variable_list(void)
{
    const char *const *names = ddpc__dist_env_var_names();
    int n = 0, found = 0;
    for (; names[n]; n++)
        found += strcmp(names[n], "SLURM_STEP_ID") == 0 || strcmp(names[n], "RANK") == 0 ||
                 strcmp(names[n], "OMPI_COMM_WORLD_RANK") == 0 ||
                 strcmp(names[n], "PMI_RANK") == 0 || strcmp(names[n], "DDPC_BACKEND") == 0;
    CHECK(n > 30);
    CHECK_EQ_INT(found, 5);
    CHECK(ddpc_comm_env_lookup(ENV("A=1", "AB=2"), "AB") != NULL);
    CHECK(strcmp(ddpc_comm_env_lookup(ENV("A=1", "AB=2"), "AB"), "2") == 0);
    CHECK(ddpc_comm_env_lookup(ENV("AB=2"), "A") == NULL);
    CHECK(ddpc_comm_env_lookup(NULL, "A") == NULL);
    int hosts = -1;
    CHECK_EQ_INT(ddpc_comm_env_slurm_hosts(ENV("A=1"), &hosts), DDPC_OK);
    CHECK_EQ_INT(hosts, 0);
    CHECK_EQ_INT(ddpc_comm_env_slurm_hosts(ENV("SLURM_JOB_NODELIST=n[1-3],g"), &hosts), DDPC_OK);
    CHECK_EQ_INT(hosts, 4);
    CHECK_EQ_INT(ddpc_comm_env_slurm_hosts(ENV("SLURM_JOB_NODELIST=n[3-1]"), &hosts), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "SLURM_JOB_NODELIST");
}

/* What gave the ranks on this host (the trainer names it when it splits the cores), and the
 * OMP_NUM_THREADS it must leave alone. */
static void test_local_world_source(void)
{
    ddpc_comm_env e = ok_env(ENV("RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2"));
    CHECK(e.layout_known);
    CHECK(strcmp(e.local_world_from, "LOCAL_WORLD_SIZE") == 0);
    CHECK(strcmp(e.omp_num_threads, "") == 0);
    e = ok_env(ENV("RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1", "OMP_NUM_THREADS=3"));
    CHECK(!e.layout_known);
    CHECK(strcmp(e.local_world_from, "") == 0);
    CHECK(strcmp(e.omp_num_threads, "3") == 0);
    e = ok_env(ENV("RANK=3", "WORLD_SIZE=4", "GROUP_WORLD_SIZE=2"));
    CHECK(strcmp(e.local_world_from, "WORLD_SIZE / GROUP_WORLD_SIZE") == 0);
    e = ok_env(ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=2"));
    CHECK(strcmp(e.local_world_from, "OMPI_COMM_WORLD_LOCAL_SIZE") == 0);
    e = ok_env(ENV("PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALNRANKS=2"));
    CHECK(strcmp(e.local_world_from, "MPI_LOCALNRANKS") == 0);
    e = ok_env(ENV("SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=3", "SLURM_NODEID=0",
                   "SLURM_STEP_TASKS_PER_NODE=2,1"));
    CHECK_EQ_INT(e.local_world_size, 2);
    CHECK(strcmp(e.local_world_from, "SLURM_STEP_TASKS_PER_NODE") == 0);
}

int main(void)
{
    RUN_TEST(test_single_process_defaults);
    RUN_TEST(test_torchrun_family);
    RUN_TEST(test_openmpi_family);
    RUN_TEST(test_pmi_family);
    RUN_TEST(test_slurm_family);
    RUN_TEST(test_sbatch_trap);
    RUN_TEST(test_precedence_every_pair);
    RUN_TEST(test_families_disagree);
    RUN_TEST(test_explicit_variables);
    RUN_TEST(test_malformed_numbers);
    RUN_TEST(test_contradictions);
    RUN_TEST(test_malformed_explicit_variables);
    RUN_TEST(test_hostlist);
    RUN_TEST(test_tasks_per_node);
    RUN_TEST(test_discover_reads_process_environment);
    RUN_TEST(test_slurm_mpi_check);
    RUN_TEST(test_known_variable_list);
    RUN_TEST(test_local_world_source);
    return check_summary();
}
