// SPDX-License-Identifier: MIT
/* Model tensors (parameters, then buffers) <-> safetensors. Load validates the whole file against
 * the model before it copies anything, so a refused file leaves the parameters untouched; a
 * non-strict load copies exactly the tensors whose name, dtype (F32) and shape match, and reports
 * the rest. A seq2seq model's vocabulary digests travel in __metadata__, so ids keep meaning. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>
#include <ddpc/models.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tensors a weights file holds: the parameters, then the model's buffers. */
static size_t n_entries(const ddpc_model *m)
{
    return ddpc_model_num_tensors(m) + ddpc_model_num_buffers(m);
}

static const ddpc_param *entry(const ddpc_model *m, size_t i)
{
    size_t nt = ddpc_model_num_tensors(m);
    return i < nt ? ddpc_model_tensor(m, i) : ddpc_model_buffer(m, i - nt);
}

/* Where entry i's values live: in `params` (parameter layout) or the model's buffer data. */
static float *entry_data(ddpc_model *m, float *params, size_t i)
{
    const ddpc_param *p = entry(m, i);
    return (i < ddpc_model_num_tensors(m) ? params : ddpc_model_buffer_data(m)) + p->offset;
}

static ddpc_status save(const ddpc_model *m, const float *buffer, bool with_buffers,
                        const char *path)
{
    size_t n = with_buffers ? n_entries(m) : ddpc_model_num_tensors(m);
    ddpc_st_tensor *ts = ddpc_calloc(n ? n : 1, sizeof *ts);
    if (!ts)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory saving '%s'", path);
    for (size_t i = 0; i < n; i++) {
        const ddpc_param *p = entry(m, i);
        ts[i].name = p->name;
        ts[i].ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++)
            ts[i].shape[d] = p->shape[d];
        /* entry_data only reads here: the cast does not let anything write m. */
        ts[i].data = entry_data((ddpc_model *)m, (float *)buffer, i);
    }
    const ddpc_seq2seq_config *s2s = ddpc_seq2seq_config_of(m); /* NULL: no vocabularies */
    bool digests = s2s && s2s->vocab_digests;
    char src[16], tgt[16];
    snprintf(src, sizeof src, "%08" PRIx32, digests ? s2s->src_vocab_digest : 0);
    snprintf(tgt, sizeof tgt, "%08" PRIx32, digests ? s2s->tgt_vocab_digest : 0);
    const char *keys[] = {"format", "model", DDPC_WEIGHTS_META_SRC_VOCAB,
                          DDPC_WEIGHTS_META_TGT_VOCAB};
    const char *values[] = {"pt", ddpc_model_config_of(m)->type, src, tgt};
    ddpc_status s = ddpc_safetensors_write(path, ts, n, keys, values, digests ? 4 : 2);
    ddpc_free(ts);
    return s;
}

ddpc_status ddpc_weights_save(const ddpc_model *m, const float *buffer, const char *path)
{
    return save(m, buffer, false, path);
}

ddpc_status ddpc_weights_save_model(const ddpc_model *m, const char *path)
{
    /* Only read: the cast does not let anything write m. */
    return save(m, ddpc_model_params((ddpc_model *)m), true, path);
}

/* The vocabulary digests f records must be the model's; a file without them passes. */
static ddpc_status check_vocab(const ddpc_model *m, const ddpc_safetensors *f, const char *file)
{
    const ddpc_seq2seq_config *s2s = ddpc_seq2seq_config_of(m); /* NULL: no vocabularies */
    if (!s2s || !s2s->vocab_digests)
        return DDPC_OK;
    static const char *const side[2] = {"source", "target"};
    const char *key[2] = {DDPC_WEIGHTS_META_SRC_VOCAB, DDPC_WEIGHTS_META_TGT_VOCAB};
    uint32_t mine[2] = {s2s->src_vocab_digest, s2s->tgt_vocab_digest};
    for (int i = 0; i < 2; i++) {
        const char *v = ddpc_safetensors_metadata(f, key[i]);
        char want[16];
        snprintf(want, sizeof want, "%08" PRIx32, mine[i]);
        if (v && strcmp(v, want) != 0)
            return ddpc_errorf(DDPC_EINVAL,
                               "%s was trained with another %s vocabulary (digest %s) than the one "
                               "in use (%s): its token ids would mean other tokens",
                               file, side[i], v, want);
    }
    return DDPC_OK;
}

