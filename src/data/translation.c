// SPDX-License-Identifier: MIT
/* Translation pairs from two line-aligned text files, encoded with fixed vocabularies, and their
 * padded batches. Invariant: every kept sample fits max_len (source ids + <eos>, target ids + 1
 * decoder positions), and d->shape holds the longest of each, so a batch padded to its own longest
 * rows never exceeds the shape the loader allocated for. */
#include "data/dataset_impl.h"
#include "data/textfile.h"

#include <ddpc/alloc.h>
#include <ddpc/vocab.h>

#include <string.h>

/* A growable id stream with per-sample offsets. */
typedef struct {
    int32_t *ids;
    int64_t *off; /* (n + 1) */
    int64_t n_ids, cap_ids, n, cap;
} id_stream;

static void stream_free(id_stream *s)
{
    ddpc_free(s->ids);
    ddpc_free(s->off);
}

/* Makes room for `more` ids and one more sample. */
static ddpc_status stream_reserve(id_stream *s, int64_t more)
{
    if (s->n_ids + more > s->cap_ids) {
        int64_t cap = s->cap_ids ? 2 * s->cap_ids : 4096;
        while (cap < s->n_ids + more)
            cap *= 2;
        int32_t *p = ddpc_malloc((size_t)cap * sizeof *p);
        if (!p)
            return ddpc_errorf(DDPC_ENOMEM, "translation dataset: out of memory for %lld ids",
                               (long long)cap);
        if (s->n_ids)
            memcpy(p, s->ids, (size_t)s->n_ids * sizeof *p);
        ddpc_free(s->ids);
        s->ids = p;
        s->cap_ids = cap;
    }
    if (s->n + 2 > s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 1024;
        int64_t *p = ddpc_malloc((size_t)cap * sizeof *p);
        if (!p)
            return ddpc_errorf(DDPC_ENOMEM, "translation dataset: out of memory for %lld samples",
                               (long long)cap);
        p[0] = 0;
        if (s->n)
            memcpy(p, s->off, (size_t)(s->n + 1) * sizeof *p);
        ddpc_free(s->off);
        s->off = p;
        s->cap = cap;
    }
    return DDPC_OK;
}

/* Appends the line's ids (and <eos> when eos) as one sample; *len = the line's token count. */
static ddpc_status stream_add(id_stream *s, const ddpc_vocab *v, const char *line, size_t n,
                              bool eos, int64_t *len)
{
    int64_t k;
    char stack[512];
    /* encode reads up to a NUL or newline: the textfile line ends at '\n', or at '\r' + '\n'. */
    const char *text = line;
    char *heap = NULL;
    if (line[n] != '\n' && line[n] != '\0') {
        heap = n < sizeof stack ? stack : ddpc_malloc(n + 1);
        if (!heap)
            return ddpc_errorf(DDPC_ENOMEM, "translation dataset: out of memory for a line");
        memcpy(heap, line, n);
        heap[n] = '\0';
        text = heap;
    }
    ddpc_vocab_encode(v, text, NULL, 0, &k);
    ddpc_status st = stream_reserve(s, k + 1);
    if (st == DDPC_OK) {
        int64_t got;
        ddpc_vocab_encode(v, text, s->ids + s->n_ids, k, &got);
        s->n_ids += k;
        if (eos)
            s->ids[s->n_ids++] = DDPC_TOK_EOS;
        s->off[++s->n] = s->n_ids;
    }
    if (heap != stack)
        ddpc_free(heap);
    *len = k;
    return st;
}

/* Drops the stream's last sample. */
static void stream_pop(id_stream *s)
{
    s->n--;
    s->n_ids = s->off[s->n];
}

typedef struct {
    const char *src_path, *tgt_path;
    const ddpc_vocab *sv, *tv;
    int64_t max_len;
    bool drop_long;
} pair_args;

