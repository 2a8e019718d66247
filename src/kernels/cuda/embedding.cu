// SPDX-License-Identifier: MIT
/* Token + learned position embedding (GPT-2) on the GPU: y[b, t] = wte[tokens[b, t]] + wpe[t].
 * Invariant: backward adds into each row of dwte and dwpe in ascending flat position (b * T + t),
 * one thread per element summing serially: the CPU kernel's order, so results are bitwise
 * reproducible and match the CPU, with no float atomics. The positions are grouped by token on
 * the device (a stable radix sort of (token, position) pairs), so backward never waits for the
 * host. */
#ifndef DDPC_CUDA_EMULATE /* tests/test_embedding_emu.cpp runs the kernels on the host */
#include "kernels/cuda/cuda_impl.h"
#include <cub/device/device_radix_sort.cuh>
#endif

static __global__ void embedding_forward_kernel(float *y, const int32_t *tokens, const float *wte,
                                                const float *wpe, int64_t bt, int64_t t, int64_t c)
{
    const int64_t total = bt * c;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / c, j = e % c;
        const float w = wte[(int64_t)tokens[i] * c + j];
        y[e] = wpe ? w + wpe[(i % t) * c + j] : w;
    }
}

/* dwpe (t, c) += sum over the batch of dy (b, t, c), batch rows in order. */
static __global__ void embedding_dwpe_kernel(float *dwpe, const float *dy, int64_t b, int64_t t,
                                             int64_t c)
{
    const int64_t total = t * c;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        float acc = dwpe[e];
        for (int64_t bi = 0; bi < b; bi++)
            acc += dy[bi * total + e];
        dwpe[e] = acc;
    }
}

/* pos[i] = i: the values the sort carries along with the tokens. */
static __global__ void iota_kernel(int32_t *pos, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        pos[i] = (int32_t)i;
}

/* Block (k, channel tile): when sorted position k starts a run of equal non-negative tokens, dwte
 * row key[k] += dy rows pos[k ..] over the run, in that (ascending) order; other blocks return at
 * once. Distinct runs own distinct rows, so no two threads write one element. A negative token
 * is skipped, not indexed (kernels.h requires [0, v)). */
static __global__ void embedding_dwte_kernel(float *dwte, const float *dy, const int32_t *key,
                                             const int32_t *pos, int64_t n, int64_t c)
{
    const int64_t k = blockIdx.x, j = blockIdx.y * (int64_t)blockDim.x + threadIdx.x;
    const int32_t tok = key[k];
    if (j >= c || tok < 0 || (k > 0 && key[k - 1] == tok))
        return;
    float *d = dwte + (int64_t)tok * c + j;
    float acc = *d;
    for (int64_t r = k; r < n && key[r] == tok; r++)
        acc += dy[(int64_t)pos[r] * c + j];
    *d = acc;
}

#ifndef DDPC_CUDA_EMULATE /* the host side: launches */
extern "C" void ddpc__cuda_embedding_forward(float *y, const int32_t *tokens, const float *wte,
                                             const float *wpe, int64_t b, int64_t t, int64_t c)
{
    const int64_t total = b * t * c;
    if (total <= 0)
        return;
    embedding_forward_kernel<<<ddpc__cuda_blocks(total, 256), 256, 0, ddpc__cuda_stream()>>>(
        y, tokens, wte, wpe, b * t, t, c);
    DDPC_CUDA_LAUNCHED();
}

/* CUB's temporary bytes for sorting n pairs: computed on the host, without touching the device. */
static size_t sort_temp_bytes(int n)
{
    size_t bytes = 0;
    DDPC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const int32_t *)nullptr,
                                                    (int32_t *)nullptr, (const int32_t *)nullptr,
                                                    (int32_t *)nullptr, n));
    return bytes;
}

extern "C" void ddpc__cuda_embedding_backward(float *dwte, float *dwpe, const float *dy,
                                              const int32_t *tokens, int64_t b, int64_t t,
                                              int64_t c)
{
    const int64_t n = b * t;
    if (n <= 0 || c <= 0)
        return;
    cudaStream_t st = ddpc__cuda_stream();
    if (dwpe) {
        embedding_dwpe_kernel<<<ddpc__cuda_blocks(t * c, 256), 256, 0, st>>>(dwpe, dy, b, t, c);
        DDPC_CUDA_LAUNCHED();
    }
    if (!dwte)
        return;
    /* Scratch: sorted keys, positions in and out (n each), then CUB's temporary storage, 256-byte
     * aligned. Sized by n alone, so a repeated shape never grows it: warm steps allocate
     * nothing. */
    const size_t ints = ((size_t)n * sizeof(int32_t) + 255) / 256 * 256;
    const size_t temp = sort_temp_bytes((int)n);
    char *scratch = (char *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_MISC, 3 * ints + temp);
    int32_t *key = (int32_t *)scratch, *pos_in = (int32_t *)(scratch + ints),
            *pos = (int32_t *)(scratch + 2 * ints);
    void *cub_temp = scratch + 3 * ints;
    iota_kernel<<<ddpc__cuda_blocks(n, 256), 256, 0, st>>>(pos_in, n);
    DDPC_CUDA_LAUNCHED();
    /* LSD radix sort: stable, so each token's positions stay ascending; all 32 bits, as token ids
     * are int32 (negatives sort first and are skipped). */
    size_t temp_bytes = temp;
    DDPC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, temp_bytes, tokens, key, pos_in, pos,
                                                    (int)n, 0, 32, st));
    const dim3 grid((unsigned)n, (unsigned)((c + 255) / 256));
    embedding_dwte_kernel<<<grid, 256, 0, st>>>(dwte, dy, key, pos, n, c);
    DDPC_CUDA_LAUNCHED();
}
#endif
