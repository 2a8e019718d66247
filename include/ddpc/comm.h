// SPDX-License-Identifier: MIT
/* ddpc process groups: rank discovery from the environment, collectives with timeouts, async work.
 * Every rank of a group issues the same collectives in the same order; a collective that cannot
 * finish within the group's timeout fails on every surviving rank, and a group that failed once
 * stays failed and says why. A ddpc_pg is used by one thread at a time (the caller's); async
 * collectives run on the group's own comm thread, in issue order. */
#ifndef DDPC_COMM_H
#define DDPC_COMM_H

#include <ddpc/status.h>
#include <ddpc/store.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDPC_DTYPE_F32,
    DDPC_DTYPE_F64,
    DDPC_DTYPE_BF16, /* bfloat16 stored as uint16_t bits */
    DDPC_DTYPE_F16,  /* IEEE binary16 stored as uint16_t bits */
    DDPC_DTYPE_I32,
    DDPC_DTYPE_I64,
    DDPC_DTYPE_COUNT
} ddpc_dtype;

/* SUM and AVG of bf16/f16 accumulate in f32 in rank order and round once; AVG of integers
 * truncates toward zero (as NCCL does). */
typedef enum {
    DDPC_REDUCE_SUM,
    DDPC_REDUCE_AVG,
    DDPC_REDUCE_MIN,
    DDPC_REDUCE_MAX,
    DDPC_REDUCE_COUNT
} ddpc_reduce_op;

typedef enum {
    DDPC_BACKEND_AUTO, /* see ddpc_pg_create */
    DDPC_BACKEND_SHM,  /* embedded POSIX shared memory, one host */
    DDPC_BACKEND_MPI,  /* Open MPI or MPICH, many hosts; absent when built without MPI */
    DDPC_BACKEND_GLOO, /* shm within a host + gloo (TCP) between hosts; absent without libgloo */
    DDPC_BACKEND_NCCL, /* NCCL on device buffers, one GPU per rank; absent without CUDA, and
                          libnccl.so.2 is loaded at run time */
    DDPC_BACKEND_COUNT
} ddpc_backend;

/* Which launcher's variables gave the rank, in order of precedence (first found wins). */
typedef enum {
    DDPC_COMM_SOURCE_NONE,     /* no variables: a single process */
    DDPC_COMM_SOURCE_TORCHRUN, /* RANK, WORLD_SIZE, ... (torchrun, ddpc run) */
    DDPC_COMM_SOURCE_OPENMPI,  /* OMPI_COMM_WORLD_* (mpirun) */
    DDPC_COMM_SOURCE_PMI,      /* PMI_RANK, PMI_SIZE (MPICH, Intel MPI) */
    DDPC_COMM_SOURCE_SLURM,    /* SLURM_PROCID, SLURM_NTASKS, ... (srun) */
    DDPC_COMM_SOURCE_COUNT
} ddpc_comm_source;

size_t ddpc_dtype_size(ddpc_dtype dtype);
const char *ddpc_dtype_name(ddpc_dtype dtype);          /* "f32", "bf16", ... */
const char *ddpc_reduce_op_name(ddpc_reduce_op op);     /* "sum", "avg", "min", "max" */
const char *ddpc_backend_name(ddpc_backend backend);    /* "auto", "shm", "mpi", "gloo", "nccl" */
const char *ddpc_comm_source_name(ddpc_comm_source src); /* "none", "torchrun", ... */
/* Parses "auto", "shm", "mpi", "gloo" or "nccl"; anything else is DDPC_EINVAL naming the value. */
ddpc_status ddpc_backend_parse(const char *name, ddpc_backend *out);
/* False for DDPC_BACKEND_MPI in a build without MPI, DDPC_BACKEND_GLOO without libgloo,
 * DDPC_BACKEND_NCCL without CUDA (whether libnccl.so.2 loads is known only at ddpc_pg_create). */
bool ddpc_backend_available(ddpc_backend backend);

