// SPDX-License-Identifier: MIT
/* state: predict for data.type translation: rank 0 reads predict.input (one source sentence per
 * line), encodes each with the saved source vocabulary and <eos>, translates batches of
 * eval_batch_size lines (each padded to its longest line) with beam predict.beam_size, and writes
 * one decoded translation per line to predict.output, in input order. */
#include "data/textfile.h"
#include "train/trainer_impl.h"
#include "train/trainer_translation.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <stdio.h>
#include <string.h>

typedef struct {
    int32_t *src; /* (rows, max_len) encoded lines, padded per batch */
    int64_t *len; /* (rows) ids of each line with <eos> */
    int32_t *out; /* (rows, max_len - 1) */
    char *text;   /* (text_cap) one decoded translation */
    size_t text_cap;
    char *line; /* (line_cap) one input line, NUL-terminated */
    size_t line_cap;
} predict_buf;

/* Makes *buf (contents not kept) hold at least `need` bytes, doubling from 256; `what` names it
 * in the out-of-memory message. */
static ddpc_status grow(char **buf, size_t *cap, size_t need, const char *what)
{
    if (need <= *cap)
        return DDPC_OK;
    size_t room = *cap ? *cap : 256;
    while (room < need)
        room *= 2;
    char *p = ddpc_malloc(room);
    if (!p)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %s of %zu bytes", what, need);
    ddpc_free(*buf);
    *buf = p;
    *cap = room;
    return DDPC_OK;
}

/* Translates rows [0, n) of b (their widest source is S) and writes them to f. */
static ddpc_status flush(ddpc_trainer *t, predict_buf *b, int64_t n, FILE *f)
{
    ddpc__translation *tr = t->tr;
    int64_t S = 1, max_out = tr->max_len - 1;
    for (int64_t r = 0; r < n; r++)
        S = b->len[r] > S ? b->len[r] : S;
    /* Rows were written max_len apart; pack them S apart and pad. */
    for (int64_t r = 0; r < n; r++) {
        memmove(b->src + r * S, b->src + r * tr->max_len, (size_t)b->len[r] * sizeof *b->src);
        memset(b->src + r * S + b->len[r], 0, (size_t)(S - b->len[r]) * sizeof *b->src);
    }
    DDPC_TRY(ddpc_model_translate(t->model, b->src, n, S, tr->predict_beam, max_out, b->out));
    for (int64_t r = 0; r < n; r++) {
        const int32_t *ids = b->out + r * max_out;
        /* Word tokens have no length bound: grow the text to what this line needs. */
        size_t need = ddpc_vocab_decode(tr->tgt_vocab, ids, max_out, b->text, b->text_cap);
        if (need >= b->text_cap) {
            DDPC_TRY(grow(&b->text, &b->text_cap, need + 1, "a translation"));
            ddpc_vocab_decode(tr->tgt_vocab, ids, max_out, b->text, b->text_cap);
        }
        fprintf(f, "%s\n", b->text);
    }
    return DDPC_OK;
}

static ddpc_status translate_file(ddpc_trainer *t, ddpc__textfile *in, predict_buf *b, FILE *f,
                                  int64_t *lines)
{
    ddpc__translation *tr = t->tr;
    int64_t rows = t->data.task[0].eval_batch_size, n = 0;
    const char *s;
    size_t len;
    while (ddpc__textfile_next(in, &s, &len)) {
        /* encode reads up to a NUL or '\n', and the line may end in '\r': encode a copy. */
        DDPC_TRY(grow(&b->line, &b->line_cap, len + 1, "an input line"));
        memcpy(b->line, s, len);
        b->line[len] = '\0';
        int64_t k;
        int32_t *row = b->src + n * tr->max_len;
        ddpc_vocab_encode(tr->src_vocab, b->line, row, tr->max_len - 1, &k);
        if (k + 1 > tr->max_len)
            return ddpc_errorf(DDPC_EINVAL,
                               "%s:%lld: %lld source tokens; with <eos> a source must fit "
                               "data.max_len %lld",
                               tr->predict_input, (long long)in->line, (long long)k,
                               (long long)tr->max_len);
        row[k] = DDPC_TOK_EOS;
        b->len[n++] = k + 1;
        if (n == rows) {
            DDPC_TRY(flush(t, b, n, f));
            n = 0;
        }
        (*lines)++;
    }
    return n > 0 ? flush(t, b, n, f) : DDPC_OK;
}

ddpc_status ddpc__translation_predict(ddpc_trainer *t)
{
    ddpc__translation *tr = t->tr;
    int64_t rows = t->data.task[0].eval_batch_size, lines = 0;
    ddpc__textfile in;
    DDPC_TRY(ddpc__textfile_read(&in, tr->predict_input));
    predict_buf b = {.text_cap = (size_t)tr->max_len * 16 + 64};
    b.src = ddpc_malloc((size_t)(rows * tr->max_len) * sizeof *b.src);
    b.len = ddpc_malloc((size_t)rows * sizeof *b.len);
    b.out = ddpc_malloc((size_t)(rows * (tr->max_len - 1)) * sizeof *b.out);
    b.text = ddpc_malloc(b.text_cap);
    ddpc_status st =
        b.src && b.len && b.out && b.text
            ? DDPC_OK
            : ddpc_errorf(DDPC_ENOMEM, "out of memory for %lld translations", (long long)rows);
    ddpc_fs_out o = {0};
    if (st == DDPC_OK)
        st = ddpc_fs_out_open(&o, tr->predict_output, "predict.output");
    if (st == DDPC_OK)
        st = translate_file(t, &in, &b, o.f, &lines);
    ddpc_status c = ddpc_fs_out_commit(&o, st != DDPC_OK); /* no-op when it was not opened */
    st = st != DDPC_OK ? st : c;
    if (st == DDPC_OK && t->log)
        fprintf(t->log, "translated %lld lines of %s into %s (beam %d)\n", (long long)lines,
                tr->predict_input, tr->predict_output, tr->predict_beam);
    ddpc__textfile_free(&in);
    ddpc_free(b.src);
    ddpc_free(b.len);
    ddpc_free(b.out);
    ddpc_free(b.text);
    ddpc_free(b.line);
    return st;
}
