// SPDX-License-Identifier: MIT
/* Tests for src/launch/options.c: `ddpc run` arguments into a ddpc_launch_config, and the one-line
 * errors bad arguments give. */
#include <ddpc/launch.h>

#include "check.h"

#include <unistd.h>

static ddpc_status parse(ddpc_launch_config *c, int argc, char **argv)
{
    *c = ddpc_launch_config_default();
    return ddpc_launch_parse_args(argc, argv, c);
}

static void test_defaults(void)
{
    ddpc_launch_config c;
    char *argv[] = {"prog", NULL};
    CHECK_EQ_INT(parse(&c, 1, argv), DDPC_OK);
    CHECK_EQ_INT(c.nproc_per_node, 1);
    CHECK_EQ_INT(c.nnodes, 1);
    CHECK_EQ_INT(c.node_rank, 0);
    CHECK_EQ_INT(c.backend, DDPC_BACKEND_AUTO);
    CHECK_EQ_INT(c.max_restarts, 0);
    CHECK_NEAR(c.monitor_interval_s, 0.1, 1e-12);
    CHECK_NEAR(c.collective_timeout_s, 0.0, 0.0);
    CHECK(!c.tee && !c.help);
    CHECK(strcmp(c.master_addr, "127.0.0.1") == 0);
    CHECK_EQ_INT(c.master_port, 0);
    CHECK(c.run_id[0] == '\0' && c.log_dir[0] == '\0' && c.hostfile[0] == '\0');
    CHECK_EQ_INT(c.argc, 1);
    CHECK(c.argv == argv);
    CHECK(c.out == stdout && c.err == stderr);
    CHECK(!ddpc_launch_uses_mpirun(&c));
}

