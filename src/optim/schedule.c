// SPDX-License-Identifier: MIT
/* Learning-rate schedules: nanoGPT-style linear warm-up, then constant, cosine or linear decay to
 * min_lr at total_steps. Pure functions of (schedule, step), computed in double and rounded once,
 * so every rank and a resumed run see the same LR for the same step. */
#include <ddpc/optim.h>

#include <math.h>
#include <strings.h>

static const double pi = 3.14159265358979323846;

ddpc_lr_schedule ddpc_lr_schedule_default(void)
{
    return (ddpc_lr_schedule){
        .kind = DDPC_LR_CONSTANT,
        .warmup_steps = 0,
        .total_steps = 0,
        .min_lr = 0.0f,
    };
}

const char *ddpc_lr_kind_name(ddpc_lr_kind k)
{
    switch (k) {
    case DDPC_LR_CONSTANT:
        return "constant";
    case DDPC_LR_COSINE:
        return "cosine";
    case DDPC_LR_LINEAR:
        return "linear";
    }
    return "unknown";
}

ddpc_status ddpc_lr_kind_from_name(const char *name, ddpc_lr_kind *out)
{
    if (!name || !out)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_lr_kind_from_name: name and out must be non-NULL");
    static const ddpc_lr_kind kinds[] = {DDPC_LR_CONSTANT, DDPC_LR_COSINE, DDPC_LR_LINEAR};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcasecmp(name, ddpc_lr_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return DDPC_OK;
        }
    }
    return ddpc_errorf(DDPC_EINVAL,
                       "unknown LR schedule '%s' (expected 'constant', 'cosine' or 'linear')", name);
}

ddpc_status ddpc_lr_schedule_check(const ddpc_lr_schedule *s)
{
    if (!s)
        return ddpc_errorf(DDPC_EINVAL, "ddpc_lr_schedule_check: schedule must be non-NULL");
    if (!(s->min_lr >= 0.0f && isfinite(s->min_lr)))
        return ddpc_errorf(DDPC_EINVAL, "LR schedule min_lr %g must be finite and >= 0",
                           (double)s->min_lr);
    if (s->warmup_steps < 0)
        return ddpc_errorf(DDPC_EINVAL, "LR schedule warmup_steps %lld must be >= 0",
                           (long long)s->warmup_steps);
    if (s->kind != DDPC_LR_CONSTANT && s->total_steps < s->warmup_steps)
        return ddpc_errorf(DDPC_EINVAL,
                           "LR schedule total_steps %lld is less than warmup_steps %lld",
                           (long long)s->total_steps, (long long)s->warmup_steps);
    if (s->kind != DDPC_LR_CONSTANT && s->kind != DDPC_LR_COSINE && s->kind != DDPC_LR_LINEAR)
        return ddpc_errorf(DDPC_EINVAL, "unknown LR schedule kind %d", (int)s->kind);
    return DDPC_OK;
}

float ddpc_lr_at(const ddpc_lr_schedule *s, float base_lr, int64_t step)
{
    const double base = base_lr, lo = s->min_lr;
    if (step < 0)
        step = 0;
    if (step < s->warmup_steps)
        return (float)(base * (double)(step + 1) / (double)s->warmup_steps);
    if (s->kind != DDPC_LR_COSINE && s->kind != DDPC_LR_LINEAR)
        return base_lr;
    const int64_t span = s->total_steps - s->warmup_steps;
    double r = span <= 0 ? 1.0 : (double)(step - s->warmup_steps) / (double)span;
    if (r > 1.0)
        r = 1.0;
    if (s->kind == DDPC_LR_COSINE)
        return (float)(lo + 0.5 * (1.0 + cos(pi * r)) * (base - lo));
    return (float)(base + (lo - base) * r);
}
