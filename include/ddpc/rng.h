// SPDX-License-Identifier: MIT
/* Counter-based random numbers: value i of stream s under seed k is a pure function of (k, s, i),
 * so any rank or thread can reproduce any stream without sharing state (as Philox is used in
 * PyTorch and JAX). The generator is SplitMix64's finaliser over a mixed counter. */
#ifndef DDPC_RNG_H
#define DDPC_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A stream: (seed, stream) pick the sequence, counter is the position. Plain data; copy freely. */
typedef struct {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter;
} ddpc_rng;

/* The 64-bit value at position i of (seed, stream). Pure and thread safe. */
uint64_t ddpc_rng_at(uint64_t seed, uint64_t stream, uint64_t i);
/* Uniform float in [0, 1) at position i: the top 24 bits of ddpc_rng_at. */
float ddpc_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t i);

static inline ddpc_rng ddpc_rng_make(uint64_t seed, uint64_t stream) { return (ddpc_rng){seed, stream, 0}; }
uint64_t ddpc_rng_next(ddpc_rng *r);
/* Uniform in [0, 1). */
float ddpc_rng_uniform(ddpc_rng *r);
/* Standard normal (Box-Muller; consumes two positions). */
float ddpc_rng_normal(ddpc_rng *r);
/* Uniform integer in [0, n) for n > 0 (Lemire's multiply-shift, negligible bias for n < 2^32). */
uint64_t ddpc_rng_below(ddpc_rng *r, uint64_t n);
/* Fisher-Yates shuffle of idx[0..n). */
void ddpc_rng_shuffle(ddpc_rng *r, int64_t *idx, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
