// SPDX-License-Identifier: MIT
/* `ddpc bench allreduce|broadcast|all_gather|reduce_scatter [options]`: the collective benchmark,
 * run as one worker of a job (under `ddpc run`, mpirun or torchrun --no-python). Rank 0 prints an
 * nccl-tests table: per size S (total bytes of one call) the max over ranks of the mean time per
 * call, algbw = S / time and busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
 * reduce_scatter) or 1 (broadcast); with --check the wrong elements of every rank, summed.
 * Buffers are allocated once at the largest size and every rank runs the same calls in order.
 * With --device cuda the measured calls move GPU buffers (nccl, or host staging: the header's
 * note says which); inputs are filled and checked on the host and copied across untimed, and the
 * bench's own small reductions (times, counts) go through a device scalar of the same group. */
#include "cli/bench_coll.h"
#include "cli/cli.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/timer.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const coll_names[DDPC__BENCH_COUNT] = {"all_reduce", "broadcast", "all_gather",
                                                          "reduce_scatter"};

typedef struct {
    ddpc_pg *pg;
    const ddpc__bench_options *o;
    void *send, *recv;            /* (max_bytes) each, host */
    const ddpc_kernel_table *dev; /* NULL on the CPU; else the GPU holding the three below */
    void *dsend, *drecv;          /* (max_bytes) each, device */
    void *dscalar;                /* (1) 8-byte device scalar for the bench's own reductions */
    int64_t wrong;                /* over every rank and size so far */
} sweep;

static const char usage_line[] =
    "usage: ddpc bench allreduce|broadcast|all_gather|reduce_scatter [--iters N] [--warmup W] "
    "[--min-bytes A] [--max-bytes B] [--step-factor F] [--min-ms T] [--max-ms T] "
    "[--dtype f32|f64|bf16|f16|i32|i64] [--op sum|avg|min|max] "
    "[--backend auto|shm|mpi|gloo|nccl] [--device cpu|cuda] [--root R] [--check] [--json]\n";

static int bad_option(const char *opt, const char *value, const char *why)
{
    fprintf(stderr, "ddpc bench: bad %s '%s' (%s)\n", opt, value ? value : "", why);
    return 2;
}

/* "4096", "4K", "256M", "1G": powers of 1024, as nccl-tests reads -b/-e. 0 when malformed. */
static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return 0;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30;
    end += mul > 1;
    if (*end != '\0' || v > (1ull << 40) / mul)
        return 0;
    return (size_t)(v * mul);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Parses the value of one option that takes one; returns 0 or 2 (after one stderr line). */
static int parse_value(ddpc__bench_options *o, const char *opt, const char *v)
{
    long root = 0;
    if (strcmp(opt, "--min-bytes") == 0 || strcmp(opt, "--max-bytes") == 0) {
        size_t b = parse_bytes(v);
        if (b == 0)
            return bad_option(opt, v, "a positive size such as 4096, 4K, 256M or 1G");
        *(strcmp(opt, "--min-bytes") == 0 ? &o->min_bytes : &o->max_bytes) = b;
    } else if (strcmp(opt, "--iters") == 0) {
        if (!parse_long(v, 1, 1000000, &o->iters))
            return bad_option(opt, v, "an integer from 1 to 1000000");
    } else if (strcmp(opt, "--warmup") == 0) {
        if (!parse_long(v, 0, 1000000, &o->warmup))
            return bad_option(opt, v, "an integer from 0 to 1000000");
    } else if (strcmp(opt, "--min-ms") == 0 || strcmp(opt, "--max-ms") == 0) {
        long *ms = strcmp(opt, "--min-ms") == 0 ? &o->min_ms : &o->max_ms;
        if (!parse_long(v, 0, 3600000, ms))
            return bad_option(opt, v, "milliseconds, an integer from 0 (off) to 3600000");
    } else if (strcmp(opt, "--step-factor") == 0) {
        if (!parse_long(v, 2, 1024, &o->factor))
            return bad_option(opt, v, "an integer from 2 to 1024");
    } else if (strcmp(opt, "--root") == 0) {
        if (!parse_long(v, 0, 1 << 20, &root))
            return bad_option(opt, v, "a rank, an integer >= 0");
        o->root = (int)root;
    } else if (strcmp(opt, "--dtype") == 0) {
        int t = 0;
        while (t < DDPC_DTYPE_COUNT && strcmp(v, ddpc_dtype_name((ddpc_dtype)t)) != 0)
            t++;
        if (t == DDPC_DTYPE_COUNT)
            return bad_option(opt, v, "one of f32, f64, bf16, f16, i32, i64");
        o->dtype = (ddpc_dtype)t;
    } else if (strcmp(opt, "--op") == 0) {
        int r = 0;
        while (r < DDPC_REDUCE_COUNT && strcmp(v, ddpc_reduce_op_name((ddpc_reduce_op)r)) != 0)
            r++;
        if (r == DDPC_REDUCE_COUNT)
            return bad_option(opt, v, "one of sum, avg, min, max");
        o->op = (ddpc_reduce_op)r;
    } else if (strcmp(opt, "--backend") == 0) {
        if (ddpc_backend_parse(v, &o->backend) != DDPC_OK)
            return bad_option(opt, v, "one of auto, shm, mpi, gloo, nccl");
        o->cuda = o->cuda || o->backend == DDPC_BACKEND_NCCL;
    } else if (strcmp(opt, "--device") == 0) {
        if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
            return bad_option(opt, v, "cpu or cuda");
        o->cuda = strcmp(v, "cuda") == 0 || o->backend == DDPC_BACKEND_NCCL;
    } else {
        fprintf(stderr, "ddpc bench: unknown option '%s' (try 'ddpc bench allreduce --help')\n",
                opt);
        return 2;
    }
    return 0;
}

