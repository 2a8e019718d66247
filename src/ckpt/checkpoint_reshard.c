// SPDX-License-Identifier: MIT
/* Reading a checkpoint of either format by flat ranges: every parameter, and the optimizer state
 * of any list of ranges (this rank's shard under the current partition), whatever world size and
 * ZeRO stage wrote it. A full checkpoint holds parameter p's flat range [offset, offset + numel)
 * as tensor "<p>" in model.safetensors and "<p>.<state>" in optimizer.safetensors; a sharded one
 * holds each file's ranges concatenated in "params" and "<state>". Invariant: the reader writes
 * only into the caller's staging buffers, so a file refused halfway leaves the run untouched. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Copies the elements of the piece [lo, lo + len) (src, len floats) that fall inside the wanted
 * ranges to their place in dst (the wanted ranges' elements in order). */
static void scatter(float *dst, const ddpc_range *want, size_t n_want, size_t lo, size_t len,
                    const float *src)
{
    size_t at = 0;
    for (size_t i = 0; i < n_want; at += want[i].len, i++) {
        size_t a = lo > want[i].lo ? lo : want[i].lo;
        size_t b = min_size(lo + len, want[i].lo + want[i].len);
        if (a < b)
            memcpy(dst + at + (a - want[i].lo), src + (a - lo), (b - a) * sizeof *dst);
    }
}

/* An F32 tensor `name` of f with `numel` elements; with `t`, of t's shape as well. */
static ddpc_status find_f32(const ddpc_safetensors *f, const char *file, const char *name,
                            size_t numel, const ddpc__ckpt_tensor *t, ddpc_st_info *info)
{
    if (ddpc_safetensors_find(f, name, info) != DDPC_OK)
        return ddpc_errorf(DDPC_EFORMAT, "%s: no tensor '%s'", file, name);
    bool same = strcmp(info->dtype, "F32") == 0 && info->nbytes == numel * sizeof(float);
    if (t) {
        same = same && info->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = info->shape[d] == t->shape[d];
    } else {
        same = same && info->ndim == 1;
    }
    if (!same)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' is not F32 of %s %zu elements", file,
                           name, t ? "the parameter's shape and" : "1-D with", numel);
    return DDPC_OK;
}

/* The optimizer type and step count a file's metadata records must be state.json's. */
static ddpc_status check_meta(const ddpc_safetensors *f, const char *file,
                              const ddpc__ckpt_extra *x)
{
    const char *type = ddpc_safetensors_metadata(f, "optimizer");
    if (!type || strcmp(type, x->optim_type) != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: optimizer is %s, but state.json says %s", file,
                           type ? type : "unknown", x->optim_type);
    const char *steps = ddpc_safetensors_metadata(f, "step_count");
    if (!steps || strtoll(steps, NULL, 10) != x->optim_step_count || x->optim_step_count < 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: step_count %s differs from state.json's %" PRId64,
                           file, steps ? steps : "(missing)", x->optim_step_count);
    return DDPC_OK;
}

static ddpc_status open_part(const char *path, const char *name, char *file, size_t cap,
                             ddpc_safetensors **f)
{
    DDPC_TRY(ddpc__ckpt_join(file, cap, path, name));
    return ddpc_safetensors_open(f, file);
}

/* The model's buffers from f, each named prefix + its name, into w->buffer_data. */
static ddpc_status read_buffers(const ddpc_safetensors *f, const char *file, const char *prefix,
                                const ddpc__ckpt_want *w)
{
    for (size_t i = 0; i < w->n_buffers; i++) {
        const ddpc__ckpt_tensor *t = &w->buffers[i];
        char name[DDPC_PARAM_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        ddpc_st_info info;
        DDPC_TRY(find_f32(f, file, name, t->numel, t, &info));
        memcpy(w->buffer_data + t->offset, info.data, info.nbytes);
    }
    return DDPC_OK;
}

/* model.safetensors: exactly the table's tensors and the model's buffers, each of its shape. */
static ddpc_status read_model(const char *path, const ddpc__ckpt_want *w)
{
    char file[DDPC__CKPT_PATH_MAX];
    ddpc_safetensors *f = NULL;
    DDPC_TRY(open_part(path, DDPC__CKPT_MODEL, file, sizeof file, &f));
    ddpc_status s = DDPC_OK;
    if (ddpc_safetensors_count(f) != w->n_tensors + w->n_buffers)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: holds %zu tensors, but the model has %zu", file,
                        ddpc_safetensors_count(f), w->n_tensors + w->n_buffers);
    for (size_t i = 0; i < w->n_tensors && s == DDPC_OK; i++) {
        const ddpc__ckpt_tensor *t = &w->tensors[i];
        ddpc_st_info info;
        s = find_f32(f, file, t->name, t->numel, t, &info);
        if (s == DDPC_OK)
            memcpy(w->params + t->offset, info.data, info.nbytes);
    }
    if (s == DDPC_OK && w->buffer_data)
        s = read_buffers(f, file, "", w);
    ddpc_safetensors_close(f);
    return s;
}

