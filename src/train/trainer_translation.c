// SPDX-License-Identifier: MIT
/* data.type translation: the keys, the vocabularies and the three splits. A training run builds
 * the vocabularies from the train split and rank 0 saves them in the vocabulary directory (the
 * run directory unless data.vocab_dir says otherwise); when that directory already holds them
 * (a resumed run, a second run into the same directory) they must equal what the corpus and
 * settings give (rank 0 checks; every rank builds the same ones). Evaluation and prediction runs
 * load them from there, so ids always mean what they meant when the weights were trained. */
#include "train/trainer_translation.h"
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const tokenize_names[] = {"word", "char", NULL};

typedef struct {
    const char *train[2], *valid[2], *test[2];
    int tokenize;
    int64_t min_freq, vocab_size;
} tr_keys;

static ddpc_status read_keys(ddpc_trainer *t, const char *prefix, tr_keys *k)
{
    ddpc_config *c = t->cfg;
    ddpc__translation *tr = t->tr;
    char key[96];
    const char *vocab_dir, *out;
    static const char *const names[6] = {"train_src", "train_tgt", "valid_src",
                                         "valid_tgt", "test_src",  "test_tgt"};
    const char **dst[6] = {&k->train[0], &k->train[1], &k->valid[0],
                           &k->valid[1], &k->test[0],  &k->test[1]};
    for (int i = 0; i < 6; i++) {
        DDPC_TRY(ddpc_config_string(c, ddpc_config_key(key, sizeof key, prefix, names[i]), NULL,
                                    dst[i]));
        if (!*dst[i] && (i < 2 || i >= 4))
            return ddpc_errorf(DDPC_EINVAL,
                               "data.type translation needs key '%s' (a text file, "
                               "one sentence per line)",
                               key);
    }
    if (!k->valid[0] != !k->valid[1])
        return ddpc_errorf(DDPC_EINVAL, "keys '%s.valid_src' and '%s.valid_tgt' go together",
                           prefix, prefix);
    DDPC_TRY(ddpc_config_choice(c, ddpc_config_key(key, sizeof key, prefix, "tokenize"), "word",
                                tokenize_names, &k->tokenize));
    DDPC_TRY(ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "min_freq"), 1, 1,
                             INT32_MAX, &k->min_freq));
    DDPC_TRY(ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "vocab_size"), 0, 0,
                             INT32_MAX, &k->vocab_size));
    if (k->vocab_size > 0 && k->vocab_size <= DDPC_VOCAB_SPECIALS)
        return ddpc_errorf(DDPC_EINVAL, "key '%s.vocab_size' must be 0 (no cap) or > %d, got %lld",
                           prefix, DDPC_VOCAB_SPECIALS, (long long)k->vocab_size);
    DDPC_TRY(ddpc_config_int(c, ddpc_config_key(key, sizeof key, prefix, "max_len"), 256, 2,
                             1 << 16, &tr->max_len));
    DDPC_TRY(ddpc_config_string(c, ddpc_config_key(key, sizeof key, prefix, "vocab_dir"),
                                t->set.run_dir, &vocab_dir));
    /* Room for "/vocab.src.txt" in vocab_path's buffer too. */
    if (strlen(vocab_dir) >= sizeof tr->vocab_dir)
        return ddpc_errorf(DDPC_EINVAL,
                           "key '%s.vocab_dir': path of %zu bytes, at most %zu: '%.60s...'", prefix,
                           strlen(vocab_dir), sizeof tr->vocab_dir - 1, vocab_dir);
    snprintf(tr->vocab_dir, sizeof tr->vocab_dir, "%s", vocab_dir);
    int64_t beam;
    DDPC_TRY(ddpc_config_int(c, "eval_beam_size", 1, 1, 64, &beam));
    tr->eval_beam = (int)beam;
    DDPC_TRY(ddpc_config_int(c, "predict.beam_size", 1, 1, 64, &beam));
    tr->predict_beam = (int)beam;
    DDPC_TRY(ddpc_config_string(c, "predict.input", k->test[0], &tr->predict_input));
    char def_out[1100];
    snprintf(def_out, sizeof def_out, "%s/translations.txt", t->set.run_dir);
    DDPC_TRY(ddpc_config_string(c, "predict.output", def_out, &out));
    if (strlen(out) >= sizeof tr->predict_output)
        return ddpc_errorf(DDPC_EINVAL,
                           "key 'predict.output': path of %zu bytes, at most %zu: '%.60s...'",
                           strlen(out), sizeof tr->predict_output - 1, out);
    snprintf(tr->predict_output, sizeof tr->predict_output, "%s", out);
    tr->train_src = k->train[0];
    tr->train_tgt = k->train[1];
    return DDPC_OK;
}