/* What the environment says about this process's place in a job. */
typedef struct {
    ddpc_comm_source source;
    int rank, world_size;            /* 0 <= rank < world_size */
    int local_rank, local_world_size; /* on this host */
    int node_rank, num_nodes;        /* GROUP_RANK / SLURM_NODEID; num_nodes 1 when unknown */
    int restart_count, max_restarts; /* TORCHELASTIC_RESTART_COUNT / _MAX_RESTARTS, else 0 */
    char master_addr[256];           /* "" when not given */
    int master_port;                 /* 0 when not given */
    char run_id[128];                /* TORCHELASTIC_RUN_ID, SLURM job.step, mpirun job id; or "" */
    ddpc_backend backend;            /* DDPC_BACKEND (set by `ddpc run --backend`), else AUTO */
    double timeout_s;                /* DDPC_COLLECTIVE_TIMEOUT (set by `ddpc run`), else 0 */
    bool nested_launcher;            /* TORCHELASTIC_RUN_ID or DDPC_LAUNCHER is set */
    bool layout_known;               /* local world size or node count came from the launcher
                                        (else all ranks were assumed to share one host) */
    char local_world_from[64];       /* what gave local_world_size when layout_known:
                                        "LOCAL_WORLD_SIZE", "WORLD_SIZE / GROUP_WORLD_SIZE", ... */
    char omp_num_threads[32];        /* OMP_NUM_THREADS as set (the user's or the launcher's
                                        thread count, cut to fit), "" when unset or empty */
    bool agent_store;                /* TORCHELASTIC_USE_AGENT_STORE=True: a launcher agent serves
                                        the store at MASTER_ADDR:MASTER_PORT (else rank 0 does) */
    bool ddpc_launcher;              /* DDPC_LAUNCHER is set: `ddpc run` started this worker */
    char store_token[DDPC_STORE_TOKEN_MAX + 1]; /* DDPC_STORE_TOKEN or the file that
                                                   DDPC_STORE_TOKEN_FILE names; "" when neither */
    char store_bind[256]; /* DDPC_STORE_BIND: where rank 0's store listens; "" (MASTER_ADDR) */
} ddpc_comm_env;

/* A single process: rank 0 of 1, nothing else set. */
ddpc_comm_env ddpc_comm_env_single(void);

/* Reads the variables from `envp` ("KEY=VALUE" strings, NULL-terminated, like environ). Malformed
 * or contradictory values (WORLD_SIZE=abc, RANK >= WORLD_SIZE, negative ranks) are DDPC_EINVAL
 * naming the variable and its value. The precedence is the order of ddpc_comm_source. */
ddpc_status ddpc_comm_env_parse(const char *const *envp, ddpc_comm_env *out);
/* ddpc_comm_env_parse on this process's environment. */
ddpc_status ddpc_comm_env_discover(ddpc_comm_env *out);

/* The value of `key` in `envp` ("KEY=VALUE" strings, NULL-terminated; NULL reads as empty), or
 * NULL when unset. The library's one environment lookup: the launcher uses it too. */
const char *ddpc_comm_env_lookup(const char *const *envp, const char *key);
/* Hosts of the SLURM allocation SLURM_JOB_NODELIST in `envp` names (0 when unset). DDPC_EINVAL
 * naming the variable when it is not a valid SLURM host list. */
ddpc_status ddpc_comm_env_slurm_hosts(const char *const *envp, int *hosts);

/* What `ddpc env` reports about communication; every field is filled, never an error. */
typedef struct {
    bool mpi_built;        /* the mpi backend is compiled in */
    char mpi_library[256]; /* first line of MPI_Get_library_version, or "not built with MPI" */
    char vars[2048];       /* "KEY=VALUE\n" for each launcher variable set, in precedence order */
    ddpc_status status;    /* of ddpc_comm_env_discover */
    char error[512];       /* its message when status != DDPC_OK */
    ddpc_comm_env env;     /* what it found (valid when status == DDPC_OK) */
    ddpc_backend backend;  /* the backend ddpc_pg_create would choose with backend AUTO */
} ddpc_comm_report;

/* Fills *out from this process's environment and the build. Never fails. */
void ddpc_comm_report_collect(ddpc_comm_report *out);

typedef struct {
    ddpc_backend backend; /* AUTO: env.backend if set; else mpi when the rank came from mpirun,
                             PMI or SLURM and MPI is built in; else gloo when torchrun-style
                             variables span several nodes; else shm */
    double timeout_s;     /* > 0 overrides env.timeout_s; when both are 0, 300 s */
    bool cuda;            /* the collectives take device buffers of this rank's GPU (local rank
                             mod visible GPUs, as ddpc_device_select picks it): AUTO then means
                             nccl when libnccl.so.2 loads and every rank of the host has a GPU of
                             its own, else host staging (device buffers copied through pinned
                             host memory) over the host rule's backend; shm, gloo and mpi are
                             staged too. false: host buffers, and backend nccl is refused. */
} ddpc_pg_config;