/* path itself, or a checkpoint directory's model.safetensors. */
static bool exists(const char *dir, const char *name)
{
    char p[DDPC__CKPT_PATH_MAX];
    return (size_t)snprintf(p, sizeof p, "%s/%s", dir, name) < sizeof p && access(p, F_OK) == 0;
}

/* The weights file a path names: a safetensors file itself; a checkpoint directory's
 * model.safetensors; a run's checkpoint root (it holds `latest`): its newest complete
 * checkpoint's, as resuming picks it. A ZeRO-sharded checkpoint has no model.safetensors: refused
 * with the command that consolidates it. */
static ddpc_status file_of(const char *path, char *file, size_t cap)
{
    struct stat st;
    char dir[DDPC__CKPT_PATH_MAX];
    int w = snprintf(dir, sizeof dir, "%s", path);
    if (w < 0 || (size_t)w >= sizeof dir)
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long", path);
    bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (is_dir && exists(path, DDPC__CKPT_LATEST)) {
        bool found = false;
        DDPC_TRY(ddpc_ckpt_find_latest(path, dir, sizeof dir, &found));
        if (!found)
            return ddpc_errorf(DDPC_EIO, "%s: no complete checkpoint to initialise from "
                               "(`ddpc ckpt ls %s` shows why)", path, path);
    }
    if (is_dir && !exists(dir, DDPC__CKPT_MODEL) && exists(dir, DDPC__CKPT_STATE))
        return ddpc_errorf(DDPC_EINVAL, "%s/%s: not there: %s is a ZeRO-sharded checkpoint; "
                           "consolidate it first with `ddpc ckpt export %s OUT.safetensors`, then "
                           "init_from=OUT.safetensors", dir, DDPC__CKPT_MODEL, dir, dir);
    w = is_dir ? snprintf(file, cap, "%s/%s", dir, DDPC__CKPT_MODEL)
               : snprintf(file, cap, "%s", path);
    if (w < 0 || (size_t)w >= cap)
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long", path);
    return DDPC_OK;
}

ddpc_status ddpc_weights_check_vocab(const ddpc_model *m, const char *path)
{
    char file[4096];
    DDPC_TRY(file_of(path, file, sizeof file));
    const ddpc_seq2seq_config *s2s = ddpc_seq2seq_config_of(m);
    if (!s2s || !s2s->vocab_digests || access(file, F_OK) != 0)
        return DDPC_OK;
    ddpc_safetensors *f = NULL;
    DDPC_TRY(ddpc_safetensors_open(&f, file));
    ddpc_status s = check_vocab(m, f, file);
    ddpc_safetensors_close(f);
    return s;
}

static bool same_tensor(const ddpc_param *p, const ddpc_st_info *info)
{
    bool same = strcmp(info->dtype, "F32") == 0 && info->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = info->shape[d] == p->shape[d];
    return same;
}

/* "(12, 9)" (torch.Size's numbers), after a space when `spaced` (it follows a dtype). */
static const char *shape_text(char *buf, size_t cap, const int64_t *shape, int ndim, bool spaced)
{
    size_t len = (size_t)snprintf(buf, cap, "%s(", spaced ? " " : "");
    for (int d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, ")");
    return buf;
}

/* One "label: a, b" list of a report, truncated with "..." when the buffer is full. */
typedef struct {
    char *buf;
    size_t cap, len;
} report_buf;

static void report_add(report_buf *r, const char *label, const char *name, bool *first)
{
    if (!r->cap)
        return;
    int w = snprintf(r->buf + r->len, r->cap - r->len, "%s%s", *first ? (r->len ? "; " : "") : ", ",
                     *first ? label : "");
    if (w >= 0 && (size_t)w < r->cap - r->len)
        r->len += (size_t)w;
    w = snprintf(r->buf + r->len, r->cap - r->len, "%s", name);
    if (w >= 0 && (size_t)w < r->cap - r->len)
        r->len += (size_t)w;
    else if (r->cap >= 4) {
        r->len = r->cap - 1;
        memcpy(r->buf + r->cap - 4, "...", 4);
    }
    *first = false;
}

