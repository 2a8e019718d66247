// SPDX-License-Identifier: MIT
/* Private to src/data: NumPy's .npy format (numpy/lib/format.py, versions 1.0, 2.0 and 3.0): the
 * magic "\x93NUMPY", a version, a header length, a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...), } padded with spaces to a newline,
 * then the array's bytes. The parser reads little-endian f4, f8, u1, i4 and i8 in C order. */
#ifndef DDPC_DATA_NPY_H
#define DDPC_DATA_NPY_H

#include <ddpc/status.h>

#include <stddef.h>
#include <stdint.h>

enum { DDPC__NPY_MAX_DIMS = 8 };

typedef enum { DDPC__NPY_F4, DDPC__NPY_F8, DDPC__NPY_U1, DDPC__NPY_I4, DDPC__NPY_I8 } ddpc__npy_dtype;

typedef struct {
    ddpc__npy_dtype dtype;
    int itemsize;                        /* bytes per element */
    int ndim;                            /* 0..DDPC__NPY_MAX_DIMS */
    int64_t shape[DDPC__NPY_MAX_DIMS];   /* (ndim) */
    int64_t count;                       /* elements: the shape's product */
    const uint8_t *data;                 /* (count * itemsize) bytes inside the parsed buffer */
} ddpc__npy_array;

/* Parses the .npy file held in buf[0, len) (borrowed: out->data points into it). DDPC_EFORMAT
 * naming `path` and what is wrong: not .npy, an unknown version, a header that is not the dict
 * NumPy writes, a dtype other than the five above (big-endian included), Fortran order, or a
 * size that disagrees with the shape (truncated or trailing bytes). */
ddpc_status ddpc__npy_parse(const char *path, const uint8_t *buf, size_t len,
                            ddpc__npy_array *out);

/* Element i of a as a double. */
double ddpc__npy_get(const ddpc__npy_array *a, int64_t i);

#endif
