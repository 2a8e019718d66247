// SPDX-License-Identifier: MIT
/* ddpc_ckpt_save_sharded: the collective save of a ZeRO run. Rank 0 creates the temporary
 * directory and broadcasts its path, every rank writes and fsyncs its own shard file there, the
 * ranks' (status, size, CRC-32, ranges) records are all-gathered, rank 0 writes state.json with
 * the manifest and commits, then broadcasts the outcome. Invariants: every rank issues the same
 * collectives whatever fails locally (a failure travels in the records, never as a missing
 * call), so all ranks return the same status; and the commit protocol is ddpc_ckpt_save's, so a
 * crash of any rank at any moment leaves only a .tmp-* directory that readers ignore. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MSG_BYTES 512

/* Rank 0's word to everyone: whether the step went well, the path (the temporary directory,
 * then the committed one), and the message when it did not. Sent as int64 words. */
typedef struct {
    int64_t status;
    char path[DDPC__CKPT_PATH_MAX];
    char name[32];
    char msg[MSG_BYTES];
} header;
static_assert(sizeof(header) % sizeof(int64_t) == 0, "header is sent as int64 words");

/* One rank's record to everyone, followed by 2 x max_ranges words: its ranges as (lo, len). */
typedef struct {
    int64_t status, bytes, crc, n_ranges;
    char msg[MSG_BYTES];
} record;
static_assert(sizeof(record) % sizeof(int64_t) == 0, "record is sent as int64 words");
#define RECORD_WORDS (sizeof(record) / sizeof(int64_t))

static void set_msg(char *msg, ddpc_status s)
{
    snprintf(msg, MSG_BYTES, "%s", s == DDPC_OK ? "" : ddpc_last_error());
}

/* Broadcasts rank 0's header; on return every rank has it (or the collective's error). */
static ddpc_status share(ddpc_pg *pg, header *h)
{
    return ddpc_pg_broadcast(pg, h, sizeof *h / sizeof(int64_t), DDPC_DTYPE_I64, 0);
}

/* The header's failure as this rank's error: the same status and message on every rank. */
static ddpc_status fail_as(const header *h)
{
    return ddpc_errorf((ddpc_status)h->status, "%s", h->msg);
}

static ddpc_status check_args(const char *dir, const ddpc_model *m, ddpc_optim *o,
                              const ddpc_range *ranges, size_t n_ranges, const ddpc_ckpt_state *s,
                              int64_t keep)
{
    if (!dir || !m || !o || !s || (!ranges && n_ranges))
        return ddpc_errorf(DDPC_EINVAL, "sharded checkpoint save: dir, model, optimizer, ranges "
                                        "or state is NULL");
    if (s->step < 0 || keep < 0 || s->zero_stage < 1)
        return ddpc_errorf(DDPC_EINVAL,
                           "sharded checkpoint save: step %lld, keep %lld or "
                           "zero_stage %d out of range",
                           (long long)s->step, (long long)keep, s->zero_stage);
    size_t owned = 0, np = ddpc_model_num_params(m);
    for (size_t i = 0; i < n_ranges; i++) {
        if (ranges[i].lo > np || ranges[i].len > np - ranges[i].lo ||
            (i && ranges[i].lo < ranges[i - 1].lo + ranges[i - 1].len))
            return ddpc_errorf(DDPC_EINVAL,
                               "sharded checkpoint save: range %zu [%zu, +%zu) is "
                               "outside the %zu parameters or not ascending",
                               i, ranges[i].lo, ranges[i].len, np);
        owned += ranges[i].len;
    }
    if (owned > ddpc_optim_numel(o))
        return ddpc_errorf(DDPC_EINVAL,
                           "sharded checkpoint save: the ranges hold %zu elements but "
                           "the optimizer only %zu",
                           owned, ddpc_optim_numel(o));
    return DDPC_OK;
}

