// SPDX-License-Identifier: MIT
/* Tests for the launcher's pure parts: worker environments (torchrun's contract), the nested-launch
 * check, OMP_NUM_THREADS, run ids, program lookup, port reservation, wait-status names, hostfiles
 * and the mpirun command line. */
#include <ddpc/alloc.h>
#include <ddpc/launch.h>

#include "check.h"
#include "launch/launch_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int count_key(char **env, const char *key)
{
    int n = 0;
    size_t len = strlen(key);
    for (int i = 0; env[i]; i++)
        n += strncmp(env[i], key, len) == 0 && env[i][len] == '=';
    return n;
}

static const char *get(char **env, const char *key)
{
    return ddpc_comm_env_lookup((const char *const *)env, key);
}

static void test_worker_env_contract(void)
{
    int64_t live = ddpc_alloc_live();
    ddpc_launch_config c = ddpc_launch_config_default();
    c.nproc_per_node = 4;
    c.nnodes = 2;
    c.node_rank = 1;
    c.max_restarts = 3;
    c.backend = DDPC_BACKEND_SHM;
    c.collective_timeout_s = 2.5;
    const char *base[] = {"PATH=/bin",
                          "RANK=99",
                          "WORLD_SIZE=7",
                          "HOME=/root",
                          "DDPC_BACKEND=mpi",
                          "TORCHELASTIC_RUN_ID=old",
                          "DDPC_STORE_TOKEN=the-callers-own-token",
                          "DDPC_STORE_TOKEN_FILE=/home/u/token",
                          NULL};
    ddpc__job_ids ids = {.master_port = 29555, .omp_threads = 2, .restart_count = 1};
    snprintf(ids.run_id, sizeof ids.run_id, "job7");
    snprintf(ids.store_token, sizeof ids.store_token, "the-jobs-token-0123456789");
    char **env = NULL;
    CHECK_EQ_INT(ddpc__worker_env(&c, base, &ids, 2, &env), DDPC_OK);
    CHECK(strcmp(get(env, "RANK"), "6") == 0);
    CHECK(strcmp(get(env, "LOCAL_RANK"), "2") == 0);
    CHECK(strcmp(get(env, "WORLD_SIZE"), "8") == 0);
    CHECK(strcmp(get(env, "LOCAL_WORLD_SIZE"), "4") == 0);
    CHECK(strcmp(get(env, "GROUP_RANK"), "1") == 0);
    CHECK(strcmp(get(env, "GROUP_WORLD_SIZE"), "2") == 0);
    CHECK(strcmp(get(env, "ROLE_RANK"), "6") == 0);
    CHECK(strcmp(get(env, "ROLE_WORLD_SIZE"), "8") == 0);
    CHECK(strcmp(get(env, "MASTER_ADDR"), "127.0.0.1") == 0);
    CHECK(strcmp(get(env, "MASTER_PORT"), "29555") == 0);
    CHECK(strcmp(get(env, "TORCHELASTIC_RESTART_COUNT"), "1") == 0);
    CHECK(strcmp(get(env, "TORCHELASTIC_MAX_RESTARTS"), "3") == 0);
    CHECK(strcmp(get(env, "TORCHELASTIC_RUN_ID"), "job7") == 0);
    CHECK(strcmp(get(env, "DDPC_LAUNCHER"), "1") == 0);
    CHECK(strcmp(get(env, "DDPC_BACKEND"), "shm") == 0);
    CHECK(strcmp(get(env, "DDPC_COLLECTIVE_TIMEOUT"), "2.5") == 0);
    CHECK(strcmp(get(env, "OMP_NUM_THREADS"), "2") == 0);
    CHECK(strcmp(get(env, "PATH"), "/bin") == 0 && strcmp(get(env, "HOME"), "/root") == 0);
    /* the job's token itself, never the file that held it */
    CHECK(strcmp(get(env, "DDPC_STORE_TOKEN"), "the-jobs-token-0123456789") == 0);
    CHECK_EQ_INT(count_key(env, "DDPC_STORE_TOKEN_FILE"), 0);
    const char *once[] = {"RANK", "WORLD_SIZE", "DDPC_BACKEND", "TORCHELASTIC_RUN_ID", "PATH",
                          "DDPC_STORE_TOKEN"};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(count_key(env, once[i]), 1);
    ddpc__strv_free(env);
    CHECK_EQ_INT(ddpc_alloc_live(), live);
}