static void test_every_option(void)
{
    ddpc_launch_config c;
    char *argv[] = {"--nproc-per-node",
                    "3",
                    "--backend=shm",
                    "--max-restarts",
                    "2",
                    "--monitor-interval",
                    "0.05",
                    "--log-dir",
                    "/tmp/x",
                    "--tee",
                    "--master-addr",
                    "localhost",
                    "--master-port=29500",
                    "--run-id",
                    "job.1_a-b",
                    "--collective-timeout",
                    "7.5",
                    "--nnodes",
                    "1",
                    "--node-rank",
                    "0",
                    "--",
                    "prog",
                    "--nproc-per-node",
                    "9",
                    NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    CHECK_EQ_INT(parse(&c, argc, argv), DDPC_OK);
    CHECK_EQ_INT(c.nproc_per_node, 3);
    CHECK_EQ_INT(c.backend, DDPC_BACKEND_SHM);
    CHECK_EQ_INT(c.max_restarts, 2);
    CHECK_NEAR(c.monitor_interval_s, 0.05, 1e-12);
    CHECK(strcmp(c.log_dir, "/tmp/x") == 0);
    CHECK(c.tee);
    CHECK(strcmp(c.master_addr, "localhost") == 0);
    CHECK_EQ_INT(c.master_port, 29500);
    CHECK(strcmp(c.run_id, "job.1_a-b") == 0);
    CHECK_NEAR(c.collective_timeout_s, 7.5, 1e-12);
    /* Everything after `--` belongs to PROGRAM, even option-like words. */
    CHECK_EQ_INT(c.argc, 3);
    CHECK(strcmp(c.argv[0], "prog") == 0 && strcmp(c.argv[1], "--nproc-per-node") == 0);
}

static void test_program_without_dashdash_and_underscores(void)
{
    ddpc_launch_config c;
    char *argv[] = {"--nproc_per_node=2", "--max_restarts", "1", "bash", "-c", "echo", NULL};
    CHECK_EQ_INT(parse(&c, 6, argv), DDPC_OK);
    CHECK_EQ_INT(c.nproc_per_node, 2);
    CHECK_EQ_INT(c.max_restarts, 1);
    CHECK_EQ_INT(c.argc, 3);
    CHECK(strcmp(c.argv[0], "bash") == 0 && strcmp(c.argv[1], "-c") == 0);
}

static void test_auto_and_mpirun_routes(void)
{
    ddpc_launch_config c;
    char *a1[] = {"--nproc-per-node", "auto", "p", NULL};
    CHECK_EQ_INT(parse(&c, 3, a1), DDPC_OK);
    CHECK_EQ_INT(c.nproc_per_node, (int)sysconf(_SC_NPROCESSORS_ONLN));
    char *a2[] = {"--hostfile", "hosts", "p", NULL};
    CHECK_EQ_INT(parse(&c, 3, a2), DDPC_OK);
    CHECK(ddpc_launch_uses_mpirun(&c));
    char *a3[] = {"--backend", "mpi", "p", NULL};
    CHECK_EQ_INT(parse(&c, 3, a3), DDPC_OK);
    CHECK(ddpc_launch_uses_mpirun(&c));
    char *a4[] = {"--nnodes", "2", "--node-rank", "1", "p", NULL};
    CHECK_EQ_INT(parse(&c, 5, a4), DDPC_OK);
    CHECK(ddpc_launch_uses_mpirun(&c));
    CHECK(!ddpc_launch_per_node(&c));
}

/* --nnodes with --master-addr is a per-node launch (one ddpc run per host), not mpirun's. */
static void test_per_node_route(void)
{
    ddpc_launch_config c;
    char *a1[] = {"--nnodes=2", "--node_rank",       "1",     "--master-addr",
                  "10.0.0.1",   "--master-port",     "29500", "--rdzv-timeout",
                  "7.5",        "--agent_timeout=4", "p",     NULL};
    CHECK_EQ_INT(parse(&c, 11, a1), DDPC_OK);
    CHECK(ddpc_launch_per_node(&c));
    CHECK(!ddpc_launch_uses_mpirun(&c));
    CHECK(c.master_addr_set);
    CHECK_NEAR(c.rdzv_timeout_s, 7.5, 1e-12);
    CHECK_NEAR(c.agent_timeout_s, 4.0, 1e-12);
    /* a hostfile or the mpi backend still go to mpirun */
    char *a2[] = {"--nnodes", "2",         "--master-addr", "h", "--master-port",
                  "1",        "--backend", "mpi",           "p", NULL};
    CHECK_EQ_INT(parse(&c, 9, a2), DDPC_OK);
    CHECK(!ddpc_launch_per_node(&c) && ddpc_launch_uses_mpirun(&c));
    /* one node with a master address is the ordinary one-host launch */
    char *a3[] = {"--master-addr", "h", "p", NULL};
    CHECK_EQ_INT(parse(&c, 3, a3), DDPC_OK);
    CHECK(!ddpc_launch_per_node(&c) && !ddpc_launch_uses_mpirun(&c));
    ddpc_launch_config d = ddpc_launch_config_default();
    CHECK_NEAR(d.rdzv_timeout_s, 60.0, 0.0);
    CHECK_NEAR(d.agent_timeout_s, 30.0, 0.0);
    CHECK(!d.master_addr_set);
    char *a5[] = {"--help", NULL};
    CHECK_EQ_INT(parse(&c, 1, a5), DDPC_OK);
    CHECK(c.help);
    char *a6[] = {"-h", NULL};
    CHECK_EQ_INT(parse(&c, 1, a6), DDPC_OK);
    CHECK(c.help);
}

/* Each bad command line is DDPC_EINVAL whose message contains `want`. */
static void expect_error(const char *want, int argc, char **argv)
{
    ddpc_launch_config c;
    ddpc_clear_error();
    ddpc_status s = parse(&c, argc, argv);
    CHECK_EQ_INT(s, DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    CHECK(strchr(ddpc_last_error(), '\n') == NULL);
}

static void test_errors_name_the_culprit(void)
{
    char *a1[] = {"--nproc-per-node", "0", "p", NULL};
    expect_error("--nproc-per-node: '0'", 3, a1);
    char *a2[] = {"--nproc-per-node", "two", "p", NULL};
    expect_error("'two' is not 'auto'", 3, a2);
    char *a3[] = {"--backend", "ucc", "p", NULL};
    expect_error("--backend: 'ucc'", 3, a3);
    char *a4[] = {"--bogus", "p", NULL};
    expect_error("unknown option '--bogus'", 2, a4);
    char *a5[] = {"-x", "p", NULL};
    expect_error("unknown option '-x'", 2, a5);
    char *a6[] = {"--max-restarts", NULL};
    expect_error("--max-restarts needs a value", 1, a6);
    char *a7[] = {"--monitor-interval", "0", "p", NULL};
    expect_error("--monitor-interval: '0'", 3, a7);
    char *a8[] = {"--master-port", "70000", "p", NULL};
    expect_error("--master-port: '70000'", 3, a8);
    char *a9[] = {"--run-id", "a/b", "p", NULL};
    expect_error("--run-id: 'a/b'", 3, a9);
    char *a10[] = {"--tee=yes", "p", NULL};
    expect_error("--tee takes no value", 2, a10);
    char *a11[] = {"--nproc-per-node", "2", NULL};
    expect_error("no PROGRAM given", 2, a11);
    char *a12[] = {"--nnodes", "2", "--node-rank", "2", "p", NULL};
    expect_error("--node-rank 2 must be below --nnodes 2", 5, a12);
    char *a13[] = {"--collective-timeout", "-1", "p", NULL};
    expect_error("--collective-timeout: '-1'", 3, a13);
    char *a14[] = {"--log-dir=", "p", NULL};
    expect_error("--log-dir: '' is empty", 2, a14);
    char *a15[] = {"--max-restarts", "1x", "p", NULL};
    expect_error("--max-restarts: '1x'", 3, a15);
}

/* torchrun's rendezvous flags (options_torchrun.c): what each maps onto, IPv6 endpoints, N:N. */
static void test_torchrun_flags(void)
{
    ddpc_launch_config c;
    char *a1[] = {"--rdzv_endpoint=[::1]:29411",
                  "--rdzv-backend",
                  "c10d",
                  "--rdzv-id=j.1",
                  "--nnodes",
                  "2:2",
                  "--node-rank",
                  "1",
                  "prog"};
    CHECK_EQ_INT(parse(&c, 9, a1), DDPC_OK);
    CHECK(strcmp(c.master_addr, "::1") == 0);
    CHECK_EQ_INT(c.master_port, 29411);
    CHECK(c.master_addr_set && c.rdzv_endpoint_set && !c.standalone);
    CHECK(strcmp(c.run_id, "j.1") == 0);
    CHECK_EQ_INT(c.nnodes, 2);
    CHECK(ddpc_launch_per_node(&c));
    char *a2[] = {"--rdzv-endpoint", "node0.example", "--standalone", "prog"};
    expect_error("--standalone is a job on this host alone", 4, a2);
    char *a3[] = {"--standalone", "--nproc_per_node", "2", "prog"};
    CHECK_EQ_INT(parse(&c, 4, a3), DDPC_OK);
    CHECK(c.standalone && !c.master_addr_set && c.master_port == 0);
    char *a4[] = {"--rdzv-endpoint", "[::1]x", "prog"};
    expect_error("is not HOST[:PORT] or [IPV6][:PORT]", 3, a4);
    char *a5[] = {"--rdzv-endpoint", "-h:1", "prog"};
    expect_error("--rdzv-endpoint: ", 3, a5);
    char *a6[] = {"--standalone=1", "prog"};
    expect_error("--standalone takes no value", 2, a6);
}

int main(void)
{
    RUN_TEST(test_defaults);
    RUN_TEST(test_every_option);
    RUN_TEST(test_program_without_dashdash_and_underscores);
    RUN_TEST(test_auto_and_mpirun_routes);
    RUN_TEST(test_per_node_route);
    RUN_TEST(test_errors_name_the_culprit);
    RUN_TEST(test_torchrun_flags);
    return check_summary();
}
