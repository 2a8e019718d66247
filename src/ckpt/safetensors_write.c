// SPDX-License-Identifier: MIT
/* safetensors writer for F32 tensors: builds the JSON header, pads it with spaces to a multiple
 * of 8 bytes (as the reference implementation does, so the data starts 8-aligned), and replaces
 * the file atomically through ddpc_fs_out (a uniquely named <path>.tmp-XXXXXX, fsync, rename,
 * fsync the directory; a symlink's target is replaced, a device or FIFO refused): concurrent
 * writers of one path never share a temporary file.
 * Invariant: the data buffer is the tensors back to back in the given order, so data_offsets
 * tile it exactly; a crash leaves either the old file or the new one, never a torn one. */
#include <ddpc/safetensors.h>

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *sb, const char *s, size_t n)
{
    if (sb->oom)
        return;
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + n + 1)
            cap *= 2;
        char *p = ddpc_malloc(cap);
        if (!p) {
            sb->oom = true;
            return;
        }
        if (sb->len)
            memcpy(p, sb->buf, sb->len);
        ddpc_free(sb->buf);
        sb->buf = p;
        sb->cap = cap;
    }
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

static void sb_str(strbuf *sb, const char *s)
{
    sb_put(sb, s, strlen(s));
}

/* s as a JSON string literal: quotes, backslashes and control bytes escaped; other bytes as is. */
static void sb_json_string(strbuf *sb, const char *s)
{
    sb_put(sb, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(sb, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(sb, esc, 6);
        } else {
            sb_put(sb, s, 1);
        }
    }
    sb_put(sb, "\"", 1);
}

static void sb_tensor(strbuf *sb, const ddpc_st_tensor *t, uint64_t begin, uint64_t end)
{
    char num[48];
    sb_json_string(sb, t->name);
    sb_str(sb, ":{\"dtype\":\"F32\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
        snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sb_str(sb, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)begin,
             (unsigned long long)end);
    sb_str(sb, num);
}

/* Bytes of tensor t's data, or 0 with *ok = false on a bad shape or overflow. */
static uint64_t tensor_bytes(const ddpc_st_tensor *t, bool *ok)
{
    uint64_t n = sizeof(float);
    *ok = t->ndim >= 0 && t->ndim <= DDPC_ST_MAX_NDIM;
    for (int d = 0; *ok && d < t->ndim; d++) {
        if (t->shape[d] < 0 || (t->shape[d] && n > (UINT64_MAX >> 1) / (uint64_t)t->shape[d]))
            *ok = false;
        else
            n *= (uint64_t)t->shape[d];
    }
    return *ok ? n : 0;
}

static ddpc_status check_args(const char *path, const ddpc_st_tensor *t, size_t n,
                              const char *const *mk, const char *const *mv, size_t n_meta)
{
    if (n && !t)
        return ddpc_errorf(DDPC_EINVAL, "%s: tensors is NULL", path);
    for (size_t i = 0; i < n; i++) {
        bool ok;
        uint64_t bytes = tensor_bytes(&t[i], &ok);
        if (!t[i].name || !t[i].name[0] || strcmp(t[i].name, "__metadata__") == 0)
            return ddpc_errorf(DDPC_EINVAL, "%s: tensor %zu has no valid name", path, i);
        if (!ok || (bytes && !t[i].data))
            return ddpc_errorf(DDPC_EINVAL,
                               "%s: tensor '%.200s' has a bad shape (ndim %d) or no "
                               "data",
                               path, t[i].name, t[i].ndim);
        for (size_t j = 0; j < i; j++)
            if (strcmp(t[i].name, t[j].name) == 0)
                return ddpc_errorf(DDPC_EINVAL, "%s: duplicate tensor name '%.200s'", path,
                                   t[i].name);
    }
    for (size_t i = 0; i < n_meta; i++)
        if (!mk || !mv || !mk[i] || !mv[i])
            return ddpc_errorf(DDPC_EINVAL, "%s: metadata pair %zu is NULL", path, i);
    return DDPC_OK;
}

/* The header JSON padded with spaces so that 8 + its length is a multiple of 8. */
static ddpc_status build_header(const char *path, strbuf *sb, const ddpc_st_tensor *t, size_t n,
                                const char *const *mk, const char *const *mv, size_t n_meta)
{
    sb_str(sb, "{");
    if (n_meta) {
        sb_str(sb, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i)
                sb_str(sb, ",");
            sb_json_string(sb, mk[i]);
            sb_str(sb, ":");
            sb_json_string(sb, mv[i]);
        }
        sb_str(sb, n ? "}," : "}");
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        bool ok;
        uint64_t bytes = tensor_bytes(&t[i], &ok);
        if (i)
            sb_str(sb, ",");
        sb_tensor(sb, &t[i], at, at + bytes);
        at += bytes;
    }
    sb_str(sb, "}");
    while (!sb->oom && sb->len % 8 != 0)
        sb_str(sb, " ");
    if (sb->oom)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory building the header", path);
    return DDPC_OK;
}

/* Writes length, header and tensor data to the temporary (committed by the caller). */
static bool write_body(FILE *f, const strbuf *sb, const ddpc_st_tensor *t, size_t n)
{
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)sb->len >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(sb->buf, 1, sb->len, f) == sb->len;
    for (size_t i = 0; ok && i < n; i++) {
        bool shape_ok;
        size_t bytes = (size_t)tensor_bytes(&t[i], &shape_ok);
        ok = bytes == 0 || fwrite(t[i].data, 1, bytes, f) == bytes; /* an empty one may be NULL */
    }
    return ok;
}

static bool little_endian_host(void)
{
    const uint32_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

ddpc_status ddpc_safetensors_write(const char *path, const ddpc_st_tensor *tensors, size_t n,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   size_t n_meta)
{
    if (!path)
        return ddpc_errorf(DDPC_EINVAL, "safetensors write: path is NULL");
    if (!little_endian_host())
        return ddpc_errorf(DDPC_EUNSUPPORTED,
                           "%s: safetensors writing needs a little-endian "
                           "host",
                           path);
    DDPC_TRY(check_args(path, tensors, n, meta_keys, meta_values, n_meta));
    strbuf sb = {0};
    ddpc_status s = build_header(path, &sb, tensors, n, meta_keys, meta_values, n_meta);
    ddpc_fs_out o;
    if (s == DDPC_OK)
        s = ddpc_fs_out_open(&o, path, NULL);
    if (s == DDPC_OK) {
        bool ok = write_body(o.f, &sb, tensors, n);
        int e = errno;
        s = ddpc_fs_out_commit(&o, !ok);
        if (!ok)
            s = ddpc_errorf(DDPC_EIO, "%s: write failed: %s", path, strerror(e));
    }
    ddpc_free(sb.buf);
    return s;
}
