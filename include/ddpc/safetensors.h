// SPDX-License-Identifier: MIT
/* safetensors files (the Hugging Face format): an 8-byte little-endian u64 header length N, N bytes
 * of UTF-8 JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"k": "v"}} (may be padded with spaces), then the data buffer. Invariant of a
 * valid file: offsets are relative to the buffer, lie in it, do not overlap, cover it exactly,
 * and each tensor spans prod(shape) * dtype-size bytes. Data is little-endian, row-major. */
#ifndef DDPC_SAFETENSORS_H
#define DDPC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_ST_MAX_NDIM 8
/* Largest header we accept when reading (as the reference implementation): 100 MB. */
#define DDPC_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One F32 tensor to write: data (shape[0], ..., shape[ndim-1]) contiguous; 0 <= ndim <= 8. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[DDPC_ST_MAX_NDIM];
    const float *data;
} ddpc_st_tensor;

/* Writes F32 tensors (in the given order, data contiguous) atomically (ddpc_fs_out): to a unique
 * temporary "<path>.tmp-XXXXXX" (mkstemp), fsync, rename over path (a symlink's target; a
 * directory, device, FIFO or socket is refused), fsync the directory; concurrent writers of one
 * path each leave one complete file (the last rename wins). meta_keys/meta_values: n_meta string
 * pairs for __metadata__ (may be 0, then both may be NULL). Names must be unique, non-empty and not
 * "__metadata__". Borrows everything for the call only. Errors name the path: DDPC_EINVAL (bad
 * arguments), DDPC_EIO (create, write, fsync, rename), DDPC_ENOMEM; on error path is untouched. */
ddpc_status ddpc_safetensors_write(const char *path, const ddpc_st_tensor *tensors, size_t n,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   size_t n_meta);

typedef struct ddpc_safetensors ddpc_safetensors;

/* Reads and validates the whole file into memory. A torn or truncated file, bad header length,
 * invalid JSON, unknown dtype or key, shape/offset mismatch, out-of-bounds, overlapping or
 * uncovered offsets, duplicate names are DDPC_EFORMAT naming the path and the problem; DDPC_EIO
 * if it cannot be read; DDPC_ENOMEM. Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL
 * F8_E4M3 F8_E5M2 (only F32 is written by ddpc; others are validated and exposed as bytes). */
ddpc_status ddpc_safetensors_open(ddpc_safetensors **out, const char *path);
/* Frees everything, invalidating every pointer obtained from f; NULL is a no-op. */
void ddpc_safetensors_close(ddpc_safetensors *f);

/* Number of tensors. */
size_t ddpc_safetensors_count(const ddpc_safetensors *f);

/* A tensor's description. Pointers are owned by the file handle and live until close; data is
 * aligned to the dtype's size and holds nbytes = prod(shape) * dtype-size bytes. */
typedef struct {
    const char *name;
    const char *dtype; /* "F32", "BF16", ... */
    int ndim;
    int64_t shape[DDPC_ST_MAX_NDIM];
    const void *data; /* (shape[0], ..., shape[ndim-1]) */
    size_t nbytes;
} ddpc_st_info;

/* Tensor i in [0, count), in the order of their data in the file (for files ddpc wrote: the
 * order written). DDPC_EINVAL if i is out of range. */
ddpc_status ddpc_safetensors_info(const ddpc_safetensors *f, size_t i, ddpc_st_info *out);
/* The tensor called `name`; DDPC_EINVAL "<path>: no tensor named '<name>'" if absent. */
ddpc_status ddpc_safetensors_find(const ddpc_safetensors *f, const char *name, ddpc_st_info *out);
/* The __metadata__ value for key, owned by f; NULL if absent. */
const char *ddpc_safetensors_metadata(const ddpc_safetensors *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