static void test_worker_env_leaves_caller_choices(void)
{
    ddpc_launch_config c = ddpc_launch_config_default();
    const char *base[] = {"DDPC_BACKEND=mpi", "DDPC_COLLECTIVE_TIMEOUT=9", "OMP_NUM_THREADS=5",
                          NULL};
    ddpc__job_ids ids = {.master_port = 1, .omp_threads = 0};
    char **env = NULL;
    CHECK_EQ_INT(ddpc__worker_env(&c, base, &ids, 0, &env), DDPC_OK);
    CHECK(strcmp(get(env, "DDPC_BACKEND"), "mpi") == 0);
    CHECK(strcmp(get(env, "DDPC_COLLECTIVE_TIMEOUT"), "9") == 0);
    CHECK(strcmp(get(env, "OMP_NUM_THREADS"), "5") == 0);
    CHECK(strcmp(get(env, "WORLD_SIZE"), "1") == 0);
    ddpc__strv_free(env);
    /* Allocation failure part-way leaves nothing behind. */
    int64_t live = ddpc_alloc_live();
    for (int k = 0; k < 12; k++) {
        ddpc_alloc_fail_after(k);
        env = NULL;
        ddpc_status s = ddpc__worker_env(&c, base, &ids, 0, &env);
        ddpc_alloc_fail_after(-1);
        CHECK(s == DDPC_OK || s == DDPC_ENOMEM);
        if (s == DDPC_OK)
            ddpc__strv_free(env);
        CHECK_EQ_INT(ddpc_alloc_live(), live);
    }
}

static void test_strv_grows(void)
{
    char **v = NULL;
    int n = 0;
    for (int i = 0; i < 100; i++)
        CHECK_EQ_INT(ddpc__strv_pushf(&v, &n, "K%d=%d", i, i * i), DDPC_OK);
    CHECK_EQ_INT(n, 100);
    CHECK(v[100] == NULL);
    CHECK(strcmp(v[0], "K0=0") == 0 && strcmp(v[99], "K99=9801") == 0);
    CHECK(strcmp(ddpc_comm_env_lookup((const char *const *)v, "K57"), "3249") == 0);
    CHECK(ddpc_comm_env_lookup((const char *const *)v, "K5") != NULL);
    CHECK(ddpc_comm_env_lookup((const char *const *)v, "K") == NULL);
    CHECK(ddpc_comm_env_lookup(NULL, "K") == NULL);
    ddpc__strv_free(v);
}

static void test_omp_threads(void)
{
    const char *none[] = {NULL};
    const char *set[] = {"OMP_NUM_THREADS=3", NULL};
    CHECK_EQ_INT(ddpc__omp_threads(none, 1, 8), 0);
    CHECK_EQ_INT(ddpc__omp_threads(none, 2, 8), 4);
    CHECK_EQ_INT(ddpc__omp_threads(none, 3, 8), 2);
    CHECK_EQ_INT(ddpc__omp_threads(none, 4, 2), 1);
    CHECK_EQ_INT(ddpc__omp_threads(set, 4, 8), 0);
}

static void test_nested_launch_refused(void)
{
    const char *plain[] = {"PATH=/bin", "RANK=0", "WORLD_SIZE=1", "OMPI_COMM_WORLD_SIZE=1", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(plain), DDPC_OK);
    const char *cases[][3] = {
        {"TORCHELASTIC_RUN_ID=abc", "HOME=/root", "TORCHELASTIC_RUN_ID is set"},
        {"DDPC_LAUNCHER=1", "WORLD_SIZE=1", "DDPC_LAUNCHER is set"},
        {"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2", "rank 2 of 4 started by mpirun"},
        {"PMI_SIZE=2", "PMI_RANK=0", "rank 0 of 2 started by an MPI launcher"},
        {"SLURM_STEP_ID=0", "SLURM_PROCID=1", "rank 1 of 3 started by srun"},
        /* Malformed rank variables: the launcher marker alone still refuses. */
        {"TORCHELASTIC_RUN_ID=x", "RANK=abc", "TORCHELASTIC_RUN_ID or DDPC_LAUNCHER is set"},
    };
    for (int i = 0; i < 6; i++) {
        const char *env[] = {"PATH=/bin",      cases[i][0],      cases[i][1],
                             "SLURM_NTASKS=3", "SLURM_JOB_ID=7", NULL};
        CHECK_EQ_INT(ddpc_launch_check_nested(env), DDPC_EINVAL);
        CHECK_STR_CONTAINS(ddpc_last_error(), cases[i][2]);
        CHECK_STR_CONTAINS(ddpc_last_error(), "another launcher");
    }
    /* An sbatch script (SLURM variables, no step) may start a job; so may a 1-rank mpirun. */
    const char *sbatch[] = {"SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=7", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(sbatch), DDPC_OK);
    const char *one[] = {"OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=0", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(one), DDPC_OK);
    /* A malformed environment without launcher markers does not block a launch. */
    const char *junk[] = {"OMPI_COMM_WORLD_SIZE=abc", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(junk), DDPC_OK);
}

