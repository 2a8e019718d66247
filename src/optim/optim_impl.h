// SPDX-License-Identifier: MIT
/* Private to src/optim: the optimizer struct and the per-algorithm update loops.
 * Invariant: state[0..nstate) each hold n floats from ddpc_calloc; step counts calls to
 * ddpc_optim_step (or what set_step_count restored) and is 0 exactly when no update has happened. */
#ifndef DDPC_OPTIM_IMPL_H
#define DDPC_OPTIM_IMPL_H

#include <ddpc/device.h>
#include <ddpc/optim.h>

/* Below this many elements an update runs on one thread: a parallel region costs more. */
#define DDPC_OPTIM_PARALLEL_MIN 32768

#define DDPC_OPTIM_MAX_STATE 2

struct ddpc_optim {
    ddpc_optim_config cfg;
    size_t n;
    int64_t step;
    size_t nstate;
    float *state[DDPC_OPTIM_MAX_STATE]; /* each (n), on the host */
    /* On a device (k not the CPU's): the state the updates use, on the device; `state` is then
     * a host copy moved by ddpc_optim_to_host / ddpc_optim_to_device. Else kstate == state. */
    const ddpc_kernel_table *k;
    float *kstate[DDPC_OPTIM_MAX_STATE];
    const char *state_name[DDPC_OPTIM_MAX_STATE];
};

/* The step's scalars, computed as torch computes them (o->step already incremented): one place
 * for the host loops and the device kernels. */
ddpc_adamw_coef ddpc__adamw_coef_of(const ddpc_optim *o, float lr);
ddpc_sgd_coef ddpc__sgd_coef_of(const ddpc_optim *o, float lr);

/* One update of state elements [off, off + n) with o->step already incremented: params, grads
 * and decay_mask (may be NULL) point at those elements' values; otherwise as ddpc_optim_step. */
void ddpc__sgd_update(ddpc_optim *o, size_t off, size_t n, float *params, const float *grads,
                      const uint8_t *decay_mask, float lr);
void ddpc__adamw_update(ddpc_optim *o, size_t off, size_t n, float *params, const float *grads,
                        const uint8_t *decay_mask, float lr);

#endif