ddpc_pg_config ddpc_pg_config_default(void);

/* The backend ddpc_pg_create would use for `asked` (DDPC_BACKEND_AUTO applies the rule above). */
ddpc_backend ddpc_pg_choose_backend(const ddpc_comm_env *env, ddpc_backend asked);

typedef struct ddpc_pg ddpc_pg;
typedef struct ddpc_work ddpc_work;

/* Joins the group described by `env` (every rank calls it; returns when all have joined or the
 * timeout passed). shm finds its peers through env.master_addr:master_port (rank 0 listens there;
 * a port in use is an error naming it) or, without a port, through env.run_id. World size 1 needs
 * neither. Errors: DDPC_EINVAL (bad env/config), DDPC_EUNSUPPORTED (backend not built in),
 * DDPC_ETIMEOUT (peers missing, named), DDPC_EIO. */
ddpc_status ddpc_pg_create(const ddpc_comm_env *env, const ddpc_pg_config *cfg, ddpc_pg **out);
/* Leaves the group and frees it; waits for outstanding async work first. NULL is a no-op. */
void ddpc_pg_destroy(ddpc_pg *pg);
/* Removes the /dev/shm segment the shm rendezvous of `env` (run id, master port, restart count)
 * names, unless a live process still owns it. Ranks unlink it themselves once all have joined;
 * this is for a launcher after every rank of an attempt exited, since a rank killed during the
 * rendezvous cannot. DDPC_OK when it was absent or removed; DDPC_EIO naming it otherwise. */
ddpc_status ddpc_pg_shm_remove(const ddpc_comm_env *env);

int ddpc_pg_rank(const ddpc_pg *pg);
int ddpc_pg_world_size(const ddpc_pg *pg);
/* This rank's index among the ranks on its host, and their number: the launcher's figures, or
 * where it gave none (a platform setting only RANK and WORLD_SIZE) those the gloo backend counted
 * through the store while joining (ranks publishing this host's identity). */
int ddpc_pg_local_rank(const ddpc_pg *pg);
int ddpc_pg_local_world_size(const ddpc_pg *pg);
/* The backend that moves the bytes: nccl, or for a staged group the host backend under it. */
ddpc_backend ddpc_pg_backend(const ddpc_pg *pg);
/* NULL, or for a group on device buffers one line saying how they travel, for the caller to print
 * once at start: "host staging over shm: 2 ranks on this host share 1 GPU, which NCCL refuses".
 * Valid while the group lives. */
const char *ddpc_pg_device_note(const ddpc_pg *pg);
double ddpc_pg_timeout(const ddpc_pg *pg);
/* Number of collectives issued so far; the next one gets this sequence number. */
uint64_t ddpc_pg_seq(const ddpc_pg *pg);
/* Bytes this rank would send for the collectives issued so far if each ran as a ring (NCCL's
 * bus-bandwidth convention: all-reduce 2(W-1)/W of its buffer, reduce-scatter and all-gather
 * (W-1)/W of the whole W x count buffer, broadcast the buffer): what a step costs on a network,
 * whatever the backend really does. 0 on one rank. */
uint64_t ddpc_pg_ring_bytes(const ddpc_pg *pg);
/* Seconds this rank's collectives have spent in the backend so far, on whichever thread ran them
 * (the comm thread for async work, the caller's for blocking calls); 0 on one rank. Thread safe. */
double ddpc_pg_busy_seconds(const ddpc_pg *pg);
/* NULL while healthy; after a failure, the message of the collective that failed. */
const char *ddpc_pg_error(const ddpc_pg *pg);

/* The hang recorder. What a rank is doing between collectives, as the layer above says it; the
 * group records it with each collective and shows it to the other ranks of its host, so that a
 * timeout can say where a rank that never arrived is stuck. */
