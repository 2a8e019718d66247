// SPDX-License-Identifier: MIT
/* The ranks' agreement on checkpoints, one small collective each: at resume every rank
 * all-gathers what it loaded (its status, step, the checkpoint's name, state.json's own CRC and
 * the position it placed the run at), and after this run's first save every rank checks that it
 * sees the state.json rank 0 committed. Invariant: every rank issues the same collectives
 * whatever failed locally (a failure travels in the records), so no rank waits for one that gave
 * up, and every rank returns the same verdict. Under ZeRO each rank loads its own shard: the
 * record holds what all must share, never the shard's bytes. */
#include "train/trainer_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/checkpoint.h>

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define MSG_BYTES 512
#define MAX_NAMED 8 /* ranks a message lists before "and N more" */

/* One rank's account of its resume, all-gathered as int64 words. */
typedef struct {
    int64_t status;
    int64_t step;       /* the engine's step after resuming (0 when nothing was loaded) */
    int64_t digest;     /* crc32 of the identity below and the position; 0 when nothing */
    char name[32];      /* the checkpoint directory's name, "" when nothing was loaded */
    char msg[MSG_BYTES];
} vote;
static_assert(sizeof(vote) % sizeof(int64_t) == 0, "a vote is sent as int64 words");
#define VOTE_WORDS (sizeof(vote) / sizeof(int64_t))

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* What every rank must agree on: the checkpoint (its name and state.json's CRC, which covers
 * every file's CRC and every counter) and where this rank placed the run. */
static int64_t digest_of(const ddpc_trainer *t, const ddpc_ckpt_state *st, const char *name)
{
    int64_t pos[4] = {ddpc_engine_step(t->engine), t->pos.epoch, t->pos.epoch_step, st->state_crc};
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, (const Bytef *)pos, (uInt)sizeof pos);
    c = crc32(c, (const Bytef *)name, (uInt)strlen(name));
    return (int64_t)c;
}

static void describe(char *buf, size_t cap, int rank, const vote *v)
{
    if (v->name[0])
        snprintf(buf, cap, "rank %d resumed %s at step %lld (digest %08llx)", rank, v->name,
                 (long long)v->step, (unsigned long long)(uint32_t)v->digest);
    else
        snprintf(buf, cap, "rank %d found no checkpoint (step 0)", rank);
}

/* The verdict on the gathered votes: a failed rank's message, or the ranks that differ from
 * rank 0. */
static ddpc_status verdict(const ddpc_trainer *t, ddpc_status local, const vote *all)
{
    for (int r = 0; r < t->dist.world; r++) {
        const vote *v = &all[r];
        if (v->status == DDPC_OK)
            continue;
        if (local != DDPC_OK) /* this rank's own message stands */
            return local;
        return ddpc_errorf((ddpc_status)v->status, "resume failed on rank %d: %.*s", r,
                           MSG_BYTES, v->msg);
    }
    char list[700] = "", one[160];
    size_t at = 0;
    int differ = 0;
    for (int r = 1; r < t->dist.world; r++) {
        const vote *v = &all[r];
        if (v->step == all[0].step && v->digest == all[0].digest &&
            strcmp(v->name, all[0].name) == 0)
            continue;
        if (++differ > MAX_NAMED)
            continue;
        describe(one, sizeof one, r, v);
        int w = snprintf(list + at, sizeof list - at, "; %s", one);
        at += w > 0 && (size_t)w < sizeof list - at ? (size_t)w : 0;
    }
    if (!differ)
        return DDPC_OK;
    describe(one, sizeof one, 0, &all[0]);
    char more[48] = "";
    if (differ > MAX_NAMED)
        snprintf(more, sizeof more, "; and %d more ranks", differ - MAX_NAMED);
    return ddpc_errorf(DDPC_EINVAL,
                       "resume: the ranks did not load the same state: %s%s%s; checkpoint.dir "
                       "'%s' must be on a file system every rank sees",
                       one, list, more, t->set.ckpt_dir);
}