static void vocab_path(const ddpc_trainer *t, const char *side, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/vocab.%s.txt", t->tr->vocab_dir, side);
}

/* The saved vocabulary of one side must agree with the settings (and, training, with the one
 * the corpus gives, `built`). Settings first: a changed min_freq can give the same tokens, and
 * then only that message says what differs. */
static ddpc_status check_saved(const char *path, const ddpc_vocab *saved, const ddpc_vocab *built,
                               const tr_keys *k, const char *corpus)
{
    if ((int)ddpc_vocab_tokenize(saved) != k->tokenize || ddpc_vocab_min_freq(saved) != k->min_freq)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s was built with tokenize %s and min_freq %lld, but the config says "
                           "data.tokenize %s and data.min_freq %lld",
                           path, ddpc_tokenize_name(ddpc_vocab_tokenize(saved)),
                           (long long)ddpc_vocab_min_freq(saved), tokenize_names[k->tokenize],
                           (long long)k->min_freq);
    if (built && !ddpc_vocab_equal(saved, built))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s (%lld tokens) differs from the vocabulary that %s gives with "
                           "data.tokenize %s and data.min_freq %lld (%lld tokens): the corpus or "
                           "the settings changed since it was saved; train into another run_dir "
                           "or delete the vocab files",
                           path, (long long)ddpc_vocab_size(saved), corpus,
                           tokenize_names[k->tokenize], (long long)k->min_freq,
                           (long long)ddpc_vocab_size(built));
    return DDPC_OK;
}

/* A vocabulary of the specials alone would make every sentence <unk>: refuse it, naming why.
 * Destroys v when it refuses. */
static ddpc_status check_nonempty(ddpc_vocab *v, const tr_keys *k, const char *corpus)
{
    if (ddpc_vocab_size(v) > DDPC_VOCAB_SPECIALS)
        return DDPC_OK;
    ddpc_vocab_destroy(v);
    if (k->min_freq > 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "data.min_freq %lld keeps no token of %s (none appears that often): "
                           "every sentence would be <unk>; lower data.min_freq",
                           (long long)k->min_freq, corpus);
    return ddpc_errorf(DDPC_EINVAL, "%s has no %s token to build a vocabulary from", corpus,
                       tokenize_names[k->tokenize]);
}

/* One side's vocabulary into *out: built from `corpus` when training, checked against (or, not
 * training, loaded from) the saved file. */
static ddpc_status side_vocab(ddpc_trainer *t, const tr_keys *k, const char *side,
                              const char *corpus, bool have_saved, ddpc_vocab **out)
{
    char path[600];
    vocab_path(t, side, path, sizeof path);
    ddpc_vocab *built = NULL, *saved = NULL;
    bool train = t->set.state == STATE_TRAIN;
    if (!train && !have_saved)
        return ddpc_errorf(DDPC_EIO,
                           "no vocabulary at %s: a training run writes vocab.src.txt and "
                           "vocab.tgt.txt into its run_dir; point data.vocab_dir at it",
                           path);
    if (train) {
        DDPC_TRY(ddpc_vocab_build(&built, corpus, (ddpc_tokenize)k->tokenize, k->min_freq,
                                  k->vocab_size));
        DDPC_TRY(check_nonempty(built, k, corpus));
    }
    ddpc_status st = have_saved ? ddpc_vocab_load(&saved, path) : DDPC_OK;
    if (st == DDPC_OK && saved)
        st = check_saved(path, saved, built, k, corpus);
    if (st != DDPC_OK) {
        ddpc_vocab_destroy(built);
        ddpc_vocab_destroy(saved);
        return st;
    }
    if (built) {
        ddpc_vocab_destroy(saved);
        *out = built;
    } else {
        *out = saved;
    }
    return DDPC_OK;
}

