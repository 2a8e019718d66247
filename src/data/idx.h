// SPDX-License-Identifier: MIT
/* Reader for the idx format of (Fashion-)MNIST, gzip'd or plain: a big-endian magic
 * 0x0000 08 <ndim>, ndim big-endian u32 dims, then prod(dims) unsigned bytes and nothing else.
 * Invariant: every failure names the file and leaves no allocation behind. */
#ifndef DDPC_DATA_IDX_H
#define DDPC_DATA_IDX_H

#include <ddpc/status.h>

#include <stdint.h>

/* Reads the idx file at `path`, which must have `ndim` (1..3) dims of unsigned bytes; dims[0..ndim)
 * receive them and *data a ddpc_malloc'd buffer of their product (the caller frees it). `what`
 * names the payload in messages ("pixel", "label"). DDPC_EIO: cannot open or read;
 * DDPC_EFORMAT: bad magic or dims, truncated, trailing or corrupt data; DDPC_ENOMEM. */
ddpc_status ddpc__idx_read_u8(const char *path, int ndim, const char *what, int64_t dims[3],
                              uint8_t **data);

#endif
