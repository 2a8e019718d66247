// SPDX-License-Identifier: MIT
/* Token + learned position embedding (GPT-2) on the GPU: y[b, t] = wte[tokens[b, t]] + wpe[t].
 * Invariant: backward adds into each row of dwte and dwpe in ascending flat position (b * T + t),
 * one thread per element summing serially: the CPU kernel's order, so results are bitwise
 * reproducible and match the CPU, with no float atomics. */
#include <ddpc/alloc.h>

#include "kernels/cuda/cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>

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

/* Block (u, channel tile): dwte row uniq[u] += dy rows pos[start[u] .. start[u + 1]), in that
 * (ascending) order; distinct u own distinct rows, so no two threads write one element. */
static __global__ void embedding_dwte_kernel(float *dwte, const float *dy, const int32_t *pos,
                                             const int32_t *start, const int32_t *uniq, int64_t c)
{
    const int64_t u = blockIdx.x, j = blockIdx.y * (int64_t)blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    float *d = dwte + (int64_t)uniq[u] * c + j;
    float acc = *d;
    for (int32_t k = start[u]; k < start[u + 1]; k++)
        acc += dy[(int64_t)pos[k] * c + j];
    *d = acc;
}

/* Host buffers for grouping positions by token, grown (never shrunk) for the largest b * t seen:
 * tokens (n), a radix pass's output (n), the upload (pos n, start n + 1, uniq n), digit counts.
 * One thread at a time, like the rest of the CUDA table (one stream, shared scratch). */
static struct {
    int32_t *buf;
    size_t cap; /* int32s */
} g_host;

enum { RADIX = 1 << 16 };

static int32_t *host_ints(size_t need)
{
    if (need > g_host.cap) {
        int32_t *p = (int32_t *)ddpc_malloc(need * sizeof(int32_t));
        if (!p) {
            /* No status to return through the table; a few MB of host memory missing is fatal. */
            fprintf(stderr, "ddpc: embedding_backward: out of host memory for %zu bytes\n",
                    need * sizeof(int32_t));
            abort();
        }
        ddpc_free(g_host.buf);
        g_host.buf = p;
        g_host.cap = need;
    }
    return g_host.buf;
}

/* One stable counting-sort pass of positions src (m) into dst by 16-bit digit `shift` of their
 * token; stable, so positions stay ascending within a token. */
static void radix_pass(int32_t *dst, const int32_t *src, int64_t m, const int32_t *tok,
                       int32_t *count, int shift)
{
    for (int64_t d = 0; d <= RADIX; d++)
        count[d] = 0;
    for (int64_t k = 0; k < m; k++)
        count[(((uint32_t)tok[src[k]] >> shift) & (RADIX - 1)) + 1]++;
    for (int64_t d = 0; d < RADIX; d++)
        count[d + 1] += count[d];
    for (int64_t k = 0; k < m; k++)
        dst[count[((uint32_t)tok[src[k]] >> shift) & (RADIX - 1)]++] = src[k];
}

/* Fills pos (the positions of non-negative tokens, grouped by token, ascending within a group)
 * and start (nu + 1 group offsets into pos), and writes the nu distinct tokens, ascending, over
 * tmp (n); returns nu. */
static int64_t group_by_token(int32_t *pos, int32_t *start, int32_t *tmp, int32_t *count,
                              const int32_t *tok, int64_t n)
{
    int64_t m = 0;
    int32_t max_tok = 0;
    for (int64_t i = 0; i < n; i++)
        if (tok[i] >= 0) { /* kernels.h requires [0, v); a negative id is skipped, not indexed */
            tmp[m++] = (int32_t)i;
            max_tok = tok[i] > max_tok ? tok[i] : max_tok;
        }
    /* Low digit, then (only past 65535 tokens) the high digit: LSD radix sort. */
    radix_pass(pos, tmp, m, tok, count, 0);
    if (max_tok >= RADIX) {
        radix_pass(tmp, pos, m, tok, count, 16);
        for (int64_t k = 0; k < m; k++)
            pos[k] = tmp[k];
    }
    int64_t nu = 0;
    for (int64_t k = 0; k < m; k++)
        if (k == 0 || tok[pos[k]] != tok[pos[k - 1]]) {
            start[nu] = (int32_t)k;
            tmp[nu++] = tok[pos[k]];
        }
    start[nu] = (int32_t)m;
    return nu;
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
    /* Positions are grouped by token on the host, so this member waits for the device once per
     * backward (to read the token ids back): a small price next to a step, and it keeps dwte's
     * sums in a fixed order without float atomics. */
    int32_t *tok = host_ints((size_t)(5 * n + 1 + RADIX + 1));
    int32_t *tmp = tok + n, *up = tmp + n, *count = up + 3 * n + 1;
    DDPC_CUDA_CHECK(
        cudaMemcpyAsync(tok, tokens, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost, st));
    DDPC_CUDA_CHECK(cudaStreamSynchronize(st));
    /* The upload, one copy: pos (n slots, the first m used), start (nu + 1), uniq (nu). */
    int32_t *pos = up, *start = up + n;
    const int64_t nu = group_by_token(pos, start, tmp, count, tok, n);
    if (nu == 0)
        return;
    int32_t *uniq = start + nu + 1;
    for (int64_t u = 0; u < nu; u++)
        uniq[u] = tmp[u];
    /* Sized by n alone (3n + 1 >= n + 2 nu + 1), so a repeated shape never grows the scratch. */
    int32_t *dev = (int32_t *)ddpc__cuda_scratch(DDPC__CUDA_SCRATCH_MISC,
                                                 (size_t)(3 * n + 1) * sizeof(int32_t));
    /* From pageable memory the copy has taken the host bytes when it returns, so the buffer may
     * be reused by the next call while the DMA is still in flight. */
    DDPC_CUDA_CHECK(cudaMemcpyAsync(dev, up, (size_t)(n + 2 * nu + 1) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, st));
    const dim3 grid((unsigned)nu, (unsigned)((c + 255) / 256));
    embedding_dwte_kernel<<<grid, 256, 0, st>>>(dwte, dy, dev, dev + n, dev + n + nu + 1, c);
    DDPC_CUDA_LAUNCHED();
}
