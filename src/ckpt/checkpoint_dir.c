// SPDX-License-Identifier: MIT
/* A run's checkpoint directory as readers see it: verification of one checkpoint, the latest
 * verifiable one, listings, pruning and removal of stale temporaries. Verification is the same
 * for both formats: every file state.json lists (model and optimizer, or one shard per rank)
 * has its recorded size and CRC-32, and a sharded manifest holds every tensor element once.
 * Invariant: readers look only at step-<digits> directories and `latest`; anything named .tmp-*
 * belongs to a writer and is removed only when that writer is dead, is this process, or has not
 * touched it for an hour. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STALE_SECONDS 3600

bool ddpc_ckpt_is_dir(const char *path)
{
    char p[DDPC__CKPT_PATH_MAX];
    struct stat st;
    /* Anything but a directory named state.json counts: loading it then says what is wrong
     * with it (a FIFO, a dangling link) instead of looking for checkpoints inside. */
    return path && ddpc__ckpt_join(p, sizeof p, path, DDPC__CKPT_STATE) == DDPC_OK &&
           lstat(p, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* Size and CRC-32 of every file x lists against the record. */
static ddpc_status verify_files(const char *path, const ddpc__ckpt_extra *x)
{
    for (size_t i = 0; i < x->n_files; i++) {
        char file[DDPC__CKPT_PATH_MAX];
        uint64_t bytes;
        uint32_t crc;
        DDPC_TRY(ddpc__ckpt_join(file, sizeof file, path, x->files[i].name));
        DDPC_TRY(ddpc__ckpt_file_crc(file, &bytes, &crc));
        if (bytes != x->files[i].bytes)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: %llu bytes, but state.json records %llu "
                               "(corrupt checkpoint)",
                               file, (unsigned long long)bytes,
                               (unsigned long long)x->files[i].bytes);
        if (crc != x->files[i].crc)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: CRC-32 %08x does not match state.json's %08x "
                               "(corrupt checkpoint)",
                               file, (unsigned)crc, (unsigned)x->files[i].crc);
    }
    return DDPC_OK;
}

ddpc_status ddpc_ckpt_verify(const char *path)
{
    if (!path)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint verify: path is NULL");
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return ddpc_errorf(DDPC_EFORMAT, "%s is not a checkpoint directory", path);
    ddpc_ckpt_state s;
    ddpc__ckpt_extra x;
    ddpc_status r = ddpc__ckpt_state_load(path, &s, &x);
    ddpc_ckpt_state_fini(&s);
    if (r == DDPC_OK)
        r = verify_files(path, &x);
    if (r == DDPC_OK && x.zero_stage > 0) {
        char origin[DDPC__CKPT_PATH_MAX];
        r = ddpc__ckpt_join(origin, sizeof origin, path, DDPC__CKPT_STATE);
        if (r == DDPC_OK)
            r = ddpc__ckpt_manifest_check(&x, origin);
    }
    ddpc__ckpt_extra_fini(&x);
    return r;
}

/* The name `latest` holds ("" if none or not a step name). */
static void read_latest(const char *dir, char *name, size_t cap)
{
    char path[DDPC__CKPT_PATH_MAX], *text = NULL;
    size_t len = 0;
    int64_t step;
    bool missing;
    name[0] = '\0';
    /* No pointer, or an unreadable one: the newest complete step directory decides. */
    if (ddpc__ckpt_join(path, sizeof path, dir, DDPC__CKPT_LATEST) != DDPC_OK ||
        ddpc_read_regular_file(path, NULL, 256, &missing, &text, &len) != DDPC_OK || missing)
        return;
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r'))
        text[--len] = '\0';
    if (ddpc__ckpt_parse_step_name(text, &step) && len < cap)
        memcpy(name, text, len + 1);
    ddpc_free(text);
}

static int by_step(const void *a, const void *b)
{
    const ddpc_ckpt_entry *x = a, *y = b;
    return x->step < y->step ? -1 : x->step > y->step;
}

/* The step-* directories of dir sorted by step, not verified. */
static ddpc_status scan(const char *dir, ddpc_ckpt_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? DDPC_OK
                               : ddpc_errorf(DDPC_EIO, "cannot read %s: %s", dir, strerror(errno));
    size_t cap = 0;
    ddpc_status s = DDPC_OK;
    struct dirent *e;
    int64_t step;
    while ((e = readdir(d))) {
        if (!ddpc__ckpt_parse_step_name(e->d_name, &step) || strlen(e->d_name) >= 32)
            continue;
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            ddpc_ckpt_entry *p = ddpc_calloc(nc, sizeof *p);
            if (!p) {
                s = ddpc_errorf(DDPC_ENOMEM, "out of memory listing %s", dir);
                break;
            }
            if (*n)
                memcpy(p, *out, *n * sizeof *p);
            ddpc_free(*out);
            *out = p;
            cap = nc;
        }
        ddpc_ckpt_entry *en = &(*out)[(*n)++];
        memset(en, 0, sizeof *en);
        memcpy(en->name, e->d_name, strlen(e->d_name) + 1); /* < 32 bytes, checked above */
        en->step = step;
        en->epoch = -1;
    }
    closedir(d);
    if (s != DDPC_OK) {
        ddpc_free(*out);
        *out = NULL;
        *n = 0;
        return s;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, by_step);
    return DDPC_OK;
}

