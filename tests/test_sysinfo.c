// SPDX-License-Identifier: MIT
/* Tests for ddpc_sysinfo_collect (src/core/sysinfo_*.c) and ddpc_comm_report_collect
 * (src/comm/report.c, mpi_info.c): every field is filled and terminated, host facts are
 * plausible, and the distributed part follows the process environment (variables listed, rank
 * resolved, backend choice, parse errors). */
#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/sysinfo.h>

#include "check.h"

#include <unistd.h>

#define TERMINATED(field) CHECK(memchr((field), '\0', sizeof(field)) != NULL)

static ddpc_sysinfo *collect(void)
{
    ddpc_sysinfo *s = ddpc_malloc(sizeof *s);
    memset(s, 0x7f, sizeof *s); /* every field must be written */
    ddpc_sysinfo_collect(s);
    return s;
}

static ddpc_comm_report *report(void)
{
    ddpc_comm_report *d = ddpc_malloc(sizeof *d);
    memset(d, 0x7f, sizeof *d);
    ddpc_comm_report_collect(d);
    return d;
}

static void test_fields_filled(void)
{
    ddpc_sysinfo *s = collect();
    TERMINATED(s->os);
    TERMINATED(s->distro);
    TERMINATED(s->hostname);
    TERMINATED(s->cpu_model);
    TERMINATED(s->simd_host);
    TERMINATED(s->simd_build);
    TERMINATED(s->simd_missing);
    TERMINATED(s->compiler);
    TERMINATED(s->build_flags);
    TERMINATED(s->blas_library);
    TERMINATED(s->blas_config);
    TERMINATED(s->openmp);
    TERMINATED(s->cuda_driver);
    TERMINATED(s->nccl);
    CHECK(strncmp(s->os, "Linux ", 6) == 0);
    CHECK(s->cpu_model[0] != '\0');
    CHECK(s->cpu_threads >= 1);
    CHECK(s->cpu_allowed >= 1 && s->cpu_allowed <= s->cpu_threads);
    CHECK(s->cpu_cores >= 0 && s->cpu_cores <= s->cpu_threads);
    CHECK_EQ_INT(s->cpu_threads, (int)sysconf(_SC_NPROCESSORS_ONLN));
    /* the tests run on the machine that built them: nothing the build uses can be missing */
    CHECK(s->simd_missing[0] == '\0');
    CHECK(strncmp(s->compiler, "gcc ", 4) == 0 || strncmp(s->compiler, "clang ", 6) == 0);
    CHECK_STR_CONTAINS(s->build_flags, "release flags");
    CHECK_STR_CONTAINS(s->blas_library, "blas");
    CHECK(s->blas_threads >= 1);
    CHECK_STR_CONTAINS(s->openmp, "OpenMP ");
    CHECK(s->omp_max_threads >= 1);
    ddpc_comm_report *d = report();
    TERMINATED(d->mpi_library);
    TERMINATED(d->vars);
    TERMINATED(d->error);
    CHECK(d->mpi_built == ddpc_backend_available(DDPC_BACKEND_MPI));
    if (d->mpi_built)
        CHECK(d->mpi_library[0] != '\0' && strstr(d->mpi_library, "MPI standard") != NULL);
    else
        CHECK(strcmp(d->mpi_library, "not built with MPI") == 0);
    ddpc_free(d);
    CHECK(strncmp(s->cuda_driver, "CUDA driver ", 12) == 0 ||
          strncmp(s->cuda_driver, "not found (", 11) == 0 ||
          strncmp(s->cuda_driver, "not usable (", 12) == 0);
    CHECK(s->gpu_count >= 0);
    for (int i = 0; i < s->gpu_count && i < DDPC_SYSINFO_MAX_GPUS; i++)
        CHECK(s->gpu_names[i][0] != '\0');
    CHECK(strncmp(s->nccl, "NCCL ", 5) == 0 || strncmp(s->nccl, "not found (", 11) == 0);
    ddpc_free(s);
}

static void test_comm_part_follows_environment(void)
{
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    ddpc_comm_report *s = report();
    CHECK_EQ_INT(s->status, DDPC_OK);
    CHECK_STR_CONTAINS(s->vars, "RANK=1\n");
    CHECK_STR_CONTAINS(s->vars, "WORLD_SIZE=2\n");
    CHECK_EQ_INT(s->env.source, DDPC_COMM_SOURCE_TORCHRUN);
    CHECK_EQ_INT(s->env.rank, 1);
    CHECK_EQ_INT(s->backend, DDPC_BACKEND_SHM);
    ddpc_free(s);

    setenv("DDPC_BACKEND", "mpi", 1);
    s = report();
    CHECK_EQ_INT(s->backend, DDPC_BACKEND_MPI);
    ddpc_free(s);
    unsetenv("DDPC_BACKEND");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");

    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    s = report();
    CHECK_EQ_INT(s->env.source, DDPC_COMM_SOURCE_OPENMPI);
    CHECK_EQ_INT(s->backend,
                 ddpc_backend_available(DDPC_BACKEND_MPI) ? DDPC_BACKEND_MPI : DDPC_BACKEND_SHM);
    ddpc_free(s);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");

    setenv("WORLD_SIZE", "abc", 1);
    setenv("RANK", "0", 1);
    s = report();
    CHECK_EQ_INT(s->status, DDPC_EINVAL);
    CHECK_STR_CONTAINS(s->error, "WORLD_SIZE=abc is not a number");
    CHECK_STR_CONTAINS(s->vars, "WORLD_SIZE=abc\n");
    ddpc_free(s);
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");

    s = report();
    CHECK_EQ_INT(s->status, DDPC_OK);
    CHECK_EQ_INT(s->env.source, DDPC_COMM_SOURCE_NONE);
    CHECK_EQ_INT(s->env.world_size, 1);
    ddpc_free(s);
}

static void test_long_values_are_cut(void)
{
    char v[400];
    memset(v, 'x', sizeof v - 1);
    v[sizeof v - 1] = '\0';
    setenv("SLURM_JOB_NODELIST", v, 1);
    ddpc_comm_report *s = report();
    CHECK_STR_CONTAINS(s->vars, "SLURM_JOB_NODELIST=xxxx");
    CHECK_STR_CONTAINS(s->vars, "...\n");
    CHECK(strlen(s->vars) < 220);
    ddpc_free(s);
    unsetenv("SLURM_JOB_NODELIST");
}

static void test_memory_figures(void)
{
    uint64_t avail = 0, rss = 0, peak = 0;
    CHECK_EQ_INT(ddpc_sysinfo_mem_available(&avail), DDPC_OK);
    CHECK(avail > 0);
    CHECK_EQ_INT(ddpc_sysinfo_process_memory(&rss, &peak), DDPC_OK);
    CHECK(rss > 0 && peak >= rss);
    /* Touching 32 MiB raises the resident set's peak by about that much. */
    size_t n = (size_t)32 << 20;
    char *p = ddpc_malloc(n);
    CHECK(p != NULL);
    memset(p, 1, n);
    uint64_t rss2 = 0, peak2 = 0;
    CHECK_EQ_INT(ddpc_sysinfo_process_memory(&rss2, &peak2), DDPC_OK);
    CHECK(peak2 >= peak + n / 2 || peak2 >= rss + n / 2);
    ddpc_free(p);
}

int main(void)
{
    RUN_TEST(test_memory_figures);
    RUN_TEST(test_fields_filled);
    RUN_TEST(test_comm_part_follows_environment);
    RUN_TEST(test_long_values_are_cut);
    return check_summary();
}