static ddpc_status load_vocabs(ddpc_trainer *t, const tr_keys *k)
{
    char ps[600], pt[600];
    vocab_path(t, "src", ps, sizeof ps);
    vocab_path(t, "tgt", pt, sizeof pt);
    /* Training, rank 0 alone compares with saved files: it is the one writing them, so another
     * rank could find one file renamed into place and not yet the other. */
    bool look = t->set.state != STATE_TRAIN || t->dist.rank == 0;
    bool hs = look && access(ps, F_OK) == 0, ht = look && access(pt, F_OK) == 0;
    if (hs != ht)
        return ddpc_errorf(DDPC_EIO, "%s exists but %s does not: the vocabularies go in pairs",
                           hs ? ps : pt, hs ? pt : ps);
    DDPC_TRY(side_vocab(t, k, "src", k->train[0], hs, &t->tr->src_vocab));
    DDPC_TRY(side_vocab(t, k, "tgt", k->train[1], ht, &t->tr->tgt_vocab));
    t->tr->save_vocab = t->set.state == STATE_TRAIN;
    return DDPC_OK;
}

static ddpc_status own(ddpc_trainer *t, ddpc_dataset *d)
{
    if (t->data.n_owned == DDPC__MAX_OWNED) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_EINTERNAL, "tasks: too many datasets");
    }
    t->data.owned[t->data.n_owned++] = d;
    return DDPC_OK;
}

/* One split; train leaves out pairs longer than max_len, the held-out splits refuse them. */
static ddpc_status load_split(ddpc_trainer *t, const char *const paths[2], bool train,
                              ddpc_dataset **out)
{
    ddpc__translation *tr = t->tr;
    ddpc_dataset *d = NULL;
    DDPC_TRY(ddpc_dataset_translation_create(&d, paths[0], paths[1], tr->src_vocab, tr->tgt_vocab,
                                             tr->max_len, train,
                                             train ? &tr->train_dropped : NULL));
    DDPC_TRY(own(t, d));
    *out = d;
    return DDPC_OK;
}

ddpc_status ddpc__trainer_load_translation(ddpc_trainer *t, ddpc__task *k, const char *prefix)
{
    if (t->data.multi)
        return ddpc_errorf(DDPC_EINVAL,
                           "data.type translation is single-task: use the data.* keys, not tasks");
    t->tr = ddpc_calloc(1, sizeof *t->tr);
    if (!t->tr)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory");
    t->kind = &ddpc__kind_translation;
    tr_keys keys;
    DDPC_TRY(read_keys(t, prefix, &keys));
    DDPC_TRY(load_vocabs(t, &keys));
    DDPC_TRY(load_split(t, keys.train, true, &k->train));
    DDPC_TRY(load_split(t, keys.test, false, &k->test));
    if (keys.valid[0])
        DDPC_TRY(load_split(t, keys.valid, false, &k->valid));
    return DDPC_OK;
}

ddpc_status ddpc__trainer_save_vocab(ddpc_trainer *t)
{
    if (!t->tr || !t->tr->save_vocab || t->dist.rank != 0)
        return DDPC_OK;
    char path[600];
    DDPC_TRY(ddpc_mkdirs(t->tr->vocab_dir));
    vocab_path(t, "src", path, sizeof path);
    DDPC_TRY(ddpc_vocab_save(t->tr->src_vocab, path));
    vocab_path(t, "tgt", path, sizeof path);
    return ddpc_vocab_save(t->tr->tgt_vocab, path);
}

ddpc_status ddpc__translation_name_vocabs(const ddpc_trainer *t, ddpc_status s)
{
    if (s != DDPC_EINVAL || !t->tr)
        return s;
    char why[800], ps[600], pt[600];
    snprintf(why, sizeof why, "%s", ddpc_last_error());
    if (t->set.state == STATE_TRAIN) /* built from the corpus, saved only once training starts */
        return ddpc_errorf(s, "%s; the vocabularies in use are those of %s and %s", why,
                           t->tr->train_src, t->tr->train_tgt);
    vocab_path(t, "src", ps, sizeof ps);
    vocab_path(t, "tgt", pt, sizeof pt);
    return ddpc_errorf(s, "%s; the vocabularies in use are %s and %s (data.vocab_dir)", why, ps,
                       pt);
}

void ddpc__trainer_free_translation(ddpc_trainer *t)
{
    if (!t->tr)
        return;
    ddpc_vocab_destroy(t->tr->src_vocab);
    ddpc_vocab_destroy(t->tr->tgt_vocab);
    ddpc_free(t->tr->mf_src);
    ddpc_free(t->tr->mf_pick);
    ddpc_free(t->tr->out);
    ddpc_free(t->tr);
    t->tr = NULL;
}