/* A platform that starts every worker itself injects RANK, LOCAL_RANK and WORLD_SIZE (no launcher
 * marker): 'ddpc run' there would be a second level of workers. */
static void test_platform_worker_refused(void)
{
    const char *injected[] = {"RANK=5",        "LOCAL_RANK=1",         "WORLD_SIZE=8",
                              "MASTER_PORT=1", "MASTER_ADDR=10.0.0.1", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(injected), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "RANK=5, LOCAL_RANK=1 and WORLD_SIZE=8 are set");
    CHECK_STR_CONTAINS(ddpc_last_error(), "a second level of workers");
    CHECK_STR_CONTAINS(ddpc_last_error(), "run the program directly instead (e.g. 'ddpc train");
    /* even a world of one, and even malformed: the platform made this process a worker */
    const char *one[] = {"RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=1", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(one), DDPC_EINVAL);
    const char *junk[] = {"RANK=x", "LOCAL_RANK=0", "WORLD_SIZE=2", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(junk), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "RANK=x");
    /* two of the three is not a worker's environment (a stale export): ddpc run may start */
    const char *two[] = {"RANK=0", "WORLD_SIZE=1", NULL};
    CHECK_EQ_INT(ddpc_launch_check_nested(two), DDPC_OK);
}

static void test_run_ids(void)
{
    char a[128], b[128];
    ddpc__run_id_make(a, sizeof a);
    ddpc__run_id_make(b, sizeof b);
    CHECK(strcmp(a, b) != 0);
    CHECK(ddpc__run_id_valid(a));
    CHECK(ddpc__run_id_valid("x.Y_z-9"));
    CHECK(!ddpc__run_id_valid(""));
    CHECK(!ddpc__run_id_valid("a b"));
    char longid[120];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    CHECK(!ddpc__run_id_valid(longid));
}

static void test_find_program(void)
{
    char out[512];
    const char *env[] = {"PATH=/nonexistent::/bin:/usr/bin", NULL};
    CHECK_EQ_INT(ddpc__find_program("sh", env, out, sizeof out), DDPC_OK);
    CHECK(strcmp(out, "/bin/sh") == 0);
    CHECK_EQ_INT(ddpc__find_program("/bin/sh", env, out, sizeof out), DDPC_OK);
    CHECK_EQ_INT(ddpc__find_program("no-such-prog-xyz", env, out, sizeof out), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "'no-such-prog-xyz' was not found in PATH");
    CHECK_EQ_INT(ddpc__find_program("/etc/hostname-nope", env, out, sizeof out), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc__find_program("/etc", env, out, sizeof out), DDPC_EINVAL);
    const char *nopath[] = {NULL};
    CHECK_EQ_INT(ddpc__find_program("sh", nopath, out, sizeof out), DDPC_OK);
}

/* A socket bound to 127.0.0.1:port, optionally SO_REUSEADDR; -1 when bind fails. */
static int bind_port(int port, int reuse)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    return s;
}

static void test_port_reservation(void)
{
    int fd = -1, port = 0;
    CHECK_EQ_INT(ddpc__port_reserve("127.0.0.1", &fd, &port), DDPC_OK);
    CHECK(fd >= 0 && port > 0 && port < 65536);
    /* Another plain bind cannot take the port while the launcher holds it... */
    CHECK(bind_port(port, 0) < 0);
    /* ...but rank 0's SO_REUSEADDR listener can, and is then the one that accepts. */
    int l = bind_port(port, 1);
    CHECK(l >= 0);
    CHECK(l >= 0 && listen(l, 4) == 0);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0);
    close(c);
    if (l >= 0)
        close(l);
    int fd2 = -1, port2 = 0;
    CHECK_EQ_INT(ddpc__port_reserve("localhost", &fd2, &port2), DDPC_OK);
    CHECK(port2 != port);
    close(fd2);
    close(fd);
    CHECK_EQ_INT(ddpc__port_reserve("no-such-host.invalid", &fd, &port), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "no-such-host.invalid");
}