static int parse_options(ddpc__bench_coll coll, int argc, char **argv, ddpc__bench_options *o)
{
    *o = (ddpc__bench_options){.coll = coll,
                               .min_bytes = 4096,
                               .max_bytes = (size_t)256 << 20,
                               .factor = 2,
                               .iters = 20,
                               .warmup = 5,
                               .dtype = DDPC_DTYPE_F32,
                               .op = DDPC_REDUCE_SUM,
                               .backend = DDPC_BACKEND_AUTO};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0 || strcmp(argv[i], "--json") == 0) {
            *(strcmp(argv[i], "--check") == 0 ? &o->check : &o->json) = true;
        } else if (ddpc_cli_is_help(argv[i])) {
            fputs(usage_line, stdout);
            return 3;
        } else if (strncmp(argv[i], "--", 2) != 0) {
            fprintf(stderr, "ddpc bench: unexpected argument '%s' (options start with --)\n",
                    argv[i]);
            return 2;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "ddpc bench: option '%s' needs a value\n", argv[i]);
            return 2;
        } else {
            int rc = parse_value(o, argv[i], argv[i + 1]);
            if (rc)
                return rc;
            i++;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "ddpc bench: --min-bytes %zu is larger than --max-bytes %zu\n",
                o->min_bytes, o->max_bytes);
        return 2;
    }
    if ((o->coll == DDPC__BENCH_BROADCAST || o->coll == DDPC__BENCH_ALL_GATHER) &&
        o->op != DDPC_REDUCE_SUM) {
        fprintf(stderr, "ddpc bench: --op applies to all_reduce and reduce_scatter only\n");
        return 2;
    }
    return 0;
}

static ddpc_status run_once(sweep *s, const ddpc__bench_shape *sh)
{
    const ddpc__bench_options *o = s->o;
    void *send = s->dev ? s->dsend : s->send, *recv = s->dev ? s->drecv : s->recv;
    switch (o->coll) {
    case DDPC__BENCH_ALL_REDUCE:
        return ddpc_pg_all_reduce(s->pg, send, recv, sh->per, o->dtype, o->op);
    case DDPC__BENCH_BROADCAST:
        return ddpc_pg_broadcast(s->pg, recv, sh->per, o->dtype, o->root);
    case DDPC__BENCH_ALL_GATHER:
        return ddpc_pg_all_gather(s->pg, send, recv, sh->per, o->dtype);
    default:
        return ddpc_pg_reduce_scatter(s->pg, send, recv, sh->per, o->dtype, o->op);
    }
}

/* The bench's own one-element reductions, on the group being measured: through the device
 * scalar when its collectives take GPU buffers. */
static ddpc_status reduce_scalar(sweep *s, void *x, ddpc_dtype dtype, ddpc_reduce_op op)
{
    if (!s->dev)
        return ddpc_pg_all_reduce(s->pg, x, x, 1, dtype, op);
    s->dev->to_device(s->dscalar, x, ddpc_dtype_size(dtype));
    DDPC_TRY(ddpc_pg_all_reduce(s->pg, s->dscalar, s->dscalar, 1, dtype, op));
    s->dev->to_host(x, s->dscalar, ddpc_dtype_size(dtype));
    return DDPC_OK;
}

