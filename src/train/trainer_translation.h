// SPDX-License-Identifier: MIT
/* data.type translation's state and functions: loading (trainer_translation.c), evaluation
 * (trainer_translate_eval.c), prediction (trainer_translate_predict.c); the trainer reaches them
 * through the translation task kind (trainer_translation_kind.c). */
#ifndef DDPC_TRAIN_TRAINER_TRANSLATION_H
#define DDPC_TRAIN_TRAINER_TRANSLATION_H

#include "train/trainer_impl.h"

#include <ddpc/bleu.h>
#include <ddpc/vocab.h>

/* data.type translation (trainer_translation.c): the vocabularies (built from the train split, or
 * loaded from vocab_dir), decoding settings and, per evaluation split, the trivial baselines'
 * hypotheses. */
struct ddpc__translation {
    ddpc_vocab *src_vocab, *tgt_vocab;
    char vocab_dir[512];
    bool save_vocab; /* built by a training run: rank 0 writes them into vocab_dir */
    int64_t max_len; /* positions of a source (with <eos>) or a decoder input (with <bos>) */
    int eval_beam, predict_beam;
    const char *predict_input;
    char predict_output[1100];
    const char *train_src, *train_tgt;
    int64_t train_dropped; /* train pairs longer than max_len, left out */
    /* Most-frequent-translation baseline (trainer_translate_eval.c), built at the first
     * evaluation: the train sources' hashes, sorted, each with the train sample holding its most
     * frequent target; and the sample of the most frequent target overall. */
    uint64_t *mf_src; /* (n_mf) */
    int64_t *mf_pick; /* (n_mf) */
    int64_t n_mf, mf_overall;
    int32_t *out; /* (out_rows, max_len) decoded ids */
    int64_t out_rows;
};

/* trainer_translation.c: data.type translation for task k (`prefix` = "data"): reads its keys,
 * builds or loads the vocabularies into t->tr and loads the train, valid and test splits. */
ddpc_status ddpc__trainer_load_translation(ddpc_trainer *t, ddpc__task *k, const char *prefix);
/* Rank 0 of a training run: writes vocab.src.txt and vocab.tgt.txt into the vocabulary
 * directory. */
ddpc_status ddpc__trainer_save_vocab(ddpc_trainer *t);
void ddpc__trainer_free_translation(ddpc_trainer *t);
/* s, the status of loading weights into a translation model: DDPC_EINVAL (their vocabulary
 * digests are not the model's, weights.h) comes back with the vocabulary files in use named. */
ddpc_status ddpc__translation_name_vocabs(const ddpc_trainer *t, ddpc_status s);

/* trainer_translate_eval.c: BLEU and exact match of the model's decoded translations (beam
 * eval_beam_size) and of the two trivial baselines (copy the source; the most frequent
 * translation of the source in the train split, else the most frequent target overall) on the
 * same rows. sums holds DDPC__TR_SUMS values per evaluation (plain sums: ranks add theirs). */
#define DDPC__TR_FIELDS (2 * DDPC_BLEU_ORDER + 3) /* BLEU statistics, then exact matches */
#define DDPC__TR_SUMS (3 * DDPC__TR_FIELDS)       /* model, copy, most frequent */
ddpc_status ddpc__translation_eval_batch(ddpc_trainer *t, const ddpc_dataset *d,
                                         const ddpc_batch *b, double *sums);
/* Adds the fields to the open metrics record (exact matches over `rows`) and a summary for the
 * log line into text. */
void ddpc__translation_eval_record(ddpc_trainer *t, const double *sums, double rows, char *text,
                                   size_t cap);
/* trainer_translate_predict.c: rank 0 translates predict.input into predict.output. */
ddpc_status ddpc__translation_predict(ddpc_trainer *t);

#endif
