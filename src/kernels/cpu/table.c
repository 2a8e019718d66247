// SPDX-License-Identifier: MIT
/* The CPU kernel table: the functions of kernels.h, on host memory. The optimizer members stay
 * NULL: optim/ runs its own vectorised loops on the host. */
#include <ddpc/alloc.h>
#include <ddpc/device.h>
#include <ddpc/half.h>
#include <ddpc/pages.h>

#include <math.h>
#include <string.h>

static void *host_alloc(size_t bytes)
{
    return ddpc_calloc(1, bytes ? bytes : 1);
}

static void host_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

static void host_synchronize(void) {}
static uint64_t host_alloc_count(void) { return 0; }
static uint64_t never_waits(void) { return 0; } /* it computes on the calling thread */
static size_t host_memory_total(void) { return 0; }
/* A released page faults back in zeroed on its next touch: nothing to do before a write. */
static ddpc_status host_back(void *p, size_t bytes) { (void)p, (void)bytes; return DDPC_OK; }
/* madvise's failure is covered inside (it zeroes by hand): a release cannot fail here. */
static ddpc_status host_release(void *p, size_t bytes)
{
    ddpc_pages_release(p, bytes);
    return DDPC_OK;
}
static size_t host_backed_bytes(void) { return 0; }

/* The table's attention sizes take the precision (the CUDA table's depend on it); the CPU's
 * do not. */
static size_t cpu_attention_saved_floats(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                         int64_t nh)
{
    (void)prec;
    (void)c;
    return (size_t)(b * nh * t * t);
}

static size_t cpu_attention_workspace_floats(ddpc_precision prec, int64_t b, int64_t t, int64_t c,
                                             int64_t nh)
{
    (void)prec;
    return ddpc_attention_workspace_floats(b, t, c, nh);
}

/* The count from sums (host memory here) when given, as the device tables take it. */
static void cpu_cross_entropy_backward_inplace(float *probs, const int32_t *targets, int64_t n,
                                               int64_t v, int32_t ignore_index, int64_t n_valid,
                                               const double *sums, float dloss)
{
    ddpc_cross_entropy_backward_inplace(probs, targets, n, v, ignore_index,
                                        sums ? (int64_t)sums[1] : n_valid, dloss);
}

static void cpu_softmax_rows(float *x, int64_t n, int64_t classes)
{
    for (int64_t i = 0; i < n; i++) {
        float *row = x + i * classes;
        float mx = row[0], sum = 0.0f;
        for (int64_t j = 1; j < classes; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < classes; j++)
            sum += (row[j] = expf(row[j] - mx));
        for (int64_t j = 0; j < classes; j++)
            row[j] /= sum;
    }
}