static ddpc_status max_over_ranks(sweep *s, double *x)
{
    return reduce_scalar(s, x, DDPC_DTYPE_F64, DDPC_REDUCE_MAX);
}

/* Host buffers (send n_send, recv n_recv elements) to the device, untimed. */
static void upload(sweep *s, const ddpc__bench_shape *sh)
{
    size_t es = ddpc_dtype_size(s->o->dtype);
    if (!s->dev)
        return;
    s->dev->to_device(s->dsend, s->send, sh->n_send * es);
    s->dev->to_device(s->drecv, s->recv, sh->n_recv * es);
}

/* Timed iterations: --iters, raised to last --min-ms and lowered to fit --max-ms (at least 1),
 * judged by `est`, the max over ranks of the mean warm-up call, so every rank agrees. */
static long timed_iters(const ddpc__bench_options *o, double est)
{
    long n = o->iters;
    if (o->min_ms > 0 && est > 0 && (double)n * est < 1e-3 * (double)o->min_ms)
        n = (long)fmin(1e6, ceil(1e-3 * (double)o->min_ms / est));
    if (o->max_ms > 0 && (double)n * est > 1e-3 * (double)o->max_ms)
        n = (long)fmax(1.0, floor(1e-3 * (double)o->max_ms / est));
    return n;
}

/* Warm-up, then the timed calls; *mean_s: max over ranks of the mean seconds per call. */
static ddpc_status time_size(sweep *s, const ddpc__bench_shape *sh, long *iters, double *mean_s)
{
    const ddpc__bench_options *o = s->o;
    long warm = o->warmup > 0 ? o->warmup : (o->min_ms > 0 || o->max_ms > 0);
    DDPC_TRY(ddpc_pg_barrier(s->pg));
    double t0 = ddpc_time_now();
    for (long i = 0; i < warm; i++)
        DDPC_TRY(run_once(s, sh));
    double est = warm > 0 ? (ddpc_time_now() - t0) / (double)warm : 0.0;
    DDPC_TRY(max_over_ranks(s, &est));
    *iters = timed_iters(o, est);
    DDPC_TRY(ddpc_pg_barrier(s->pg));
    t0 = ddpc_time_now();
    for (long i = 0; i < *iters; i++)
        DDPC_TRY(run_once(s, sh));
    *mean_s = (ddpc_time_now() - t0) / (double)*iters;
    return max_over_ranks(s, mean_s);
}

static void print_row(const sweep *s, const ddpc__bench_shape *sh, long iters, double t,
                      int64_t wrong)
{
    const ddpc__bench_options *o = s->o;
    int n = sh->world;
    size_t count = o->coll == DDPC__BENCH_ALL_REDUCE || o->coll == DDPC__BENCH_BROADCAST
                       ? sh->per
                       : sh->per * (size_t)n;
    size_t bytes = count * ddpc_dtype_size(o->dtype);
    double algbw = t > 0 ? (double)bytes / t * 1e-9 : 0.0;
    double factor = o->coll == DDPC__BENCH_ALL_REDUCE  ? 2.0 * (n - 1) / n
                    : o->coll == DDPC__BENCH_BROADCAST ? 1.0
                                                       : (double)(n - 1) / n;
    bool reduces = o->coll == DDPC__BENCH_ALL_REDUCE || o->coll == DDPC__BENCH_REDUCE_SCATTER;
    const char *op = reduces ? ddpc_reduce_op_name(o->op) : "none";
    char w[32] = "N/A";
    if (o->check)
        snprintf(w, sizeof w, "%lld", (long long)wrong);
    if (o->json)
        printf("{\"bench\": \"%s\", \"impl\": \"ddpc\", \"backend\": \"%s\", \"ranks\": %d, "
               "\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
               "\"iters\": %ld, \"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
               "\"wrong\": %s}\n",
               coll_names[o->coll], ddpc_backend_name(ddpc_pg_backend(s->pg)), n, bytes, count,
               ddpc_dtype_name(o->dtype), op, iters, t * 1e6, algbw, algbw * factor,
               o->check ? w : "null");
    else
        printf("%12zu  %12zu  %6s  %6s  %10.2f  %7.2f  %7.2f  %6s\n", bytes, count,
               ddpc_dtype_name(o->dtype), op, t * 1e6, algbw, algbw * factor, w);
    fflush(stdout);
}

