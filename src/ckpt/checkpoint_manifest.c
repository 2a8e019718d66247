// SPDX-License-Identifier: MIT
/* The layout part of state.json: which files a checkpoint has and, for a sharded one, the ZeRO
 * stage, the model's tensor table and the manifest of the flat ranges each shard file holds.
 * Invariant: a manifest that passes ddpc__ckpt_manifest_check names only plain file names of
 * this directory and holds every tensor element in exactly one file, so a reader can fill a
 * model from it without looking anywhere else. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ddpc__ckpt_extra_fini(ddpc__ckpt_extra *x)
{
    if (!x)
        return;
    ddpc_free(x->files);
    ddpc_free(x->tensors);
    ddpc_free(x->ranges);
    ddpc_free(x->first);
    memset(x, 0, sizeof *x);
}

/* {"bytes": N, "crc32": C} of file `name` in the "files" object. */
static ddpc_status parse_file(const ddpc__json *files, const char *name, const char *origin,
                              ddpc__ckpt_file *out)
{
    const ddpc__json *f = ddpc__json_get(files, name);
    int64_t bytes = 0, crc = 0;
    if (!f)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"files\" lacks %s", origin, name);
    DDPC_TRY(ddpc__ckpt_get_int(f, "bytes", origin, &bytes));
    DDPC_TRY(ddpc__ckpt_get_int(f, "crc32", origin, &crc));
    if (bytes < 0 || crc < 0 || crc > (int64_t)UINT32_MAX)
        return ddpc_errorf(DDPC_EFORMAT, "%s: bad size or crc32 for %s", origin, name);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->bytes = (uint64_t)bytes;
    out->crc = (uint32_t)crc;
    return DDPC_OK;
}

/* A non-negative integer that fits size_t, or DDPC_EFORMAT naming what. */
static ddpc_status get_size(const ddpc__json *v, const char *origin, const char *what, size_t *out)
{
    if (!v || v->type != DDPC__JSON_NUMBER || !v->is_int || v->integer < 0 ||
        (uint64_t)v->integer > SIZE_MAX / 8)
        return ddpc_errorf(DDPC_EFORMAT, "%s: %s is not a non-negative integer", origin, what);
    *out = (size_t)v->integer;
    return DDPC_OK;
}

/* "tensors": [{"name": N, "offset": O, "shape": [..]}, ...] */
static ddpc_status parse_tensors(const ddpc__json *a, const char *origin, ddpc__ckpt_extra *x)
{
    if (!a || a->type != DDPC__JSON_ARRAY || a->count == 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"tensors\" is missing or empty", origin);
    x->tensors = ddpc_calloc(a->count, sizeof *x->tensors);
    if (!x->tensors)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s", origin);
    x->n_tensors = a->count;
    for (size_t i = 0; i < a->count; i++) {
        const ddpc__json *e = &a->items[i], *name, *shape = ddpc__json_get(e, "shape");
        ddpc__ckpt_tensor *t = &x->tensors[i];
        DDPC_TRY(ddpc__ckpt_get_str(e, "name", origin, &name));
        if (name->str_len == 0 || name->str_len >= sizeof t->name)
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensor %zu has an empty or too long name", origin,
                               i);
        memcpy(t->name, name->str, name->str_len + 1);
        DDPC_TRY(get_size(ddpc__json_get(e, "offset"), origin, "a tensor's offset", &t->offset));
        if (!shape || shape->type != DDPC__JSON_ARRAY || shape->count > 4)
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' has no shape of at most 4 dims",
                               origin, t->name);
        t->ndim = (int)shape->count;
        t->numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            size_t n = 0;
            DDPC_TRY(get_size(&shape->items[d], origin, "a tensor's dimension", &n));
            if (n && t->numel > SIZE_MAX / 16 / n)
                return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' is too large", origin, t->name);
            t->shape[d] = (int64_t)n;
            t->numel *= n;
        }
    }
    return DDPC_OK;
}

