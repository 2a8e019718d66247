// SPDX-License-Identifier: MIT
/* The shm rendezvous by run id (TORCHELASTIC_RUN_ID, a SLURM step, an mpirun job id): the
 * segment is named from the user id, the sanitised run id, MASTER_PORT (torchrun's agent already
 * listens there, so it only tells jobs apart) and the restart count, plus a hash of the raw run
 * id. Rank 0 creates it O_EXCL; a leftover whose creator died is replaced, a live one is an
 * error; other ranks poll until it is ready; a launcher removes what ranks that died during the
 * rendezvous left (ddpc_pg_shm_remove). Invariant: a rank attaches only to a segment whose
 * creator is alive, so a stale segment never captures a new job. */
#include "comm/shm_impl.h"

#include <ddpc/timer.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { RUN_ID_CHARS = 40 };
static const double UNINIT_GRACE_S = 1.0; /* a creator takes far less to write its header */

void ddpc__shm_segment_name(const ddpc_comm_env *env, char *out, size_t cap)
{
    char clean[RUN_ID_CHARS + 1];
    uint64_t hash = 1469598103934665603ull; /* FNV-1a over the raw id */
    size_t n = 0;
    for (const char *p = env->run_id; *p; p++) {
        hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
        if (n < RUN_ID_CHARS) {
            char ch = *p;
            bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                        (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
            clean[n++] = keep ? ch : '_';
        }
    }
    clean[n] = '\0';
    snprintf(out, cap, "/ddpc-u%d-%s-p%d-r%d-%016llx", (int)getuid(), clean, env->master_port,
             env->restart_count, (unsigned long long)hash);
}

static void nap_ms(int ms)
{
    nanosleep(&(struct timespec){0, (long)ms * 1000000}, NULL);
}

/* The owner recorded in segment `name`'s header (left 0 when it has none yet); false when no
 * segment has that name. */
static bool segment_owner(const char *name, int32_t *owner, uint64_t *start)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size >= DDPC__SHM_HEADER) {
        ddpc__shm_header *h = mmap(NULL, DDPC__SHM_HEADER, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            *owner = h->owner_pid;
            *start = h->owner_start;
            munmap(h, DDPC__SHM_HEADER);
        }
    }
    close(fd);
    return true;
}

ddpc_status ddpc_pg_shm_remove(const ddpc_comm_env *env)
{
    if (env->run_id[0] == '\0')
        return DDPC_OK;
    char name[DDPC__SHM_NAME_CAP + 64];
    ddpc__shm_segment_name(env, name, sizeof name);
    int32_t owner = 0;
    uint64_t start = 0;
    if (segment_owner(name, &owner, &start) && owner != 0 && ddpc__pid_alive(owner, start))
        return DDPC_OK; /* not ours to take: a live rank still uses it */
    if (shm_unlink(name) != 0 && errno != ENOENT)
        return ddpc_errorf(DDPC_EIO, "cannot remove shm segment /dev/shm%s: %s", name,
                           strerror(errno));
    return DDPC_OK;
}

/* An existing segment under our name: DDPC_OK after removing a stale one, DDPC_EINVAL to look
 * again later (its creator is still writing it), or an error if a live job owns it. */
static ddpc_status judge_existing(const char *name, const ddpc_comm_env *env, double *first_seen)
{
    int32_t owner = 0;
    uint64_t start = 0;
    if (!segment_owner(name, &owner, &start))
        return DDPC_OK; /* vanished meanwhile */
    if (owner != 0 && ddpc__pid_alive(owner, start))
        return ddpc_errorf(DDPC_EIO,
                           "run id '%s' is in use by pid %d (another job with the same "
                           "run id and port?)",
                           env->run_id, (int)owner);
    double now = ddpc_time_now();
    if (owner == 0 && *first_seen == 0)
        *first_seen = now;
    if (owner == 0 && now - *first_seen < UNINIT_GRACE_S)
        return DDPC_EINVAL;
    shm_unlink(name); /* its creator died: replace it */
    return DDPC_OK;
}

static ddpc_status rank0(ddpc__shm_state *s, const ddpc_comm_env *env, const char *name,
                         double deadline)
{
    char host[DDPC__SHM_HOST_CAP];
    ddpc__host_name(host, sizeof host);
    void *base = NULL;
    double first_seen = 0;
    for (;;) {
        ddpc_status st = ddpc__shm_seg_create(name, s->world, host, &base, &s->map_bytes);
        if (st == DDPC_OK)
            break;
        if (st != DDPC_EINVAL)
            return st;
        st = judge_existing(name, env, &first_seen);
        if (st == DDPC_EINVAL)
            nap_ms(10);
        else if (st != DDPC_OK)
            return st;
        if (ddpc_time_now() > deadline)
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "shm rendezvous for run id '%s' timed out after "
                               "%.3g s: could not take segment %s",
                               env->run_id, s->timeout_s, name);
    }
    ddpc__shm_bind(s, base);
    ddpc_status st = ddpc__shm_claim(s);
    atomic_store_explicit(&s->hdr->ready, 1, memory_order_release);
    char where[200];
    snprintf(where, sizeof where, "for run id '%s'", env->run_id);
    if (st == DDPC_OK)
        st = ddpc__shm_wait_joined(s, name, deadline, where);
    if (st != DDPC_OK) {
        ddpc__shm_abort(s, st);
        shm_unlink(name);
    }
    return st;
}

static ddpc_status rank_n(ddpc__shm_state *s, const ddpc_comm_env *env, const char *name,
                          double deadline)
{
    void *base = NULL;
    for (;;) {
        bool retry = false;
        ddpc_status st = ddpc__shm_seg_open(name, s->world, &base, &s->map_bytes, &retry);
        if (st == DDPC_OK) {
            ddpc__shm_header *h = base;
            if (ddpc__pid_alive(h->owner_pid, h->owner_start))
                break;
            munmap(base, s->map_bytes); /* left by a dead job; rank 0 will replace it */
        } else if (!retry) {
            return st;
        }
        if (ddpc_time_now() > deadline)
            return ddpc_errorf(DDPC_ETIMEOUT,
                               "shm rendezvous for run id '%s' timed out after "
                               "%.3g s: rank 0 never created segment %s",
                               env->run_id, s->timeout_s, name);
        nap_ms(5);
    }
    ddpc__shm_bind(s, base);
    ddpc_status st = ddpc__shm_claim(s);
    if (st != DDPC_OK) {
        ddpc__shm_abort(s, st);
        return st;
    }
    char where[200];
    snprintf(where, sizeof where, "for run id '%s'", env->run_id);
    return ddpc__shm_wait_joined(s, name, deadline, where);
}

ddpc_status ddpc__shm_rdzv_named(ddpc__shm_state *s, const ddpc_comm_env *env, double deadline)
{
    char name[DDPC__SHM_NAME_CAP + 64];
    ddpc__shm_segment_name(env, name, sizeof name);
    return s->rank == 0 ? rank0(s, env, name, deadline) : rank_n(s, env, name, deadline);
}
