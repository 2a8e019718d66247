// SPDX-License-Identifier: MIT
/* The .npy parser (numpy/lib/format.py). The header is a Python literal written by NumPy's own
 * repr, so the parser accepts exactly what NumPy writes: the three keys in any order, quoted with
 * ' or ", spaces anywhere between tokens, a trailing comma. Invariant: on DDPC_OK the data range
 * lies inside the buffer and holds exactly count * itemsize bytes. */
#include "data/npy.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char MAGIC[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && isspace((unsigned char)*c->p))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string into buf (cap bytes with the NUL). */
static bool quoted(cursor *c, char *buf, size_t cap)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= cap)
            return false;
        buf[n++] = *c->p++;
    }
    buf[n] = '\0';
    return c->p < c->end && *c->p++ == q;
}

static bool word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool integer(cursor *c, int64_t *v)
{
    skip_space(c);
    if (c->p >= c->end || !isdigit((unsigned char)*c->p))
        return false;
    int64_t x = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        if (x > (INT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (*c->p++ - '0');
    }
    *v = x;
    return true;
}

/* (a, b, ...) with an optional trailing comma; () for a scalar. */
static bool shape_tuple(cursor *c, ddpc__npy_array *a)
{
    if (!eat(c, '('))
        return false;
    a->ndim = 0;
    while (!eat(c, ')')) {
        if (a->ndim == DDPC__NPY_MAX_DIMS || !integer(c, &a->shape[a->ndim]))
            return false;
        a->ndim++;
        if (!eat(c, ',')) {
            if (!eat(c, ')'))
                return false;
            break;
        }
    }
    return true;
}

static const struct {
    const char *descr;
    ddpc__npy_dtype dtype;
    int itemsize;
} DTYPES[] = {
    {"<f4", DDPC__NPY_F4, 4}, {"<f8", DDPC__NPY_F8, 8}, {"|u1", DDPC__NPY_U1, 1},
    {"<u1", DDPC__NPY_U1, 1}, {"<i4", DDPC__NPY_I4, 4}, {"<i8", DDPC__NPY_I8, 8},
};

static ddpc_status parse_dict(const char *path, cursor *c, ddpc__npy_array *a)
{
    bool seen[3] = {false, false, false};
    char descr[32] = "";
    bool fortran = false;
    if (!eat(c, '{'))
        return ddpc_errorf(DDPC_EFORMAT, "%s: the .npy header is not a dict", path);
    while (!eat(c, '}')) {
        char key[32];
        if (!quoted(c, key, sizeof key) || !eat(c, ':'))
            return ddpc_errorf(DDPC_EFORMAT, "%s: the .npy header is not NumPy's dict", path);
        if (strcmp(key, "descr") == 0 && !seen[0] && quoted(c, descr, sizeof descr))
            seen[0] = true;
        else if (strcmp(key, "fortran_order") == 0 && !seen[1] &&
                 ((fortran = word(c, "True")) || word(c, "False")))
            seen[1] = true;
        else if (strcmp(key, "shape") == 0 && !seen[2] && shape_tuple(c, a))
            seen[2] = true;
        else
            return ddpc_errorf(DDPC_EFORMAT, "%s: the .npy header's '%s' is not understood", path,
                               key);
        if (!eat(c, ',')) {
            if (!eat(c, '}'))
                return ddpc_errorf(DDPC_EFORMAT, "%s: the .npy header is not NumPy's dict", path);
            break;
        }
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: the .npy header lacks 'descr', 'fortran_order' or 'shape'", path);
    if (fortran)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: a Fortran-order array; save it in C order "
                           "(numpy.ascontiguousarray)",
                           path);
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(descr, DTYPES[i].descr) == 0) {
            a->dtype = DTYPES[i].dtype;
            a->itemsize = DTYPES[i].itemsize;
            return DDPC_OK;
        }
    return ddpc_errorf(DDPC_EFORMAT,
                       "%s: dtype '%s' is not read; ddpc reads little-endian float32, float64, "
                       "uint8, int32 and int64",
                       path, descr);
}

ddpc_status ddpc__npy_parse(const char *path, const uint8_t *buf, size_t len,
                            ddpc__npy_array *out)
{
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    int major = buf[6];
    size_t header_len, start;
    if (major == 1) {
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return ddpc_errorf(DDPC_EFORMAT, "%s: truncated .npy header", path);
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                     (size_t)buf[11] << 24;
        start = 12;
    } else {
        return ddpc_errorf(DDPC_EFORMAT, "%s: .npy version %d.%d is not read (1.0, 2.0, 3.0 are)",
                           path, major, buf[7]);
    }
    if (header_len > len - start)
        return ddpc_errorf(DDPC_EFORMAT, "%s: truncated .npy header", path);
    cursor c = {(const char *)buf + start, (const char *)buf + start + header_len};
    DDPC_TRY(parse_dict(path, &c, out));
    out->count = 1;
    for (int i = 0; i < out->ndim; i++) {
        if (out->shape[i] != 0 && out->count > INT64_MAX / 8 / out->shape[i])
            return ddpc_errorf(DDPC_EFORMAT, "%s: the .npy shape is too large", path);
        out->count *= out->shape[i];
    }
    size_t have = len - start - header_len;
    uint64_t want = (uint64_t)out->count * (uint64_t)out->itemsize;
    if (have != want)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: %zu data bytes, but the shape and dtype give %llu (%s)", path,
                           have, (unsigned long long)want,
                           have < want ? "truncated" : "trailing bytes");
    out->data = buf + start + header_len;
    return DDPC_OK;
}

double ddpc__npy_get(const ddpc__npy_array *a, int64_t i)
{
    const uint8_t *p = a->data + i * a->itemsize;
    switch (a->dtype) {
    case DDPC__NPY_F4: {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    case DDPC__NPY_F8: {
        double d;
        memcpy(&d, p, sizeof d);
        return d;
    }
    case DDPC__NPY_U1:
        return p[0];
    case DDPC__NPY_I4: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case DDPC__NPY_I8: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    }
    return 0.0;
}
