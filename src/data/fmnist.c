// SPDX-License-Identifier: MIT
/* Fashion-MNIST (Xiao et al. 2017) from its four gzip'd idx files.
 * Invariant: images (n, 1, 28, 28) stay as raw bytes and are normalised on copy through the
 * dataset's 256-entry table with the train set's mean and std, for both splits; every label < 10. */
#include "data/dataset_impl.h"
#include "data/idx.h"

#include <ddpc/alloc.h>

#include <stdio.h>

#define FMNIST_SIDE 28
#define FMNIST_CLASSES 10

/* "<dir>/<split>-<kind>-ubyte.gz", or DDPC_EINVAL if it does not fit. */
static ddpc_status fmnist_path(char *buf, size_t size, const char *dir, const char *split,
                               const char *kind)
{
    int len = snprintf(buf, size, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (len < 0 || (size_t)len >= size)
        return ddpc_errorf(DDPC_EINVAL, "fmnist: directory path '%s' is too long", dir);
    return DDPC_OK;
}

static ddpc_status check_images(const char *path, const int64_t dims[3])
{
    if (dims[1] != FMNIST_SIDE || dims[2] != FMNIST_SIDE)
        return ddpc_errorf(DDPC_EFORMAT, "%s: images are %lldx%lld, expected %dx%d", path,
                           (long long)dims[1], (long long)dims[2], FMNIST_SIDE, FMNIST_SIDE);
    return DDPC_OK;
}

static ddpc_status check_labels(const char *path, const uint8_t *labels, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (labels[i] >= FMNIST_CLASSES)
            return ddpc_errorf(DDPC_EFORMAT, "%s: label %u at index %lld is outside [0, %d)",
                               path, labels[i], (long long)i, FMNIST_CLASSES);
    return DDPC_OK;
}

ddpc_status ddpc_dataset_fmnist_create(ddpc_dataset **out, const char *dir, bool train)
{
    *out = NULL;
    if (!dir)
        return ddpc_errorf(DDPC_EINVAL, "fmnist: directory is NULL");
    const char *split = train ? "train" : "t10k";
    char img_path[4096], lbl_path[4096];
    DDPC_TRY(fmnist_path(img_path, sizeof img_path, dir, split, "images-idx3"));
    DDPC_TRY(fmnist_path(lbl_path, sizeof lbl_path, dir, split, "labels-idx1"));

    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_IMAGES);
    if (!d)
        return ddpc_errorf(DDPC_ENOMEM, "fmnist: out of memory for the dataset");
    int64_t idims[3] = {0}, ldims[3] = {0};
    ddpc_status s = ddpc__idx_read_u8(lbl_path, 1, "label", ldims, &d->labels);
    if (s != DDPC_OK)
        goto fail;
    if ((s = check_labels(lbl_path, d->labels, ldims[0])) != DDPC_OK)
        goto fail;
    if ((s = ddpc__idx_read_u8(img_path, 3, "pixel", idims, &d->pix_u8)) != DDPC_OK)
        goto fail;
    if ((s = check_images(img_path, idims)) != DDPC_OK)
        goto fail;
    if (idims[0] != ldims[0]) {
        s = ddpc_errorf(DDPC_EFORMAT, "%s: %lld images but %s has %lld labels", img_path,
                        (long long)idims[0], lbl_path, (long long)ldims[0]);
        goto fail;
    }
    d->n = idims[0];
    d->classes = FMNIST_CLASSES;
    d->shape[0] = 1;
    d->shape[1] = FMNIST_SIDE;
    d->shape[2] = FMNIST_SIDE;
    for (int v = 0; v < 256; v++)
        d->lut[v] = ((float)v / 255.0f - DDPC_FMNIST_MEAN) / DDPC_FMNIST_STD;
    *out = d;
    return DDPC_OK;
fail:
    ddpc_dataset_destroy(d);
    return s;
}
