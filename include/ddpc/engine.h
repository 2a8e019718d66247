// SPDX-License-Identifier: MIT
/* ddpc engine: one training step as one object. A step is zero_grad, then per micro-batch one or
 * more forward/backward passes (one per task that has a batch), gradient synchronisation (the DDP
 * reducer: all-reduce, or ZeRO's reduce-scatter with zero_stage), the non-finite check,
 * global-norm clipping, the optimizer update at the scheduled learning rate. The engine owns everything a step mutates
 * apart from the model's buffers (the optimizer and its state, the step and skip counters), so
 * that state is saved and restored as one unit. One thread at a time. */
#ifndef DDPC_ENGINE_H
#define DDPC_ENGINE_H

#include <ddpc/nn.h>
#include <ddpc/optim.h>
#include <ddpc/reducer.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a step whose gradient norm (or loss) is NaN or infinite does. */
typedef enum {
    DDPC_NONFINITE_STOP, /* fail with DDPC_EINVAL naming the step: the run stops, non-zero exit */
    DDPC_NONFINITE_SKIP, /* leave parameters and optimizer state alone, count the step as skipped */
    DDPC_NONFINITE_COUNT
} ddpc_nonfinite_policy;

/* "stop" / "skip"; "unknown" outside the enum. */
const char *ddpc_nonfinite_policy_name(ddpc_nonfinite_policy p);

typedef struct {
    ddpc_optim_config optim;
    ddpc_lr_schedule
        schedule; /* the LR of step s is ddpc_lr_at(&schedule, optim.lr, s) x lr_scale */
    float lr_scale;            /* 1 */
    float grad_clip;           /* max global gradient norm; 0 = no clipping */
    int64_t accum_steps;       /* micro-batches per optimizer step, >= 1; 1 */
    int num_tasks;             /* passes per micro-batch at most (dropout streams), >= 1; 1 */
    ddpc_nonfinite_policy on_nonfinite; /* stop */
    /* Dynamic loss scaling (fp16): each backward's loss weight is multiplied by the scale, update
     * unscales the averaged gradients before anything reads them, and a step whose gradients are
     * not all finite is skipped and backs the scale off, whatever on_nonfinite says (GradScaler's
     * recipe: overflow is expected, not an error). Off by default. */
    bool loss_scaling;
    ddpc_loss_scale_config loss_scale; /* GradScaler's defaults */
    /* Time forward, backward, the wait for gradient synchronisation and the update (a few clock
     * reads per pass; ddpc_engine_take_timing). Off by default. */
    bool timing;
    /* DataParallel (parallel.mode dp): 0 = off; N >= 1 runs N replicas of the model in this
     * process, as torch.nn.DataParallel does with N devices. Each step copies the model's
     * parameters into the other replicas; each pass splits its batch by rows (replica k takes rows
     * k, k + N, ...: what rank k of N-rank DDP takes), runs every replica's forward and backward on
     * its own thread (each with max(1, ddpc_kernels_threads() / N) kernel threads; dropout stream
     * as DDP rank k of N), and update first averages the replicas' gradients into the model's. So N
     * replicas x batch N*b train as N DDP ranks x b. One process only: no reducer, world 1. */
    int dp_replicas;
    /* On a device: leave up to this many passes' losses, and the steps' gradient norms, on the
     * device until ddpc_engine_read, so that a step does not wait for the device (see there).
     * 0 (the default) reads them in every pass, as on the CPU, where it has no effect. */
    size_t defer_passes;
} ddpc_engine_config;

#define DDPC_ENGINE_MAX_REPLICAS 64

/* SGD defaults (ddpc_optim_config_default), constant schedule at its lr, scale 1, no clipping,
 * one micro-batch of one task, stop on non-finite values. */
ddpc_engine_config ddpc_engine_config_default(void);

typedef struct ddpc_engine ddpc_engine;

/* Creates the engine and its optimizer over the model's parameters. Borrows `m` and `reducer`
 * (NULL on one rank) until destroy; rank and world make dropout streams distinct per rank.
 * DDPC_EINVAL naming the field for a bad config, DDPC_ENOMEM. */
ddpc_status ddpc_engine_create(ddpc_model *m, ddpc_reducer *reducer, int rank, int world,
                               const ddpc_engine_config *c, ddpc_engine **out);
