// SPDX-License-Identifier: MIT
/* What fit says before its first step (model, data, global batch, backend, ZeRO, precision,
 * activations, memory plan) and after its last (a GPU run's device allocations): rank 0's log
 * only, nothing that changes the run. */
#include <ddpc/device.h>

#include "train/trainer_impl.h"

#include <ddpc/kernels.h>

#include <stdio.h>

/* ZeRO: what rank 0 holds, so a user sees the sharding took effect. */
static void log_zero(ddpc_trainer *t)
{
    int stage = ddpc_engine_zero_stage(t->engine);
    if (stage == 0 || t->dist.world == 1)
        return;
    const ddpc_range *r;
    size_t n, owned = 0;
    ddpc_engine_shard(t->engine, &r, &n);
    for (size_t i = 0; i < n; i++)
        owned += r[i].len;
    const char *what = stage == 1   ? "optimizer state"
                       : stage == 2 ? "optimizer state and gradients"
                                    : "optimizer state, gradients and parameters";
    fprintf(t->log,
            "zero stage %d: rank 0 holds the %s of %zu of %zu parameters (1/%d of each of "
            "%zu buckets)\n",
            stage, what, owned, ddpc_model_num_params(t->model), t->dist.world, n);
}

/* The activation arena at the largest training batch, both ways, so the cost of memory is known
 * when choosing model.activation_checkpointing. */
static void log_activations(ddpc_trainer *t)
{
    int64_t batch = 1;
    for (int i = 0; i < t->data.n_tasks; i++)
        batch = t->data.task[i].batch_size > batch ? t->data.task[i].batch_size : batch;
    const double mib = 1.0 / (1024.0 * 1024.0);
    double on = (double)ddpc_model_activation_bytes(t->model, batch, true) * mib;
    double off = (double)ddpc_model_activation_bytes(t->model, batch, false) * mib;
    const ddpc_model_config *mc = ddpc_model_config_of(t->model);
    fprintf(t->log, "activations: %.1f MiB per %s at batch %lld ",
            mc->activation_checkpointing ? on : off, t->dist.dp_replicas ? "replica" : "rank",
            (long long)batch);
    if (mc->activation_checkpointing)
        fprintf(t->log, "(checkpointing on; %.1f MiB without)\n", off);
    else if (on < off)
        fprintf(t->log, "(checkpointing off; %.1f MiB with)\n", on);
    else
        fprintf(t->log, "(no checkpointing for %s)\n", mc->type);
}

void ddpc__trainer_matmul_info(const ddpc_trainer *t, char *out, size_t cap)
{
    const trainer_settings *s = &t->set;
    bool gpu = ddpc_model_backend(t->model)->kind != DDPC_DEVICE_CPU;
    bool fp32 = s->precision == DDPC_PREC_FP32;
    snprintf(out, cap, "%s%s",
             !gpu      ? ddpc_kernels_matmul_info(s->precision, NULL)
             : !fp32   ? "16-bit inputs on cuBLAS tensor cores, fp32 accumulation"
             : s->tf32 ? "TF32 on cuBLAS tensor cores (inputs with 10 mantissa bits), fp32 "
                         "accumulation (matmul_precision high)"
                       : "fp32 cuBLAS (TF32 off)",
             !s->tf32 ? ""
             : !gpu   ? "; matmul_precision high changes nothing on the CPU"
             : !fp32  ? "; matmul_precision high changes only fp32 products, and there are none"
                      : "");
}

