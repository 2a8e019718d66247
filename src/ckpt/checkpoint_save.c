// SPDX-License-Identifier: MIT
/* ddpc_ckpt_save (the full format) and the commit protocol every format shares: a checkpoint
 * is written into a fresh mkdtemp directory inside the run's checkpoint directory and committed
 * with renames. Invariant: step-<N> and latest change only by rename
 * of fully written, fsynced files or directories, each followed by an fsync of the parent, so a
 * crash at any instruction leaves every step-* and latest either old-and-valid or new-and-valid
 * (a leftover .tmp-* is ignored by readers and removed by the next save). */
#define _GNU_SOURCE /* renameat2 (RENAME_EXCHANGE) */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* optimizer.safetensors: state buffer k of parameter p as "<p.name>.<state name>" (p's shape). */
static ddpc_status write_optimizer(const char *path, const ddpc_model *m, ddpc_optim *o)
{
    size_t nt = ddpc_model_num_tensors(m), ns = ddpc_optim_num_state(o);
    size_t n = nt * ns;
    ddpc_st_tensor *ts = ddpc_calloc(n ? n : 1, sizeof *ts);
    char(*names)[DDPC_PARAM_NAME_MAX + 32] = ddpc_calloc(n ? n : 1, sizeof *names);
    ddpc_status s = DDPC_OK;
    if (!ts || !names) {
        s = ddpc_errorf(DDPC_ENOMEM, "out of memory writing %s", path);
        goto out;
    }
    for (size_t k = 0; k < ns; k++) {
        const char *sname = NULL;
        const float *buf = ddpc_optim_state(o, k, &sname);
        for (size_t i = 0; i < nt; i++) {
            const ddpc_param *p = ddpc_model_tensor(m, i);
            ddpc_st_tensor *t = &ts[k * nt + i];
            snprintf(names[k * nt + i], sizeof names[0], "%s.%s", p->name, sname);
            t->name = names[k * nt + i];
            t->ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++)
                t->shape[d] = p->shape[d];
            t->data = buf + p->offset;
        }
    }
    const ddpc_optim_config *c = ddpc_optim_config_of(o);
    char step[32], lr[32], mom[32], wd[32], b1[32], b2[32], eps[32], damp[32];
    snprintf(step, sizeof step, "%" PRId64, ddpc_optim_step_count(o));
    snprintf(lr, sizeof lr, "%.9g", (double)c->lr);
    snprintf(mom, sizeof mom, "%.9g", (double)c->momentum);
    snprintf(damp, sizeof damp, "%.9g", (double)c->dampening);
    snprintf(wd, sizeof wd, "%.9g", (double)c->weight_decay);
    snprintf(b1, sizeof b1, "%.9g", (double)c->beta1);
    snprintf(b2, sizeof b2, "%.9g", (double)c->beta2);
    snprintf(eps, sizeof eps, "%.9g", (double)c->eps);
    const char *keys[] = {"format",   "optimizer", "step_count", "lr",
                          "momentum", "dampening", "nesterov",   "weight_decay",
                          "beta1",    "beta2",     "eps"};
    const char *vals[] = {"pt", ddpc_optim_type_name(c->type),  step, lr, mom,
                          damp, c->nesterov ? "true" : "false", wd,   b1, b2,
                          eps};
    s = ddpc_safetensors_write(path, ts, n, keys, vals, sizeof keys / sizeof keys[0]);
out:
    ddpc_free(names);
    ddpc_free(ts);
    return s;
}

/* Writes the three files into tmp and fsyncs it. */
static ddpc_status write_parts(const char *tmp, const ddpc_model *m, ddpc_optim *o,
                               const ddpc_ckpt_state *s)
{
    char path[DDPC__CKPT_PATH_MAX];
    ddpc__ckpt_file files[2] = {{.name = DDPC__CKPT_MODEL}, {.name = DDPC__CKPT_OPTIM}};
    ddpc__ckpt_extra x = {.files = files, .n_files = 2};
    snprintf(x.model_type, sizeof x.model_type, "%s", ddpc_model_config_of(m)->type);
    x.num_params = (int64_t)ddpc_model_num_params(m);
    snprintf(x.optim_type, sizeof x.optim_type, "%s",
             ddpc_optim_type_name(ddpc_optim_config_of(o)->type));
    x.optim_step_count = ddpc_optim_step_count(o);

    DDPC_TRY(ddpc__ckpt_join(path, sizeof path, tmp, DDPC__CKPT_MODEL));
    DDPC_TRY(ddpc_weights_save_model(m, path));
    DDPC_TRY(ddpc__ckpt_file_crc(path, &x.files[0].bytes, &x.files[0].crc));
    DDPC_TRY(ddpc__ckpt_join(path, sizeof path, tmp, DDPC__CKPT_OPTIM));
    DDPC_TRY(write_optimizer(path, m, o));
    DDPC_TRY(ddpc__ckpt_file_crc(path, &x.files[1].bytes, &x.files[1].crc));

    ddpc_ckpt_state st = *s;
    char *text = NULL;
    size_t len = 0;
    DDPC_TRY(ddpc__ckpt_state_format(&st, &x, &text, &len));
    ddpc_status r = ddpc__ckpt_join(path, sizeof path, tmp, DDPC__CKPT_STATE);
    if (r == DDPC_OK)
        r = ddpc__ckpt_write_new(path, text, len);
    ddpc_free(text);
    if (r == DDPC_OK)
        ddpc__ckpt_fsync_dir(tmp);
    return r;
}

