/* TEMPORARY stubs for the core kernels still being written: each aborts if called. Delete this
 * file when they are all implemented. */
#include "kernels/cuda/cuda_impl.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#include <stdio.h>
#include <stdlib.h>

static void ddpc__cuda_todo(const char *name)
{
    fprintf(stderr, "ddpc: CUDA kernel %s is not written yet\n", name);
    abort();
}

extern "C" {
void *ddpc__cuda_alloc(size_t bytes)
{ ddpc__cuda_todo("alloc"); return 0; }

void ddpc__cuda_free(void *p)
{ ddpc__cuda_todo("free"); }

void ddpc__cuda_to_device(void *dst, const void *src, size_t bytes)
{ ddpc__cuda_todo("to_device"); }

void ddpc__cuda_to_host(void *dst, const void *src, size_t bytes)
{ ddpc__cuda_todo("to_host"); }

void ddpc__cuda_copy(void *dst, const void *src, size_t bytes)
{ ddpc__cuda_todo("copy"); }

void ddpc__cuda_synchronize(void)
{ ddpc__cuda_todo("synchronize"); }

uint64_t ddpc__cuda_alloc_count(void)
{ ddpc__cuda_todo("alloc_count"); return 0; }

void ddpc__cuda_count_alloc(void)
{ ddpc__cuda_todo("count_alloc"); }

void ddpc__cuda_fill_f32(float *x, float value, int64_t n)
{ ddpc__cuda_todo("fill_f32"); }

void ddpc__cuda_add_f32(float *y, const float *a, const float *b, int64_t n)
{ ddpc__cuda_todo("add_f32"); }

void ddpc__cuda_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{ ddpc__cuda_todo("axpy_f32"); }

void ddpc__cuda_gelu_forward(float *y, const float *x, int64_t n)
{ ddpc__cuda_todo("gelu_forward"); }

void ddpc__cuda_gelu_backward(float *dx, const float *dy, const float *x, int64_t n)
{ ddpc__cuda_todo("gelu_backward"); }

void ddpc__cuda_gemm(ddpc_precision prec, ddpc_transpose ta, ddpc_transpose tb, int64_t m,                      int64_t n, int64_t k, float alpha, const float *a, int64_t lda,                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{ ddpc__cuda_todo("gemm"); }

void ddpc__cuda_linear_forward(ddpc_precision prec, float *y, const float *x, const float *w,                                const float *b, int64_t n, int64_t in, int64_t out)
{ ddpc__cuda_todo("linear_forward"); }

void ddpc__cuda_linear_residual_forward(ddpc_precision prec, float *y, const float *x,                                         const float *w, const float *b, const float *r, int64_t n,                                         int64_t in, int64_t out)
{ ddpc__cuda_todo("linear_residual_forward"); }

void ddpc__cuda_linear_backward(ddpc_precision prec, float *dx, float *dw, float *db,                                 const float *dy, const float *x, const float *w, int64_t n,                                 int64_t in, int64_t out)
{ ddpc__cuda_todo("linear_backward"); }

void ddpc__cuda_layernorm_forward(float *y, float *mean, float *rstd, const float *x,                                   const float *w, const float *b, int64_t rows, int64_t c)
{ ddpc__cuda_todo("layernorm_forward"); }

void ddpc__cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dy,                                    const float *x, const float *w, const float *mean,                                    const float *rstd, int64_t rows, int64_t c)
{ ddpc__cuda_todo("layernorm_backward"); }
}
