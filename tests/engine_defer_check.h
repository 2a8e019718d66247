// SPDX-License-Identifier: MIT
/* The deferred engine (ddpc_engine_deferred) on a device table, shared by test_engine_defer (a
 * stand-in device on the CPU) and test_cuda_defer (the GPU): an MLP trained with two micro-batches
 * and clipping gives, read at every other step, the same per-pass losses and counts, the same
 * norms and the same parameters, bit for bit, as the engine that reads every pass, with
 * cross-entropy and with each loss on float targets (mse, l1, smooth_l1, bce_logits); its steps
 * make no host wait and a read makes one; a NaN input stops at the read, naming the steps; more
 * unread passes than defer_passes are refused. */
#ifndef DDPC_TESTS_ENGINE_DEFER_CHECK_H
#define DDPC_TESTS_ENGINE_DEFER_CHECK_H

#include "check.h"

#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/rng.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { DC_N = 8, DC_PIX = 16, DC_CLASSES = 3, DC_ACCUM = 2, DC_STEPS = 5 };

static float dc_x[DC_N * DC_PIX];
static int32_t dc_y[DC_N];
static float dc_fy[DC_N * DC_CLASSES]; /* float targets: 0/1 labels, fit for every loss */

static ddpc_model *dc_model_loss(const ddpc_kernel_table *k, ddpc_loss loss)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    strcpy(c.type, "mlp");
    c.in_channels = 1, c.in_height = 4, c.in_width = 4, c.num_classes = DC_CLASSES;
    own.hidden[0] = 8, own.n_hidden = 1;
    c.seed = 5;
    c.loss = loss;
    c.backend = k;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &c), DDPC_OK);
    return m;
}

static ddpc_model *dc_model(const ddpc_kernel_table *k)
{
    return dc_model_loss(k, DDPC_LOSS_CROSS_ENTROPY);
}

static void dc_data(float poison)
{
    ddpc_rng r = ddpc_rng_make(9, 0);
    for (int i = 0; i < DC_N * DC_PIX; i++)
        dc_x[i] = 4.0f * (ddpc_rng_uniform(&r) - 0.5f);
    for (int i = 0; i < DC_N; i++)
        dc_y[i] = i % DC_CLASSES;
    for (int i = 0; i < DC_N * DC_CLASSES; i++)
        dc_fy[i] = (float)(i % 2 == i / DC_CLASSES % 2);
    dc_x[3] = dc_x[3] + poison; /* NaN poisons the loss and every gradient */
}

static ddpc_engine *dc_engine(ddpc_model *m, size_t defer_passes)
{
    ddpc_engine_config c = ddpc_engine_config_default();
    c.optim.type = DDPC_OPTIM_SGD;
    c.optim.lr = 0.5f;
    c.optim.momentum = 0.9f;
    c.grad_clip = 0.05f; /* small: every step clips */
    c.accum_steps = DC_ACCUM;
    c.defer_passes = defer_passes;
    ddpc_engine *e = NULL;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &c, &e), DDPC_OK);
    return e;
}

/* One step of a model ending in `loss`; outs gets its passes' outputs as the pass returned them. */
static ddpc_status dc_step_loss(ddpc_engine *e, ddpc_loss loss, ddpc_model_output *outs,
                                ddpc_engine_step_info *info)
{
    int64_t b = DC_N / DC_ACCUM;
    ddpc_engine_zero_grad(e);
    for (int64_t k = 0; k < DC_ACCUM; k++) {
        ddpc_model_input in = {.n = b, .x = dc_x + k * b * DC_PIX};
        if (loss == DDPC_LOSS_CROSS_ENTROPY)
            in.targets = dc_y + k * b;
        else
            in.float_targets = dc_fy + k * b * DC_CLASSES;
        DDPC_TRY(ddpc_engine_pass(e, &in, k, 1.0f, k == DC_ACCUM - 1, &outs[k]));
    }
    return ddpc_engine_update(e, info);
}

static ddpc_status dc_step(ddpc_engine *e, ddpc_model_output *outs, ddpc_engine_step_info *info)
{
    return dc_step_loss(e, DDPC_LOSS_CROSS_ENTROPY, outs, info);
}

static bool dc_same_out(const ddpc_model_output *a, const ddpc_model_output *b)
{
    return memcmp(&a->loss, &b->loss, sizeof a->loss) == 0 && a->n_valid == b->n_valid &&
           a->n_correct == b->n_correct;
}