/* Moves tmp to final. If final exists (a re-save of a step), the two are swapped atomically
 * (renameat2 RENAME_EXCHANGE) and the old one, now at tmp, is removed; where the kernel lacks
 * it, final is first renamed aside, which leaves a moment without final (readers then fall back
 * to an older checkpoint, never to a torn one). */
static ddpc_status commit_dir(const char *dir, const char *tmp, const char *final)
{
    if (rename(tmp, final) == 0)
        return DDPC_OK;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return ddpc_errorf(DDPC_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
    if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        ddpc__ckpt_fsync_dir(dir);
        ddpc__ckpt_remove_tree(tmp); /* the old step; a leftover is removed as stale later */
        return DDPC_OK;
    }
    char aside[DDPC__CKPT_PATH_MAX];
    if (snprintf(aside, sizeof aside, "%s/.tmp-old-%ld-XXXXXX", dir, (long)getpid()) >=
            (int)sizeof aside ||
        !mkdtemp(aside))
        return ddpc_errorf(DDPC_EIO, "cannot replace %s: %s", final, strerror(errno));
    if (rename(final, aside) != 0) {
        ddpc_status st = ddpc_errorf(DDPC_EIO, "cannot replace %s: %s", final, strerror(errno));
        rmdir(aside);
        return st;
    }
    if (rename(tmp, final) != 0) {
        ddpc_status st = ddpc_errorf(DDPC_EIO, "cannot replace %s: %s", final, strerror(errno));
        (void)rename(aside, final); /* put the old one back */
        return st;
    }
    ddpc__ckpt_fsync_dir(dir);
    ddpc__ckpt_remove_tree(aside);
    return DDPC_OK;
}

/* Points <dir>/latest at name: a unique temporary file, fsync, rename over latest, fsync dir. */
static ddpc_status write_latest(const char *dir, const char *name)
{
    char tmp[DDPC__CKPT_PATH_MAX], latest[DDPC__CKPT_PATH_MAX], line[64];
    DDPC_TRY(ddpc__ckpt_join(latest, sizeof latest, dir, DDPC__CKPT_LATEST));
    if (snprintf(tmp, sizeof tmp, "%s/.tmp-latest-%ld-XXXXXX", dir, (long)getpid()) >=
        (int)sizeof tmp)
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long", dir);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int len = snprintf(line, sizeof line, "%s\n", name);
    bool ok = ddpc_fd_write_all(fd, line, (size_t)len) == 0 && fsync(fd) == 0;
    (void)fchmod(fd, 0644);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, latest) != 0) {
        ddpc_status s = ddpc_errorf(DDPC_EIO, "cannot update %s: %s", latest, strerror(errno));
        unlink(tmp);
        return s;
    }
    ddpc__ckpt_fsync_dir(dir);
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_begin(const char *dir, int64_t step, char *name, size_t name_cap, char *tmp,
                             size_t cap)
{
    DDPC_TRY(ddpc_mkdirs(dir));
    snprintf(name, name_cap, "step-%08lld", (long long)step);
    if (snprintf(tmp, cap, "%s/.tmp-%s-%ld-XXXXXX", dir, name, (long)getpid()) >= (int)cap)
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long", dir);
    if (!mkdtemp(tmp))
        return ddpc_errorf(DDPC_EIO, "cannot create a temporary directory in %s: %s", dir,
                           strerror(errno));
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_commit(const char *dir, const char *tmp, const char *name, int64_t keep,
                              char *out_path, size_t cap)
{
    char final[DDPC__CKPT_PATH_MAX];
    ddpc_status r = ddpc__ckpt_join(final, sizeof final, dir, name);
    if (r == DDPC_OK)
        r = commit_dir(dir, tmp, final);
    if (r != DDPC_OK) {
        ddpc__ckpt_remove_tree(tmp);
        return r;
    }
    ddpc__ckpt_fsync_dir(dir);
    DDPC_TRY(write_latest(dir, name));
    if (out_path && cap)
        snprintf(out_path, cap, "%s", final);
    return ddpc__ckpt_prune(dir, keep, name);
}

ddpc_status ddpc_ckpt_save(const char *dir, const ddpc_model *m, ddpc_optim *o,
                           const ddpc_ckpt_state *s, int64_t keep, char *out_path, size_t cap)
{
    if (out_path && cap)
        out_path[0] = '\0';
    if (!dir || !m || !o || !s)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint save: dir, model, optimizer or state is NULL");
    if (s->step < 0 || keep < 0)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint save: negative step %lld or keep %lld",
                           (long long)s->step, (long long)keep);
    if (ddpc_optim_numel(o) != ddpc_model_num_params(m))
        return ddpc_errorf(DDPC_EINVAL,
                           "checkpoint save: the optimizer holds %zu parameters but "
                           "the model has %zu",
                           ddpc_optim_numel(o), ddpc_model_num_params(m));
    char name[32], tmp[DDPC__CKPT_PATH_MAX];
    DDPC_TRY(ddpc__ckpt_begin(dir, s->step, name, sizeof name, tmp, sizeof tmp));
    ddpc_status r = write_parts(tmp, m, o, s);
    if (r != DDPC_OK) {
        ddpc__ckpt_remove_tree(tmp);
        return r;
    }
    return ddpc__ckpt_commit(dir, tmp, name, keep, out_path, cap);
}
