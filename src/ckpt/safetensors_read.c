// SPDX-License-Identifier: MIT
/* safetensors reader: loads the whole file, parses the JSON header strictly (json.c) and checks
 * the format's invariant before handing out any tensor.
 * Invariant: an open handle's entries are sorted by data offset, tile the data buffer exactly,
 * and each one's bytes are aligned for its dtype (misaligned ones get an aligned private copy);
 * names point into the parsed header and by_name indexes them sorted. */
#include <ddpc/safetensors.h>

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"

typedef struct {
    const char *name;  /* owned by the header tree */
    const char *dtype; /* static */
    size_t elsize;
    int ndim;
    int64_t shape[DDPC_ST_MAX_NDIM];
    uint64_t begin, end; /* byte range in the data buffer */
    void *copy;          /* aligned copy when data + begin is misaligned, else NULL */
} st_entry;

struct ddpc_safetensors {
    char *path;
    ddpc__json *header;
    const ddpc__json *meta; /* __metadata__ object, or NULL */
    uint8_t *data;          /* (data_len) */
    uint64_t data_len;
    st_entry *entries; /* (n), sorted by offset */
    st_entry **by_name; /* (n) the entries sorted by name */
    size_t n;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
    {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1},
    {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

/* Reads exactly len bytes unless the file ends; returns the count, or -1 on a read error. */
static int64_t read_full(int fd, void *buf, uint64_t len)
{
    uint64_t got = 0;
    while (got < len) {
        uint64_t want = len - got > (1u << 30) ? (1u << 30) : len - got;
        ssize_t r = read(fd, (uint8_t *)buf + got, (size_t)want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (uint64_t)r;
    }
    return (int64_t)got;
}

/* Reads the header length and validates it against the file size. */
static ddpc_status read_header_len(int fd, const char *path, uint64_t size, uint64_t *n)
{
    uint8_t b[8];
    if (size < 8)
        return ddpc_errorf(DDPC_EFORMAT, "%s: file is %llu bytes, too short for the 8-byte "
                           "header length (torn or truncated file?)", path,
                           (unsigned long long)size);
    if (read_full(fd, b, 8) != 8)
        return ddpc_errorf(DDPC_EIO, "%s: cannot read the header length: %s", path,
                           strerror(errno));
    *n = 0;
    for (int i = 7; i >= 0; i--)
        *n = *n << 8 | b[i];
    if (*n > DDPC_ST_MAX_HEADER)
        return ddpc_errorf(DDPC_EFORMAT, "%s: header length %llu exceeds the %llu-byte limit",
                           path, (unsigned long long)*n, (unsigned long long)DDPC_ST_MAX_HEADER);
    if (*n > size - 8)
        return ddpc_errorf(DDPC_EFORMAT, "%s: header length %llu exceeds the %llu bytes after "
                           "it (torn or truncated file?)", path, (unsigned long long)*n,
                           (unsigned long long)(size - 8));
    if (*n < 2)
        return ddpc_errorf(DDPC_EFORMAT, "%s: header length %llu is too small for a JSON object",
                           path, (unsigned long long)*n);
    return DDPC_OK;
}

/* Reads and parses the header, then the data buffer, into f. */
static ddpc_status load(ddpc_safetensors *f, int fd, uint64_t size)
{
    uint64_t hlen = 0;
    DDPC_TRY(read_header_len(fd, f->path, size, &hlen));
    char *text = ddpc_malloc((size_t)hlen);
    if (!text)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for a %llu-byte header", f->path,
                           (unsigned long long)hlen);
    ddpc_status s = DDPC_OK;
    if (read_full(fd, text, hlen) != (int64_t)hlen)
        s = ddpc_errorf(DDPC_EIO, "%s: cannot read the header", f->path);
    char origin[512];
    snprintf(origin, sizeof origin, "%.480s: header", f->path);
    if (s == DDPC_OK)
        s = ddpc__json_parse(&f->header, text, (size_t)hlen, origin);
    ddpc_free(text);
    if (s != DDPC_OK)
        return s;
    if (f->header->type != DDPC__JSON_OBJECT)
        return ddpc_errorf(DDPC_EFORMAT, "%s: header is not a JSON object", f->path);
    f->data_len = size - 8 - hlen;
    f->data = ddpc_malloc((size_t)f->data_len);
    if (!f->data)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %llu bytes of tensor data",
                           f->path, (unsigned long long)f->data_len);
    if (read_full(fd, f->data, f->data_len) != (int64_t)f->data_len)
        return ddpc_errorf(DDPC_EIO, "%s: cannot read the tensor data (file changed while "
                           "reading?)", f->path);
    return DDPC_OK;
}

/* A non-negative integer JSON value that fits int64, or -1. */
static int64_t json_count(const ddpc__json *v)
{
    return v && v->type == DDPC__JSON_NUMBER && v->is_int && v->integer >= 0 ? v->integer : -1;
}

static ddpc_status parse_dtype(const char *path, st_entry *e, const ddpc__json *v)
{
    if (!v || v->type != DDPC__JSON_STRING)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': \"dtype\" must be a string",
                           path, e->name);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(v->str, dtypes[i].name) == 0) {
            e->dtype = dtypes[i].name;
            e->elsize = dtypes[i].size;
            return DDPC_OK;
        }
    return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': unknown dtype '%.40s'", path, e->name,
                       v->str);
}

