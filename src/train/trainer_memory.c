// SPDX-License-Identifier: MIT
/* The trainer's memory plan (issue #11): built from the shapes-only model, the ddp.* bucket caps,
 * the optimizer and zero.stage before the parameter and gradient buffers and the optimizer are
 * allocated, so a config that cannot fit is refused while nothing large exists; then the plan line
 * at the start of training and, once, the measured peak after the first step. Every rank plans
 * alike and takes the smallest limit of any rank, so all refuse or none does. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/sysinfo.h>

#include <stdio.h>

/* memory.limit_gb (GiB per rank), or MemAvailable over the ranks on this host. */
static ddpc_status read_limit(ddpc_trainer *t)
{
    double gb;
    DDPC_TRY(ddpc_config_float(t->cfg, "memory.limit_gb", 0.0, 0.0, 1e9, &gb));
    if (gb > 0.0) {
        t->mem.limit = (uint64_t)(gb * 1073741824.0);
        snprintf(t->mem.limit_what, sizeof t->mem.limit_what, "memory.limit_gb is %g", gb);
        return DDPC_OK;
    }
    /* A model on a GPU keeps parameters, gradients, optimizer state and activations there: the
     * plan is held to the GPU's memory (each rank has its own GPU). */
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (k->kind != DDPC_DEVICE_CPU) {
        char a[32];
        t->mem.limit = k->memory_total();
        snprintf(t->mem.limit_what, sizeof t->mem.limit_what,
                 "the GPU's memory (memory.limit_gb is unset) is %s",
                 ddpc_memplan_format_bytes(t->mem.limit, a, sizeof a));
        return DDPC_OK;
    }
    uint64_t avail;
    if (ddpc_sysinfo_mem_available(&avail) != DDPC_OK) { /* not Linux: no limit to enforce */
        t->mem.limit = UINT64_MAX;
        snprintf(t->mem.limit_what, sizeof t->mem.limit_what,
                 "none: memory.limit_gb is unset and %s", ddpc_last_error());
        return DDPC_OK;
    }
    int local = t->dist.local_world > 0 ? t->dist.local_world : 1;
    t->mem.limit = avail / (uint64_t)local;
    char a[32], b[32];
    ddpc_memplan_format_bytes(avail, a, sizeof a);
    size_t len = (size_t)snprintf(t->mem.limit_what, sizeof t->mem.limit_what,
                                  "this machine's available memory (MemAvailable, as "
                                  "memory.limit_gb is unset) is %s",
                                  a);
    if (local > 1 && len < sizeof t->mem.limit_what)
        snprintf(t->mem.limit_what + len, sizeof t->mem.limit_what - len,
                 ", %s for each of its %d ranks",
                 ddpc_memplan_format_bytes(t->mem.limit, b, sizeof b), local);
    return DDPC_OK;
}

/* All ranks refuse or none does: the limit is the smallest any rank saw. */
static ddpc_status agree_on_limit(ddpc_trainer *t)
{
    if (!t->dist.pg || t->dist.world == 1)
        return DDPC_OK;
    double v = (double)t->mem.limit;
    DDPC_TRY(ddpc_pg_all_reduce(t->dist.pg, &v, &v, 1, DDPC_DTYPE_F64, DDPC_REDUCE_MIN));
    t->mem.limit = v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
    return DDPC_OK;
}

static int64_t largest_batch(const ddpc_trainer *t)
{
    int64_t batch = 1;
    for (int i = 0; i < t->data.n_tasks; i++)
        batch = t->data.task[i].batch_size > batch ? t->data.task[i].batch_size : batch;
    return batch;
}

ddpc_status ddpc__trainer_plan_memory(ddpc_trainer *t)
{
    size_t nt = ddpc_model_num_tensors(t->model);
    size_t *of = ddpc_malloc((nt ? nt : 1) * sizeof *of);
    t->mem.buckets = ddpc_malloc((nt ? nt : 1) * sizeof *t->mem.buckets);
    if (!of || !t->mem.buckets) {
        ddpc_free(of);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the memory plan's bucket table");
    }
    size_t nb = ddpc_reducer_assign_buckets(t->model, &t->dist.reducer_cfg, of, t->mem.buckets);
    ddpc_free(of);
    const ddpc_model_config *mc = ddpc_model_config_of(t->model);
    int64_t batch = largest_batch(t);
    ddpc_memplan_input *in = &t->mem.in;
    *in = (ddpc_memplan_input){
        .n = ddpc_model_num_params(t->model),
        .bucket_len = t->mem.buckets,
        .n_buckets = nb,
        .world = t->dist.world,
        .stage = t->dist.reducer_cfg.zero_stage,
        .optim_states = (int)ddpc_optim_state_buffers(t->engine_cfg.optim.type),
        .comm_dtype = t->dist.reducer_cfg.comm_dtype,
        .act_bytes = {ddpc_model_activation_bytes(t->model, batch, false),
                      ddpc_model_activation_bytes(t->model, batch, true)},
        .checkpointing = mc->activation_checkpointing,
        .replicas = t->dist.dp_replicas,
    };
    in->can_checkpoint = ddpc_model_can_checkpoint(t->model);
    DDPC_TRY(read_limit(t));
    DDPC_TRY(agree_on_limit(t));
    if (t->dist.plan_world > 0 || t->set.state != STATE_TRAIN)
        return DDPC_OK; /* `ddpc plan` checks after printing; evaluation allocates no optimizer */
    return ddpc_memplan_check(in, t->mem.limit, t->mem.limit_what);
}

