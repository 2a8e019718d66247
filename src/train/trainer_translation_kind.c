// SPDX-License-Identifier: MIT
/* The translation task kind: what a data.type translation run does differently, for the generic
 * loop, evaluation, prediction and bench (trainer_kind.h). Every member reads t->tr, which
 * ddpc__trainer_load_translation filled when it selected this kind. */
#include "train/trainer_impl.h"
#include "train/trainer_translation.h"

#include <ddpc/models.h>
#include <ddpc/weights.h>

#include <assert.h>
#include <stdio.h>
#include <string.h>

static_assert(DDPC__TR_SUMS <= DDPC__KIND_MAX_SUMS, "the eval buffer holds translation's sums");

static void log_start(ddpc_trainer *t)
{
    const ddpc__translation *tr = t->tr;
    fprintf(t->log,
            "translation: vocabularies of %lld source and %lld target %ss (min_freq %lld) in "
            "%s; %lld train pairs longer than data.max_len %lld left out\n",
            (long long)ddpc_vocab_size(tr->src_vocab), (long long)ddpc_vocab_size(tr->tgt_vocab),
            ddpc_tokenize_name(ddpc_vocab_tokenize(tr->src_vocab)),
            (long long)ddpc_vocab_min_freq(tr->src_vocab), tr->vocab_dir,
            (long long)tr->train_dropped, (long long)tr->max_len);
}

/* The vocabularies and the longest sequence come from the data; own is the model type's config,
 * a seq2seq's (the only type that takes translation pairs). */
static ddpc_status model_config(ddpc_trainer *t, ddpc_model_config *mc, void *own)
{
    const ddpc__translation *tr = t->tr;
    if (strcmp(mc->type, "seq2seq") != 0)
        return ddpc_errorf(DDPC_EINVAL, "data.type translation needs model.type seq2seq, not '%s'",
                           mc->type);
    ddpc_seq2seq_data d = {.src_vocab = ddpc_vocab_size(tr->src_vocab),
                           .tgt_vocab = ddpc_vocab_size(tr->tgt_vocab),
                           .src_digest = ddpc_vocab_digest(tr->src_vocab),
                           .tgt_digest = ddpc_vocab_digest(tr->tgt_vocab),
                           .max_len = tr->max_len};
    return ddpc_seq2seq_config_read_data(t->cfg, "model", &d, own);
}

/* Ids must mean what they meant when the checkpoint was saved. */
static ddpc_status check_resumed(ddpc_trainer *t)
{
    return ddpc__translation_name_vocabs(t, ddpc_weights_check_vocab(t->model, t->resumed_from));
}

/* predict.output is written at the end of the translations. */
static ddpc_status check_predict_output(ddpc_trainer *t)
{
    char target[DDPC_FS_PATH_MAX];
    return ddpc_fs_out_target(t->tr->predict_output, "predict.output", target, sizeof target);
}

static int64_t pair_len(const ddpc_trainer *t)
{
    return t->tr->max_len;
}

const ddpc__task_kind ddpc__kind_translation = {
    .name = "translation",
    .predict = ddpc__translation_predict,
    .check_predict_output = check_predict_output,
    .write_outputs = ddpc__trainer_save_vocab,
    .log_start = log_start,
    .model_config = model_config,
    .check_resumed = check_resumed,
    .explain_weights = ddpc__translation_name_vocabs,
    .eval_sums = DDPC__TR_SUMS,
    .eval_batch = ddpc__translation_eval_batch,
    .eval_record = ddpc__translation_eval_record,
    .pair_len = pair_len,
};
