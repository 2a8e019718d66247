// SPDX-License-Identifier: MIT
/* data.type imagefolder's keys and splits: data.train (required), data.val and data.test roots
 * (one of them at least), data.image_size, data.channels, data.mean and data.std. The held-out
 * splits take the train split's classes, channels and size. Invariant: every split built is
 * handed to the caller, even when a later one fails, so the caller frees it. */
#include "train/trainer_data.h"
#include "train/trainer_impl.h"

#include <stdio.h>
#include <string.h>

/* data.mean or data.std: a number or a list of 1 or 3. */
static ddpc_status read_norm(ddpc_trainer *t, const char *key, bool is_std, float *out, size_t *n)
{
    double v[3];
    DDPC_TRY(ddpc_config_float_list(t->cfg, key, NULL, 0, is_std ? 1e-12 : -1e6, 1e6, v, 3, n));
    if (*n == 2)
        return ddpc_errorf(DDPC_EINVAL,
                           "key '%s' must be one number or one per channel (1 or 3), "
                           "got 2",
                           key);
    for (size_t i = 0; i < *n; i++)
        out[i] = (float)v[i]; /* as torchvision's Normalize on float tensors */
    return DDPC_OK;
}

ddpc_status ddpc__trainer_read_imagefolder(ddpc_trainer *t, const char *prefix,
                                           const char *roots[3], ddpc_imagefolder_config *c)
{
    static const char *const split[3] = {"train", "val", "test"};
    char key[96];
    *c = ddpc_imagefolder_config_default();
    c->threads = t->set.threads;
    for (int i = 0; i < 3; i++)
        DDPC_TRY(ddpc_config_string(t->cfg, ddpc_config_key(key, sizeof key, prefix, split[i]),
                                    NULL, &roots[i]));
    if (!roots[0] || (!roots[1] && !roots[2]))
        return ddpc_errorf(DDPC_EINVAL,
                           "data.type imagefolder needs key '%s.%s' (a folder of class folders) "
                           "and a held-out split: '%s.val' or '%s.test'",
                           prefix, roots[0] ? "val" : "train", prefix, prefix);
    ddpc_config_key(key, sizeof key, prefix, "image_size");
    int64_t size[2];
    size_t n_size = 0;
    DDPC_TRY(ddpc_config_int_list(t->cfg, key, NULL, 0, 1, 1 << 15, size, 2, &n_size));
    if (n_size)
        c->height = size[0], c->width = size[n_size - 1];
    int64_t ch = 0;
    ddpc_config_key(key, sizeof key, prefix, "channels");
    DDPC_TRY(ddpc_config_int(t->cfg, key, 0, 0, 3, &ch));
    if (ch == 2)
        return ddpc_errorf(DDPC_EINVAL, "key '%s' must be 1 (grey) or 3 (RGB), got 2", key);
    c->channels = (int)ch;
    DDPC_TRY(
        read_norm(t, ddpc_config_key(key, sizeof key, prefix, "mean"), false, c->mean, &c->n_mean));
    return read_norm(t, ddpc_config_key(key, sizeof key, prefix, "std"), true, c->std, &c->n_std);
}

/* Appends "data: ROOT: ..." for one split to note. */
static void describe(char *note, size_t cap, const char *root, const ddpc_dataset *d,
                     const ddpc_imagefolder_info *info)
{
    int64_t s[3];
    ddpc_dataset_sample_shape(d, s);
    size_t len = strlen(note);
    snprintf(note + len, cap - len,
             "data: %s: %lld images of %lld classes, %lldx%lldx%lld, %.1f MB decoded in memory",
             root, (long long)ddpc_dataset_size(d), (long long)ddpc_dataset_num_classes(d),
             (long long)s[0], (long long)s[1], (long long)s[2], (double)info->bytes / 1e6);
    len = strlen(note);
    if (info->skipped)
        snprintf(note + len, cap - len, "; %lld other entries skipped (not .png, .jpg or .jpeg)\n",
                 (long long)info->skipped);
    else
        snprintf(note + len, cap - len, "\n");
}

ddpc_status ddpc__trainer_create_imagefolder(const char *const roots[3],
                                             const ddpc_imagefolder_config *c, ddpc_dataset *out[3],
                                             char *note, size_t cap)
{
    ddpc_imagefolder_info info;
    for (int i = 0; i < 3; i++) {
        if (!roots[i])
            continue;
        DDPC_TRY(ddpc_dataset_imagefolder_create(&out[i], roots[i], c, i ? out[0] : NULL, &info));
        describe(note, cap, roots[i], out[i], &info);
    }
    return DDPC_OK;
}
