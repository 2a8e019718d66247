// SPDX-License-Identifier: MIT
/* data.type imagefolder: torchvision's ImageFolder decoded once into memory. Pass 1 reads every
 * file's header (size, colour), pass 2 decodes each into its slot of one (n, c, h, w) u8 buffer;
 * both run in parallel, and a failure is reported for the first failing file in sample order,
 * so the message does not depend on the threads. Invariant: after creation the dataset holds
 * pixels of one size and channel count, and per-channel tables doing ToTensor then Normalize. */
#include "data/dataset_impl.h"
#include "data/image.h"
#include "data/imagefolder_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <omp.h>
#include <string.h>

ddpc_imagefolder_config ddpc_imagefolder_config_default(void)
{
    return (ddpc_imagefolder_config){0};
}

const char *ddpc_dataset_class_name(const ddpc_dataset *d, int64_t k)
{
    return d->class_names && k >= 0 && k < d->classes ? d->class_names[k] : NULL;
}

static ddpc_status check_config(const ddpc_imagefolder_config *c, const char *root)
{
    if ((c->height == 0) != (c->width == 0) || c->height < 0 || c->width < 0 ||
        c->height > DDPC__IMAGE_MAX_SIDE || c->width > DDPC__IMAGE_MAX_SIDE)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: image size %lldx%lld; both sides in [1, %d], or "
                           "both 0 to keep the images' size",
                           root, (long long)c->height, (long long)c->width, DDPC__IMAGE_MAX_SIDE);
    if (c->channels != 0 && c->channels != 1 && c->channels != 3)
        return ddpc_errorf(DDPC_EINVAL, "%s: channels %d; images have 1 (grey) or 3 (RGB)", root,
                           c->channels);
    if (c->n_mean > 3 || c->n_std > 3)
        return ddpc_errorf(DDPC_EINVAL, "%s: %zu means and %zu stds; at most one per channel", root,
                           c->n_mean, c->n_std);
    for (size_t i = 0; i < c->n_std; i++)
        if (!(c->std[i] > 0))
            return ddpc_errorf(DDPC_EINVAL, "%s: std %g; each std must be > 0", root, c->std[i]);
    return DDPC_OK;
}

/* Runs one of the passes on file i: reads it, then probes (out == NULL) or decodes into out. */
static ddpc_status one_file(const char *path, ddpc__image_info *info, uint8_t *out, int c,
                            int64_t h, int64_t w)
{
    char *buf = NULL;
    size_t len;
    DDPC_TRY(ddpc_read_regular_file(path, "image", 0, NULL, &buf, &len));
    ddpc_status s = DDPC_OK;
    if (!out) {
        s = ddpc__image_probe(path, (const uint8_t *)buf, len, info);
        ddpc_free(buf);
        return s;
    }
    size_t hwc = (size_t)(info->height * info->width * info->channels);
    uint8_t *raw = ddpc_malloc(hwc);
    float *scratch = ddpc_malloc((size_t)(info->height * info->width) * sizeof *scratch);
    if (!raw || !scratch)
        s = ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for a %lldx%lld image", path,
                        (long long)info->width, (long long)info->height);
    if (s == DDPC_OK)
        s = ddpc__image_decode(path, (const uint8_t *)buf, len, info, raw);
    if (s == DDPC_OK)
        ddpc__image_to_planar(raw, info->height, info->width, info->channels, out, c, h, w,
                              scratch);
    ddpc_free(scratch);
    ddpc_free(raw);
    ddpc_free(buf);
    return s;
}

/* One pass over every file (decoding when pix is set); the first failure in file order is
 * repeated on this thread so that its message is the one left. */
static ddpc_status run_pass(const ddpc__image_list *l, ddpc__image_info *infos, uint8_t *pix, int c,
                            int64_t h, int64_t w, int threads)
{
    ddpc_status *st = ddpc_malloc((size_t)l->n * sizeof *st);
    if (!st)
        return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory");
    int64_t per = (int64_t)c * h * w;
    int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt)
    for (int64_t i = 0; i < l->n; i++)
        st[i] = one_file(l->paths[i], &infos[i], pix ? pix + i * per : NULL, c, h, w);
    ddpc_status s = DDPC_OK;
    for (int64_t i = 0; i < l->n && s == DDPC_OK; i++)
        if (st[i] != DDPC_OK)
            s = one_file(l->paths[i], &infos[i], pix ? pix + i * per : NULL, c, h, w);
    ddpc_free(st);
    return s;
}

/* The folder's size and channels: the config's, else like's, else the images' (all one size). */
static ddpc_status pick_shape(const ddpc__image_list *l, const ddpc__image_info *infos,
                              const ddpc_imagefolder_config *cfg, const ddpc_dataset *like,
                              int64_t shape[3])
{
    shape[0] = cfg->channels;
    if (!shape[0])
        shape[0] = like ? like->shape[0] : 1;
    for (int64_t i = 0; i < l->n && !cfg->channels && !like; i++)
        if (infos[i].channels == 3)
            shape[0] = 3;
    if (cfg->height) {
        shape[1] = cfg->height, shape[2] = cfg->width;
        return DDPC_OK;
    }
    const char *first = like ? "the train split's images" : l->paths[0];
    shape[1] = like ? like->shape[1] : infos[0].height;
    shape[2] = like ? like->shape[2] : infos[0].width;
    for (int64_t i = 0; i < l->n; i++)
        if (infos[i].height != shape[1] || infos[i].width != shape[2])
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s is %lldx%lld (height x width) but %s are %lldx%lld: images of "
                               "mixed sizes need data.image_size to resize them to one",
                               l->paths[i], (long long)infos[i].height, (long long)infos[i].width,
                               first, (long long)shape[1], (long long)shape[2]);
    return DDPC_OK;
}

