// SPDX-License-Identifier: MIT
/* Reading a checkpoint back: ddpc_ckpt_load_shard (model, the optimizer state of any flat ranges,
 * counters; either format, any world size and ZeRO stage), ddpc_ckpt_load (all of it) and
 * ddpc_ckpt_export (the parameters as one safetensors file). Invariant: load is all-or-nothing:
 * the checkpoint is verified and read into staging buffers, which are copied into the model and
 * the optimizer only once everything was checked, so a refused checkpoint leaves the run as it
 * was. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model's tensor table, or with buffers its buffer table (ddpc_malloc'd). */
static ddpc_status model_table(const ddpc_model *m, bool buffers, ddpc__ckpt_tensor **out)
{
    size_t nt = buffers ? ddpc_model_num_buffers(m) : ddpc_model_num_tensors(m);
    *out = ddpc_calloc(nt ? nt : 1, sizeof **out);
    if (!*out)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the model's tensor table");
    for (size_t i = 0; i < nt; i++) {
        const ddpc_param *p = buffers ? ddpc_model_buffer(m, i) : ddpc_model_tensor(m, i);
        ddpc__ckpt_tensor *t = &(*out)[i];
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->ndim = p->ndim;
        memcpy(t->shape, p->shape, sizeof t->shape);
        t->offset = p->offset;
        t->numel = p->numel;
    }
    return DDPC_OK;
}

/* The model of the checkpoint must be m: type, size and (sharded) the tensor table. */
static ddpc_status check_model(const char *origin, const ddpc__ckpt_extra *x, const ddpc_model *m,
                               const ddpc__ckpt_tensor *table)
{
    const char *type = ddpc_model_config_of(m)->type;
    size_t nt = ddpc_model_num_tensors(m);
    if (strcmp(x->model_type, type) != 0 || x->num_params != (int64_t)ddpc_model_num_params(m))
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: holds a %s model of %" PRId64 " parameters, but "
                           "the run has a %s model of %zu",
                           origin, x->model_type, x->num_params, type, ddpc_model_num_params(m));
    if (x->zero_stage == 0)
        return DDPC_OK; /* model.safetensors is checked tensor by tensor */
    if (x->n_tensors != nt)
        return ddpc_errorf(DDPC_EFORMAT, "%s: records %zu tensors, but the model has %zu", origin,
                           x->n_tensors, nt);
    for (size_t i = 0; i < nt; i++) {
        const ddpc__ckpt_tensor *a = &x->tensors[i], *b = &table[i];
        bool same = strcmp(a->name, b->name) == 0 && a->offset == b->offset && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++)
            same = a->shape[d] == b->shape[d];
        if (!same)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: tensor %zu is '%s' at offset %zu, but the "
                               "model's is '%s' at %zu (or their shapes differ)",
                               origin, i, a->name, a->offset, b->name, b->offset);
    }
    return DDPC_OK;
}

/* Ranges inside [0, np), ascending and disjoint; *owned gets their total. */
static ddpc_status check_ranges(const ddpc_range *r, size_t n, size_t np, size_t *owned)
{
    *owned = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo > np || r[i].len > np - r[i].lo || (i && r[i].lo < r[i - 1].lo + r[i - 1].len))
            return ddpc_errorf(DDPC_EINVAL,
                               "checkpoint load: range %zu [%zu, +%zu) is outside "
                               "the %zu parameters or not ascending",
                               i, r[i].lo, r[i].len, np);
        *owned += r[i].len;
    }
    return DDPC_OK;
}

/* The staging buffers of w (params from the model's, state zero) and their release. */
static ddpc_status stage(ddpc__ckpt_want *w, ddpc_model *m, ddpc_optim *o, size_t owned)
{
    size_t np = ddpc_model_num_params(m);
    w->params = ddpc_malloc((np ? np : 1) * sizeof(float));
    if (!w->params)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory staging %zu parameters", np);
    memcpy(w->params, ddpc_model_params(m), np * sizeof(float));
    size_t nb = ddpc_model_num_buffer_floats(m);
    if (nb) {
        w->buffer_data = ddpc_malloc(nb * sizeof(float));
        if (!w->buffer_data)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory staging the model's buffers");
    }
    w->ns = o ? ddpc_optim_num_state(o) : 0;
    for (size_t k = 0; k < w->ns; k++) {
        ddpc_optim_state(o, k, &w->snames[k]);
        w->state[k] = ddpc_calloc(owned ? owned : 1, sizeof(float));
        if (!w->state[k])
            return ddpc_errorf(DDPC_ENOMEM, "out of memory staging the optimizer state");
    }
    return DDPC_OK;
}