/* Shape and offsets; *nbytes receives prod(shape) * elsize (checked for overflow). */
static ddpc_status parse_shape_offsets(const char *path, st_entry *e, const ddpc__json *shape,
                                       const ddpc__json *offs, uint64_t *nbytes)
{
    if (!shape || shape->type != DDPC__JSON_ARRAY || shape->count > DDPC_ST_MAX_NDIM)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': \"shape\" must be an array of at "
                           "most %d dims", path, e->name, DDPC_ST_MAX_NDIM);
    *nbytes = e->elsize;
    bool overflow = false;
    e->ndim = (int)shape->count;
    for (int d = 0; d < e->ndim; d++) {
        e->shape[d] = json_count(&shape->items[d]);
        if (e->shape[d] < 0)
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': shape dim %d is not a "
                               "non-negative integer", path, e->name, d);
        if (e->shape[d] != 0 && *nbytes > UINT64_MAX / (uint64_t)e->shape[d])
            overflow = true;
        *nbytes *= (uint64_t)e->shape[d];
    }
    if (!offs || offs->type != DDPC__JSON_ARRAY || offs->count != 2 ||
        json_count(&offs->items[0]) < 0 || json_count(&offs->items[1]) < 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': \"data_offsets\" must be two "
                           "non-negative integers [begin, end]", path, e->name);
    e->begin = (uint64_t)offs->items[0].integer;
    e->end = (uint64_t)offs->items[1].integer;
    if (e->begin > e->end)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': data_offsets [%llu, %llu] end "
                           "before they begin", path, e->name, (unsigned long long)e->begin,
                           (unsigned long long)e->end);
    if (overflow || *nbytes != e->end - e->begin)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': shape of %s needs %s%llu bytes but "
                           "data_offsets [%llu, %llu] span %llu", path, e->name, e->dtype,
                           overflow ? "over " : "", (unsigned long long)*nbytes,
                           (unsigned long long)e->begin, (unsigned long long)e->end,
                           (unsigned long long)(e->end - e->begin));
    return DDPC_OK;
}

/* One tensor entry "name": {"dtype", "shape", "data_offsets"} and nothing else. */
static ddpc_status parse_entry(ddpc_safetensors *f, const char *name, const ddpc__json *v,
                               st_entry *e)
{
    e->name = name;
    if (v->type != DDPC__JSON_OBJECT)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': entry is not a JSON object",
                           f->path, name);
    DDPC_TRY(ddpc__json_check_unique_keys(v, f->path));
    for (size_t k = 0; k < v->count; k++)
        if (strcmp(v->keys[k], "dtype") && strcmp(v->keys[k], "shape") &&
            strcmp(v->keys[k], "data_offsets"))
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': unknown key '%.200s'", f->path,
                               name, v->keys[k]);
    DDPC_TRY(parse_dtype(f->path, e, ddpc__json_get(v, "dtype")));
    uint64_t nbytes;
    DDPC_TRY(parse_shape_offsets(f->path, e, ddpc__json_get(v, "shape"),
                                 ddpc__json_get(v, "data_offsets"), &nbytes));
    if (e->end > f->data_len)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%.200s': data_offsets [%llu, %llu] lie "
                           "outside the %llu-byte data buffer (torn or truncated file?)", f->path,
                           name, (unsigned long long)e->begin, (unsigned long long)e->end,
                           (unsigned long long)f->data_len);
    return DDPC_OK;
}

static ddpc_status parse_metadata(ddpc_safetensors *f, const ddpc__json *v)
{
    if (v->type != DDPC__JSON_OBJECT)
        return ddpc_errorf(DDPC_EFORMAT, "%s: __metadata__ is not a JSON object", f->path);
    char origin[512];
    snprintf(origin, sizeof origin, "%.480s: __metadata__", f->path);
    DDPC_TRY(ddpc__json_check_unique_keys(v, origin));
    for (size_t k = 0; k < v->count; k++)
        if (v->items[k].type != DDPC__JSON_STRING)
            return ddpc_errorf(DDPC_EFORMAT, "%s: __metadata__ value of '%.200s' is not a string",
                               f->path, v->keys[k]);
    f->meta = v;
    return DDPC_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Sorted by offset, entries must tile [0, data_len) exactly. */
static ddpc_status check_layout(const ddpc_safetensors *f)
{
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->entries[i];
        if (e->begin < at)
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensors '%.200s' and '%.200s' overlap in the "
                               "data buffer (byte %llu)", f->path, f->entries[i - 1].name,
                               e->name, (unsigned long long)e->begin);
        if (e->begin > at)
            return ddpc_errorf(DDPC_EFORMAT, "%s: bytes [%llu, %llu) of the data buffer belong "
                               "to no tensor", f->path, (unsigned long long)at,
                               (unsigned long long)e->begin);
        at = e->end;
    }
    if (at != f->data_len)
        return ddpc_errorf(DDPC_EFORMAT, "%s: the data buffer has %llu bytes but the tensors "
                           "cover %llu (trailing bytes)", f->path,
                           (unsigned long long)f->data_len, (unsigned long long)at);
    return DDPC_OK;
}