/* Writes this rank's shard file into tmp and records its size and CRC-32 in *r. */
static ddpc_status write_shard(const char *tmp, int rank, int world, const ddpc_model *m,
                               ddpc_optim *o, const ddpc_range *ranges, size_t n_ranges,
                               int zero_stage, record *r)
{
    char name[DDPC__CKPT_FILE_NAME_MAX], path[DDPC__CKPT_PATH_MAX];
    snprintf(name, sizeof name, DDPC__CKPT_SHARD_FMT, rank, world);
    DDPC_TRY(ddpc__ckpt_join(path, sizeof path, tmp, name));
    size_t owned = 0, ns = ddpc_optim_num_state(o);
    for (size_t i = 0; i < n_ranges; i++)
        owned += ranges[i].len;
    float *params = ddpc_malloc((owned ? owned : 1) * sizeof *params);
    /* Rank 0 also writes the model's buffers (they are replicated, not sharded). */
    size_t nbuf = rank == 0 ? ddpc_model_num_buffers(m) : 0;
    ddpc_st_tensor *ts = ddpc_calloc(1 + ns + nbuf, sizeof *ts);
    char(*bnames)[DDPC_PARAM_NAME_MAX + 16] = ddpc_calloc(nbuf ? nbuf : 1, sizeof *bnames);
    ddpc_status s = DDPC_OK;
    if (!params || !ts || !bnames) {
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory writing %s", path);
        goto out;
    }
    /* ddpc_model_params only reads here: the cast does not let anything write m. */
    const float *src = ddpc_model_params((ddpc_model *)m);
    for (size_t i = 0, at = 0; i < n_ranges; at += ranges[i].len, i++)
        memcpy(params + at, src + ranges[i].lo, ranges[i].len * sizeof *params);
    ts[0] = (ddpc_st_tensor){
        .name = DDPC__CKPT_SHARD_PARAMS, .ndim = 1, .shape = {(int64_t)owned}, .data = params};
    for (size_t k = 0; k < ns; k++) {
        const char *sname = NULL;
        const float *buf = ddpc_optim_state(o, k, &sname);
        ts[1 + k] =
            (ddpc_st_tensor){.name = sname, .ndim = 1, .shape = {(int64_t)owned}, .data = buf};
    }
    for (size_t b = 0; b < nbuf; b++) {
        const ddpc_param *p = ddpc_model_buffer(m, b);
        ddpc_st_tensor *t = &ts[1 + ns + b];
        snprintf(bnames[b], sizeof bnames[0], "%s%s", DDPC__CKPT_SHARD_BUFFER_PREFIX, p->name);
        /* ddpc_model_buffer_data only reads here: the cast does not let anything write m. */
        *t = (ddpc_st_tensor){.name = bnames[b], .ndim = p->ndim,
                              .data = ddpc_model_buffer_data((ddpc_model *)m) + p->offset};
        memcpy(t->shape, p->shape, sizeof p->shape);
    }
    char step[32], rk[16], wd[16], stage[16];
    snprintf(step, sizeof step, "%" PRId64, ddpc_optim_step_count(o));
    snprintf(rk, sizeof rk, "%d", rank);
    snprintf(wd, sizeof wd, "%d", world);
    snprintf(stage, sizeof stage, "%d", zero_stage);
    const char *keys[] = {"format", "optimizer", "step_count", "rank", "world", "zero_stage"};
    const char *vals[] = {"pt", ddpc_optim_type_name(ddpc_optim_config_of(o)->type), step, rk, wd,
                          stage};
    s = ddpc_safetensors_write(path, ts, 1 + ns + nbuf, keys, vals, sizeof keys / sizeof keys[0]);
    uint64_t bytes = 0;
    uint32_t crc = 0;
    if (s == DDPC_OK)
        s = ddpc__ckpt_file_crc(path, &bytes, &crc);
    r->bytes = (int64_t)bytes;
    r->crc = crc;
out:
    ddpc_free(bnames);
    ddpc_free(ts);
    ddpc_free(params);
    return s;
}

