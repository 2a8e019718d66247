// SPDX-License-Identifier: MIT
/* Helpers of the checkpoint tests: a small real mlp on 1x4x4 images and a real optimizer after a
 * few training steps on fixed pseudo-random data, and byte-level comparisons of their buffers. */
#ifndef DDPC_TESTS_CKPT_TESTUTIL_H
#define DDPC_TESTS_CKPT_TESTUTIL_H

#include <ddpc/checkpoint.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/optim.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* An mlp 16 -> hidden... -> classes (heads when n_heads > 0), initialised from seed. */
static inline ddpc_model *ckpt_make_model(const int64_t *hidden, size_t n_hidden, int64_t classes,
                                          const int64_t *heads, size_t n_heads, uint64_t seed)
{
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    c.type_config = &own;
    snprintf(c.type, sizeof c.type, "mlp");
    c.in_channels = 1;
    c.in_height = 4;
    c.in_width = 4;
    c.num_classes = classes;
    for (size_t i = 0; i < n_hidden; i++)
        own.hidden[i] = hidden[i];
    own.n_hidden = n_hidden;
    for (size_t i = 0; i < n_heads; i++)
        c.head_classes[i] = heads[i];
    c.n_heads = n_heads;
    c.seed = seed;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK)
        fprintf(stderr, "model: %s\n", ddpc_last_error());
    return m;
}

static inline ddpc_model *ckpt_small_model(uint64_t seed)
{
    const int64_t hidden[] = {8};
    return ckpt_make_model(hidden, 1, 3, NULL, 0, seed);
}

static inline ddpc_optim *ckpt_make_optim(ddpc_optim_type type, size_t n)
{
    ddpc_optim_config c = ddpc_optim_config_default();
    c.type = type;
    c.lr = 0.05f;
    c.momentum = type == DDPC_OPTIM_SGD ? 0.9f : 0.0f;
    c.weight_decay = 0.01f;
    ddpc_optim *o = NULL;
    if (ddpc_optim_create(&o, &c, n) != DDPC_OK)
        fprintf(stderr, "optim: %s\n", ddpc_last_error());
    return o;
}

/* `steps` training steps of batch 4 on data derived from `data_seed`. */
static inline void ckpt_train(ddpc_model *m, ddpc_optim *o, int steps, uint32_t data_seed)
{
    float x[4 * 16];
    int32_t y[4];
    uint32_t r = data_seed * 2654435761u + 1;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 4 * 16; i++) {
            r = r * 1664525u + 1013904223u;
            x[i] = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
        }
        for (int i = 0; i < 4; i++)
            y[i] = (int32_t)((r >> (4 * i)) % 3);
        ddpc_model_input in = {.n = 4, .x = x, .targets = y};
        ddpc_model_output out;
        ddpc_model_zero_grad(m);
        if (ddpc_model_forward(m, &in, true, &out) != DDPC_OK ||
            ddpc_model_backward(m, 1.0f) != DDPC_OK)
            fprintf(stderr, "train: %s\n", ddpc_last_error());
        ddpc_optim_step(o, ddpc_model_params(m), ddpc_model_grads(m), ddpc_model_decay_mask(m),
                        0.05f);
    }
}

static inline bool ckpt_same_params(ddpc_model *a, ddpc_model *b)
{
    return ddpc_model_num_params(a) == ddpc_model_num_params(b) &&
           memcmp(ddpc_model_params(a), ddpc_model_params(b),
                  ddpc_model_num_params(a) * sizeof(float)) == 0;
}

static inline bool ckpt_same_optim(ddpc_optim *a, ddpc_optim *b)
{
    if (ddpc_optim_num_state(a) != ddpc_optim_num_state(b) ||
        ddpc_optim_step_count(a) != ddpc_optim_step_count(b) ||
        ddpc_optim_numel(a) != ddpc_optim_numel(b))
        return false;
    for (size_t k = 0; k < ddpc_optim_num_state(a); k++)
        if (memcmp(ddpc_optim_state(a, k, NULL), ddpc_optim_state(b, k, NULL),
                   ddpc_optim_numel(a) * sizeof(float)) != 0)
            return false;
    return true;
}

/* A state for step `step` with recognisable counters and a config needing JSON escapes. */
static inline ddpc_ckpt_state ckpt_state_for(int64_t step, const char *config)
{
    ddpc_ckpt_state s = {.step = step, .epoch = step / 10, .epoch_step = step % 10,
                         .samples_seen = step * 32, .global_batch = 32, .world = 2,
                         .seed = 18446744073709551615ull, .skipped_steps = step / 7,
                         .config = (char *)config};
    return s;
}

#endif