/* Encodes every line pair of the two files into the streams. */
static ddpc_status read_pairs(const pair_args *a, ddpc__textfile *fs, ddpc__textfile *ft,
                              id_stream *src, id_stream *tgt, int64_t *dropped)
{
    int64_t ns = ddpc__textfile_count_lines(fs), nt = ddpc__textfile_count_lines(ft);
    if (ns != nt)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s has %lld lines but %s has %lld: they must be line-aligned",
                           a->src_path, (long long)ns, a->tgt_path, (long long)nt);
    const char *ls, *lt;
    size_t n_s, n_t;
    while (ddpc__textfile_next(fs, &ls, &n_s) && ddpc__textfile_next(ft, &lt, &n_t)) {
        int64_t ks, kt;
        DDPC_TRY(stream_add(src, a->sv, ls, n_s, true, &ks));
        DDPC_TRY(stream_add(tgt, a->tv, lt, n_t, false, &kt));
        if (ks + 1 <= a->max_len && kt + 1 <= a->max_len)
            continue;
        if (!a->drop_long)
            return ddpc_errorf(DDPC_EINVAL,
                               "%s:%lld: the pair has %lld source and %lld target tokens; with "
                               "<eos>/<bos> both must fit max_len %lld",
                               ks + 1 > a->max_len ? a->src_path : a->tgt_path, (long long)fs->line,
                               (long long)ks, (long long)kt, (long long)a->max_len);
        stream_pop(src);
        stream_pop(tgt);
        (*dropped)++;
    }
    if (src->n == 0 && *dropped)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s: none of its %lld pairs fits max_len %lld (source tokens + <eos> "
                           "and target tokens + 1 must both fit)",
                           a->src_path, (long long)*dropped, (long long)a->max_len);
    if (src->n == 0)
        return ddpc_errorf(DDPC_EINVAL, "%s: no pair (empty file)", a->src_path);
    return DDPC_OK;
}

/* Shape = (longest source with <eos>, longest target + 1, 1). */
static void set_shape(ddpc_dataset *d)
{
    int64_t s = 1, t = 1;
    for (int64_t i = 0; i < d->n; i++) {
        int64_t ls = d->src_off[i + 1] - d->src_off[i], lt = d->tgt_off[i + 1] - d->tgt_off[i] + 1;
        s = ls > s ? ls : s;
        t = lt > t ? lt : t;
    }
    d->shape[0] = s;
    d->shape[1] = t;
    d->shape[2] = 1;
}

ddpc_status ddpc_dataset_translation_create(ddpc_dataset **out, const char *src_path,
                                            const char *tgt_path, const ddpc_vocab *src_vocab,
                                            const ddpc_vocab *tgt_vocab, int64_t max_len,
                                            bool drop_long, int64_t *dropped)
{
    *out = NULL;
    int64_t drops = 0;
    if (dropped)
        *dropped = 0;
    if (!src_path || !tgt_path || !src_vocab || !tgt_vocab)
        return ddpc_errorf(DDPC_EINVAL,
                           "translation dataset: needs two paths and two vocabularies");
    if (max_len < 2)
        return ddpc_errorf(DDPC_EINVAL, "translation dataset: max_len must be >= 2, got %lld",
                           (long long)max_len);
    pair_args a = {src_path, tgt_path, src_vocab, tgt_vocab, max_len, drop_long};
    ddpc__textfile fs, ft = {0};
    id_stream src = {0}, tgt = {0};
    ddpc_status st = ddpc__textfile_read(&fs, src_path);
    if (st == DDPC_OK)
        st = ddpc__textfile_read(&ft, tgt_path);
    if (st == DDPC_OK)
        st = read_pairs(&a, &fs, &ft, &src, &tgt, &drops);
    ddpc__textfile_free(&fs);
    ddpc__textfile_free(&ft);
    ddpc_dataset *d = st == DDPC_OK ? ddpc__dataset_alloc(DDPC_DATASET_PAIRS) : NULL;
    if (st == DDPC_OK && !d)
        st = ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the dataset", src_path);
    if (st != DDPC_OK) {
        stream_free(&src);
        stream_free(&tgt);
        return st;
    }
    d->n = src.n;
    d->classes = ddpc_vocab_size(tgt_vocab);
    d->src_ids = src.ids, d->src_off = src.off;
    d->tgt_ids = tgt.ids, d->tgt_off = tgt.off;
    set_shape(d);
    if (dropped)
        *dropped = drops;
    *out = d;
    return DDPC_OK;
}