/* Rank 0: state.json from the gathered records (words_per per rank), then the commit. */
static ddpc_status finish(const char *dir, const char *tmp, const char *name, int world,
                          const ddpc_model *m, ddpc_optim *o, const ddpc_ckpt_state *s,
                          const int64_t *all, size_t words_per, int64_t keep, char *out_path,
                          size_t cap)
{
    ddpc__ckpt_extra x = {.zero_stage = s->zero_stage, .n_files = (size_t)world};
    snprintf(x.model_type, sizeof x.model_type, "%s", ddpc_model_config_of(m)->type);
    x.num_params = (int64_t)ddpc_model_num_params(m);
    snprintf(x.optim_type, sizeof x.optim_type, "%s",
             ddpc_optim_type_name(ddpc_optim_config_of(o)->type));
    x.optim_step_count = ddpc_optim_step_count(o);
    size_t total = 0, nt = ddpc_model_num_tensors(m);
    for (int r = 0; r < world; r++)
        total += (size_t)((const record *)(all + (size_t)r * words_per))->n_ranges;
    x.files = ddpc_calloc((size_t)world, sizeof *x.files);
    x.first = ddpc_calloc((size_t)world + 1, sizeof *x.first);
    x.ranges = ddpc_calloc(total ? total : 1, sizeof *x.ranges);
    x.tensors = ddpc_calloc(nt ? nt : 1, sizeof *x.tensors);
    x.n_tensors = nt;
    char *text = NULL, path[DDPC__CKPT_PATH_MAX], origin[DDPC__CKPT_PATH_MAX];
    size_t len = 0;
    ddpc_status st = DDPC_OK;
    if (!x.files || !x.first || !x.ranges || !x.tensors) {
        st = ddpc_errorf(DDPC_ENOMEM, "out of memory writing the manifest in %s", tmp);
        goto out;
    }
    for (size_t i = 0; i < nt; i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        ddpc__ckpt_tensor *t = &x.tensors[i];
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->ndim = p->ndim;
        memcpy(t->shape, p->shape, sizeof t->shape);
        t->offset = p->offset;
        t->numel = p->numel;
    }
    for (int r = 0, k = 0; r < world; r++) {
        const int64_t *w = all + (size_t)r * words_per;
        const record *rec = (const record *)w;
        snprintf(x.files[r].name, sizeof x.files[r].name, DDPC__CKPT_SHARD_FMT, r, world);
        x.files[r].bytes = (uint64_t)rec->bytes;
        x.files[r].crc = (uint32_t)rec->crc;
        x.first[r] = (size_t)k;
        for (int64_t i = 0; i < rec->n_ranges; i++, k++)
            x.ranges[k] =
                (ddpc_range){(size_t)w[RECORD_WORDS + 2 * i], (size_t)w[RECORD_WORDS + 2 * i + 1]};
        x.first[r + 1] = (size_t)k;
    }
    ddpc_ckpt_state state = *s;
    state.world = world;
    st = ddpc__ckpt_join(path, sizeof path, tmp, DDPC__CKPT_STATE);
    if (st == DDPC_OK)
        st = ddpc__ckpt_join(origin, sizeof origin, dir, name);
    if (st == DDPC_OK) /* the ranks' shards must hold every parameter once: never commit less */
        st = ddpc__ckpt_manifest_check(&x, origin);
    if (st == DDPC_OK)
        st = ddpc__ckpt_state_format(&state, &x, &text, &len);
    if (st == DDPC_OK)
        st = ddpc__ckpt_write_new(path, text, len);
out:
    ddpc_free(text);
    ddpc_free(x.tensors);
    ddpc_free(x.ranges);
    ddpc_free(x.first);
    ddpc_free(x.files);
    if (st != DDPC_OK) {
        ddpc__ckpt_remove_tree(tmp);
        return st;
    }
    ddpc__ckpt_fsync_dir(tmp);
    return ddpc__ckpt_commit(dir, tmp, name, keep, out_path, cap);
}

/* Every rank's record to every rank (two collectives: the longest range list, then the
 * records); *all is ddpc_malloc'd. A rank that cannot allocate says so in a third collective
 * rather than skipping the gather, so no rank waits for it. */