ddpc_status ddpc__trainer_resume_agree(ddpc_trainer *t, ddpc_status local,
                                       const ddpc_ckpt_state *st, const char *path)
{
    if (t->dist.world <= 1)
        return local;
    vote mine;
    memset(&mine, 0, sizeof mine);
    mine.status = local;
    if (local != DDPC_OK) {
        snprintf(mine.msg, sizeof mine.msg, "%s", ddpc_last_error());
    } else if (st) {
        snprintf(mine.name, sizeof mine.name, "%s", base_name(path));
        mine.step = ddpc_engine_step(t->engine);
        mine.digest = digest_of(t, st, mine.name);
    }
    vote *all = ddpc_calloc((size_t)t->dist.world, sizeof *all);
    if (!all) /* the others then fail at the group's timeout, as for a dead rank */
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %d ranks' resume records",
                           t->dist.world);
    ddpc_status s = ddpc_pg_all_gather(t->dist.pg, &mine, all, VOTE_WORDS, DDPC_DTYPE_I64);
    if (s == DDPC_OK)
        s = verdict(t, local, all);
    else if (local != DDPC_OK)
        s = ddpc_errorf(local, "%.*s", MSG_BYTES, mine.msg); /* its own reason comes first */
    ddpc_free(all);
    return s;
}

/* Rank 0's word on its first save: the outcome and what it committed. */
typedef struct {
    int64_t status;
    int64_t state_crc;
    char path[1104];
    char msg[MSG_BYTES];
} commit_note;
static_assert(sizeof(commit_note) % sizeof(int64_t) == 0, "a note is sent as int64 words");

ddpc_status ddpc__trainer_save_seen(ddpc_trainer *t, ddpc_status local, const char *path)
{
    if (t->dist.world <= 1)
        return local;
    commit_note n;
    memset(&n, 0, sizeof n);
    ddpc_ckpt_state st = {0};
    if (t->dist.rank == 0) {
        if (local == DDPC_OK)
            local = ddpc_ckpt_read_state(path, &st);
        ddpc_ckpt_state_fini(&st);
        n.status = local;
        n.state_crc = st.state_crc;
        snprintf(n.path, sizeof n.path, "%s", path);
        if (local != DDPC_OK)
            snprintf(n.msg, sizeof n.msg, "%s", ddpc_last_error());
    }
    DDPC_TRY(ddpc_pg_broadcast(t->dist.pg, &n, sizeof n / sizeof(int64_t), DDPC_DTYPE_I64, 0));
    if (n.status != DDPC_OK) /* the same failure everywhere: no rank checks */
        return local != DDPC_OK ? local
                                : ddpc_errorf((ddpc_status)n.status,
                                              "saving the checkpoint failed on rank 0: %.*s",
                                              MSG_BYTES, n.msg);
    /* Whatever this rank's save said (ZeRO: the same as rank 0's), can it see the commit? */
    int64_t seen = 1;
    char why[MSG_BYTES] = "";
    if (t->dist.rank != 0) {
        ddpc_status r = ddpc_ckpt_read_state(n.path, &st);
        ddpc_ckpt_state_fini(&st);
        if (r != DDPC_OK)
            snprintf(why, sizeof why, ": %s", ddpc_last_error());
        else if (st.state_crc != (uint32_t)n.state_crc)
            snprintf(why, sizeof why, ": it sees another state.json there (CRC-32 %08x, rank "
                                      "0 wrote %08x)",
                     (unsigned)st.state_crc, (unsigned)n.state_crc);
        seen = r == DDPC_OK && st.state_crc == (uint32_t)n.state_crc;
    }
    int64_t *all = ddpc_calloc((size_t)t->dist.world, sizeof *all);
    if (!all) /* the others then fail at the group's timeout, as for a dead rank */
        return ddpc_errorf(DDPC_ENOMEM, "out of memory checking checkpoint %s", n.path);
    ddpc_status s = ddpc_pg_all_gather(t->dist.pg, &seen, all, 1, DDPC_DTYPE_I64);
    if (s != DDPC_OK) {
        ddpc_free(all);
        return s;
    }
    char ranks[160] = "";
    size_t at = 0;
    int blind = 0;
    for (int r = 0; r < t->dist.world; r++) {
        if (all[r] || ++blind > MAX_NAMED)
            continue;
        int w = snprintf(ranks + at, sizeof ranks - at, "%s%d", at ? ", " : "", r);
        at += w > 0 && (size_t)w < sizeof ranks - at ? (size_t)w : 0;
    }
    ddpc_free(all);
    if (!blind)
        return DDPC_OK;
    return ddpc_errorf(DDPC_EINVAL,
                       "checkpoint.dir '%s' must be on a file system every rank sees: rank%s %s%s "
                       "cannot see the checkpoint %s that rank 0 committed%s",
                       t->set.ckpt_dir, blind == 1 ? "" : "s", ranks,
                       blind > MAX_NAMED ? " and more" : "", n.path, why);
}