/* One row: shape for `bytes`, fill (touching the buffers), time, check, print on rank 0. */
static ddpc_status bench_size(sweep *s, size_t bytes)
{
    const ddpc__bench_options *o = s->o;
    ddpc__bench_shape sh = {.rank = ddpc_pg_rank(s->pg), .world = ddpc_pg_world_size(s->pg)};
    size_t blocks = o->coll == DDPC__BENCH_ALL_GATHER || o->coll == DDPC__BENCH_REDUCE_SCATTER
                        ? (size_t)sh.world
                        : 1;
    sh.per = bytes / ddpc_dtype_size(o->dtype) / blocks;
    sh.n_send = o->coll == DDPC__BENCH_REDUCE_SCATTER ? sh.per * blocks
                : o->coll == DDPC__BENCH_BROADCAST    ? 0
                                                      : sh.per;
    sh.n_recv = o->coll == DDPC__BENCH_ALL_GATHER ? sh.per * blocks : sh.per;
    ddpc__bench_fill(o, &sh, s->send, s->recv);
    upload(s, &sh);
    long iters = 0;
    double t = 0.0;
    DDPC_TRY(time_size(s, &sh, &iters, &t));
    int64_t wrong = 0;
    if (o->check) {
        ddpc__bench_fill(o, &sh, s->send, s->recv);
        upload(s, &sh);
        DDPC_TRY(run_once(s, &sh));
        if (s->dev)
            s->dev->to_host(s->recv, s->drecv, sh.n_recv * ddpc_dtype_size(o->dtype));
        wrong = ddpc__bench_count_wrong(o, &sh, s->recv);
        DDPC_TRY(reduce_scalar(s, &wrong, DDPC_DTYPE_I64, DDPC_REDUCE_SUM));
    }
    s->wrong += wrong;
    if (sh.rank == 0)
        print_row(s, &sh, iters, t, wrong);
    return DDPC_OK;
}