/* DDPC_EINVAL unless d is a pairs dataset and every idx is in [0, n). */
static ddpc_status check_rows(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                              const char *what)
{
    if (!d || d->kind != DDPC_DATASET_PAIRS || n < 0 || (n > 0 && !idx))
        return ddpc_errorf(DDPC_EINVAL, "%s: needs a translation dataset and n >= 0", what);
    for (int64_t b = 0; b < n; b++)
        if (idx[b] < 0 || idx[b] >= d->n)
            return ddpc_errorf(DDPC_EINVAL, "%s: index %lld (batch row %lld) is outside [0, %lld)",
                               what, (long long)idx[b], (long long)b, (long long)d->n);
    return DDPC_OK;
}

ddpc_status ddpc_dataset_pair_lengths(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                      int64_t *src_len, int64_t *tgt_len)
{
    DDPC_TRY(check_rows(d, idx, n, "dataset pair_lengths"));
    int64_t s = 0, t = 0;
    for (int64_t b = 0; b < n; b++) {
        int64_t i = idx[b];
        int64_t ls = d->src_off[i + 1] - d->src_off[i], lt = d->tgt_off[i + 1] - d->tgt_off[i] + 1;
        s = ls > s ? ls : s;
        t = lt > t ? lt : t;
    }
    *src_len = s;
    *tgt_len = t;
    return DDPC_OK;
}

ddpc_status ddpc_dataset_get_pairs(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                   int64_t src_len, int64_t tgt_len, int32_t *src, int32_t *tokens,
                                   int32_t *targets)
{
    int64_t need_s, need_t;
    DDPC_TRY(ddpc_dataset_pair_lengths(d, idx, n, &need_s, &need_t));
    if (src_len < need_s || tgt_len < need_t)
        return ddpc_errorf(DDPC_EINVAL,
                           "dataset get_pairs: widths (%lld, %lld) are narrower than the rows' "
                           "(%lld, %lld)",
                           (long long)src_len, (long long)tgt_len, (long long)need_s,
                           (long long)need_t);
    for (int64_t b = 0; b < n; b++) {
        int64_t i = idx[b];
        int64_t ls = d->src_off[i + 1] - d->src_off[i], ly = d->tgt_off[i + 1] - d->tgt_off[i];
        const int32_t *y = d->tgt_ids + d->tgt_off[i];
        if (src) {
            int32_t *row = src + b * src_len;
            memcpy(row, d->src_ids + d->src_off[i], (size_t)ls * sizeof *row);
            memset(row + ls, 0, (size_t)(src_len - ls) * sizeof *row);
        }
        if (tokens) { /* <bos> y, pad */
            int32_t *row = tokens + b * tgt_len;
            row[0] = DDPC_TOK_BOS;
            memcpy(row + 1, y, (size_t)ly * sizeof *row);
            memset(row + ly + 1, 0, (size_t)(tgt_len - ly - 1) * sizeof *row);
        }
        if (targets) { /* y <eos>, pad */
            int32_t *row = targets + b * tgt_len;
            memcpy(row, y, (size_t)ly * sizeof *row);
            row[ly] = DDPC_TOK_EOS;
            memset(row + ly + 1, 0, (size_t)(tgt_len - ly - 1) * sizeof *row);
        }
    }
    return DDPC_OK;
}

ddpc_status ddpc_dataset_pair(const ddpc_dataset *d, int64_t i, const int32_t **src,
                              int64_t *src_len, const int32_t **tgt, int64_t *tgt_len)
{
    DDPC_TRY(check_rows(d, &i, 1, "dataset pair"));
    *src = d->src_ids + d->src_off[i];
    *src_len = d->src_off[i + 1] - d->src_off[i];
    *tgt = d->tgt_ids + d->tgt_off[i];
    *tgt_len = d->tgt_off[i + 1] - d->tgt_off[i];
    return DDPC_OK;
}
