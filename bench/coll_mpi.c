// SPDX-License-Identifier: MIT
/* coll_mpi: the MPI peer of `ddpc bench allreduce|broadcast|all_gather|reduce_scatter` — the same
 * sweep, timing rule and table with MPI_Allreduce, MPI_Bcast, MPI_Allgather and
 * MPI_Reduce_scatter_block. Per size: a barrier, `warmup` untimed calls, a barrier, `iters` timed
 * calls back to back; the figure is the max over ranks of the mean time per call (nccl-tests'
 * rule). Sizes are total bytes S (all_gather: the gathered buffer; reduce_scatter: the input).
 * Build: mpicc -std=c11 -O3 bench/coll_mpi.c -o coll_mpi
 * Run:   mpirun -np 2 ./coll_mpi allreduce [--min-bytes 4K] [--max-bytes 256M] [--step-factor 2]
 *          [--iters 20] [--warmup 5] [--min-ms 0] [--max-ms 0] [--dtype f32|f64|i32|i64]
 *          [--op sum|min|max] [--check] [--json]
 * --min-ms/--max-ms raise/lower the timed calls of a size to last about that long (as ddpc's). */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER };
static const char *const coll_names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
enum { OP_SUM, OP_MIN, OP_MAX };
static const char *const op_names[] = {"sum", "min", "max"};
enum { T_F32, T_F64, T_I32, T_I64 };
static const char *const type_names[] = {"f32", "f64", "i32", "i64"};
static const size_t type_sizes[] = {4, 8, 4, 8};

typedef struct {
    int coll, op, type;
    size_t min_bytes, max_bytes;
    long factor, iters, warmup, min_ms, max_ms;
    int check, json;
} options;

/* "4096", "4K", "256M", "1G" (powers of 1024, as nccl-tests reads -b/-e); 0 when malformed. */
static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return 0;
    unsigned long long mul = 1;
    switch (*end) {
    case 'K':
    case 'k':
        mul = 1ull << 10;
        end++;
        break;
    case 'M':
    case 'm':
        mul = 1ull << 20;
        end++;
        break;
    case 'G':
    case 'g':
        mul = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > (1ull << 40) / mul)
        return 0;
    return (size_t)(v * mul);
}

static long parse_long(const char *s, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return lo - 1;
    return v;
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int parse_coll(const char *s)
{
    static const char *const alt[] = {"allreduce", "bcast", "allgather", "reducescatter"};
    int c = lookup(s, coll_names, 4);
    return c >= 0 ? c : lookup(s, alt, 4);
}

/* Returns 0, or 2 after printing one usage line (on rank 0). */
static int parse_options(int argc, char **argv, options *o, int rank)
{
    *o = (options){
        .min_bytes = 4096, .max_bytes = 256u << 20, .factor = 2, .iters = 20, .warmup = 5};
    const char *bad = NULL;
    if (argc < 2 || (o->coll = parse_coll(argv[1])) < 0)
        bad = argc < 2 ? "(no collective)" : argv[1];
    for (int i = 2; i < argc && !bad; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0 || strcmp(a, "--check") == 0) {
            *(a[2] == 'j' ? &o->json : &o->check) = 1;
            continue;
        }
        if (!v)
            bad = a;
        else if (strcmp(a, "--min-bytes") == 0)
            bad = (o->min_bytes = parse_bytes(v)) == 0 ? v : NULL;
        else if (strcmp(a, "--max-bytes") == 0)
            bad = (o->max_bytes = parse_bytes(v)) == 0 ? v : NULL;
        else if (strcmp(a, "--step-factor") == 0)
            bad = (o->factor = parse_long(v, 2, 1024)) < 2 ? v : NULL;
        else if (strcmp(a, "--iters") == 0)
            bad = (o->iters = parse_long(v, 1, 1000000)) < 1 ? v : NULL;
        else if (strcmp(a, "--warmup") == 0)
            bad = (o->warmup = parse_long(v, 0, 1000000)) < 0 ? v : NULL;
        else if (strcmp(a, "--min-ms") == 0)
            bad = (o->min_ms = parse_long(v, 0, 3600000)) < 0 ? v : NULL;
        else if (strcmp(a, "--max-ms") == 0)
            bad = (o->max_ms = parse_long(v, 0, 3600000)) < 0 ? v : NULL;
        else if (strcmp(a, "--dtype") == 0)
            bad = (o->type = lookup(v, type_names, 4)) < 0 ? v : NULL;
        else if (strcmp(a, "--op") == 0)
            bad = (o->op = lookup(v, op_names, 3)) < 0 ? v : NULL;
        else
            bad = a;
        i++;
    }
    if (!bad && o->min_bytes > o->max_bytes)
        bad = "--min-bytes larger than --max-bytes";
    if (bad && rank == 0)
        fprintf(stderr,
                "coll_mpi: bad argument '%s' (usage: coll_mpi allreduce|broadcast|"
                "all_gather|reduce_scatter [--min-bytes B] [--max-bytes B] ...)\n",
                bad);
    return bad ? 2 : 0;
}