void ddpc__trainer_log_memory_plan(ddpc_trainer *t)
{
    ddpc_memplan p;
    if (!t->log || ddpc_memplan_compute(&t->mem.in, &p) != DDPC_OK)
        return;
    char b[32];
    ddpc_memplan_print_line(t->log, &p, t->dist.world);
    fprintf(t->log, "memory limit %s per rank: %s\n",
            ddpc_memplan_format_bytes(t->mem.limit, b, sizeof b), t->mem.limit_what);
}

ddpc_status ddpc__trainer_report_memory(ddpc_trainer *t)
{
    if (t->mem.reported)
        return DDPC_OK;
    t->mem.reported = true;
    ddpc_memplan p;
    DDPC_TRY(ddpc_memplan_compute(&t->mem.in, &p));
    uint64_t rss = 0, rss_peak = 0;
    DDPC_TRY(ddpc_sysinfo_process_memory(&rss, &rss_peak));
    int64_t peak = ddpc_alloc_peak_bytes(), live = ddpc_alloc_live_bytes();
    int64_t step = ddpc_engine_step(t->engine);
    ddpc_metrics *m = t->metrics;
    ddpc_metrics_begin(m, step);
    ddpc_metrics_i64(m, "mem_plan_bytes", (int64_t)p.total);
    ddpc_metrics_i64(m, "mem_alloc_peak_bytes", peak);
    ddpc_metrics_i64(m, "mem_alloc_live_bytes", live);
    ddpc_metrics_i64(m, "mem_rss_bytes", (int64_t)rss);
    ddpc_metrics_i64(m, "mem_rss_peak_bytes", (int64_t)rss_peak);
    /* Rank 0's buffers as the kernel holds them: what ZeRO's formulas are about. */
    ddpc_engine_memory em = ddpc_engine_memory_of(t->engine);
    ddpc_metrics_i64(m, "mem_params_bytes", (int64_t)em.params);
    ddpc_metrics_i64(m, "mem_grads_bytes", (int64_t)em.grads);
    ddpc_metrics_i64(m, "mem_optim_bytes", (int64_t)em.optim_state);
    ddpc_metrics_i64(m, "mem_comm_bytes", (int64_t)em.staging);
    ddpc_metrics_i64(m, "mem_plan_params_bytes", (int64_t)p.bytes[DDPC_MEM_PARAMS]);
    ddpc_metrics_i64(m, "mem_plan_grads_bytes", (int64_t)p.bytes[DDPC_MEM_GRADS]);
    ddpc_metrics_i64(m, "mem_plan_optim_bytes", (int64_t)p.bytes[DDPC_MEM_OPTIM]);
    ddpc_metrics_i64(m, "mem_plan_activations_bytes", (int64_t)p.bytes[DDPC_MEM_ACTIVATIONS]);
    ddpc_metrics_i64(m, "mem_plan_comm_bytes", (int64_t)p.bytes[DDPC_MEM_COMM]);
    DDPC_TRY(ddpc_metrics_end(m));
    ddpc__progress_clear(t);
    DDPC_TRY(ddpc__trainer_rank_memory(t, step)); /* every rank's, after warm-up */
    if (t->log) {
        char a[32], b[32], c[32], d[32], e[32];
        fprintf(t->log,
                "memory after step %lld: plan %s, allocator peak %s (live %s), RSS %s (peak "
                "%s)\n",
                (long long)step, ddpc_memplan_format_bytes(p.total, a, sizeof a),
                ddpc_memplan_format_bytes((uint64_t)peak, b, sizeof b),
                ddpc_memplan_format_bytes((uint64_t)live, c, sizeof c),
                ddpc_memplan_format_bytes(rss, d, sizeof d),
                ddpc_memplan_format_bytes(rss_peak, e, sizeof e));
        fprintf(t->log,
                "resident on rank 0: parameters %s, gradients %s, optimizer state %s, "
                "communication %s\n",
                ddpc_memplan_format_bytes(em.params, a, sizeof a),
                ddpc_memplan_format_bytes(em.grads, b, sizeof b),
                ddpc_memplan_format_bytes(em.optim_state, c, sizeof c),
                ddpc_memplan_format_bytes(em.staging, d, sizeof d));
    }
    return DDPC_OK;
}

ddpc_status ddpc_trainer_print_plan(ddpc_trainer *t, FILE *f, bool exact)
{
    const ddpc_model_config *mc = ddpc_model_config_of(t->model);
    int replicas = t->mem.in.replicas;
    long long batch = (long long)largest_batch(t);
    fprintf(f, "%s model, batch %lld per %s", mc->type, batch, replicas > 1 ? "replica" : "rank");
    if (replicas > 1)
        fprintf(f, " (%lld per step)", batch * replicas);
    fprintf(f, ", optimizer %s, zero.stage %d, ddp.comm_dtype %s\n",
            ddpc_optim_type_name(t->engine_cfg.optim.type), t->mem.in.stage,
            ddpc_dtype_name(t->mem.in.comm_dtype));
    ddpc_memplan_print_table(f, &t->mem.in, t->mem.limit, t->mem.limit_what, exact);
    DDPC_TRY(ddpc_memplan_check(&t->mem.in, t->mem.limit, t->mem.limit_what));
    fprintf(f, "fits\n");
    return DDPC_OK;
}