static void unstage(ddpc__ckpt_want *w)
{
    ddpc_free(w->params);
    ddpc_free(w->buffer_data);
    for (size_t k = 0; k < DDPC__CKPT_MAX_STATE; k++)
        ddpc_free(w->state[k]);
}

ddpc_status ddpc_ckpt_load_shard(const char *path, ddpc_model *m, ddpc_optim *o,
                                 const ddpc_range *ranges, size_t n_ranges, ddpc_ckpt_state *s)
{
    if (!path || !m || (ranges == NULL && n_ranges))
        return ddpc_errorf(DDPC_EINVAL, "checkpoint load: path, model or ranges is NULL");
    size_t np = ddpc_model_num_params(m), owned = 0;
    ddpc_range whole = {0, np};
    if (o && !ranges) {
        if (ddpc_optim_numel(o) != np)
            return ddpc_errorf(DDPC_EINVAL,
                               "checkpoint load: the optimizer holds %zu parameters "
                               "but the model has %zu",
                               ddpc_optim_numel(o), np);
        ranges = &whole;
        n_ranges = 1;
    }
    DDPC_TRY(check_ranges(ranges, o ? n_ranges : 0, np, &owned));
    if (o && (owned > ddpc_optim_numel(o) || ddpc_optim_num_state(o) > DDPC__CKPT_MAX_STATE))
        return ddpc_errorf(DDPC_EINVAL,
                           "checkpoint load: the ranges hold %zu elements, but the "
                           "optimizer only %zu",
                           owned, ddpc_optim_numel(o));
    DDPC_TRY(ddpc_ckpt_verify(path));
    ddpc_ckpt_state st;
    ddpc__ckpt_extra x;
    ddpc__ckpt_want w = {.ranges = ranges, .n_ranges = o ? n_ranges : 0};
    ddpc__ckpt_tensor *table = NULL, *btable = NULL;
    char origin[DDPC__CKPT_PATH_MAX];
    ddpc_status r = ddpc__ckpt_state_load(path, &st, &x);
    if (r == DDPC_OK)
        r = model_table(m, false, &table);
    if (r == DDPC_OK)
        r = model_table(m, true, &btable);
    if (r == DDPC_OK)
        r = ddpc__ckpt_join(origin, sizeof origin, path, DDPC__CKPT_STATE);
    if (r == DDPC_OK)
        r = check_model(origin, &x, m, table);
    const char *want = o ? ddpc_optim_type_name(ddpc_optim_config_of(o)->type) : "";
    if (r == DDPC_OK && o && strcmp(x.optim_type, want) != 0)
        r = ddpc_errorf(DDPC_EFORMAT, "%s: optimizer is %s, but the run uses %s", origin,
                        x.optim_type, want);
    w.tensors = table;
    w.n_tensors = ddpc_model_num_tensors(m);
    w.buffers = btable;
    w.n_buffers = ddpc_model_num_buffers(m);
    if (r == DDPC_OK)
        r = stage(&w, m, o, owned);
    if (r == DDPC_OK)
        r = ddpc__ckpt_read(path, &x, &w);
    if (r == DDPC_OK) { /* nothing can fail from here */
        memcpy(ddpc_model_params(m), w.params, np * sizeof(float));
        if (w.buffer_data)
            memcpy(ddpc_model_buffer_data(m), w.buffer_data,
                   ddpc_model_num_buffer_floats(m) * sizeof(float));
        for (size_t k = 0; k < w.ns; k++)
            memcpy(ddpc_optim_state(o, k, NULL), w.state[k], owned * sizeof(float));
        if (o)
            ddpc_optim_set_step_count(o, x.optim_step_count);
    }
    unstage(&w);
    ddpc_free(table);
    ddpc_free(btable);
    ddpc__ckpt_extra_fini(&x);
    if (r == DDPC_OK && s)
        *s = st;
    else
        ddpc_ckpt_state_fini(&st);
    return r;
}

ddpc_status ddpc_ckpt_load(const char *path, ddpc_model *m, ddpc_optim *o, ddpc_ckpt_state *s)
{
    return ddpc_ckpt_load_shard(path, m, o, NULL, 0, s);
}

/* The tensors of a sharded checkpoint consolidated into one buffer and written under the names
 * and shapes of its tensor table. */