static MPI_Datatype mpi_type(int t)
{
    switch (t) {
    case T_F32:
        return MPI_FLOAT;
    case T_F64:
        return MPI_DOUBLE;
    case T_I32:
        return MPI_INT32_T;
    default:
        return MPI_INT64_T;
    }
}

/* Rank r's input element i: a small integer, exact in every type and in any sum of <= 32 ranks. */
static double value(int r, size_t i)
{
    return (double)((long)((i * 7u + (size_t)r * 13u) % 17u) - 8);
}

static void put(void *buf, int t, size_t i, double v)
{
    switch (t) {
    case T_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case T_F64:
        ((double *)buf)[i] = v;
        break;
    case T_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    default:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    }
}

static double get(const void *buf, int t, size_t i)
{
    switch (t) {
    case T_F32:
        return ((const float *)buf)[i];
    case T_F64:
        return ((const double *)buf)[i];
    case T_I32:
        return ((const int32_t *)buf)[i];
    default:
        return (double)((const int64_t *)buf)[i];
    }
}

static double reduce_ref(int op, int n, size_t i)
{
    double acc = value(0, i);
    for (int r = 1; r < n; r++) {
        double v = value(r, i);
        acc = op == OP_SUM ? acc + v : op == OP_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
    }
    return acc;
}

/* Inputs of one call with `per` elements per rank block (all_reduce/broadcast: the whole count). */
static void fill(const options *o, int rank, void *send, void *recv, size_t per, int n)
{
    size_t ns = o->coll == REDUCE_SCATTER ? per * (size_t)n : per;
    size_t nr = o->coll == ALL_GATHER ? per * (size_t)n : per;
    for (size_t i = 0; i < ns; i++)
        put(send, o->type, i, value(rank, i));
    for (size_t i = 0; i < nr; i++)
        put(recv, o->type, i, o->coll == BROADCAST && rank == 0 ? value(0, i) : -99.0);
}

static long count_wrong(const options *o, int rank, const void *recv, size_t per, int n)
{
    long wrong = 0;
    size_t nr = o->coll == ALL_GATHER ? per * (size_t)n : per;
    for (size_t i = 0; i < nr; i++) {
        double want;
        switch (o->coll) {
        case ALL_REDUCE:
            want = reduce_ref(o->op, n, i);
            break;
        case BROADCAST:
            want = value(0, i);
            break;
        case ALL_GATHER:
            want = value((int)(i / per), i % per);
            break;
        default:
            want = reduce_ref(o->op, n, (size_t)rank * per + i);
            break;
        }
        wrong += get(recv, o->type, i) != want;
    }
    return wrong;
}

static void run_once(const options *o, void *send, void *recv, size_t per)
{
    static const MPI_Op ops[3] = {MPI_SUM, MPI_MIN, MPI_MAX};
    MPI_Datatype t = mpi_type(o->type);
    int cnt = (int)per;
    switch (o->coll) {
    case ALL_REDUCE:
        MPI_Allreduce(send, recv, cnt, t, ops[o->op], MPI_COMM_WORLD);
        break;
    case BROADCAST:
        MPI_Bcast(recv, cnt, t, 0, MPI_COMM_WORLD);
        break;
    case ALL_GATHER:
        MPI_Allgather(send, cnt, t, recv, cnt, t, MPI_COMM_WORLD);
        break;
    default:
        MPI_Reduce_scatter_block(send, recv, cnt, t, ops[o->op], MPI_COMM_WORLD);
        break;
    }
}

/* Timed calls: --iters, raised to last --min-ms and lowered to fit --max-ms (at least 1), judged
 * by `est`, the max over ranks of the mean warm-up call, so every rank runs the same count. */
static long timed_iters(const options *o, double est)
{
    long n = o->iters;
    if (o->min_ms > 0 && est > 0 && (double)n * est < 1e-3 * (double)o->min_ms)
        n = (long)fmin(1e6, ceil(1e-3 * (double)o->min_ms / est));
    if (o->max_ms > 0 && (double)n * est > 1e-3 * (double)o->max_ms)
        n = (long)fmax(1.0, floor(1e-3 * (double)o->max_ms / est));
    return n;
}

