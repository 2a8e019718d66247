// SPDX-License-Identifier: MIT
/* seq2seq_decode_bench.c: ddpc_model_translate (incremental decoding with a key/value cache)
 * against the same search driven by full teacher-forced forwards over every whole prefix (what
 * decoding costs without a cache), on one random model; prints both times and whether the outputs
 * agree. A random model never emits <eos>, so every source runs the full max_out steps.
 * Built and run by bench/seq2seq_decode_bench.sh. */
#include <ddpc/kernels.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>

#include "nn/seq2seq_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { N = 8, S = 30, MAX_OUT = 40, BEAM = 4, V = 1000 };

typedef struct {
    ddpc_model *m;
    const int32_t *src;
    int64_t k;
    int32_t *rep; /* (N k, S) */
} fwd_ctx;

static ddpc_status forward_step(void *p, const int32_t *prefix, const int64_t *parent,
                                int64_t rows, int64_t t, float *logp)
{
    (void)parent;
    fwd_ctx *c = p;
    for (int64_t r = 0; r < rows; r++)
        memcpy(c->rep + r * S, c->src + (r / c->k) * S, S * sizeof(int32_t));
    ddpc_model_input in = {.n = rows, .src_tokens = c->rep, .tokens = prefix, .src_len = S,
                           .tgt_len = t};
    DDPC_TRY(ddpc_model_forward(c->m, &in, false, NULL));
    const float *probs = ddpc_model_probs(c->m);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < V; v++)
            logp[r * V + v] = logf(probs[(r * t + t - 1) * V + v]);
    return DDPC_OK;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    ddpc_kernels_set_threads(1);
    ddpc_model_config c = ddpc_model_config_default();
    ddpc_seq2seq_config own = ddpc_seq2seq_config_default();
    c.type_config = &own;
    strcpy(c.type, "seq2seq");
    own.d_model = 256, own.num_heads = 4, own.num_encoder_layers = 3, own.num_decoder_layers = 3;
    own.d_ff = 1024, own.max_len = 64, own.src_vocab = own.tgt_vocab = V;
    ddpc_model *m = NULL;
    if (ddpc_model_create(&m, &c) != DDPC_OK) {
        fprintf(stderr, "seq2seq_decode_bench: %s\n", ddpc_last_error());
        return 1;
    }
    static int32_t src[N * S], out[N * MAX_OUT], ref[N * MAX_OUT], rep[N * BEAM * S];
    for (int i = 0; i < N * S; i++)
        src[i] = 4 + (i * 37) % (V - 4);
    printf("d_model 256, 3 + 3 layers, d_ff 1024, vocabulary %d; %d sources of %d tokens, "
           "%d output tokens, 1 thread\n", V, N, S, MAX_OUT);
    for (int k = 1; k <= BEAM; k += BEAM - 1) {
        double t0 = now();
        ddpc_status s = ddpc_model_translate(m, src, N, S, k, MAX_OUT, out);
        double t1 = now();
        fwd_ctx fc = {m, src, k, rep};
        if (s == DDPC_OK)
            s = k == 1 ? ddpc__s2s_greedy(forward_step, &fc, N, V, MAX_OUT, ref)
                       : ddpc__s2s_beam(forward_step, &fc, N, k, V, MAX_OUT, ref);
        double t2 = now();
        if (s != DDPC_OK) {
            fprintf(stderr, "seq2seq_decode_bench: %s\n", ddpc_last_error());
            return 1;
        }
        printf("beam %d: key/value cache %.3f s, full-prefix recompute %.3f s (%.1fx), same "
               "output: %s\n", k, t1 - t0, t2 - t1, (t2 - t1) / (t1 - t0),
               memcmp(out, ref, sizeof out) == 0 ? "yes" : "no");
    }
    ddpc_model_destroy(m);
    return 0;
}