static void dc_check_same_as_undeferred_loss(const ddpc_kernel_table *k, ddpc_loss loss)
{
    printf("  loss %s\n", ddpc_loss_name(loss));
    dc_data(0.0f);
    ddpc_model *ma = dc_model_loss(k, loss), *mb = dc_model_loss(k, loss);
    ddpc_engine *now = dc_engine(ma, 0), *later = dc_engine(mb, 2 * DC_ACCUM);
    CHECK(!ddpc_engine_deferred(now));
    CHECK(ddpc_engine_deferred(later));
    ddpc_model_output want[DC_STEPS * DC_ACCUM], got[DC_STEPS * DC_ACCUM], tmp[DC_ACCUM];
    double norms[DC_STEPS];
    for (int s = 0; s < DC_STEPS; s++) {
        ddpc_engine_step_info info;
        CHECK_EQ_INT(dc_step_loss(now, loss, want + s * DC_ACCUM, &info), DDPC_OK);
        norms[s] = info.grad_norm;
    }
    size_t have = 0;
    for (int s = 0; s < DC_STEPS; s++) {
        ddpc_engine_step_info info;
        uint64_t w0 = k->host_waits();
        CHECK_EQ_INT(dc_step_loss(later, loss, tmp, &info), DDPC_OK);
        CHECK_EQ_INT(k->host_waits() - w0, 0); /* a step never waits */
        CHECK(isnan(tmp[0].loss) && tmp[0].n_valid == -1 && isnan(info.grad_norm));
        CHECK_EQ_INT(ddpc_engine_unread(later), (s % 2 + 1) * DC_ACCUM);
        if (s % 2 == 0 && s + 1 < DC_STEPS)
            continue;
        size_t n = 0;
        double norm = 0.0;
        w0 = k->host_waits();
        CHECK_EQ_INT(ddpc_engine_read(later, got + have, &n, &norm), DDPC_OK);
        CHECK_EQ_INT(k->host_waits() - w0, 1); /* a read waits once */
        have += n;
        CHECK_EQ_INT(have, (size_t)(s + 1) * DC_ACCUM);
        printf("  read at step %d: %zu passes, norm %.17g (undeferred %.17g)\n", s + 1, n, norm,
               norms[s]);
        CHECK(memcmp(&norm, &norms[s], sizeof norm) == 0);
    }
    for (size_t i = 0; i < have; i++) {
        if (!dc_same_out(&got[i], &want[i]))
            printf("  pass %zu: loss %.9g n_valid %lld correct %lld, undeferred %.9g %lld %lld\n",
                   i, got[i].loss, (long long)got[i].n_valid, (long long)got[i].n_correct,
                   want[i].loss, (long long)want[i].n_valid, (long long)want[i].n_correct);
        CHECK(dc_same_out(&got[i], &want[i]));
    }
    ddpc_model_to_host(ma);
    ddpc_model_to_host(mb);
    CHECK(memcmp(ddpc_model_params(ma), ddpc_model_params(mb),
                 ddpc_model_num_params(ma) * sizeof(float)) == 0);
    ddpc_engine_destroy(now);
    ddpc_engine_destroy(later);
    ddpc_model_destroy(ma);
    ddpc_model_destroy(mb);
}

/* dc_check_same_as_undeferred_loss for every loss the MLP takes. */
static void dc_check_same_as_undeferred(const ddpc_kernel_table *k)
{
    for (int l = 0; l < DDPC_LOSS_COUNT; l++)
        dc_check_same_as_undeferred_loss(k, (ddpc_loss)l);
}

static void dc_check_stop_at_read(const ddpc_kernel_table *k)
{
    dc_data(NAN);
    ddpc_model *m = dc_model(k);
    ddpc_engine *e = dc_engine(m, 2 * DC_ACCUM);
    ddpc_model_output outs[DC_ACCUM * 2];
    ddpc_engine_step_info info;
    CHECK_EQ_INT(dc_step(e, outs, &info), DDPC_OK); /* nothing known yet */
    CHECK_EQ_INT(dc_step(e, outs, &info), DDPC_OK);
    size_t n = 0;
    double norm = 0.0;
    CHECK_EQ_INT(ddpc_engine_read(e, outs, &n, &norm), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "steps 1 to 2");
    CHECK_STR_CONTAINS(ddpc_last_error(), "stopping (on_nonfinite: stop)");
    CHECK_EQ_INT(n, 2 * DC_ACCUM);
    CHECK(isnan(norm)); /* ReLU drops the NaN from the loss; the first layer's gradient keeps it */
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
    dc_data(0.0f);
}

static void dc_check_full(const ddpc_kernel_table *k)
{
    dc_data(0.0f);
    ddpc_model *m = dc_model(k);
    ddpc_engine *e = dc_engine(m, DC_ACCUM); /* one step's passes */
    ddpc_model_output outs[DC_ACCUM];
    ddpc_engine_step_info info;
    CHECK_EQ_INT(dc_step(e, outs, &info), DDPC_OK);
    CHECK_EQ_INT(dc_step(e, outs, &info), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "wait to be read");
    size_t n = 0;
    double norm;
    CHECK_EQ_INT(ddpc_engine_read(e, outs, &n, &norm), DDPC_OK);
    CHECK_EQ_INT(n, DC_ACCUM);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
}

#endif
