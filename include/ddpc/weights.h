/* A model's tensors as a safetensors file: names and shapes are the model's parameter views.
 * Loading is strict, like PyTorch's load_state_dict(strict=True). */
#ifndef DDPC_WEIGHTS_H
#define DDPC_WEIGHTS_H

#include <ddpc/nn.h>
#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `buffer` (num_params floats laid out like the model's parameters: the parameters
 * themselves, or the gradients) as F32 tensors named after the parameters, atomically. */
ddpc_status ddpc_weights_save(const ddpc_model *m, const float *buffer, const char *path);
/* Copies every tensor of the file into the model's parameters. Every parameter must be present
 * with the same shape and dtype F32, and the file may hold no others; on error the model's
 * parameters are unchanged. */
ddpc_status ddpc_weights_load(ddpc_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