static ddpc_status gather(ddpc_pg *pg, const record *mine, const ddpc_range *ranges,
                          size_t n_ranges, int64_t **all, size_t *words_per)
{
    int world = ddpc_pg_world_size(pg);
    int64_t maxr = (int64_t)n_ranges, oom = 0;
    *all = NULL;
    DDPC_TRY(ddpc_pg_all_reduce(pg, &maxr, &maxr, 1, DDPC_DTYPE_I64, DDPC_REDUCE_MAX));
    *words_per = RECORD_WORDS + 2 * (size_t)maxr;
    int64_t *send = ddpc_calloc(*words_per, sizeof *send);
    int64_t *recv = ddpc_calloc(*words_per * (size_t)world, sizeof *recv);
    oom = !send || !recv;
    ddpc_status s = ddpc_pg_all_reduce(pg, &oom, &oom, 1, DDPC_DTYPE_I64, DDPC_REDUCE_MAX);
    if (s == DDPC_OK && oom)
        s = ddpc_errorf(DDPC_ENOMEM,
                        "out of memory gathering the checkpoint manifest (%zu "
                        "words from each of %d ranks)",
                        *words_per, world);
    if (s == DDPC_OK) {
        memcpy(send, mine, sizeof *mine);
        for (size_t i = 0; i < n_ranges && mine->status == DDPC_OK; i++) {
            send[RECORD_WORDS + 2 * i] = (int64_t)ranges[i].lo;
            send[RECORD_WORDS + 2 * i + 1] = (int64_t)ranges[i].len;
        }
        s = ddpc_pg_all_gather(pg, send, recv, *words_per, DDPC_DTYPE_I64);
    }
    ddpc_free(send);
    if (s != DDPC_OK) {
        ddpc_free(recv);
        return s;
    }
    *all = recv;
    return DDPC_OK;
}

ddpc_status ddpc_ckpt_save_sharded(const char *dir, ddpc_pg *pg, const ddpc_model *m, ddpc_optim *o,
                                   const ddpc_range *ranges, size_t n_ranges,
                                   const ddpc_ckpt_state *s, int64_t keep, char *out_path,
                                   size_t cap)
{
    if (out_path && cap)
        out_path[0] = '\0';
    if (!pg)
        return ddpc_errorf(DDPC_EINVAL, "sharded checkpoint save: no process group");
    int rank = ddpc_pg_rank(pg), world = ddpc_pg_world_size(pg);
    ddpc_status local = check_args(dir, m, o, ranges, n_ranges, s, keep);
    header h;
    memset(&h, 0, sizeof h);
    if (rank == 0) {
        if (local == DDPC_OK)
            local = ddpc__ckpt_begin(dir, s->step, h.name, sizeof h.name, h.path, sizeof h.path);
        h.status = local;
        set_msg(h.msg, local);
    }
    char tmp[DDPC__CKPT_PATH_MAX], name[32];
    DDPC_TRY(share(pg, &h)); /* a failed group: rank 0's directory is left as a stale .tmp-* */
    if (h.status != DDPC_OK)
        return rank == 0 ? local : fail_as(&h);
    memcpy(tmp, h.path, sizeof tmp);
    memcpy(name, h.name, sizeof name);

    record mine = {.n_ranges = (int64_t)n_ranges};
    if (local == DDPC_OK)
        local = write_shard(tmp, rank, world, m, o, ranges, n_ranges, s->zero_stage, &mine);
    mine.status = local;
    set_msg(mine.msg, local);
    if (local != DDPC_OK)
        mine.n_ranges = 0;
    int64_t *all = NULL;
    size_t words_per = 0;
    ddpc_status st = gather(pg, &mine, ranges, local == DDPC_OK ? n_ranges : 0, &all, &words_per);
    if (st != DDPC_OK) {
        if (rank == 0)
            ddpc__ckpt_remove_tree(tmp);
        return st;
    }
    memset(&h, 0, sizeof h);
    if (rank == 0) {
        const record *bad = NULL;
        for (int r = 0; r < world && !bad; r++) {
            const record *rec = (const record *)(all + (size_t)r * words_per);
            bad = rec->status != DDPC_OK ? rec : NULL;
        }
        if (bad) {
            ddpc__ckpt_remove_tree(tmp);
            h.status = bad->status;
            memcpy(h.msg, bad->msg, sizeof h.msg);
            h.msg[sizeof h.msg - 1] = '\0';
        } else {
            h.status =
                finish(dir, tmp, name, world, m, o, s, all, words_per, keep, h.path, sizeof h.path);
            set_msg(h.msg, (ddpc_status)h.status);
        }
    }
    ddpc_free(all);
    DDPC_TRY(share(pg, &h));
    if (h.status != DDPC_OK)
        return fail_as(&h);
    if (out_path && cap)
        snprintf(out_path, cap, "%s", h.path);
    return DDPC_OK;
}
