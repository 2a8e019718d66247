// SPDX-License-Identifier: MIT
/* Optimizers (SGD, AdamW), learning-rate schedules and global-norm gradient clipping over flat fp32
 * buffers. An optimizer owns only its state (n floats per state buffer) and borrows the caller's
 * parameter and gradient buffers for the duration of each call. Updates follow torch.optim.SGD and
 * torch.optim.AdamW (PyTorch 1.13, foreach=False) operation for operation, so results match to the
 * last bit on IEEE fp32. Every type here is "one thread at a time"; the math is parallel inside. */
#ifndef DDPC_OPTIM_H
#define DDPC_OPTIM_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- optimizers ------------------------------------------------------------------------ */

typedef enum { DDPC_OPTIM_SGD, DDPC_OPTIM_ADAMW } ddpc_optim_type;

typedef struct {
    ddpc_optim_type type;
    float lr;                /* base LR; the step takes the scheduled LR */
    float momentum;          /* SGD; 0 = plain SGD */
    float dampening;         /* SGD, PyTorch semantics (not applied on the first step) */
    bool nesterov;           /* SGD; needs momentum > 0 and dampening == 0 */
    float weight_decay;      /* SGD: L2 added to the gradient; AdamW: decoupled, p *= 1 - lr*wd */
    float beta1, beta2, eps; /* AdamW */
} ddpc_optim_config;

/* SGD, lr 0.01, no momentum, dampening or weight decay; beta1 0.9, beta2 0.999, eps 1e-8. */
ddpc_optim_config ddpc_optim_config_default(void);

/* "sgd" / "adamw"; "unknown" outside the enum. */
const char *ddpc_optim_type_name(ddpc_optim_type t);
/* Parses "sgd" or "adamw" (case-insensitive) into *out; DDPC_EINVAL naming the string otherwise. */
ddpc_status ddpc_optim_type_from_name(const char *name, ddpc_optim_type *out);

typedef struct ddpc_optim ddpc_optim;

/* Creates an optimizer for n parameters with zero-initialised state (SGD: momentum buffer; AdamW:
 * exp_avg and exp_avg_sq) and step count 0; copies *cfg. DDPC_EINVAL for a bad config (negative lr
 * or decay, beta outside [0, 1), nesterov without momentum...), DDPC_ENOMEM; *out untouched then. */
ddpc_status ddpc_optim_create(ddpc_optim **out, const ddpc_optim_config *cfg, size_t n);
/* The same, on device k (NULL: the CPU): its state lives in k's memory and its steps take k's
 * params, grads and decay mask; ddpc_optim_state returns a host copy that ddpc_optim_to_host
 * refreshes and ddpc_optim_to_device writes back (both no-ops on the CPU). */
struct ddpc_kernel_table;
ddpc_status ddpc_optim_create_on(ddpc_optim **out, const ddpc_optim_config *cfg, size_t n,
                                 const struct ddpc_kernel_table *k);
void ddpc_optim_to_host(ddpc_optim *o);
void ddpc_optim_to_device(ddpc_optim *o);
/* Frees the optimizer and its state; NULL is a no-op. */
void ddpc_optim_destroy(ddpc_optim *o);

/* One in-place update of params (n) from grads (n) at learning rate lr; increments the step count
 * first (AdamW's bias correction uses the new count). decay_mask (n) may be NULL (weight decay on
 * every element) or holds 1 where weight decay applies and 0 where it does not (biases, norms) --
 * the same as torch with two param groups. params and grads must not overlap. SGD with momentum
 * starts its buffer from the gradient when the step count is 0, as torch does when it has none. */
void ddpc_optim_step(ddpc_optim *o, float *params, const float *grads, const uint8_t *decay_mask,
                     float lr);

/* A range [lo, lo + len) of a flat buffer. */
typedef struct {
    size_t lo, len;
} ddpc_range;
/* One update of the flat positions the ranges name, as ddpc_optim_step on each (one step count
 * for all of them): the optimizer's n state elements are the ranges' elements in order (ZeRO: a
 * rank's shard). params, grads and decay_mask (may be NULL) are indexed by flat position. Ranges
 * beyond the optimizer's n elements are ignored. */
void ddpc_optim_step_ranges(ddpc_optim *o, float *params, const float *grads,
                            const uint8_t *decay_mask, const ddpc_range *ranges, size_t n_ranges,
                            float lr);
/* Zeroes the state and the step count, as if newly created. */
void ddpc_optim_reset(ddpc_optim *o);

/* Number of parameters n, and the configuration the optimizer was created with. */
size_t ddpc_optim_numel(const ddpc_optim *o);
const ddpc_optim_config *ddpc_optim_config_of(const ddpc_optim *o);

/* For checkpoints: the number of steps taken (settable on resume), the number of state buffers
 * (SGD: 1, "momentum", all zero and unused when momentum is 0; AdamW: 2, "exp_avg" and
 * "exp_avg_sq"), and state buffer i (n floats, owned by the optimizer, writable for restore).
 * ddpc_optim_state returns NULL and leaves *name alone for i out of range; name may be NULL. */