static void print_header(const sweep *s)
{
    const ddpc__bench_options *o = s->o;
    printf("# ddpc bench %s: %d rank%s, backend %s, %ld iters", coll_names[o->coll],
           ddpc_pg_world_size(s->pg), ddpc_pg_world_size(s->pg) == 1 ? "" : "s",
           ddpc_backend_name(ddpc_pg_backend(s->pg)), o->iters);
    if (o->min_ms > 0)
        printf(", more to last %ld ms", o->min_ms);
    if (o->max_ms > 0)
        printf(", fewer to fit %ld ms", o->max_ms);
    printf(" after %ld warm-up; time = max over ranks of the mean per call\n", o->warmup);
    if (ddpc_pg_device_note(s->pg))
        printf("# GPU buffers: %s\n", ddpc_pg_device_note(s->pg));
    printf("# %10s  %12s  %6s  %6s  %10s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
           "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %6s  %6s  %10s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
}

/* Host staging's ceiling, from this run: pinned copies each way on rank 0's GPU (the other ranks
 * wait in the first row's barrier). A failure is said and the sweep goes on. */
static void print_copy_bandwidth(const ddpc__bench_options *o)
{
    enum { reps = 10 };
    size_t bytes = o->max_bytes > ((size_t)64 << 20) ? o->max_bytes : (size_t)64 << 20;
    double h2d = 0.0, d2h = 0.0;
    ddpc_status st = ddpc_cuda_copy_bandwidth(bytes, reps, &h2d, &d2h);
    if (o->json && st == DDPC_OK)
        printf("{\"bench\": \"pinned_copy\", \"size\": %zu, \"reps\": %d, \"h2d_GBps\": %.3f, "
               "\"d2h_GBps\": %.3f}\n",
               bytes, (int)reps, h2d, d2h);
    else if (st == DDPC_OK)
        printf("# pinned copies (%zu B, median of %d): host->GPU %.2f GB/s, GPU->host %.2f GB/s "
               "(host staging's ceiling)\n",
               bytes, (int)reps, h2d, d2h);
    else if (!o->json)
        printf("# pinned copies: not measured: %s\n", ddpc_last_error());
    fflush(stdout);
}

/* The sweep on a joined group (`dev`: the GPU of its buffers, or NULL). Buffers are allocated on
 * every rank before any timing, and a rank that cannot allocate says so through the group so no
 * rank waits for it. */
static ddpc_status run_sweep(ddpc_pg *pg, const ddpc_kernel_table *dev,
                             const ddpc__bench_options *o, int64_t *wrong)
{
    sweep s = {
        .pg = pg, .o = o, .send = ddpc_malloc(o->max_bytes), .recv = ddpc_malloc(o->max_bytes)};
    int32_t ok = s.send && s.recv;
    if (dev) {
        s.dev = dev;
        s.dscalar = dev->alloc(8);
        s.dsend = dev->alloc(o->max_bytes);
        s.drecv = dev->alloc(o->max_bytes);
        ok = ok && s.dsend && s.drecv;
    }
    ddpc_status st = dev && !s.dscalar
                         ? ddpc_errorf(DDPC_ENOMEM, "no GPU memory for an 8-byte scalar")
                         : reduce_scalar(&s, &ok, DDPC_DTYPE_I32, DDPC_REDUCE_MIN);
    if (st == DDPC_OK && !ok)
        st = ddpc_errorf(DDPC_ENOMEM,
                         "a rank could not allocate 2 x %zu bytes of %sbuffers "
                         "(lower --max-bytes)",
                         o->max_bytes, dev ? "host and GPU " : "");
    if (st == DDPC_OK && ddpc_pg_rank(pg) == 0 && !o->json)
        print_header(&s);
    if (st == DDPC_OK && dev && ddpc_pg_rank(pg) == 0)
        print_copy_bandwidth(o);
    for (size_t b = o->min_bytes; st == DDPC_OK && b <= o->max_bytes;) {
        st = bench_size(&s, b);
        if (b > o->max_bytes / (size_t)o->factor)
            break;
        b *= (size_t)o->factor;
    }
    if (dev) {
        dev->free(s.dsend);
        dev->free(s.drecv);
        dev->free(s.dscalar);
    }
    ddpc_free(s.send);
    ddpc_free(s.recv);
    *wrong = s.wrong;
    return st;
}

int ddpc_cli_bench_coll(const char *coll, int argc, char **argv)
{
    static const char *const alt[DDPC__BENCH_COUNT] = {"allreduce", "bcast", "allgather",
                                                       "reducescatter"};
    int c = 0;
    while (c < DDPC__BENCH_COUNT && strcmp(coll, coll_names[c]) != 0 && strcmp(coll, alt[c]) != 0)
        c++;
    if (c == DDPC__BENCH_COUNT) {
        fputs(usage_line, stderr);
        return 2;
    }
    ddpc__bench_options o;
    int rc = parse_options((ddpc__bench_coll)c, argc, argv, &o);
    if (rc)
        return rc == 3 ? 0 : rc;
    ddpc_comm_env env;
    ddpc_pg_config cfg = ddpc_pg_config_default();
    cfg.backend = o.backend;
    cfg.cuda = o.cuda;
    ddpc_pg *pg = NULL;
    if (ddpc_comm_env_discover(&env) != DDPC_OK || ddpc_pg_create(&env, &cfg, &pg) != DDPC_OK)
        return ddpc_cli_fail("bench");
    const ddpc_kernel_table *dev = NULL;
    if (o.cuda && ddpc_device_select(DDPC_DEVICE_CUDA, ddpc_pg_local_rank(pg), &dev) != DDPC_OK) {
        rc = ddpc_cli_fail("bench");
        ddpc_pg_destroy(pg);
        return rc;
    }
    if (o.coll == DDPC__BENCH_BROADCAST && o.root >= ddpc_pg_world_size(pg)) {
        fprintf(stderr, "ddpc bench: --root %d is not a rank of this %d-rank group\n", o.root,
                ddpc_pg_world_size(pg));
        ddpc_pg_destroy(pg);
        return 2;
    }
    int64_t wrong = 0;
    rc = run_sweep(pg, dev, &o, &wrong) != DDPC_OK ? ddpc_cli_fail("bench") : 0;
    if (rc == 0 && wrong > 0 && ddpc_pg_rank(pg) == 0) {
        fprintf(stderr, "ddpc bench: %lld wrong elements in %s results\n", (long long)wrong,
                coll_names[o.coll]);
        rc = 1;
    }
    rc = rc == 0 && wrong > 0 ? 1 : rc;
    ddpc_pg_destroy(pg);
    return rc;
}