static int cmp_name(const void *a, const void *b)
{
    const st_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* by_name (n) = the entries sorted by name (unique: they are the header's keys). */
static ddpc_status index_names(ddpc_safetensors *f)
{
    f->by_name = ddpc_malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    if (!f->by_name)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory indexing tensor names", f->path);
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = &f->entries[i];
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_name);
    return DDPC_OK;
}

/* Gives each misaligned tensor an aligned copy of its bytes. */
static ddpc_status align_entries(ddpc_safetensors *f)
{
    for (size_t i = 0; i < f->n; i++) {
        st_entry *e = &f->entries[i];
        if (e->begin % e->elsize == 0)
            continue; /* the buffer itself is DDPC_ALIGNMENT-aligned */
        e->copy = ddpc_malloc((size_t)(e->end - e->begin));
        if (!e->copy)
            return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory aligning tensor '%.200s'",
                               f->path, e->name);
        memcpy(e->copy, f->data + e->begin, (size_t)(e->end - e->begin));
    }
    return DDPC_OK;
}

/* Validates the parsed header into entries. */
static ddpc_status build(ddpc_safetensors *f)
{
    const ddpc__json *h = f->header;
    DDPC_TRY(ddpc__json_check_unique_keys(h, f->path));
    f->entries = ddpc_calloc(h->count ? h->count : 1, sizeof *f->entries);
    if (!f->entries)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %zu tensor entries", f->path,
                           h->count);
    for (size_t k = 0; k < h->count; k++) {
        if (strcmp(h->keys[k], "__metadata__") == 0) {
            DDPC_TRY(parse_metadata(f, &h->items[k]));
            continue;
        }
        DDPC_TRY(parse_entry(f, h->keys[k], &h->items[k], &f->entries[f->n]));
        f->n++;
    }
    qsort(f->entries, f->n, sizeof *f->entries, cmp_offset);
    DDPC_TRY(check_layout(f));
    DDPC_TRY(index_names(f));
    return align_entries(f);
}

ddpc_status ddpc_safetensors_open(ddpc_safetensors **out, const char *path)
{
    *out = NULL;
    if (!path)
        return ddpc_errorf(DDPC_EINVAL, "safetensors: path is NULL");
    ddpc_safetensors *f = ddpc_calloc(1, sizeof *f);
    size_t plen = strlen(path) + 1;
    char *p = ddpc_malloc(plen);
    if (!f || !p) {
        ddpc_free(f);
        ddpc_free(p);
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory opening", path);
    }
    memcpy(p, path, plen);
    f->path = p;
    /* Regular files only: a FIFO or a device in place of one would block or never end. */
    int fd;
    uint64_t size;
    ddpc_status s = ddpc_open_regular(path, NULL, NULL, &fd, &size);
    if (s != DDPC_OK) {
        ddpc_safetensors_close(f);
        return s;
    }
    s = load(f, fd, size);
    close(fd);
    if (s == DDPC_OK)
        s = build(f);
    if (s != DDPC_OK) {
        ddpc_safetensors_close(f);
        return s;
    }
    *out = f;
    return DDPC_OK;
}

void ddpc_safetensors_close(ddpc_safetensors *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        ddpc_free(f->entries[i].copy);
    ddpc_free(f->entries);
    ddpc_free(f->by_name);
    ddpc_free(f->data);
    ddpc__json_free(f->header);
    ddpc_free(f->path);
    ddpc_free(f);
}

size_t ddpc_safetensors_count(const ddpc_safetensors *f)
{
    return f->n;
}

static void fill_info(const ddpc_safetensors *f, const st_entry *e, ddpc_st_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof e->shape);
    out->data = e->copy ? e->copy : (const void *)(f->data + e->begin);
    out->nbytes = (size_t)(e->end - e->begin);
}

ddpc_status ddpc_safetensors_info(const ddpc_safetensors *f, size_t i, ddpc_st_info *out)
{
    if (i >= f->n)
        return ddpc_errorf(DDPC_EINVAL, "%s: tensor index %zu is outside [0, %zu)", f->path, i,
                           f->n);
    fill_info(f, &f->entries[i], out);
    return DDPC_OK;
}

ddpc_status ddpc_safetensors_find(const ddpc_safetensors *f, const char *name, ddpc_st_info *out)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_entry *e = f->by_name[mid];
        int c = strcmp(name, e->name);
        if (c == 0) {
            fill_info(f, e, out);
            return DDPC_OK;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return ddpc_errorf(DDPC_EINVAL, "%s: no tensor named '%.200s'", f->path, name);
}

const char *ddpc_safetensors_metadata(const ddpc_safetensors *f, const char *key)
{
    const ddpc__json *v = ddpc__json_get(f->meta, key);
    return v ? v->str : NULL;
}