/* Times one size; prints its row on rank 0. Returns the number of wrong elements on all ranks. */
static long bench_size(const options *o, int rank, int n, void *send, void *recv, size_t bytes)
{
    size_t ts = type_sizes[o->type];
    int per_rank = o->coll == ALL_GATHER || o->coll == REDUCE_SCATTER;
    size_t per = bytes / ts / (per_rank ? (size_t)n : 1);
    size_t total = per * (per_rank ? (size_t)n : 1);
    fill(o, rank, send, recv, per, n);
    long warm = o->warmup > 0 ? o->warmup : (o->min_ms > 0 || o->max_ms > 0);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), est = 0.0;
    for (long i = 0; i < warm; i++)
        run_once(o, send, recv, per);
    double est_local = warm > 0 ? (MPI_Wtime() - t0) / (double)warm : 0.0;
    MPI_Allreduce(&est_local, &est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long iters = timed_iters(o, est);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        run_once(o, send, recv, per);
    double mean = (MPI_Wtime() - t0) / (double)iters, tmax = 0.0;
    MPI_Allreduce(&mean, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long wrong = 0, wrong_all = 0;
    if (o->check) {
        fill(o, rank, send, recv, per, n);
        run_once(o, send, recv, per);
        wrong = count_wrong(o, rank, recv, per, n);
    }
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double sz = (double)(total * ts), algbw = tmax > 0 ? sz / tmax * 1e-9 : 0.0;
    double factor = o->coll == ALL_REDUCE  ? 2.0 * (n - 1) / n
                    : o->coll == BROADCAST ? 1.0
                                           : (double)(n - 1) / n;
    const char *op = o->coll == ALL_REDUCE || o->coll == REDUCE_SCATTER ? op_names[o->op] : "none";
    char wbuf[32] = "N/A";
    if (o->check)
        snprintf(wbuf, sizeof wbuf, "%ld", wrong_all);
    if (rank == 0 && o->json)
        printf("{\"bench\": \"%s\", \"impl\": \"mpi\", \"ranks\": %d, \"size\": %zu, "
               "\"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"iters\": %ld, "
               "\"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %s}\n",
               coll_names[o->coll], n, total * ts, total, type_names[o->type], op, iters,
               tmax * 1e6, algbw, algbw * factor, o->check ? wbuf : "null");
    else if (rank == 0)
        printf("%12zu  %12zu  %6s  %6s  %10.2f  %7.2f  %7.2f  %6s\n", total * ts, total,
               type_names[o->type], op, tmax * 1e6, algbw, algbw * factor, wbuf);
    fflush(stdout);
    return wrong_all;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    options o;
    if (parse_options(argc, argv, &o, rank) != 0) {
        MPI_Finalize();
        return 2;
    }
    if (o.max_bytes / type_sizes[o.type] > (size_t)INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "coll_mpi: --max-bytes %zu exceeds MPI's int count\n", o.max_bytes);
        MPI_Finalize();
        return 2;
    }
    /* Allocated once at the largest size; fill() touches every byte used before timing. */
    void *send = malloc(o.max_bytes), *recv = malloc(o.max_bytes);
    int ok = send && recv, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0)
            fprintf(stderr, "coll_mpi: cannot allocate 2 x %zu bytes\n", o.max_bytes);
        free(send);
        free(recv);
        MPI_Finalize();
        return 1;
    }
    if (rank == 0 && !o.json) {
        printf("# coll_mpi %s: %d ranks, %ld iters", coll_names[o.coll], n, o.iters);
        if (o.min_ms > 0)
            printf(", more to last %ld ms", o.min_ms);
        if (o.max_ms > 0)
            printf(", fewer to fit %ld ms", o.max_ms);
        printf(" after %ld warm-up; time = max over ranks of the mean per call\n", o.warmup);
        printf("# %10s  %12s  %6s  %6s  %10s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
               "time", "algbw", "busbw", "#wrong");
        printf("# %10s  %12s  %6s  %6s  %10s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "(us)",
               "(GB/s)", "(GB/s)", "");
    }
    long wrong = 0;
    for (size_t b = o.min_bytes; b <= o.max_bytes;) {
        wrong += bench_size(&o, rank, n, send, recv, b);
        if (b > o.max_bytes / (size_t)o.factor)
            break;
        b *= (size_t)o.factor;
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