int64_t ddpc_optim_step_count(const ddpc_optim *o);
void ddpc_optim_set_step_count(ddpc_optim *o, int64_t t);
size_t ddpc_optim_num_state(const ddpc_optim *o);
/* The state buffers (of n floats each) an optimizer of type t allocates: what
 * ddpc_optim_num_state will say, known before creating one (memory plans). */
size_t ddpc_optim_state_buffers(ddpc_optim_type t);
float *ddpc_optim_state(ddpc_optim *o, size_t i, const char **name);

/* ---- learning-rate schedules ----------------------------------------------------------- */

typedef enum { DDPC_LR_CONSTANT, DDPC_LR_COSINE, DDPC_LR_LINEAR } ddpc_lr_kind;

/* The shape of the LR over the steps; the base LR it scales is the optimizer's (ddpc_optim_config
 * lr), kept there only. */
typedef struct {
    ddpc_lr_kind kind;
    int64_t warmup_steps; /* 0 = no warm-up */
    int64_t total_steps;  /* the decay reaches min_lr here (COSINE, LINEAR) */
    float min_lr;         /* COSINE, LINEAR */
} ddpc_lr_schedule;

/* CONSTANT with no warm-up. */
ddpc_lr_schedule ddpc_lr_schedule_default(void);

/* "constant" / "cosine" / "linear"; "unknown" outside the enum. */
const char *ddpc_lr_kind_name(ddpc_lr_kind k);
/* Parses a kind name (case-insensitive) into *out; DDPC_EINVAL naming the string otherwise. */
ddpc_status ddpc_lr_kind_from_name(const char *name, ddpc_lr_kind *out);

/* DDPC_EINVAL naming the field if min_lr is negative, warmup_steps is negative, or a
 * decaying schedule has total_steps < warmup_steps. */
ddpc_status ddpc_lr_schedule_check(const ddpc_lr_schedule *s);

/* LR for 0-based step at base LR `base`. Warm-up for every kind, like nanoGPT: base*(step+1)/warmup
 * for step < warmup. Then CONSTANT stays at base; COSINE goes min + (base-min)*(1+cos(pi*r))/2 and
 * LINEAR base + (min-base)*r, with r = (step-warmup)/(total-warmup) clamped to [0, 1] (min_lr at
 * and past total_steps). Negative steps count as 0. Pure. */
float ddpc_lr_at(const ddpc_lr_schedule *s, float base, int64_t step);

/* ---- gradient clipping ----------------------------------------------------------------- */

/* Sum of squares of g (n), accumulated in double over a fixed partition, so the result does not
 * depend on the thread count; a distributed caller all-reduces it before taking the root. */
double ddpc_grad_sumsq(const float *g, size_t n);

/* torch.nn.utils.clip_grad_norm_ given the total norm: coef = max_norm / (norm + 1e-6) in fp32, and
 * if coef < 1, g (n) *= coef. Returns the scale applied (1 if none). A non-finite norm leaves g
 * alone and returns 1: the caller decides whether to skip the step. */
/* The factor ddpc_grad_clip_scale multiplies by: max_norm / (norm + 1e-6) in fp32 as torch, 1 when
 * that is not below 1 or norm is not finite. */
float ddpc_grad_clip_coef(double norm, float max_norm);
float ddpc_grad_clip_scale(float *g, size_t n, double norm, float max_norm);

/* Convenience for one process: the norm of g (n), clip as above; returns the pre-clip norm. */
float ddpc_clip_grad_norm(float *g, size_t n, float max_norm);

/* ---- dynamic loss scaling: torch.cuda.amp.GradScaler's rules ---------------------------- */

/* Defaults are GradScaler's: init_scale 2^16, growth_factor 2, backoff_factor 0.5,
 * growth_interval 2000. */
typedef struct {
    float init_scale;
    float growth_factor;
    float backoff_factor;
    int64_t growth_interval;
} ddpc_loss_scale_config;

typedef struct {
    float scale;            /* the loss is multiplied by this before backward */
    int64_t growth_tracker; /* consecutive finite steps since the last change */
} ddpc_loss_scale_state;

ddpc_loss_scale_config ddpc_loss_scale_config_default(void);
/* DDPC_EINVAL naming the field unless init_scale > 0 and finite, growth_factor > 1,
 * 0 < backoff_factor < 1, growth_interval >= 1. */
ddpc_status ddpc_loss_scale_check(const ddpc_loss_scale_config *c);
/* {init_scale, 0}. */
ddpc_loss_scale_state ddpc_loss_scale_start(const ddpc_loss_scale_config *c);
/* torch._amp_update_scale_ after a step: found_inf: scale *= backoff_factor and the tracker
 * restarts; otherwise the tracker counts the step, and on reaching growth_interval the scale
 * grows by growth_factor (kept only if finite) and the tracker restarts. */
void ddpc_loss_scale_update(ddpc_loss_scale_state *s, const ddpc_loss_scale_config *c,
                            bool found_inf);
/* GradScaler.unscale_: g (n) *= inv_scale, inv_scale = 1 / scale computed in double and rounded
 * to fp32 as PyTorch does. Returns true when any element was NaN or infinite before scaling. */
bool ddpc_grad_unscale(float *g, size_t n, float scale);

#ifdef __cplusplus
}
#endif
#endif
