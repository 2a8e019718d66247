// SPDX-License-Identifier: MIT
/* A model's tensors as a safetensors file: names and shapes are the model's parameter views.
 * Loading is strict by default, like PyTorch's load_state_dict(strict=True); the non-strict load
 * is load_state_dict(strict=False) that also skips tensors of another shape. */
#ifndef DDPC_WEIGHTS_H
#define DDPC_WEIGHTS_H

#include <ddpc/nn.h>
#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `buffer` (num_params floats laid out like the model's parameters: the parameters
 * themselves, or the gradients) as F32 tensors named after the parameters, atomically. */
ddpc_status ddpc_weights_save(const ddpc_model *m, const float *buffer, const char *path);
/* The model as torch's state_dict holds it: the parameters and the buffers (BatchNorm's running
 * statistics), each under its name, atomically. What the trainer and checkpoints save. */
ddpc_status ddpc_weights_save_model(const ddpc_model *m, const char *path);
/* Copies every tensor of the file into the model's parameters and buffers. Every parameter and
 * buffer must be present
 * with the same shape and dtype F32, and the file may hold no others; on error the model's
 * parameters are unchanged. Same as ddpc_weights_load_opts(m, path, true, NULL, 0). */
ddpc_status ddpc_weights_load(ddpc_model *m, const char *path);

/* Loads path, a safetensors file or a checkpoint directory (then its model.safetensors), into the
 * model's parameters. strict: as ddpc_weights_load; a mismatch is DDPC_EFORMAT with one message
 * listing every problem ("missing: a, b; unexpected: c; shape mismatch: d"). Not strict: copies
 * each tensor whose name, shape and dtype (F32) match, leaves the other parameters alone, and
 * writes the same list into report (cap bytes, truncated with "..."; "" when everything
 * matched; report may be NULL); a file none of whose tensors match is DDPC_EFORMAT. On error
 * the parameters are unchanged. */
ddpc_status ddpc_weights_load_opts(ddpc_model *m, const char *path, bool strict, char *report,
                                   size_t cap);

/* __metadata__ keys of the vocabularies' digests (ddpc_vocab_digest, 8 hex digits), written with
 * a model whose config has vocab_digests (seq2seq). Loading (ddpc_weights_load_opts) refuses a
 * file whose digests differ from the model's with DDPC_EINVAL naming the file; a file without
 * them (written before ddpc recorded them) is accepted. */
#define DDPC_WEIGHTS_META_SRC_VOCAB "ddpc.vocab.src.crc32"
#define DDPC_WEIGHTS_META_TGT_VOCAB "ddpc.vocab.tgt.crc32"
/* The same check alone, for path (a safetensors file or a checkpoint directory's
 * model.safetensors; none there, as in a sharded checkpoint, passes). */
ddpc_status ddpc_weights_check_vocab(const ddpc_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