/* NULL is a no-op. */
void ddpc_engine_destroy(ddpc_engine *e);

/* Begins a step: zeroes the gradients. The step's first pass then broadcasts rank 0's model
 * buffers (ddpc_reducer_config.broadcast_buffers). */
void ddpc_engine_zero_grad(ddpc_engine *e);
/* Broadcasts rank 0's model buffers now, if the reducer's config says so (before evaluation, so
 * every rank evaluates with the same BatchNorm statistics). Collective; no-op on one rank. */
ddpc_status ddpc_engine_sync_buffers(ddpc_engine *e);

/* One forward and backward of micro-batch `micro` (0 <= micro < accum_steps) for in->task:
 * adds d(loss x loss_weight / accum_steps) to the gradients. The engine sets in->rng_stream, so
 * dropout masks differ for every pass of every micro-batch, step and rank and are the same when a
 * step is replayed. `sync` marks the step's last pass when it is the only pass of its micro-batch:
 * the reducer then communicates while this backward runs; without any sync pass, every gradient
 * is synchronised after the last pass (several tasks feed one step). *out as
 * ddpc_model_forward's. Errors: the model's. */
ddpc_status ddpc_engine_pass(ddpc_engine *e, ddpc_model_input *in, int64_t micro, float loss_weight,
                             bool sync, ddpc_model_output *out);

typedef struct {
    int64_t step;     /* the step just finished, from 0 */
    float lr;         /* learning rate it used */
    double grad_norm; /* global norm of the averaged gradients, before clipping */
    bool skipped;     /* non-finite and skipped (DDPC_NONFINITE_SKIP, or loss scaling) */
    float loss_scale; /* the scale this step's backward used (1 without loss scaling) */
} ddpc_engine_step_info;

/* Ends the step: waits for the gradient synchronisation, checks the norm (and every pass's loss)
 * for NaN/Inf, clips, updates the parameters and advances the step counter. A non-finite value is
 * DDPC_EINVAL under `stop` (the parameters are untouched); under `skip` the step counts as done
 * and skipped. The decision depends on the averaged gradients only, so every rank takes it alike.
 * Errors: the reducer's (timeout, peer failure). */
ddpc_status ddpc_engine_update(ddpc_engine *e, ddpc_engine_step_info *info);

/* Deferred reads, in effect (ddpc_engine_deferred) when cfg.defer_passes > 0 on a device, on one
 * rank without DataParallel, under on_nonfinite stop or loss scaling (skip must decide before
 * updating): passes write their loss, valid and correct counts into device memory, and steps their
 * gradient norm, clipping on the device; nothing waits for the device except loss scaling's
 * overflow flag (one read per step, as GradScaler's). Until read, a pass's *out has loss NaN and
 * counts -1, and the step info's grad_norm is NaN. ddpc_engine_read waits once and gives the
 * passes since the last read in order (*n of them, at most cfg.defer_passes: outs must hold that
 * many) and the last step's norm (NaN when it was skipped), the values an undeferred engine gives.
 * The non-finite check of `stop` happens there: DDPC_EINVAL naming the steps read (whose updates
 * the parameters then hold). A pass with cfg.defer_passes passes unread is DDPC_EINVAL. Without
 * deferral, read gives no passes and the last step's norm. ddpc_engine_unread: passes waiting. */
bool ddpc_engine_deferred(const ddpc_engine *e);
size_t ddpc_engine_unread(const ddpc_engine *e);
ddpc_status ddpc_engine_read(ddpc_engine *e, ddpc_model_output *outs, size_t *n, double *grad_norm);

/* Seconds spent since the last call (all zero unless cfg.timing): forward and backward of every
 * pass (backward includes the communication it overlaps), comm_wait the exposed communication
 * (waiting for the reducer after backward, ZeRO's parameter all-gather), optimizer the rest of
 * update (unscale, norm, clip, the step). Under DataParallel forward and backward are replica
 * 0's, on its thread, and the step's other parts have their own fields: replicate (copying the
 * parameters to the other replicas), scatter (copying each replica's rows), replica_wait (the
 * parallel region's wall time beyond replica 0's forward and backward: the slowest replica, thread
 * start and join) and reduce (averaging the gradients into the model's). Resets them. */