/* Whether name is a plain file name of the checkpoint directory. */
static bool plain_name(const char *s, size_t len)
{
    return len > 0 && len < DDPC__CKPT_FILE_NAME_MAX && s[0] != '.' && !strchr(s, '/') &&
           strcmp(s, DDPC__CKPT_STATE) != 0;
}

/* "shards": [{"file": F, "ranges": [[lo, len], ...]}, ...] with F's entry in "files". */
static ddpc_status parse_shards(const ddpc__json *a, const ddpc__json *files, const char *origin,
                                ddpc__ckpt_extra *x)
{
    if (!a || a->type != DDPC__JSON_ARRAY || a->count == 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"shards\" is missing or empty", origin);
    if (files->count != a->count)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"files\" lists %zu files but \"shards\" %zu", origin,
                           files->count, a->count);
    size_t total = 0;
    for (size_t f = 0; f < a->count; f++) {
        const ddpc__json *r = ddpc__json_get(&a->items[f], "ranges");
        if (!r || r->type != DDPC__JSON_ARRAY)
            return ddpc_errorf(DDPC_EFORMAT, "%s: shard %zu has no \"ranges\" array", origin, f);
        total += r->count;
    }
    x->files = ddpc_calloc(a->count, sizeof *x->files);
    x->first = ddpc_calloc(a->count + 1, sizeof *x->first);
    x->ranges = ddpc_calloc(total ? total : 1, sizeof *x->ranges);
    if (!x->files || !x->first || !x->ranges)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s", origin);
    x->n_files = a->count;
    size_t k = 0;
    for (size_t f = 0; f < a->count; f++) {
        const ddpc__json *e = &a->items[f], *file, *r = ddpc__json_get(e, "ranges");
        DDPC_TRY(ddpc__ckpt_get_str(e, "file", origin, &file));
        if (!plain_name(file->str, file->str_len))
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: shard file name '%.80s' is not a plain file "
                               "name of the checkpoint",
                               origin, file->str);
        for (size_t g = 0; g < f; g++)
            if (strcmp(x->files[g].name, file->str) == 0)
                return ddpc_errorf(DDPC_EFORMAT, "%s: shard file %s is listed twice", origin,
                                   file->str);
        DDPC_TRY(parse_file(files, file->str, origin, &x->files[f]));
        x->first[f] = k;
        for (size_t i = 0; i < r->count; i++, k++) {
            const ddpc__json *p = &r->items[i];
            if (p->type != DDPC__JSON_ARRAY || p->count != 2)
                return ddpc_errorf(DDPC_EFORMAT, "%s: a range of %s is not [lo, len]", origin,
                                   file->str);
            DDPC_TRY(get_size(&p->items[0], origin, "a range's lo", &x->ranges[k].lo));
            DDPC_TRY(get_size(&p->items[1], origin, "a range's len", &x->ranges[k].len));
        }
    }
    x->first[a->count] = k;
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_manifest_parse(const ddpc__json *j, const char *origin, ddpc__ckpt_extra *x)
{
    const ddpc__json *files = ddpc__json_get(j, "files"), *stage = ddpc__json_get(j, "zero_stage");
    if (!files || files->type != DDPC__JSON_OBJECT)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"files\" is missing", origin);
    DDPC_TRY(ddpc__json_check_unique_keys(files, origin));
    if (!stage) { /* the full format: model and optimizer */
        static const char *const names[] = {DDPC__CKPT_MODEL, DDPC__CKPT_OPTIM};
        x->files = ddpc_calloc(2, sizeof *x->files);
        if (!x->files)
            return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s", origin);
        x->n_files = 2;
        for (size_t i = 0; i < 2; i++)
            DDPC_TRY(parse_file(files, names[i], origin, &x->files[i]));
        return DDPC_OK;
    }
    int64_t v;
    DDPC_TRY(ddpc__ckpt_get_int(j, "zero_stage", origin, &v));
    if (v < 1 || v > 3)
        return ddpc_errorf(DDPC_EFORMAT, "%s: zero_stage %lld is not 1, 2 or 3", origin,
                           (long long)v);
    x->zero_stage = (int)v;
    DDPC_TRY(parse_tensors(ddpc__json_get(j, "tensors"), origin, x));
    return parse_shards(ddpc__json_get(j, "shards"), files, origin, x);
}