static int status_of_child(int how)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (how < 0)
            raise(-how);
        _exit(how);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void test_wait_status_names(void)
{
    char buf[64];
    int st = status_of_child(3);
    CHECK(strcmp(ddpc_launch_describe_wait(st, buf, sizeof buf), "exit code 3") == 0);
    CHECK_EQ_INT(ddpc_launch_exit_code(st), 3);
    st = status_of_child(-SIGKILL);
    CHECK(strcmp(ddpc_launch_describe_wait(st, buf, sizeof buf), "signal SIGKILL") == 0);
    CHECK_EQ_INT(ddpc_launch_exit_code(st), 137);
    st = status_of_child(-SIGTERM);
    CHECK_EQ_INT(ddpc_launch_exit_code(st), 143);
    CHECK_EQ_INT(ddpc_launch_exit_code(status_of_child(0)), 0);
    CHECK(strcmp(ddpc_launch_signal_name(SIGSEGV, buf, sizeof buf), "SIGSEGV") == 0);
    CHECK(strcmp(ddpc_launch_signal_name(SIGINT, buf, sizeof buf), "SIGINT") == 0);
    CHECK(strcmp(ddpc_launch_signal_name(77, buf, sizeof buf), "SIG77") == 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_hostfile(void)
{
    char path[] = "/tmp/ddpc_test_hostsXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    int hosts = 0;
    write_file(path, "# cluster\nnode1 slots=4\n\n  node2 slots=4 # spare\nnode1\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_OK);
    CHECK_EQ_INT(hosts, 2);
    write_file(path, "# nothing\n\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "names no host");
    write_file(path, "node1\nnode2 slots=4 max_slots=0\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), ":2: max_slots '0' is not an integer in [1, 65536]");
    write_file(path, "node1 # a comment\r\n\t 10.0.0.1\tslots=2\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_OK);
    CHECK_EQ_INT(hosts, 2);
    /* found by tests/fuzz/fuzz_hostfile.c: an option's terminal escape reached the message */
    write_file(path, "node1 slots=\x1b[2J\nnode2 \x1b]0;x\x07=1\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EFORMAT);
    CHECK(strchr(ddpc_last_error(), '\x1b') == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "slots '?[2J' is not an integer");
    write_file(path, "node1\nnode2 \x1b]0;x\x07=1\n");
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EFORMAT);
    CHECK(strchr(ddpc_last_error(), '\x1b') == NULL);
    CHECK_STR_CONTAINS(ddpc_last_error(), ":2: '?]0;x?=1' is not slots=N");
    write_file(path, ".\n"); /* and the root domain names no host */
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "has no label");
    unlink(path);
    CHECK_EQ_INT(ddpc__hostfile_hosts(path, &hosts), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), path);
}

static void test_host_check(void)
{
    static const char *const good[] = {
        "localhost", "node-1.example.com", "NODE4.", "10.0.0.2", "::1", "fd00::3", "a", "0123"};
    static const char *const bad[] = {"",     "-oProxyCommand=x", "node_1", "a..b",     "-a.b",
                                      "a-.b", "node 1",           ".a",     "a\x1b[2J", ".",
                                      ".."};
    char why[512];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(ddpc__host_check(good[i], why, sizeof why));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!ddpc__host_check(bad[i], why, sizeof why));
    CHECK(!ddpc__host_check("a\x1b[2J", why, sizeof why));
    CHECK(strchr(why, '\x1b') == NULL); /* a terminal escape is not echoed back */
    char name[300];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(!ddpc__host_check(name, why, sizeof why));
    CHECK_STR_CONTAINS(why, "is 299 characters long");
    for (int i = 0; i < 63; i++)
        name[i] = 'b';
    name[63] = '\0';
    CHECK(ddpc__host_check(name, why, sizeof why)); /* a label of 63 is the most DNS allows */
    name[63] = 'b';
    name[64] = '\0';
    CHECK(!ddpc__host_check(name, why, sizeof why));
    CHECK_STR_CONTAINS(why, "label of 64 characters");
}

static void test_mpirun_argv(void)
{
    ddpc_launch_config c = ddpc_launch_config_default();
    char *prog[] = {"./train", "cfg.yaml", NULL};
    c.argc = 2;
    c.argv = prog;
    c.nproc_per_node = 2;
    c.collective_timeout_s = 30;
    snprintf(c.hostfile, sizeof c.hostfile, "hosts.txt");
    char **v = NULL;
    CHECK_EQ_INT(ddpc__mpirun_argv(&c, "/usr/bin/mpirun", 3, true, 1, &v), DDPC_OK);
    const char *want[] = {"/usr/bin/mpirun",
                          "-np",
                          "6",
                          "--hostfile",
                          "hosts.txt",
                          "--map-by",
                          "ppr:2:node",
                          "--allow-run-as-root",
                          "--oversubscribe",
                          "-x",
                          "DDPC_BACKEND=mpi",
                          "-x",
                          "DDPC_COLLECTIVE_TIMEOUT=30",
                          "-x",
                          "OMP_NUM_THREADS=1",
                          "./train",
                          "cfg.yaml",
                          NULL};
    for (int i = 0; want[i]; i++) {
        CHECK(v[i] != NULL);
        if (!v[i])
            break;
        if (strcmp(v[i], want[i]) != 0)
            fprintf(stderr, "argv[%d] = '%s', want '%s'\n", i, v[i], want[i]);
        CHECK(strcmp(v[i], want[i]) == 0);
    }
    CHECK(v[17] == NULL);
    ddpc__strv_free(v);
    c.hostfile[0] = '\0';
    c.collective_timeout_s = 0;
    c.tee = true;
    CHECK_EQ_INT(ddpc__mpirun_argv(&c, "mpirun", 1, false, 0, &v), DDPC_OK);
    const char *want2[] = {"mpirun",       "-np",        "2",
                           "--map-by",     "ppr:2:node", "--oversubscribe",
                           "--tag-output", "-x",         "DDPC_BACKEND=mpi",
                           "./train",      "cfg.yaml",   NULL};
    for (int i = 0; want2[i]; i++)
        CHECK(v[i] && strcmp(v[i], want2[i]) == 0);
    CHECK(v[11] == NULL);
    ddpc__strv_free(v);
}

static void test_mpirun_nodes(void)
{
    ddpc_launch_config c = ddpc_launch_config_default();
    const char *none[] = {NULL};
    const char *slurm[] = {"SLURM_JOB_NODELIST=node[01-03],gpu7", NULL};
    const char *bad[] = {"SLURM_JOB_NODELIST=node[3-1]", NULL};
    int n = 0;
    c.backend = DDPC_BACKEND_MPI;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, none, &n), DDPC_OK);
    CHECK_EQ_INT(n, 1);
    c.nnodes = 4;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, slurm, &n), DDPC_OK);
    CHECK_EQ_INT(n, 4);
    c.nnodes = 5;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, slurm, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "--nnodes 5 but the SLURM allocation");
    CHECK_STR_CONTAINS(ddpc_last_error(), "has 4 host(s)");
    c.nnodes = 2;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, bad, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "SLURM_JOB_NODELIST=node[3-1]");
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, none, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "--nnodes 2 needs the hosts");
    c.node_rank = 1;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, slurm, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "--node-rank 1");
    c.node_rank = 0;
    c.max_restarts = 2;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, slurm, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "--max-restarts 2");
    /* A hostfile gives the node count; --nnodes may use fewer of its hosts, not more. */
    char path[] = "/tmp/ddpc_test_hostsXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    write_file(path, "a\nb\nc\n");
    c.max_restarts = 0;
    c.nnodes = 1;
    snprintf(c.hostfile, sizeof c.hostfile, "%s", path);
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, none, &n), DDPC_OK);
    CHECK_EQ_INT(n, 3);
    c.nnodes = 2;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, none, &n), DDPC_OK);
    CHECK_EQ_INT(n, 2);
    c.nnodes = 4;
    CHECK_EQ_INT(ddpc__mpirun_nodes(&c, none, &n), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "names 3 host(s)");
    unlink(path);
}

int main(void)
{
    RUN_TEST(test_worker_env_contract);
    RUN_TEST(test_worker_env_leaves_caller_choices);
    RUN_TEST(test_strv_grows);
    RUN_TEST(test_omp_threads);
    RUN_TEST(test_nested_launch_refused);
    RUN_TEST(test_platform_worker_refused);
    RUN_TEST(test_run_ids);
    RUN_TEST(test_find_program);
    RUN_TEST(test_port_reservation);
    RUN_TEST(test_wait_status_names);
    RUN_TEST(test_hostfile);
    RUN_TEST(test_host_check);
    RUN_TEST(test_mpirun_argv);
    RUN_TEST(test_mpirun_nodes);
    return check_summary();
}