/* Appends the checkpoint `name` of dir that did not verify, with verify's message, to *out. */
static ddpc_status note_skip(const char *dir, const char *name, ddpc_ckpt_entry **out, size_t *n)
{
    ddpc_ckpt_entry *grown = ddpc_malloc((*n + 1) * sizeof *grown);
    if (!grown)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory listing the checkpoints of %s", dir);
    if (*n)
        memcpy(grown, *out, *n * sizeof *grown);
    ddpc_free(*out);
    *out = grown;
    ddpc_ckpt_entry *e = &grown[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    if (!ddpc__ckpt_parse_step_name(name, &e->step))
        e->step = -1;
    e->epoch = -1;
    snprintf(e->problem, sizeof e->problem, "%s", ddpc_last_error());
    return DDPC_OK;
}

/* Tries the checkpoint `name` of dir: *ok when it verifies, else it is noted in *skipped. */
static ddpc_status try_one(const char *dir, const char *name, char *p, size_t cap, bool *ok,
                           ddpc_ckpt_entry **skipped, size_t *n_skipped)
{
    *ok = false;
    if (ddpc__ckpt_join(p, cap, dir, name) != DDPC_OK)
        return note_skip(dir, name, skipped, n_skipped);
    if (ddpc_ckpt_verify(p) == DDPC_OK) {
        *ok = true;
        return DDPC_OK;
    }
    return note_skip(dir, name, skipped, n_skipped);
}

ddpc_status ddpc_ckpt_find_usable(const char *dir, char *path, size_t cap, bool *found,
                                  ddpc_ckpt_entry **skipped, size_t *n_skipped)
{
    *found = false;
    *skipped = NULL;
    *n_skipped = 0;
    if (!dir || !path || !cap)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint find_latest: dir or path is NULL");
    path[0] = '\0';
    char name[64], p[DDPC__CKPT_PATH_MAX];
    ddpc_status s = DDPC_OK;
    read_latest(dir, name, sizeof name);
    if (name[0])
        s = try_one(dir, name, p, sizeof p, found, skipped, n_skipped);
    if (s == DDPC_OK && !*found) {
        ddpc_ckpt_entry *e = NULL;
        size_t n = 0;
        s = scan(dir, &e, &n);
        for (size_t i = n; s == DDPC_OK && i-- > 0 && !*found;)
            if (strcmp(e[i].name, name) != 0) /* `latest`'s was tried first */
                s = try_one(dir, e[i].name, p, sizeof p, found, skipped, n_skipped);
        ddpc_free(e);
    }
    if (s != DDPC_OK) {
        ddpc_free(*skipped);
        *skipped = NULL;
        *n_skipped = 0;
        *found = false;
        return s;
    }
    ddpc_clear_error();
    if (*found && strlen(p) >= cap) {
        *found = false;
        return ddpc_errorf(DDPC_EINVAL, "%s: path too long for the caller's buffer", p);
    }
    if (*found)
        memcpy(path, p, strlen(p) + 1);
    return DDPC_OK;
}

ddpc_status ddpc_ckpt_find_latest(const char *dir, char *path, size_t cap, bool *found)
{
    ddpc_ckpt_entry *skipped;
    size_t n;
    ddpc_status s = ddpc_ckpt_find_usable(dir, path, cap, found, &skipped, &n);
    ddpc_free(skipped);
    return s;
}

ddpc_status ddpc_ckpt_resolve(const char *path, char *out, size_t cap)
{
    if (!path || !out || !cap)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint resolve: path or out is NULL");
    if (ddpc_ckpt_is_dir(path)) {
        if (strlen(path) >= cap)
            return ddpc_errorf(DDPC_EINVAL, "%s: path too long", path);
        memcpy(out, path, strlen(path) + 1);
        return DDPC_OK;
    }
    bool found;
    DDPC_TRY(ddpc_ckpt_find_latest(path, out, cap, &found));
    if (!found)
        return ddpc_errorf(DDPC_EINVAL, "%s: no complete checkpoint found", path);
    return DDPC_OK;
}

ddpc_status ddpc_ckpt_list(const char *dir, ddpc_ckpt_entry **out, size_t *n)
{
    if (!dir || !out || !n)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint list: NULL argument");
    DDPC_TRY(scan(dir, out, n));
    char latest[64];
    read_latest(dir, latest, sizeof latest);
    for (size_t i = 0; i < *n; i++) {
        ddpc_ckpt_entry *e = &(*out)[i];
        char p[DDPC__CKPT_PATH_MAX], f[DDPC__CKPT_PATH_MAX];
        if (ddpc__ckpt_join(p, sizeof p, dir, e->name) != DDPC_OK)
            continue;
        e->latest = strcmp(latest, e->name) == 0;
        e->ok = ddpc_ckpt_verify(p) == DDPC_OK;
        if (!e->ok)
            snprintf(e->problem, sizeof e->problem, "%s", ddpc_last_error());
        ddpc_ckpt_state s;
        ddpc__ckpt_extra x;
        struct stat st;
        if (ddpc__ckpt_state_load(p, &s, &x) == DDPC_OK) {
            e->epoch = s.epoch;
            e->world = s.world;
            e->zero_stage = s.zero_stage;
            ddpc_ckpt_state_fini(&s);
            for (size_t k = 0; k < x.n_files; k++)
                if (ddpc__ckpt_join(f, sizeof f, p, x.files[k].name) == DDPC_OK &&
                    stat(f, &st) == 0)
                    e->bytes += (uint64_t)st.st_size;
        } else { /* unreadable state.json: count the files of the full format */
            static const char *const parts[] = {DDPC__CKPT_MODEL, DDPC__CKPT_OPTIM};
            for (size_t k = 0; k < 2; k++)
                if (ddpc__ckpt_join(f, sizeof f, p, parts[k]) == DDPC_OK && stat(f, &st) == 0)
                    e->bytes += (uint64_t)st.st_size;
        }
        ddpc__ckpt_extra_fini(&x);
        if (ddpc__ckpt_join(f, sizeof f, p, DDPC__CKPT_STATE) == DDPC_OK && stat(f, &st) == 0)
            e->bytes += (uint64_t)st.st_size;
    }
    ddpc_clear_error();
    return DDPC_OK;
}

/* Whether a .tmp-* entry may go: its writer is dead or is us, or it is an hour old. */
static bool stale(const char *dir, const char *name)
{
    long pid = ddpc__ckpt_tmp_pid(name);
    if (pid < 0)
        return false;
    if (pid == (long)getpid() || (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return true;
    char p[DDPC__CKPT_PATH_MAX];
    struct stat st;
    return ddpc__ckpt_join(p, sizeof p, dir, name) == DDPC_OK && lstat(p, &st) == 0 &&
           time(NULL) - st.st_mtime > STALE_SECONDS;
}

static void remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[DDPC__CKPT_PATH_MAX];
    while (d && (e = readdir(d)))
        if (stale(dir, e->d_name) && ddpc__ckpt_join(p, sizeof p, dir, e->d_name) == DDPC_OK)
            ddpc__ckpt_remove_tree(p);
    if (d)
        closedir(d);
}

ddpc_status ddpc__ckpt_prune(const char *dir, int64_t keep, const char *keep_name)
{
    ddpc_ckpt_entry *e = NULL;
    size_t n = 0;
    ddpc_status s = DDPC_OK;
    if (keep > 0)
        DDPC_TRY(scan(dir, &e, &n));
    char latest[64];
    read_latest(dir, latest, sizeof latest);
    /* Newest first: the first `keep` stay. Each victim is renamed to a temporary name first so
     * that a half-removed checkpoint is never visible as step-*. */
    for (size_t i = n, kept = 0; i-- > 0;) {
        if (kept < (size_t)keep || strcmp(e[i].name, keep_name) == 0 ||
            strcmp(e[i].name, latest) == 0) {
            kept++;
            continue;
        }
        char from[DDPC__CKPT_PATH_MAX], aside[DDPC__CKPT_PATH_MAX];
        if (ddpc__ckpt_join(from, sizeof from, dir, e[i].name) != DDPC_OK ||
            snprintf(aside, sizeof aside, "%s/.tmp-prune-%s-%ld-XXXXXX", dir, e[i].name,
                     (long)getpid()) >= (int)sizeof aside)
            continue;
        if (!mkdtemp(aside) || rename(from, aside) != 0) {
            s = ddpc_errorf(DDPC_EIO, "cannot prune checkpoint %s: %s", from, strerror(errno));
            rmdir(aside);
            break;
        }
    }
    ddpc_free(e);
    ddpc__ckpt_fsync_dir(dir);
    remove_stale(dir);
    return s;
}
