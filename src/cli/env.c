// SPDX-License-Identifier: MIT
/* `ddpc env`: prints what ddpc_sysinfo_collect (core: host, build, GPUs),
 * ddpc_comm_report_collect (comm: MPI, launch variables) and ddpc_cli_env_cuda (the build's CUDA)
 * found, in the spirit of PyTorch's collect_env, for bug reports and for checking what a launcher
 * handed to a worker. Exit status 1 (with one line on stderr) when the distributed variables do not
 * make sense; the report is printed anyway. */
#include "cli/cli.h"

#include <ddpc/alloc.h>
#include <ddpc/comm.h>
#include <ddpc/kernels.h>
#include <ddpc/simd.h>
#include <ddpc/sysinfo.h>
#include <ddpc/version.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One "  Key:   value" line; an empty key continues the previous row. */
__attribute__((format(printf, 2, 3))) static void row(const char *key, const char *fmt, ...)
{
    char label[32];
    snprintf(label, sizeof label, "%s%s", key, key[0] ? ":" : "");
    printf("  %-20s ", label);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void print_system(const ddpc_sysinfo *s)
{
    printf("System\n");
    row("OS", "%s (%s)", s->os, s->distro);
    row("Hostname", "%s", s->hostname);
    row("CPU", "%s", s->cpu_model);
    row("CPU cores", "%d physical, %d logical, %d usable by this process", s->cpu_cores,
        s->cpu_threads, s->cpu_allowed);
    row("SIMD (CPU)", "%s", s->simd_host[0] ? s->simd_host : "none of the listed");
    row("SIMD (build)", "%s", s->simd_build[0] ? s->simd_build : "baseline only");
    const char *cap = getenv("DDPC_CPU_ISA");
    if (ddpc_isa_dispatched())
        row("Kernels ISA", "%s (run-time choice of baseline, avx2, avx512; best here: %s; "
                           "DDPC_CPU_ISA %s)",
            ddpc_isa_name(ddpc_isa_active()), ddpc_isa_name(ddpc_isa_supported()),
            cap && cap[0] ? cap : "unset");
    else
        row("Kernels ISA", "as built (this build has one variant of the kernels: DDPC_NATIVE or "
                           "not x86-64 with gcc 12+)");
    if (s->simd_missing[0])
        row("SIMD missing", "%s (built for a newer CPU: expect illegal-instruction crashes)",
            s->simd_missing);
}

static void print_build(const ddpc_sysinfo *s)
{
    printf("Build\n");
    row("ddpc", "%s", ddpc_version());
    row("Compiler", "%s", s->compiler);
    row("Build", "%s", s->build_flags);
    row("BLAS", "%s", s->blas_library);
    row("BLAS config", "%s", s->blas_config);
    row("BLAS threads", "%d", s->blas_threads);
    row("OpenMP", "%s, max threads %d", s->openmp, s->omp_max_threads);
    row("oneDNN", "%s", ddpc_kernels_onednn_info());
    for (int p = 0; p < DDPC_PREC_COUNT; p++) {
        char key[32];
        snprintf(key, sizeof key, "Matmul %s", ddpc_precision_name((ddpc_precision)p));
        row(key, "%s", ddpc_kernels_matmul_info((ddpc_precision)p, NULL));
    }
}

static void print_comm(const ddpc_sysinfo *s, const ddpc_comm_report *d)
{
    printf("Communication\n");
    row("Backends", "shm yes, mpi %s, gloo %s, nccl %s",
        d->mpi_built ? "yes" : "no (built without MPI)",
        ddpc_backend_available(DDPC_BACKEND_GLOO) ? "yes" : "no (built without libgloo)",
        ddpc_backend_available(DDPC_BACKEND_NCCL) ? "yes (on GPUs, with libnccl.so.2)"
                                                  : "no (built without CUDA and nccl.h)");
    row("MPI", "%s", d->mpi_library);
    row("NCCL", "%s", s->nccl);
}

/* The oldest GPUs this build's machine code runs on (cmake/cuda.cmake: sm_80, sm_90, PTX). */
enum { OLDEST_SM = 80 };

static void print_gpu(const ddpc_sysinfo *s, const ddpc_comm_report *d)
{
    ddpc_cli_cuda_report c;
    ddpc_cli_env_cuda(&c, d->status == DDPC_OK ? d->env.local_rank : 0);
    printf("GPU\n");
    row("CUDA driver", "%s", s->cuda_driver);
    row("CUDA runtime", "%s", c.runtime);
    row("cuBLAS", "%s", c.cublas);
    /* CUDA's minor-version compatibility holds within a major version only: an older major
     * driver cannot run this build's runtime. */
    int drv = s->cuda_driver_version, rt = c.runtime_version;
    if (drv > 0 && rt > 0 && drv / 1000 < rt / 1000)
        row("Driver check",
            "the driver (CUDA %d.%d) is older than this build's runtime (CUDA %d.%d): no GPU can "
            "be used until the driver is updated",
            drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    if (s->gpu_count == 0)
        row("GPUs", "none");
    for (int i = 0; i < s->gpu_count && i < DDPC_SYSINFO_MAX_GPUS; i++) {
        char key[16];
        snprintf(key, sizeof key, "GPU %d", i);
        if (s->gpu_sm[i] > 0 && s->gpu_sm[i] < OLDEST_SM && rt > 0)
            row(key, "%s (older than sm_%d: this build's kernels do not run on it)",
                s->gpu_names[i], OLDEST_SM);
        else
            row(key, "%s", s->gpu_names[i]);
    }
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible)
        row("Visible GPUs", "CUDA_VISIBLE_DEVICES=%s", visible);
    else
        row("Visible GPUs", "all (CUDA_VISIBLE_DEVICES unset)");
    row("Device (auto)", "%s", c.device);
}

static void print_dist(const ddpc_comm_report *s)
{
    printf("Distributed launch\n");
    if (!s->vars[0])
        row("Variables", "none set");
    const char *line = s->vars;
    for (int i = 0; *line; i++) {
        size_t n = strcspn(line, "\n");
        row(i == 0 ? "Variables" : "", "%.*s", (int)n, line);
        line += n + (line[n] == '\n');
    }
    if (s->status != DDPC_OK) {
        row("Resolves to", "error: %s", s->error);
        return;
    }
    const ddpc_comm_env *e = &s->env;
    row("Source", "%s", ddpc_comm_source_name(e->source));
    row("Rank", "%d of %d", e->rank, e->world_size);
    row("Local rank", "%d of %d", e->local_rank, e->local_world_size);
    row("Node", "%d of %d", e->node_rank, e->num_nodes);
    if (e->master_addr[0] && e->master_port)
        row("Master", "%s:%d", e->master_addr, e->master_port);
    else if (e->master_addr[0])
        row("Master", "%s (no port)", e->master_addr);
    else if (e->master_port)
        row("Master", "port %d (no address)", e->master_port);
    if (e->run_id[0])
        row("Run id", "%s", e->run_id);
    if (e->restart_count || e->max_restarts)
        row("Restarts", "%d of at most %d", e->restart_count, e->max_restarts);
    row("Backend", "%s%s", ddpc_backend_name(s->backend),
        e->backend == DDPC_BACKEND_AUTO ? " (chosen automatically)" : " (DDPC_BACKEND)");
    if (e->timeout_s > 0)
        row("Collective timeout", "%g s (DDPC_COLLECTIVE_TIMEOUT)", e->timeout_s);
    else
        row("Collective timeout", "300 s (default)");
    if (e->nested_launcher)
        row("Launcher", "inside a launcher's worker (TORCHELASTIC_RUN_ID or DDPC_LAUNCHER set)");
}

int ddpc_cli_env(int argc, char **argv)
{
    if (argc > 0) {
        bool help = ddpc_cli_is_help(argv[0]);
        fprintf(help ? stdout : stderr,
                "usage: ddpc env    print the system, build, communication libraries and the "
                "distributed variables\n");
        return help ? 0 : 2;
    }
    ddpc_sysinfo *s = ddpc_malloc(sizeof *s);
    ddpc_comm_report *d = ddpc_malloc(sizeof *d);
    if (!s || !d) {
        fprintf(stderr, "ddpc env: out of memory\n");
        ddpc_free(s);
        ddpc_free(d);
        return 1;
    }
    ddpc_sysinfo_collect(s);
    ddpc_comm_report_collect(d);
    print_system(s);
    print_build(s);
    print_gpu(s, d);
    print_comm(s, d);
    print_dist(d);
    fflush(stdout);
    int rc = 0;
    if (d->status != DDPC_OK) {
        fprintf(stderr, "ddpc env: %s\n", d->error);
        rc = 1;
    }
    ddpc_free(s);
    ddpc_free(d);
    return rc;
}
