/* TEMPORARY stubs for the cnn kernels still being written: each aborts if called. Delete this
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
void ddpc__cuda_relu_forward(float *y, const float *x, int64_t n)
{ ddpc__cuda_todo("relu_forward"); }

void ddpc__cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n)
{ ddpc__cuda_todo("relu_backward"); }

size_t ddpc__cuda_conv2d_workspace_floats(const ddpc_conv2d_shape *s)
{ ddpc__cuda_todo("conv2d_workspace_floats"); return 0; }

void ddpc__cuda_conv2d_forward(ddpc_precision prec, float *y, const float *x, const float *w,                                const float *b, const ddpc_conv2d_shape *s, float *ws)
{ ddpc__cuda_todo("conv2d_forward"); }

void ddpc__cuda_conv2d_backward(ddpc_precision prec, float *dx, float *dw, float *db,                                 const float *dy, const float *x, const float *w,                                 const ddpc_conv2d_shape *s, float *ws)
{ ddpc__cuda_todo("conv2d_backward"); }

void ddpc__cuda_maxpool2d_forward(float *y, int32_t *idx, const float *x, int64_t n, int64_t c,                                   int64_t h, int64_t w, int64_t k, int64_t stride)
{ ddpc__cuda_todo("maxpool2d_forward"); }

void ddpc__cuda_maxpool2d_backward(float *dx, const float *dy, const int32_t *idx, int64_t n,                                    int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride)
{ ddpc__cuda_todo("maxpool2d_backward"); }

void ddpc__cuda_batchnorm_sums(double *sums, const float *x, int64_t n, int64_t c, int64_t hw)
{ ddpc__cuda_todo("batchnorm_sums"); }

void ddpc__cuda_batchnorm_stats(float *mean, float *invstd, float *running_mean,                                 float *running_var, const double *sums, int64_t c,                                 float momentum, float eps)
{ ddpc__cuda_todo("batchnorm_stats"); }

void ddpc__cuda_batchnorm_eval_stats(float *mean, float *invstd, const float *running_mean,                                      const float *running_var, int64_t c, float eps)
{ ddpc__cuda_todo("batchnorm_eval_stats"); }

void ddpc__cuda_batchnorm_apply(float *y, const float *x, const float *mean, const float *invstd,                                 const float *w, const float *b, int64_t n, int64_t c, int64_t hw)
{ ddpc__cuda_todo("batchnorm_apply"); }

void ddpc__cuda_batchnorm_backward_sums(double *sums, const float *dy, const float *x,                                         const float *mean, const float *invstd, int64_t n,                                         int64_t c, int64_t hw)
{ ddpc__cuda_todo("batchnorm_backward_sums"); }

void ddpc__cuda_batchnorm_backward_params(float *dw, float *db, const double *sums, int64_t c)
{ ddpc__cuda_todo("batchnorm_backward_params"); }

void ddpc__cuda_batchnorm_backward_input(float *dx, const float *dy, const float *x,                                          const float *mean, const float *invstd, const float *w,                                          const double *sums, double count, int64_t n, int64_t c,                                          int64_t hw)
{ ddpc__cuda_todo("batchnorm_backward_input"); }

void ddpc__cuda_dropout_forward(float *y, const float *x, int64_t n, float p, uint64_t seed,                                 uint64_t stream)
{ ddpc__cuda_todo("dropout_forward"); }

void ddpc__cuda_dropout_backward(float *dx, const float *dy, int64_t n, float p, uint64_t seed,                                  uint64_t stream)
{ ddpc__cuda_todo("dropout_backward"); }

void ddpc__cuda_adamw_update(float *params, const float *grads, float *m, float *v,                              const uint8_t *mask, int64_t n, const ddpc_adamw_coef *k)
{ ddpc__cuda_todo("adamw_update"); }

void ddpc__cuda_sgd_update(float *params, const float *grads, float *buf, const uint8_t *mask,                            int64_t n, const ddpc_sgd_coef *k)
{ ddpc__cuda_todo("sgd_update"); }

double ddpc__cuda_sumsq(const float *g, int64_t n)
{ ddpc__cuda_todo("sumsq"); return 0; }

bool ddpc__cuda_unscale(float *g, int64_t n, float scale)
{ ddpc__cuda_todo("unscale"); return 0; }

void ddpc__cuda_scale(float *g, int64_t n, float s)
{ ddpc__cuda_todo("scale"); }
}