/* optimizer.safetensors: one "<param>.<state>" per parameter and wanted state buffer. */
static ddpc_status read_optimizer(const char *path, const ddpc__ckpt_extra *x,
                                  const ddpc__ckpt_want *w)
{
    char file[DDPC__CKPT_PATH_MAX];
    ddpc_safetensors *f = NULL;
    DDPC_TRY(open_part(path, DDPC__CKPT_OPTIM, file, sizeof file, &f));
    ddpc_status s = check_meta(f, file, x);
    if (s == DDPC_OK && ddpc_safetensors_count(f) != w->n_tensors * w->ns)
        s = ddpc_errorf(DDPC_EFORMAT,
                        "%s: holds %zu tensors, but %s state for this model has "
                        "%zu",
                        file, ddpc_safetensors_count(f), x->optim_type, w->n_tensors * w->ns);
    for (size_t k = 0; k < w->ns && s == DDPC_OK; k++) {
        for (size_t i = 0; i < w->n_tensors && s == DDPC_OK; i++) {
            const ddpc__ckpt_tensor *t = &w->tensors[i];
            char name[DDPC_PARAM_NAME_MAX + 32];
            ddpc_st_info info;
            snprintf(name, sizeof name, "%s.%s", t->name, w->snames[k]);
            s = find_f32(f, file, name, t->numel, t, &info);
            if (s == DDPC_OK)
                scatter(w->state[k], w->ranges, w->n_ranges, t->offset, t->numel, info.data);
        }
    }
    ddpc_safetensors_close(f);
    return s;
}

/* Shard file i: "params" and each state buffer hold its ranges' elements in order. */
static ddpc_status read_shard(const char *path, const ddpc__ckpt_extra *x, size_t i,
                              const ddpc__ckpt_want *w)
{
    char file[DDPC__CKPT_PATH_MAX];
    ddpc_safetensors *f = NULL;
    DDPC_TRY(open_part(path, x->files[i].name, file, sizeof file, &f));
    const ddpc_range *r = x->ranges + x->first[i];
    size_t n = x->first[i + 1] - x->first[i], held = 0;
    for (size_t k = 0; k < n; k++)
        held += r[k].len;
    ddpc_st_info info;
    ddpc_status s = check_meta(f, file, x);
    size_t expect = 1 + w->ns + (i == 0 ? w->n_buffers : 0);
    if (s == DDPC_OK && w->ns && ddpc_safetensors_count(f) != expect)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: holds %zu tensors, but this %s shard has %zu", file,
                        ddpc_safetensors_count(f), x->optim_type, expect);
    if (s == DDPC_OK && i == 0 && w->buffer_data)
        s = read_buffers(f, file, DDPC__CKPT_SHARD_BUFFER_PREFIX, w);
    if (s == DDPC_OK)
        s = find_f32(f, file, DDPC__CKPT_SHARD_PARAMS, held, NULL, &info);
    for (size_t k = 0, at = 0; s == DDPC_OK && w->params && k < n; at += r[k].len, k++)
        memcpy(w->params + r[k].lo, (const float *)info.data + at, r[k].len * sizeof(float));
    for (size_t b = 0; b < w->ns && s == DDPC_OK; b++) {
        s = find_f32(f, file, w->snames[b], held, NULL, &info);
        for (size_t k = 0, at = 0; s == DDPC_OK && k < n; at += r[k].len, k++)
            scatter(w->state[b], w->ranges, w->n_ranges, r[k].lo, r[k].len,
                    (const float *)info.data + at);
    }
    ddpc_safetensors_close(f);
    return s;
}

ddpc_status ddpc__ckpt_read(const char *path, const ddpc__ckpt_extra *x, const ddpc__ckpt_want *w)
{
    if (x->zero_stage == 0) {
        if (w->params)
            DDPC_TRY(read_model(path, w));
        return w->ns ? read_optimizer(path, x, w) : DDPC_OK;
    }
    for (size_t i = 0; i < x->n_files; i++)
        DDPC_TRY(read_shard(path, x, i, w));
    return DDPC_OK;
}
