// SPDX-License-Identifier: MIT
/* idx file reading through zlib's gz* functions, which also read uncompressed files as they are.
 * Invariant: we read exactly the bytes the header promises and then demand end of file, which
 * also makes zlib verify the gzip trailer's CRC and length. */
#include "data/idx.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

/* Largest payload we accept (a sanity bound on dims read from the file): 16 GiB. */
#define IDX_MAX_BYTES ((int64_t)1 << 34)
/* First payload allocation; larger payloads grow by doubling as their bytes arrive. */
#define IDX_FIRST_CHUNK ((size_t)64 << 20)

/* Reads up to len bytes; *got says how many arrived. A short read at a clean or truncated end of
 * stream is DDPC_OK (the caller reports truncation); a zlib data error or read error is not. */
static ddpc_status gz_read_some(gzFile f, const char *path, uint8_t *buf, size_t len, size_t *got)
{
    *got = 0;
    while (*got < len) {
        size_t want = len - *got;
        unsigned chunk = want > (1u << 30) ? (1u << 30) : (unsigned)want;
        int r = gzread(f, buf + *got, chunk);
        if (r > 0) {
            *got += (size_t)r;
            continue;
        }
        int errnum = Z_OK;
        const char *msg = gzerror(f, &errnum);
        if (errnum == Z_OK || errnum == Z_BUF_ERROR)
            return DDPC_OK; /* end of file, possibly mid-stream: the caller sees a short count */
        if (errnum == Z_ERRNO)
            return ddpc_errorf(DDPC_EIO, "%s: read failed: %s", path, strerror(errno));
        if (errnum == Z_MEM_ERROR)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory in zlib", path);
        return ddpc_errorf(DDPC_EFORMAT, "%s: corrupt gzip data: %s", path, msg);
    }
    return DDPC_OK;
}

/* Reads the magic and dims and checks them against ndim. */
static ddpc_status read_header(gzFile f, const char *path, int ndim, int64_t dims[3],
                               int64_t *total)
{
    uint8_t h[16];
    size_t want = 4 + 4 * (size_t)ndim, got = 0;
    DDPC_TRY(gz_read_some(f, path, h, want, &got));
    if (got < want)
        return ddpc_errorf(DDPC_EFORMAT, "%s: truncated: expected a %zu-byte idx header, got %zu",
                           path, want, got);
    uint32_t magic = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    uint32_t expect = 0x00000800u | (uint32_t)ndim;
    if (magic != expect)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: bad magic 0x%08x, expected 0x%08x (idx unsigned bytes, %d dims)",
                           path, magic, expect, ndim);
    *total = 1;
    for (int i = 0; i < ndim; i++) {
        const uint8_t *p = h + 4 + 4 * i;
        dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        if (dims[i] == 0 || dims[i] > IDX_MAX_BYTES / *total)
            return ddpc_errorf(DDPC_EFORMAT, "%s: dim %d is %lld, outside [1, %lld / others]",
                               path, i, (long long)dims[i], (long long)IDX_MAX_BYTES);
        *total *= dims[i];
    }
    return DDPC_OK;
}

/* Replaces *buf (holding `used` bytes) by a block of `cap` bytes with the same prefix. */
static ddpc_status grow(const char *path, uint8_t **buf, size_t used, size_t cap)
{
    uint8_t *p = ddpc_malloc(cap);
    if (!p)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %zu bytes", path, cap);
    if (used)
        memcpy(p, *buf, used);
    ddpc_free(*buf);
    *buf = p;
    return DDPC_OK;
}

/* Reads the payload into a new *out, then checks that the stream ends right after it. The buffer
 * grows by doubling from IDX_FIRST_CHUNK, so a header claiming more than the file holds cannot
 * make us allocate far more than the data that actually arrives. */
static ddpc_status read_payload(gzFile f, const char *path, const char *what, int64_t total,
                                uint8_t **out)
{
    size_t want = (size_t)total, cap = want < IDX_FIRST_CHUNK ? want : IDX_FIRST_CHUNK;
    size_t used = 0, got = 0;
    uint8_t *buf = NULL;
    ddpc_status s = grow(path, &buf, 0, cap);
    while (s == DDPC_OK) {
        s = gz_read_some(f, path, buf + used, cap - used, &got);
        used += got;
        if (s != DDPC_OK || used < cap || cap == want)
            break;
        size_t next = cap > want / 2 ? want : 2 * cap;
        s = grow(path, &buf, used, next);
        cap = next;
    }
    if (s == DDPC_OK && used < want)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: truncated: expected %lld %s bytes, got %zu", path,
                        (long long)total, what, used);
    uint8_t extra;
    if (s == DDPC_OK)
        s = gz_read_some(f, path, &extra, 1, &got);
    if (s == DDPC_OK && got != 0)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: trailing data after the %lld %s bytes", path,
                        (long long)total, what);
    if (s != DDPC_OK) {
        ddpc_free(buf);
        return s;
    }
    *out = buf;
    return DDPC_OK;
}

ddpc_status ddpc__idx_read_u8(const char *path, int ndim, const char *what, int64_t dims[3],
                              uint8_t **data)
{
    *data = NULL;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        if (errno == ENOMEM || errno == 0)
            return ddpc_errorf(DDPC_ENOMEM, "%s: cannot open: out of memory", path);
        return ddpc_errorf(DDPC_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    gzbuffer(f, 1u << 17);
    int64_t total = 0;
    ddpc_status s = read_header(f, path, ndim, dims, &total);
    if (s == DDPC_OK)
        s = read_payload(f, path, what, total, data);
    gzclose(f);
    return s;
}
