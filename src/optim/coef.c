// SPDX-License-Identifier: MIT
/* The per-step scalars of AdamW and SGD, computed in double like Python's and rounded to float
 * where torch hands them to an fp32 kernel (adamw.c and sgd.c say why each is what it is). Shared
 * by the host loops and the device kernels, so both apply the same update. */
#include "optim/optim_impl.h"

#include <math.h>

ddpc_adamw_coef ddpc__adamw_coef_of(const ddpc_optim *o, float lr)
{
    const ddpc_optim_config *c = &o->cfg;
    const double t = (double)o->step;
    const double bc1 = 1.0 - pow((double)c->beta1, t);
    const double bc2 = 1.0 - pow((double)c->beta2, t);
    return (ddpc_adamw_coef){
        .b1 = c->beta1,
        .b2 = c->beta2,
        .a1 = (float)(1.0 - (double)c->beta1), /* alpha=1 - beta1 */
        .a2 = (float)(1.0 - (double)c->beta2), /* value=1 - beta2 */
        .eps = c->eps,
        .neg_step = (float)(-((double)lr / bc1)),
        .bc2_sqrt = (float)sqrt(bc2),
        /* A masked element (torch: a group with wd 0) is multiplied by 1, exactly as torch. */
        .decay = (float)(1.0 - (double)lr * (double)c->weight_decay),
    };
}

ddpc_sgd_coef ddpc__sgd_coef_of(const ddpc_optim *o, float lr)
{
    return (ddpc_sgd_coef){
        .wd = o->cfg.weight_decay,
        .momentum = o->cfg.momentum,
        .keep = (float)(1.0 - (double)o->cfg.dampening), /* alpha=1 - dampening */
        .neg_lr = -lr,
        .nesterov = o->cfg.nesterov,
        .first = o->step == 1,
    };
}

float ddpc_grad_clip_coef(double norm, float max_norm)
{
    if (!isfinite(norm))
        return 1.0f;
    /* torch: clip_coef = max_norm / (total_norm + 1e-6), an fp32 tensor op, clamped to 1 */
    const float coef = max_norm / ((float)norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}