/* The class names must be like's: the head's labels mean the same classes. */
static ddpc_status same_classes(const char *root, const ddpc__image_list *l,
                                const ddpc_dataset *like)
{
    for (int64_t k = 0; k < l->n_classes || k < like->classes; k++) {
        const char *mine = k < l->n_classes ? l->classes[k] : NULL;
        const char *theirs = k < like->classes ? like->class_names[k] : NULL;
        int order = !mine ? 1 : !theirs ? -1 : strcmp(mine, theirs);
        if (order < 0)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: class folder '%s' is not a class of the train "
                               "split; held-out splits need the same class folders",
                               root, mine);
        if (order > 0)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: no class folder '%s', a class of the train "
                               "split; held-out splits need the same class folders",
                               root, theirs);
    }
    return DDPC_OK;
}

/* ToTensor then Normalize per channel, as tables from the u8 value. */
static ddpc_status fill_tables(ddpc_dataset *d, const ddpc_imagefolder_config *cfg,
                               const char *root)
{
    int c = (int)d->shape[0];
    if ((cfg->n_mean > 1 && cfg->n_mean != (size_t)c) ||
        (cfg->n_std > 1 && cfg->n_std != (size_t)c))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: %zu means and %zu stds for %d-channel images; give "
                           "one value, or one per channel",
                           root, cfg->n_mean, cfg->n_std, c);
    d->chan_lut = ddpc_malloc((size_t)c * sizeof *d->chan_lut);
    if (!d->chan_lut)
        return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory");
    for (int ch = 0; ch < c; ch++) {
        float mean = cfg->n_mean ? cfg->mean[cfg->n_mean == 1 ? 0 : ch] : 0.0f;
        float std = cfg->n_std ? cfg->std[cfg->n_std == 1 ? 0 : ch] : 1.0f;
        for (int v = 0; v < 256; v++) /* the arithmetic of fmnist.c's table, to the bit */
            d->chan_lut[ch][v] = ((float)v / 255.0f - mean) / std;
    }
    return DDPC_OK;
}

static ddpc_status build(ddpc_dataset *d, const char *root, const ddpc_imagefolder_config *cfg,
                         const ddpc_dataset *like, ddpc__image_list *l, ddpc_imagefolder_info *info)
{
    DDPC_TRY(ddpc__image_list_read(root, l));
    if (like)
        DDPC_TRY(same_classes(root, l, like));
    ddpc__image_info *infos = ddpc_calloc((size_t)l->n, sizeof *infos);
    if (!infos)
        return ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory for %lld images",
                           (long long)l->n);
    ddpc_status s = run_pass(l, infos, NULL, 0, 0, 0, cfg->threads);
    if (s == DDPC_OK)
        s = pick_shape(l, infos, cfg, like, d->shape);
    int64_t per = d->shape[0] * d->shape[1] * d->shape[2];
    if (s == DDPC_OK && !(d->pix_u8 = ddpc_malloc((size_t)(l->n * per))))
        s = ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld decoded bytes", root,
                        (long long)(l->n * per));
    if (s == DDPC_OK)
        s = run_pass(l, infos, d->pix_u8, (int)d->shape[0], d->shape[1], d->shape[2], cfg->threads);
    ddpc_free(infos);
    DDPC_TRY(s);
    DDPC_TRY(fill_tables(d, cfg, root));
    d->n = l->n;
    d->classes = l->n_classes;
    d->labels = l->labels, l->labels = NULL;
    d->class_names = l->classes, l->classes = NULL, l->n_classes = 0;
    if (info)
        *info = (ddpc_imagefolder_info){.skipped = l->skipped, .bytes = l->n * per};
    return DDPC_OK;
}

ddpc_status ddpc_dataset_imagefolder_create(ddpc_dataset **out, const char *root,
                                            const ddpc_imagefolder_config *cfg,
                                            const ddpc_dataset *like, ddpc_imagefolder_info *info)
{
    *out = NULL;
    if (!root || !cfg)
        return ddpc_errorf(DDPC_EINVAL, "image folder: root or config is NULL");
    if (like && (like->kind != DDPC_DATASET_IMAGES || !like->class_names))
        return ddpc_errorf(DDPC_EINVAL, "%s: the train split given is not an image folder", root);
    DDPC_TRY(check_config(cfg, root));
    ddpc__image_list l = {0};
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_IMAGES);
    ddpc_status s = d ? build(d, root, cfg, like, &l, info)
                      : ddpc_errorf(DDPC_ENOMEM, "image folder: out of memory");
    ddpc__image_list_free(&l);
    if (s != DDPC_OK) {
        ddpc_dataset_destroy(d);
        return s;
    }
    *out = d;
    return DDPC_OK;
}
