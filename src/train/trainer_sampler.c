// SPDX-License-Identifier: MIT
/* The training samplers' keys: data.sampler (distributed, rank_split or case), data.drop_last,
 * rank_split's bounds, down-sampling and streaming in ddpc's forms and in the seed's (LeapAI's
 * RankSplitSampler: a scalar left_index/right_index, an integer down_sample_ratio, the interleave
 * order), and data.log_indices, the record of which samples each rank trained on. The same keys
 * apply to every task's training sampler; evaluation always uses `case`. */
#include "train/trainer_impl.h"

#include <ddpc/fs.h>

#include <math.h>
#include <stdio.h>

static const char *const sampler_names[] = {"distributed", "rank_split", "case", NULL};
static const char *const streaming_names[] = {"none", "round_robin", "interleave", NULL};
static const ddpc_sampler_kind sampler_kinds[] = {DDPC_SAMPLER_DISTRIBUTED, DDPC_SAMPLER_RANK_SPLIT,
                                                  DDPC_SAMPLER_CASE};

/* data.left_index / data.right_index: a list of one (ddpc's per-source form; the task has one
 * dataset) or a scalar (the seed's). */
static ddpc_status read_bound(ddpc_config *c, const char *key, int64_t scalar_min, int64_t list_min,
                              bool *list, int64_t *list_value, int64_t *scalar)
{
    *list = ddpc_config_seq_len(c, key) > 0;
    if (!*list)
        return ddpc_config_int(c, key, *scalar, scalar_min, INT64_MAX, scalar);
    size_t n;
    return ddpc_config_int_list(c, key, NULL, 0, list_min, INT64_MAX, list_value, 1, &n);
}

/* data.down_sample_ratio: a fraction in (0, 1], or an integer k >= 2 meaning the seed's [::k]. */
static ddpc_status read_ratio(ddpc_config *c, ddpc__sampling *s)
{
    double v;
    DDPC_TRY(ddpc_config_float(c, "data.down_sample_ratio", 1.0, 0.0, 1e18, &v));
    s->ratio = 1.0;
    s->stride = 0;
    if (v > 0.0 && v <= 1.0) {
        s->ratio = v;
        return DDPC_OK;
    }
    if (v >= 2.0 && v == floor(v)) {
        s->stride = (int64_t)v;
        return DDPC_OK;
    }
    return ddpc_errorf(DDPC_EINVAL,
                       "key 'data.down_sample_ratio' must be a fraction in (0, 1] or an integer "
                       ">= 2 (keep every k-th sample, the seed's form), got %g",
                       v);
}

ddpc_status ddpc__trainer_read_sampling(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    ddpc__sampling *s = &t->data.samp;
    int kind, streaming;
    DDPC_TRY(ddpc_config_choice(c, "data.sampler", "distributed", sampler_names, &kind));
    s->kind = sampler_kinds[kind];
    DDPC_TRY(ddpc_config_bool(c, "data.drop_last", false, &s->drop_last));
    /* Scalars default to "no bound" (left 0, right -1), values that the effective configuration
     * (config.yaml) writes out and that must read back as the same run. */
    s->first_left = 0;
    s->last_right = -1;
    DDPC_TRY(read_bound(c, "data.left_index", 0, 0, &s->left_list, &s->left_index, &s->first_left));
    DDPC_TRY(
        read_bound(c, "data.right_index", -1, -1, &s->right_list, &s->right_index, &s->last_right));
    if (!s->left_list)
        s->left_index = 0;
    if (!s->right_list)
        s->right_index = -1;
    DDPC_TRY(read_ratio(c, s));
    DDPC_TRY(ddpc_config_choice(c, "data.streaming", "none", streaming_names, &streaming));
    s->streaming = streaming;
    DDPC_TRY(ddpc_config_bool(c, "data.shuffle", streaming == 0, &t->set.shuffle));
    DDPC_TRY(ddpc_config_bool(c, "data.log_indices", false, &s->log_indices));
    /* rank_split's keys with another sampler, unless at their defaults (as config.yaml has them).
     */
    const char *split_key = s->left_list || s->first_left > 0     ? "data.left_index"
                            : s->right_list || s->last_right >= 0 ? "data.right_index"
                            : s->ratio != 1.0 || s->stride > 0    ? "data.down_sample_ratio"
                            : s->streaming != 0                   ? "data.streaming"
                                                                  : NULL;
    if (s->kind != DDPC_SAMPLER_RANK_SPLIT && split_key)
        return ddpc_errorf(DDPC_EINVAL, "key '%s' needs data.sampler: rank_split (it is %s)",
                           split_key, ddpc_sampler_kind_name(s->kind));
    if ((s->left_list || s->right_list) && (s->first_left > 0 || s->last_right >= 0))
        return ddpc_errorf(DDPC_EINVAL,
                           "keys 'data.left_index' and 'data.right_index' must both be lists (one "
                           "entry per dataset, end exclusive) or both scalars (the seed's form: "
                           "first dataset from left_index, last dataset up to right_index "
                           "inclusive)");
    return DDPC_OK;
}

ddpc_sampler_config ddpc__trainer_sampler_config(const ddpc_trainer *t, int i, int64_t *size)
{
    const ddpc__task *k = &t->data.task[i];
    const ddpc__sampling *s = &t->data.samp;
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = s->kind;
    sc.rank = k->shard_rank;
    sc.world = k->shard_world;
    /* A distinct shuffle per task, so tasks over one dataset do not visit it in lockstep. */
    sc.seed = t->set.seed + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    sc.shuffle = t->set.shuffle;
    sc.drop_last = s->drop_last;
    *size = ddpc_dataset_size(k->train);
    sc.size = *size;
    if (s->kind != DDPC_SAMPLER_RANK_SPLIT)
        return sc;
    sc.num_sources = 1;
    sc.sizes = size;
    sc.left_index = s->left_list ? &s->left_index : NULL;
    sc.right_index = s->right_list ? &s->right_index : NULL;
    sc.first_left_index = s->first_left;
    sc.last_right_index = s->last_right;
    sc.down_sample_ratio = s->ratio;
    sc.down_sample_stride = s->stride;
    sc.streaming = s->streaming != 0;
    sc.interleave = s->streaming == 2;
    sc.batch_size = k->batch_size;
    return sc;
}

ddpc_status ddpc__trainer_open_indices_log(ddpc_trainer *t)
{
    if (!t->data.samp.log_indices || t->data.indices_log)
        return DDPC_OK;
    char path[600];
    DDPC_TRY(ddpc_mkdirs(t->set.run_dir));
    snprintf(path, sizeof path, "%s/indices_rank%d.txt", t->set.run_dir, t->dist.rank);
    /* Appending: a resumed run continues the record of the steps it did not redo. */
    t->data.indices_log = fopen(path, "a");
    if (!t->data.indices_log)
        return ddpc_errorf(DDPC_EIO, "data.log_indices: cannot open '%s' for writing", path);
    return DDPC_OK;
}

void ddpc__trainer_log_indices(ddpc_trainer *t, int64_t step, int64_t micro, int task,
                               const ddpc_batch *b)
{
    if (!t->data.indices_log)
        return;
    fprintf(t->data.indices_log, "%lld %lld %s", (long long)step, (long long)micro,
            t->data.task[task].name);
    for (int64_t j = 0; j < b->n; j++)
        fprintf(t->data.indices_log, " %lld", (long long)b->idx[j]);
    fputc('\n', t->data.indices_log);
}