typedef enum {
    DDPC_PHASE_SETUP,
    DDPC_PHASE_DATA,
    DDPC_PHASE_FORWARD,
    DDPC_PHASE_BACKWARD,
    DDPC_PHASE_OPTIMIZER,
    DDPC_PHASE_EVAL,
    DDPC_PHASE_CHECKPOINT,
    DDPC_PHASE_COUNT
} ddpc_phase;
const char *ddpc_phase_name(ddpc_phase phase); /* "backward" */
/* Caller's thread; costs one store (and one to shared memory on the shm backend). */
void ddpc_pg_set_phase(ddpc_pg *pg, ddpc_phase phase);
/* Every group keeps its last DDPC_FLIGHT_ENTRIES collectives (sequence number, op, dtype, count,
 * phase, start and end). With a directory set, the first failed collective writes them to
 * DIR/rank<k>.json (DIR is created). NULL or "" turns the file off; the ring is always kept. */
#define DDPC_FLIGHT_ENTRIES 64
ddpc_status ddpc_pg_set_flight_dir(ddpc_pg *pg, const char *dir);

/* Blocking collectives. Argument order follows MPI/NCCL. In place when send == recv (for
 * all_gather: send == recv + rank*count; for reduce_scatter: recv == send + rank*recv_count).
 * Every rank's result is bitwise identical and identical run to run (fixed reduction order).
 * count 0 is a valid no-op that still synchronises. Errors: DDPC_EINVAL (bad arguments),
 * DDPC_ETIMEOUT naming the collective, its sequence number and the ranks that never arrived,
 * DDPC_EPEER (a peer died or the group failed earlier). */
ddpc_status ddpc_pg_all_reduce(ddpc_pg *pg, const void *send, void *recv, size_t count,
                               ddpc_dtype dtype, ddpc_reduce_op op);
/* buf: (count) — root's values land on every rank. */
ddpc_status ddpc_pg_broadcast(ddpc_pg *pg, void *buf, size_t count, ddpc_dtype dtype, int root);
/* send: (count), recv: (world_size, count) — rank r's block at recv + r*count. */
ddpc_status ddpc_pg_all_gather(ddpc_pg *pg, const void *send, void *recv, size_t count,
                               ddpc_dtype dtype);
/* send: (world_size, recv_count), recv: (recv_count) — rank r receives the reduction of block r. */
ddpc_status ddpc_pg_reduce_scatter(ddpc_pg *pg, const void *send, void *recv, size_t recv_count,
                                   ddpc_dtype dtype, ddpc_reduce_op op);
ddpc_status ddpc_pg_barrier(ddpc_pg *pg);

/* Async forms: enqueue on the comm thread and return at once with a work handle in *work. The
 * group borrows the buffers until the work completes. Argument errors are returned here; failures
 * of the collective itself are returned by ddpc_work_wait. Work completes in issue order; a
 * blocking collective issued after async ones runs after them. */
ddpc_status ddpc_pg_iall_reduce(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                ddpc_dtype dtype, ddpc_reduce_op op, ddpc_work **work);
ddpc_status ddpc_pg_ibroadcast(ddpc_pg *pg, void *buf, size_t count, ddpc_dtype dtype, int root,
                               ddpc_work **work);
ddpc_status ddpc_pg_iall_gather(ddpc_pg *pg, const void *send, void *recv, size_t count,
                                ddpc_dtype dtype, ddpc_work **work);
ddpc_status ddpc_pg_ireduce_scatter(ddpc_pg *pg, const void *send, void *recv, size_t recv_count,
                                    ddpc_dtype dtype, ddpc_reduce_op op, ddpc_work **work);
ddpc_status ddpc_pg_ibarrier(ddpc_pg *pg, ddpc_work **work);

/* Blocks until the work is done; returns its status (the message is set on this thread). */
ddpc_status ddpc_work_wait(ddpc_work *work);
/* Sets *done without blocking; returns the work's status once done, DDPC_OK before. */
ddpc_status ddpc_work_test(ddpc_work *work, bool *done);
/* Seconds the collective itself ran (from the moment it started executing, after any work queued
 * before it, to its completion); 0 until done. */
double ddpc_work_seconds(const ddpc_work *work);
/* Waits if still running, then releases the handle: the group keeps it for its next async call
 * (so a warm training step allocates nothing), or frees it when the group is already destroyed.
 * Not concurrently with ddpc_pg_destroy. NULL is a no-op. */
void ddpc_work_destroy(ddpc_work *work);

#ifdef __cplusplus
}
#endif
#endif