typedef struct {
    double forward_s, backward_s, comm_wait_s, optimizer_s;
    double replicate_s, scatter_s, replica_wait_s, reduce_s; /* DataParallel only */
} ddpc_engine_timing;
ddpc_engine_timing ddpc_engine_take_timing(ddpc_engine *e);
/* On a device whose table has marks (a GPU), with cfg.timing: the same phases as the device ran
 * them (forward, backward, comm_wait, optimizer: the device time from each phase's start on its
 * stream to its end), for the spans the device has finished since the last call, without
 * waiting (a span still ahead counts at a later call); resets them and returns true. False (and
 * *out untouched) elsewhere. */
bool ddpc_engine_take_device_timing(ddpc_engine *e, ddpc_engine_timing *out);

/* DataParallel: the kernel threads each replica's forward and backward get, as the calling
 * thread's ddpc_kernels_threads() now sets them; 0 without replicas. */
int ddpc_engine_replica_threads(const ddpc_engine *e);
/* Steps finished (the next step's number) and how many of them were skipped. */
int64_t ddpc_engine_step(const ddpc_engine *e);
int64_t ddpc_engine_skipped(const ddpc_engine *e);
/* The learning rate of `step`. */
float ddpc_engine_lr(const ddpc_engine *e, int64_t step);
/* The flat ranges of the parameters whose optimizer state this rank holds, in the order of the
 * optimizer's state: one range covering all of them below ZeRO stage 1. Valid until destroy. */
void ddpc_engine_shard(const ddpc_engine *e, const ddpc_range **ranges, size_t *n_ranges);
/* ZeRO stage 3: gathers all the parameters so that code other than the training step
 * (evaluation, prediction, saving weights) can read them, on any subset of ranks; until
 * ddpc_engine_release_params. Collective. No-op below stage 3. Errors: the collective's. */
ddpc_status ddpc_engine_gather_params(ddpc_engine *e);
/* ZeRO stage 3: back to owned chunks only. No-op below stage 3. */
void ddpc_engine_release_params(ddpc_engine *e);
/* After something wrote all the parameters (a checkpoint load): at stage 3 only the owned chunks
 * stay resident. Local. No-op below stage 3. */
void ddpc_engine_params_written(ddpc_engine *e);
/* Memory the model's buffers and the optimizer hold on this rank now. */
typedef struct {
    size_t params;      /* parameter buffer pages resident in physical memory (mincore) */
    size_t grads;       /* gradient buffer pages resident */
    size_t optim_state; /* the optimizer's state buffers (allocated, all of it used) */
    size_t staging;     /* ZeRO's slots and pools (ddpc_reducer_staging_bytes): at stage 3 the
                           gathered buckets live there, at stage 2 the gradients being summed */
} ddpc_engine_memory;
/* Measures it. Under ZeRO 2 and 3 only the owned chunks of the flat buffers hold pages (plus a
 * page at each chunk's edges), so the resident bytes follow the paper's formulas; the working
 * set is in `staging`. */
ddpc_engine_memory ddpc_engine_memory_of(const ddpc_engine *e);
/* The optimizer (its state buffers are the engine's state for checkpoints; under ZeRO they
 * cover this rank's shard only, the ranges' elements in order). */
ddpc_optim *ddpc_engine_optim(ddpc_engine *e);
const ddpc_engine_config *ddpc_engine_config_of(const ddpc_engine *e);
/* The ZeRO stage in effect: the reducer's zero_stage (ddpc_reducer_config, where the stage is
 * set: 1 shards the optimizer state, rank r keeping and updating only its shard of the flat
 * parameters, then the updated chunks are all-gathered; 2 the gradients too; 3 the parameters
 * too), or 0 without a reducer or on one rank, where every stage is stage 0. */
int ddpc_engine_zero_stage(const ddpc_engine *e);
/* Restores the counters of a checkpoint (the optimizer's state is restored through
 * ddpc_engine_optim). */
void ddpc_engine_restore(ddpc_engine *e, int64_t step, int64_t skipped);
/* The loss scaler's state (scale 1, tracker 0 without loss scaling), and its restore from a
 * checkpoint (ignored without loss scaling). */
ddpc_loss_scale_state ddpc_engine_loss_scale(const ddpc_engine *e);
void ddpc_engine_restore_loss_scale(ddpc_engine *e, ddpc_loss_scale_state s);

#ifdef __cplusplus
}
#endif
#endif
