// SPDX-License-Identifier: MIT
/* Dynamic loss scaling with torch.cuda.amp.GradScaler's rules (torch._amp_update_scale_ and
 * _amp_foreach_non_finite_check_and_unscale_). fp16 gradients underflow unless the loss is
 * scaled up; the scale backs off when a step overflows (that step is skipped) and grows again
 * after growth_interval clean steps. Invariant: the update depends only on found_inf, so ranks
 * that saw the same averaged gradients keep the same scale. */
#include "optim/optim_impl.h"

#include <math.h>

ddpc_loss_scale_config ddpc_loss_scale_config_default(void)
{
    return (ddpc_loss_scale_config){.init_scale = 65536.0f,
                                    .growth_factor = 2.0f,
                                    .backoff_factor = 0.5f,
                                    .growth_interval = 2000};
}

ddpc_status ddpc_loss_scale_check(const ddpc_loss_scale_config *c)
{
    if (!(c->init_scale > 0.0f) || !isfinite(c->init_scale))
        return ddpc_errorf(DDPC_EINVAL, "loss_scale.init_scale must be positive and finite, got %g",
                           (double)c->init_scale);
    if (!(c->growth_factor > 1.0f) || !isfinite(c->growth_factor))
        return ddpc_errorf(DDPC_EINVAL, "loss_scale.growth_factor must be > 1, got %g",
                           (double)c->growth_factor);
    if (!(c->backoff_factor > 0.0f && c->backoff_factor < 1.0f))
        return ddpc_errorf(DDPC_EINVAL, "loss_scale.backoff_factor must be in (0, 1), got %g",
                           (double)c->backoff_factor);
    if (c->growth_interval < 1)
        return ddpc_errorf(DDPC_EINVAL, "loss_scale.growth_interval must be >= 1, got %lld",
                           (long long)c->growth_interval);
    return DDPC_OK;
}

ddpc_loss_scale_state ddpc_loss_scale_start(const ddpc_loss_scale_config *c)
{
    return (ddpc_loss_scale_state){.scale = c->init_scale, .growth_tracker = 0};
}

void ddpc_loss_scale_update(ddpc_loss_scale_state *s, const ddpc_loss_scale_config *c,
                            bool found_inf)
{
    if (found_inf) {
        s->scale *= c->backoff_factor;
        s->growth_tracker = 0;
        return;
    }
    int64_t successful = s->growth_tracker + 1;
    if (successful == c->growth_interval) {
        float grown = s->scale * c->growth_factor;
        if (isfinite(grown))
            s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker = successful;
    }
}

bool ddpc_grad_unscale(float *g, size_t n, float scale)
{
    const float inv = (float)(1.0 / (double)scale);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= DDPC_OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        bad |= !isfinite(g[i]);
        if (inv != 1.0f)
            g[i] *= inv;
    }
    return bad != 0;
}