static ddpc_status export_sharded(const char *path, const ddpc__ckpt_extra *x, const char *out,
                                  const char *const *keys, const char *const *vals)
{
    ddpc__ckpt_want w = {.tensors = x->tensors, .n_tensors = x->n_tensors};
    w.params = ddpc_calloc(x->num_params > 0 ? (size_t)x->num_params : 1, sizeof(float));
    ddpc_st_tensor *ts = ddpc_calloc(x->n_tensors, sizeof *ts);
    ddpc_status r = DDPC_OK;
    if (!w.params || !ts)
        r = ddpc_errorf(DDPC_ENOMEM, "out of memory exporting %s", path);
    if (r == DDPC_OK)
        r = ddpc__ckpt_read(path, x, &w);
    for (size_t i = 0; r == DDPC_OK && i < x->n_tensors; i++) {
        const ddpc__ckpt_tensor *t = &x->tensors[i];
        ts[i] = (ddpc_st_tensor){.name = t->name, .ndim = t->ndim, .data = w.params + t->offset};
        memcpy(ts[i].shape, t->shape, sizeof t->shape);
    }
    ddpc_safetensors *f0 = NULL;
    char file[DDPC__CKPT_PATH_MAX];
    if (r == DDPC_OK && x->n_files)
        r = ddpc__ckpt_join(file, sizeof file, path, x->files[0].name);
    if (r == DDPC_OK && x->n_files)
        r = ddpc_safetensors_open(&f0, file);
    size_t n = x->n_tensors, plen = strlen(DDPC__CKPT_SHARD_BUFFER_PREFIX);
    for (size_t j = 0; r == DDPC_OK && f0 && j < ddpc_safetensors_count(f0); j++) {
        ddpc_st_info info; /* rank 0's buffers, under their own names */
        ddpc_safetensors_info(f0, j, &info);
        if (strncmp(info.name, DDPC__CKPT_SHARD_BUFFER_PREFIX, plen) != 0)
            continue;
        ddpc_st_tensor *grown = ddpc_malloc((n + 1) * sizeof *grown);
        if (!grown) {
            r = ddpc_errorf(DDPC_ENOMEM, "out of memory exporting %s", path);
            break;
        }
        memcpy(grown, ts, n * sizeof *ts);
        ddpc_free(ts);
        ts = grown;
        ts[n] = (ddpc_st_tensor){.name = info.name + plen, .ndim = info.ndim, .data = info.data};
        memcpy(ts[n].shape, info.shape, sizeof info.shape);
        n++;
    }
    if (r == DDPC_OK)
        r = ddpc_safetensors_write(out, ts, n, keys, vals, 3);
    ddpc_safetensors_close(f0);
    ddpc_free(ts);
    ddpc_free(w.params);
    return r;
}

/* model.safetensors of a full checkpoint, copied tensor by tensor. */
static ddpc_status export_full(const char *path, const char *out, const char *const *keys,
                               const char *const *vals)
{
    char file[DDPC__CKPT_PATH_MAX];
    DDPC_TRY(ddpc__ckpt_join(file, sizeof file, path, DDPC__CKPT_MODEL));
    ddpc_safetensors *f = NULL;
    DDPC_TRY(ddpc_safetensors_open(&f, file));
    size_t n = ddpc_safetensors_count(f);
    ddpc_st_tensor *ts = ddpc_calloc(n ? n : 1, sizeof *ts);
    ddpc_status r = ts ? DDPC_OK : ddpc_errorf(DDPC_ENOMEM, "out of memory exporting %s", path);
    for (size_t i = 0; i < n && r == DDPC_OK; i++) {
        ddpc_st_info info;
        ddpc_safetensors_info(f, i, &info);
        if (strcmp(info.dtype, "F32") != 0) {
            r = ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' is %s, not F32", file, info.name,
                            info.dtype);
            break;
        }
        ts[i].name = info.name;
        ts[i].ndim = info.ndim;
        memcpy(ts[i].shape, info.shape, sizeof info.shape);
        ts[i].data = info.data;
    }
    if (r == DDPC_OK)
        r = ddpc_safetensors_write(out, ts, n, keys, vals, 3);
    ddpc_free(ts);
    ddpc_safetensors_close(f);
    return r;
}

ddpc_status ddpc_ckpt_export(const char *path, const char *out_file)
{
    if (!path || !out_file)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint export: path or output is NULL");
    DDPC_TRY(ddpc_ckpt_verify(path));
    ddpc_ckpt_state st;
    ddpc__ckpt_extra x;
    ddpc_status r = ddpc__ckpt_state_load(path, &st, &x);
    ddpc_ckpt_state_fini(&st);
    char step[32];
    snprintf(step, sizeof step, "%" PRId64, st.step);
    const char *keys[] = {"format", "model", "step"};
    const char *vals[] = {"pt", x.model_type, step};
    if (r == DDPC_OK)
        r = x.zero_stage ? export_sharded(path, &x, out_file, keys, vals)
                         : export_full(path, out_file, keys, vals);
    ddpc__ckpt_extra_fini(&x);
    return r;
}
