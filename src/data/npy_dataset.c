// SPDX-License-Identifier: MIT
/* Images (or feature vectors) and class labels from two .npy files, as a Python user saves them
 * with numpy.save: x of shape (N, D), (N, H, W) or (N, C, H, W) and y of shape (N,).
 * Invariant: the dataset owns fp32 pixels (uint8 scaled to [0, 1] as torchvision's ToTensor
 * does, other dtypes converted) and uint8 labels; the files' buffers are freed at creation. */
#include "data/dataset_impl.h"
#include "data/npy.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <string.h>

/* Reads and parses path; *buf owns the bytes a->data points into. */
static ddpc_status load(const char *path, char **buf, ddpc__npy_array *a)
{
    size_t len;
    DDPC_TRY(ddpc_read_regular_file(path, NULL, 0, NULL, buf, &len));
    return ddpc__npy_parse(path, (const uint8_t *)*buf, len, a);
}

static ddpc_status set_shape(ddpc_dataset *d, const char *path, const ddpc__npy_array *x)
{
    if (x->ndim < 2 || x->ndim > 4 || x->shape[0] < 1)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: shape of %d dimensions; samples need (N, D), (N, H, W) or "
                           "(N, C, H, W) with N >= 1",
                           path, x->ndim);
    int64_t c = x->ndim == 4 ? x->shape[1] : 1, h = x->ndim >= 3 ? x->shape[x->ndim - 2] : 1,
            w = x->shape[x->ndim - 1];
    if (c < 1 || h < 1 || w < 1)
        return ddpc_errorf(DDPC_EFORMAT, "%s: a sample of shape (%lld, %lld, %lld) is empty", path,
                           (long long)c, (long long)h, (long long)w);
    d->n = x->shape[0];
    d->shape[0] = c, d->shape[1] = h, d->shape[2] = w;
    return DDPC_OK;
}

static ddpc_status fill_pixels(ddpc_dataset *d, const char *path, const ddpc__npy_array *x)
{
    d->pix_f32 = ddpc_malloc((size_t)x->count * sizeof *d->pix_f32);
    if (!d->pix_f32)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld values", path,
                           (long long)x->count);
    if (x->dtype == DDPC__NPY_F4) {
        memcpy(d->pix_f32, x->data, (size_t)x->count * sizeof(float));
        return DDPC_OK;
    }
    for (int64_t i = 0; i < x->count; i++)
        d->pix_f32[i] = x->dtype == DDPC__NPY_U1 ? (float)x->data[i] / 255.0f
                                                 : (float)ddpc__npy_get(x, i);
    return DDPC_OK;
}

static ddpc_status fill_labels(ddpc_dataset *d, const char *path, const ddpc__npy_array *y)
{
    if (y->ndim != 1 || y->shape[0] != d->n)
        return ddpc_errorf(DDPC_EFORMAT, "%s: labels of shape (%lld%s), but the samples are %lld",
                           path, (long long)(y->ndim ? y->shape[0] : 0),
                           y->ndim == 1 ? "," : ", ...", (long long)d->n);
    if (y->dtype == DDPC__NPY_F4 || y->dtype == DDPC__NPY_F8)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: float labels; class labels are integers (uint8, int32 or int64)",
                           path);
    d->labels = ddpc_malloc((size_t)d->n);
    if (!d->labels)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld labels", path,
                           (long long)d->n);
    int64_t top = 0;
    for (int64_t i = 0; i < d->n; i++) {
        double v = ddpc__npy_get(y, i);
        if (v < 0 || v > 255)
            return ddpc_errorf(DDPC_EFORMAT, "%s: label %lld is %.0f, outside [0, 255]", path,
                               (long long)i, v);
        d->labels[i] = (uint8_t)v;
        if (d->labels[i] > top)
            top = d->labels[i];
    }
    d->classes = top + 1 < 2 ? 2 : top + 1;
    return DDPC_OK;
}

ddpc_status ddpc_dataset_npy_create(ddpc_dataset **out, const char *x_path, const char *y_path)
{
    *out = NULL;
    if (!x_path || !y_path)
        return ddpc_errorf(DDPC_EINVAL, "npy dataset: a path is NULL");
    char *xbuf = NULL, *ybuf = NULL;
    ddpc__npy_array x, y;
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_IMAGES);
    ddpc_status s = d ? DDPC_OK : ddpc_errorf(DDPC_ENOMEM, "%s: out of memory", x_path);
    if (s == DDPC_OK)
        s = load(x_path, &xbuf, &x);
    if (s == DDPC_OK)
        s = set_shape(d, x_path, &x);
    if (s == DDPC_OK)
        s = fill_pixels(d, x_path, &x);
    ddpc_free(xbuf);
    if (s == DDPC_OK)
        s = load(y_path, &ybuf, &y);
    if (s == DDPC_OK)
        s = fill_labels(d, y_path, &y);
    ddpc_free(ybuf);
    if (s != DDPC_OK) {
        ddpc_dataset_destroy(d);
        return s;
    }
    *out = d;
    return DDPC_OK;
}