/* Compares file and model; fills the report ("missing: ..; unexpected: ..; shape mismatch: ..",
 * a mismatch as "fc.0.weight (file (12, 9), model (4, 9))")
 * and returns how many model tensors match. */
static size_t compare(ddpc_model *m, const ddpc_safetensors *f, report_buf *r, size_t *problems)
{
    size_t n = n_entries(m), matched = 0;
    bool first = true;
    ddpc_st_info info;
    *problems = 0;
    for (size_t i = 0; i < n; i++) {
        const ddpc_param *p = entry(m, i);
        if (ddpc_safetensors_find(f, p->name, &info) != DDPC_OK) {
            report_add(r, "missing: ", p->name, &first);
            ++*problems;
        }
    }
    first = true;
    for (size_t j = 0; j < ddpc_safetensors_count(f); j++) {
        ddpc_safetensors_info(f, j, &info);
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(entry(m, i)->name, info.name) == 0;
        if (!known) {
            report_add(r, "unexpected: ", info.name, &first);
            ++*problems;
        }
    }
    first = true;
    for (size_t i = 0; i < n; i++) {
        const ddpc_param *p = entry(m, i);
        if (ddpc_safetensors_find(f, p->name, &info) != DDPC_OK)
            continue;
        if (same_tensor(p, &info))
            matched++;
        else {
            char what[DDPC_PARAM_NAME_MAX + 160], fs[64], ms[64];
            snprintf(what, sizeof what, "%s (file %s%s, model %s)", p->name,
                     strcmp(info.dtype, "F32") ? info.dtype : "", /* dtype only when it differs */
                     shape_text(fs, sizeof fs, info.shape, info.ndim, strcmp(info.dtype, "F32")),
                     shape_text(ms, sizeof ms, p->shape, p->ndim, false));
            report_add(r, "shape mismatch: ", what, &first);
            ++*problems;
        }
    }
    return matched;
}

ddpc_status ddpc_weights_load_opts(ddpc_model *m, const char *path, bool strict, char *report,
                                   size_t cap)
{
    if (report && cap)
        report[0] = '\0';
    if (!m || !path)
        return ddpc_errorf(DDPC_EINVAL, "weights load: model or path is NULL");
    char file[4096];
    DDPC_TRY(file_of(path, file, sizeof file));
    ddpc_safetensors *f = NULL;
    DDPC_TRY(ddpc_safetensors_open(&f, file));
    ddpc_status vs = check_vocab(m, f, file);
    if (vs != DDPC_OK) {
        ddpc_safetensors_close(f);
        return vs;
    }
    char text[700];
    report_buf r = {text, sizeof text, 0};
    text[0] = '\0';
    size_t problems;
    size_t matched = compare(m, f, &r, &problems);
    ddpc_status s = DDPC_OK;
    if (strict && problems)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: does not match the model: %s", file, text);
    else if (!strict && matched == 0 && n_entries(m) > 0)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: no tensor matches the model: %s", file, text);
    for (size_t i = 0; i < n_entries(m) && s == DDPC_OK; i++) {
        const ddpc_param *p = entry(m, i);
        ddpc_st_info info;
        if (ddpc_safetensors_find(f, p->name, &info) == DDPC_OK && same_tensor(p, &info))
            memcpy(entry_data(m, ddpc_model_params(m), i), info.data, p->numel * sizeof(float));
    }
    if (s == DDPC_OK && report && cap) {
        snprintf(report, cap, "%s", text);
        if (strlen(text) >= cap && cap >= 4)
            memcpy(report + cap - 4, "...", 4);
    }
    ddpc_safetensors_close(f);
    return s;
}

ddpc_status ddpc_weights_load(ddpc_model *m, const char *path)
{
    return ddpc_weights_load_opts(m, path, true, NULL, 0);
}
