// SPDX-License-Identifier: MIT
/* fp32 operands rounded to bf16/fp16 for the tensor cores (gemm.cu), four elements per thread:
 * dst (prows, pcols) packed = src (rows, cols; leading dimension lds) rounded to nearest even,
 * zeros in the padding (r >= rows or c >= cols). pcols is a multiple of 4 (gemm.cu pads to 8),
 * so each thread writes one aligned 8-byte group; a group reads one float4 where src's rows are
 * 16-byte aligned and the group lies inside cols, else its elements one by one.
 * gemm.cu's only rounding of fp32 operands. tests/test_round_emu.cpp runs it on the host against
 * core/half.c's rounding. */
#ifndef DDPC_CUDA_EMULATE
#include "kernels/cuda/cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

enum { ROUND4_THREADS = 256 };

template <typename T> static __device__ T round4_to(float v);
template <> __device__ __nv_bfloat16 round4_to<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __device__ __half round4_to<__half>(float v)
{
    return __float2half_rn(v);
}

template <typename T> struct __align__(8) round4_group
{
    T e[4];
};

template <typename T>
static __global__ void round4_kernel(T *dst, const float *src, int64_t rows, int64_t cols,
                                     int64_t prows, int64_t pcols, int64_t lds, bool vec)
{
    const int64_t q = pcols / 4, total = prows * q;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / q, c = (i - r * q) * 4;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (r < rows) {
            const float *s = src + r * lds + c;
            if (vec && c + 4 <= cols) {
                const float4 f = *(const float4 *)s;
                v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
            } else {
                for (int k = 0; k < 4 && c + k < cols; k++)
                    v[k] = s[k];
            }
        }
        round4_group<T> g;
        for (int k = 0; k < 4; k++)
            g.e[k] = round4_to<T>(v[k]);
        *(round4_group<T> *)(dst + r * pcols + c) = g;
    }
}

/* Whether round4_kernel may read src's rows as float4s. */
static bool round4_vectors(const float *src, int64_t lds)
{
    return ((uintptr_t)src & 15) == 0 && lds % 4 == 0;
}

#ifndef DDPC_CUDA_EMULATE
extern "C" void ddpc__cuda_round4(ddpc_precision prec, void *dst, int64_t prows, int64_t pcols,
                                  const float *src, int64_t rows, int64_t cols, int64_t lds)
{
    DDPC_ASSERT(pcols % 4 == 0); /* gemm.cu's padded() sizes are multiples of 8: a caller's bug */
    const bool vec = round4_vectors(src, lds);
    const unsigned blocks = ddpc__cuda_blocks(prows * (pcols / 4), ROUND4_THREADS);
    if (prec == DDPC_PREC_BF16)
        round4_kernel<__nv_bfloat16><<<blocks, ROUND4_THREADS, 0, ddpc__cuda_stream()>>>(
            (__nv_bfloat16 *)dst, src, rows, cols, prows, pcols, lds, vec);
    else
        round4_kernel<__half><<<blocks, ROUND4_THREADS, 0, ddpc__cuda_stream()>>>(
            (__half *)dst, src, rows, cols, prows, pcols, lds, vec);
    DDPC_CUDA_LAUNCHED();
}
#endif