static void host_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height)
{
    for (size_t r = 0; r < height; r++)
        host_copy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

static const ddpc_kernel_table cpu_table = {
    .name = "cpu",
    .kind = DDPC_DEVICE_CPU,
    .device = 0,
    .alloc = host_alloc,
    .free = ddpc_free,
    .to_device = host_copy,
    .to_host = host_copy,
    .copy = host_copy,
    .synchronize = host_synchronize,
    .alloc_count = host_alloc_count,
    .host_waits = never_waits,
    .host_throttles = never_waits,
    .memory_total = host_memory_total,
    .memory_free = host_memory_total,
    .reserve = host_alloc,
    .release = host_release,
    .back = host_back,
    .backed_bytes = host_backed_bytes,
    .fill_f32 = ddpc_fill_f32,
    .add_f32 = ddpc_add_f32,
    .axpy_f32 = ddpc_axpy_f32,
    .gemm = ddpc_gemm,
    .linear_forward = ddpc_linear_forward,
    .linear_residual_forward = ddpc_linear_residual_forward,
    .linear_backward = ddpc_linear_backward,
    .relu_forward = ddpc_relu_forward,
    .relu_backward = ddpc_relu_backward,
    .relu_mask = ddpc_relu_mask,
    .gelu_forward = ddpc_gelu_forward,
    .gelu_backward = ddpc_gelu_backward,
    .layernorm_forward = ddpc_layernorm_forward,
    .layernorm_backward = ddpc_layernorm_backward,
    .embedding_forward = ddpc_embedding_forward,
    .embedding_backward = ddpc_embedding_backward,
    .attention_saved_floats = cpu_attention_saved_floats,
    .attention_workspace_floats = cpu_attention_workspace_floats,
    .attention_forward = ddpc_attention_forward,
    .attention_backward = ddpc_attention_backward,
    .mha_workspace_floats = ddpc_mha_workspace_floats,
    .mha_forward = ddpc_mha_forward,
    .mha_backward = ddpc_mha_backward,
    .cross_entropy_smooth_forward = ddpc_cross_entropy_smooth_forward,
    .cross_entropy_smooth_backward = ddpc_cross_entropy_smooth_backward,
    .cross_entropy_smooth_forward_into = NULL, /* the CPU's values are at hand */
    .cross_entropy_smooth_backward_from = NULL,
    .sinusoidal_positions = ddpc_sinusoidal_positions,
    .embedding_scaled_forward = ddpc_embedding_scaled_forward,
    .embedding_scaled_backward = ddpc_embedding_scaled_backward,
    .pad_mask = ddpc_pad_mask,
    .copy2d = host_copy2d,
    .conv2d_workspace_floats = ddpc_conv2d_workspace_floats,
    .conv2d_forward = ddpc_conv2d_forward,
    .conv2d_backward = ddpc_conv2d_backward,
    .maxpool2d_forward = ddpc_maxpool2d_forward,
    .maxpool2d_backward = ddpc_maxpool2d_backward,
    .batchnorm_sums = ddpc_batchnorm_sums,
    .batchnorm_stats = ddpc_batchnorm_stats,
    .batchnorm_eval_stats = ddpc_batchnorm_eval_stats,
    .batchnorm_apply = ddpc_batchnorm_apply,
    .batchnorm_backward_sums = ddpc_batchnorm_backward_sums,
    .batchnorm_backward_params = ddpc_batchnorm_backward_params,
    .batchnorm_backward_input = ddpc_batchnorm_backward_input,
    .dropout_forward = ddpc_dropout_forward,
    .dropout_backward = ddpc_dropout_backward,
    .cross_entropy_forward = ddpc_cross_entropy_forward,
    .cross_entropy_backward = ddpc_cross_entropy_backward,
    .argmax_correct = ddpc_argmax_correct,
    .cross_entropy_fused = ddpc_cross_entropy_fused,
    .cross_entropy_backward_inplace = cpu_cross_entropy_backward_inplace,
    .softmax_rows = cpu_softmax_rows,
    .head16_forward = NULL, /* the CPU's logits stay fp32 */
    .head16_backward = NULL,
    .act16_applies = NULL, /* the CPU's activations stay fp32 */
    .layernorm_forward16 = NULL,
    .gelu_forward16 = NULL,
    .linear_forward16 = NULL,
    .linear_backward16 = NULL,
    .mse_forward = ddpc_mse_forward,
    .mse_backward = ddpc_mse_backward,
    .l1_forward = ddpc_l1_forward,
    .l1_backward = ddpc_l1_backward,
    .smooth_l1_forward = ddpc_smooth_l1_forward,
    .smooth_l1_backward = ddpc_smooth_l1_backward,
    .bce_logits_forward = ddpc_bce_logits_forward,
    .bce_logits_backward = ddpc_bce_logits_backward,
    .multilabel_correct = ddpc_multilabel_correct,
    .regression_errors = ddpc_regression_errors,
    .f32_to_half_array = ddpc_f32_to_half_array,
    .half_to_f32_array = ddpc_half_to_f32_array,
};

const ddpc_kernel_table *ddpc_kernel_table_cpu(void)
{
    return &cpu_table;
}
