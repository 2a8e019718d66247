// SPDX-License-Identifier: MIT
/* Counter-based RNG: SplitMix64 finaliser applied to (seed, stream, position).
 * Invariant: a value depends only on its three inputs, never on call history. */
#include <ddpc/rng.h>

#include <math.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t ddpc_rng_at(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint64_t key = mix64(seed * 0x9e3779b97f4a7c15ULL + mix64(stream + 0x632be59bd9b4e019ULL));
    return mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
}

float ddpc_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t i)
{
    return (float)(ddpc_rng_at(seed, stream, i) >> 40) * (1.0f / 16777216.0f);
}

uint64_t ddpc_rng_next(ddpc_rng *r)
{
    return ddpc_rng_at(r->seed, r->stream, r->counter++);
}

float ddpc_rng_uniform(ddpc_rng *r)
{
    return (float)(ddpc_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float ddpc_rng_normal(ddpc_rng *r)
{
    double u1 = ((double)(ddpc_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(ddpc_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t ddpc_rng_below(ddpc_rng *r, uint64_t n)
{
    if (n > 0xffffffffULL)
        return ddpc_rng_next(r) % n;
    return ((ddpc_rng_next(r) >> 32) * n) >> 32;
}

void ddpc_rng_shuffle(ddpc_rng *r, int64_t *idx, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ddpc_rng_below(r, (uint64_t)i + 1);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}