static int by_lo(const void *a, const void *b)
{
    const ddpc_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

ddpc_status ddpc__ckpt_manifest_check(const ddpc__ckpt_extra *x, const char *origin)
{
    size_t n = x->first[x->n_files], np = (size_t)x->num_params;
    for (size_t t = 0; t < x->n_tensors; t++)
        if (x->tensors[t].offset > np || x->tensors[t].numel > np - x->tensors[t].offset)
            return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' lies outside the %zu parameters",
                               origin, x->tensors[t].name, np);
    for (size_t f = 0; f < x->n_files; f++)
        for (size_t k = x->first[f]; k < x->first[f + 1]; k++)
            if (x->ranges[k].lo > np || x->ranges[k].len > np - x->ranges[k].lo)
                return ddpc_errorf(DDPC_EFORMAT,
                                   "%s: %s holds range [%zu, %zu) outside the %zu "
                                   "parameters",
                                   origin, x->files[f].name, x->ranges[k].lo,
                                   x->ranges[k].lo + x->ranges[k].len, np);
    ddpc_range *r = ddpc_malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory checking %s", origin);
    memcpy(r, x->ranges, n * sizeof *r);
    qsort(r, n, sizeof *r, by_lo);
    ddpc_status s = DDPC_OK;
    for (size_t k = 1; k < n && s == DDPC_OK; k++)
        if (r[k - 1].lo + r[k - 1].len > r[k].lo)
            s = ddpc_errorf(DDPC_EFORMAT,
                            "%s: the shards' ranges overlap at parameter %zu "
                            "(corrupt manifest)",
                            origin, r[k].lo);
    /* Disjoint ranges: a tensor is held exactly once when their overlaps with it add up. */
    for (size_t t = 0; t < x->n_tensors && s == DDPC_OK; t++) {
        size_t lo = x->tensors[t].offset, hi = lo + x->tensors[t].numel, held = 0;
        for (size_t k = 0; k < n && r[k].lo < hi; k++) {
            size_t a = r[k].lo > lo ? r[k].lo : lo, b = r[k].lo + r[k].len;
            held += b > a ? (b < hi ? b : hi) - a : 0;
        }
        if (held != hi - lo)
            s = ddpc_errorf(DDPC_EFORMAT,
                            "%s: the shards hold %zu of the %zu elements of tensor "
                            "'%s' (incomplete manifest)",
                            origin, held, hi - lo, x->tensors[t].name);
    }
    ddpc_free(r);
    return s;
}

ddpc_status ddpc_ckpt_layout(const char *path, int *zero_stage, ddpc_ckpt_shard_info **out,
                             size_t *n)
{
    if (!path || !zero_stage || !out || !n)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint layout: NULL argument");
    *out = NULL;
    *n = 0;
    ddpc_ckpt_state s;
    ddpc__ckpt_extra x;
    ddpc_status st = ddpc__ckpt_state_load(path, &s, &x);
    ddpc_ckpt_state_fini(&s);
    *zero_stage = x.zero_stage;
    if (st == DDPC_OK && x.zero_stage > 0) {
        *out = ddpc_calloc(x.n_files, sizeof **out);
        if (!*out)
            st = ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s", path);
        for (size_t f = 0; *out && f < x.n_files; f++) {
            ddpc_ckpt_shard_info *e = &(*out)[f];
            snprintf(e->file, sizeof e->file, "%s", x.files[f].name);
            e->n_ranges = x.first[f + 1] - x.first[f];
            for (size_t k = x.first[f]; k < x.first[f + 1]; k++)
                e->floats += x.ranges[k].len;
        }
        *n = *out ? x.n_files : 0;
    }
    ddpc__ckpt_extra_fini(&x);
    return st;
}