void ddpc__trainer_log_start(ddpc_trainer *t)
{
    const trainer_settings *s = &t->set;
    if (!t->log)
        return;
    int64_t per_rank = 0;
    char parts[64 * DDPC_MODEL_MAX_HEADS] = "";
    size_t len = 0;
    const char *device = ddpc__device_describe(ddpc_model_config_of(t->model)->backend);
    if (t->data.multi)
        fprintf(t->log,
                "training %s with %d task heads: %zu parameters, %lld steps, %d threads "
                "per rank, on %s\n",
                ddpc_model_config_of(t->model)->type, t->data.n_tasks,
                ddpc_model_num_params(t->model), (long long)t->total_steps, ddpc_kernels_threads(),
                device);
    else
        fprintf(t->log,
                "training %s: %zu parameters, %lld samples, %lld steps, %d threads per "
                "rank, on %s\n",
                ddpc_model_config_of(t->model)->type, ddpc_model_num_params(t->model),
                (long long)ddpc_dataset_size(t->data.task[0].train), (long long)t->total_steps,
                ddpc_kernels_threads(), device);
    int64_t per_epoch = t->steps_per_epoch;
    if (s->max_steps > s->epochs * per_epoch) /* said, never a silent change of length */
        fprintf(t->log,
                "max_steps %lld is more than epochs %lld x %lld steps: training runs %lld steps, "
                "%.2f epochs (max_steps decides the length when set)\n",
                (long long)s->max_steps, (long long)s->epochs, (long long)per_epoch,
                (long long)s->max_steps, (double)s->max_steps / (double)per_epoch);
    fputs(t->notes, t->log);
    if (t->dist.gpu_lines) /* which rank has which GPU, and how their buffers travel */
        fputs(t->dist.gpu_lines, t->log);
    /* ZeRO-2/3 on a GPU without virtual memory management: the table says why its releases
     * keep the memory (the kernels cannot log: that is a layer above them). */
    const ddpc_kernel_table *kt = ddpc_model_backend(t->model);
    const char *kept = kt->release_note && ddpc_model_config_of(t->model)->releasable_flat
                           ? kt->release_note()
                           : NULL;
    if (kept)
        fprintf(t->log, "%s\n", kept);
    if (t->kind->log_start)
        t->kind->log_start(t);
    for (int i = 0; i < t->data.n_tasks; i++) {
        const ddpc__task *k = &t->data.task[i];
        if (t->data.multi)
            fprintf(t->log,
                    "task %s: %s, %lld classes, %lld samples, batch %lld per rank, loss "
                    "weight %g\n",
                    k->name, k->data_type, (long long)k->num_classes,
                    (long long)ddpc_dataset_size(k->train), (long long)k->batch_size,
                    (double)k->loss_weight);
        per_rank += k->batch_size;
        len += (size_t)snprintf(parts + len, sizeof parts - len, "%s%s %lld", i ? " + " : "",
                                k->name, (long long)k->batch_size);
    }
    if (t->data.sharding) {
        ddpc__trainer_log_task_sharding(t);
        int64_t global = 0;
        for (int r = 0; r < t->dist.world; r++)
            for (int i = 0; i < t->data.n_tasks; i++)
                if (t->data.holds[(size_t)r * (size_t)t->data.n_tasks + (size_t)i])
                    global += t->data.task[i].batch_size;
        fprintf(t->log,
                "global batch %lld = every rank's own tasks' batches x %lld accumulation "
                "step%s (",
                (long long)(global * s->accum_steps), (long long)s->accum_steps,
                s->accum_steps == 1 ? "" : "s");
    } else {
        int dp = t->dist.dp_replicas;
        fprintf(t->log, "global batch %lld = %lld per %s",
                (long long)(per_rank * ddpc__trainer_dp_degree(t) * s->accum_steps),
                (long long)per_rank, dp ? "replica" : "rank");
        if (t->data.multi)
            fprintf(t->log, " (%s)", parts);
        int per = ddpc_engine_replica_threads(t->engine);
        if (dp)
            fprintf(t->log,
                    " x %d replica%s (parallel.mode dp: one process, %d kernel thread%s "
                    "each)",
                    dp, dp == 1 ? "" : "s", per, per == 1 ? "" : "s");
        else
            fprintf(t->log, " x %d rank%s", t->dist.world, t->dist.world == 1 ? "" : "s");
        fprintf(t->log, " x %lld accumulation step%s (", (long long)s->accum_steps,
                s->accum_steps == 1 ? "" : "s");
    }
    if (t->data.multi)
        fprintf(t->log, "combined %s, ", ddpc_combined_mode_name(t->data.mode));
    fprintf(t->log, "backend %s, lr x %.3g)\n", ddpc_backend_name(ddpc_pg_backend(t->dist.pg)),
            ddpc__trainer_lr_scale(t));
    log_zero(t);
    /* Said once, so a CPU without bf16 products is never mistaken for a fast one. */
    char matmul[256];
    ddpc__trainer_matmul_info(t, matmul, sizeof matmul);
    fprintf(t->log, "precision %s: matrix products in %s\n", ddpc_precision_name(s->precision),
            matmul);
    log_activations(t);
    ddpc__trainer_log_memory_plan(t);
}

/* A GPU run's promise that warm training steps allocate nothing on the device, as a line tests
 * read; evaluations and checkpoints between them (whose first batch of a larger size may grow the
 * buffers once) are counted apart, as is nothing after the last step. */
void ddpc__trainer_log_device_allocs(const ddpc_trainer *t)
{
    const ddpc_kernel_table *k = ddpc_model_backend(t->model);
    if (!t->log || k->kind == DDPC_DEVICE_CPU || t->gpu.steps <= 2)
        return;
    const uint64_t between = t->gpu.allocs_last - t->gpu.allocs_warm - t->gpu.step_allocs;
    fprintf(t->log, "device allocations after step 2: %llu in %lld steps",
            (unsigned long long)t->gpu.step_allocs, (long long)t->gpu.steps - 2);
    if (between)
        fprintf(t->log, "; %llu more by evaluations and checkpoints between them",
                (unsigned long long)between);
    fputc('\n', t->log);
    /* ZeRO-2/3's saving: the flat buffers' backed bytes are this rank's own. Without ZeRO-2/3
     * they are plain allocations, all of them held. */
    double mib = 1048576.0, flat = (double)ddpc_model_num_params(t->model) * sizeof(float);
    double backed = ddpc_model_config_of(t->model)->releasable_flat ? (double)k->backed_bytes()
                                                                    : 2.0 * flat;
    fprintf(t->log,
            "device memory after the last step: %.1f MiB in use on the GPU (at most %.1f MiB "
            "after any step); flat buffers backed: %.1f MiB of 2 x %.1f MiB\n",
            (double)t->gpu.used_last / mib, (double)t->gpu.used_most / mib, backed / mib,
            flat / mib);
}
