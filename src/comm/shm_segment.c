// SPDX-License-Identifier: MIT
/* The shm segment as a file in /dev/shm: geometry, create/open/map, claiming a rank's slot, and
 * process liveness from /proc. Invariant: a segment is used only after its header says `ready`
 * (set last by its creator), and its size and world size are checked before any other access. */
#include "comm/shm_impl.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
              "shared-memory atomics must be lock-free to work across processes");
static_assert(sizeof(ddpc__shm_header) <= DDPC__SHM_HEADER, "header fits its page");

static size_t ranks_bytes(int world)
{
    size_t b = (size_t)world * sizeof(ddpc__shm_rank);
    return (b + 4095) / 4096 * 4096;
}

size_t ddpc__shm_total_bytes(int world)
{
    return DDPC__SHM_HEADER + ranks_bytes(world) + (size_t)world * 4 * DDPC__SHM_SLOT;
}

void ddpc__shm_bind(ddpc__shm_state *s, void *base)
{
    s->hdr = base;
    s->ranks = (ddpc__shm_rank *)((unsigned char *)base + DDPC__SHM_HEADER);
    s->data = (unsigned char *)base + DDPC__SHM_HEADER + ranks_bytes(s->world);
    s->slot = DDPC__SHM_SLOT;
}

ddpc_status ddpc__shm_seg_create(const char *name, int world, const char *host, void **base,
                                 size_t *bytes)
{
    size_t total = ddpc__shm_total_bytes(world);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return ddpc_errorf(errno == EEXIST ? DDPC_EINVAL : DDPC_EIO,
                           "cannot create shared memory segment %s: %s", name, strerror(errno));
    int rc = posix_fallocate(fd, 0, (off_t)total); /* fail now rather than SIGBUS on first touch */
    if (rc != 0) {
        close(fd);
        shm_unlink(name);
        return ddpc_errorf(DDPC_EIO, "cannot reserve %zu KiB of shared memory for %s: %s",
                           total / 1024, name, strerror(rc));
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return ddpc_errorf(DDPC_EIO, "cannot map shared memory segment %s: %s", name,
                           strerror(errno));
    }
    ddpc__shm_header *h = p;
    h->magic = DDPC__SHM_MAGIC;
    h->version = DDPC__SHM_VERSION;
    h->world = (uint32_t)world;
    h->slot_bytes = DDPC__SHM_SLOT;
    h->total_bytes = total;
    h->owner_pid = (int32_t)getpid();
    bool dead;
    h->owner_start = ddpc__proc_start_time(getpid(), &dead);
    snprintf(h->host, sizeof h->host, "%s", host);
    *base = p;
    *bytes = total;
    return DDPC_OK;
}

/* Maps the header page; DDPC_EAGAIN-like cases (missing, short, not ready) set *retry. */
static ddpc_status open_header(const char *name, int *fd_out, ddpc__shm_header **hdr, bool *retry)
{
    *retry = false;
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        *retry = errno == ENOENT;
        return ddpc_errorf(DDPC_EIO, "cannot open shared memory segment %s: %s", name,
                           strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < DDPC__SHM_HEADER) {
        close(fd);
        *retry = true;
        return ddpc_errorf(DDPC_EIO, "shared memory segment %s is not initialised yet", name);
    }
    void *p = mmap(NULL, DDPC__SHM_HEADER, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return ddpc_errorf(DDPC_EIO, "cannot map shared memory segment %s: %s", name,
                           strerror(errno));
    }
    *fd_out = fd;
    *hdr = p;
    return DDPC_OK;
}

ddpc_status ddpc__shm_seg_open(const char *name, int world, void **base, size_t *bytes, bool *retry)
{
    int fd = -1;
    ddpc__shm_header *h = NULL;
    DDPC_TRY(open_header(name, &fd, &h, retry));
    ddpc_status s = DDPC_OK;
    size_t total = ddpc__shm_total_bytes(world);
    struct stat st;
    if (!atomic_load_explicit(&h->ready, memory_order_acquire)) {
        *retry = true;
        s = ddpc_errorf(DDPC_EIO, "shared memory segment %s is not initialised yet", name);
    } else if (h->magic != DDPC__SHM_MAGIC || h->version != DDPC__SHM_VERSION) {
        s = ddpc_errorf(DDPC_EINVAL, "%s is not a ddpc shm segment of protocol version %u", name,
                        DDPC__SHM_VERSION);
    } else if (h->world != (uint32_t)world) {
        s = ddpc_errorf(DDPC_EINVAL,
                        "world size mismatch: rank 0 (pid %d) started the group with world size "
                        "%u, pid %d has %d",
                        (int)h->owner_pid, h->world, (int)getpid(), world);
        ddpc__shm_header_abort(h, -1, DDPC_EINVAL,
                               ddpc_last_error()); /* rank 0 fails too, at once */
    } else if (h->total_bytes != total || h->slot_bytes != DDPC__SHM_SLOT || fstat(fd, &st) != 0 ||
               (size_t)st.st_size < total) {
        s = ddpc_errorf(DDPC_EINVAL, "shared memory segment %s has an unexpected size", name);
    }
    munmap(h, DDPC__SHM_HEADER);
    if (s != DDPC_OK) {
        close(fd);
        return s;
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return ddpc_errorf(DDPC_EIO, "cannot map shared memory segment %s: %s", name,
                           strerror(errno));
    *base = p;
    *bytes = total;
    return DDPC_OK;
}

void ddpc__shm_header_abort(ddpc__shm_header *h, int rank, ddpc_status status, const char *msg)
{
    unsigned expected = 0;
    if (!atomic_compare_exchange_strong(&h->aborted, &expected, 1))
        return; /* an earlier failure keeps its message */
    h->abort_status = status;
    h->abort_rank = rank;
    snprintf(h->abort_msg, sizeof h->abort_msg, "%s", msg);
    atomic_store_explicit(&h->aborted, 2, memory_order_release);
}

ddpc_status ddpc__shm_claim(ddpc__shm_state *s)
{
    ddpc__shm_rank *me = &s->ranks[s->rank];
    int expected = 0;
    bool dead;
    me->start_time = ddpc__proc_start_time(getpid(), &dead);
    me->pid_ns = ddpc__pid_namespace();
    me->cma_addr = (uint64_t)(uintptr_t)&s->cma_word; /* published by the attach below */
    me->cma_word = s->cma_word;
    if (!atomic_compare_exchange_strong(&me->pid, &expected, (int)getpid()))
        return ddpc_errorf(DDPC_EINVAL,
                           "rank %d is already taken by pid %d (two processes with the same rank?)",
                           s->rank, expected);
    atomic_fetch_add_explicit(&s->hdr->attached, 1, memory_order_acq_rel);
    return DDPC_OK;
}

uint64_t ddpc__proc_start_time(pid_t pid, bool *dead)
{
    char path[64], buf[1024];
    *dead = false;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        *dead = errno == ENOENT;
        return 0;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2])
        return 0;
    char state = p[2];
    if (state == 'Z' || state == 'X' || state == 'x') {
        *dead = true;
        return 0;
    }
    p += 3;
    for (int field = 4; field < 22 && p; field++) { /* starttime is field 22 */
        p = strchr(p + 1, ' ');
    }
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool ddpc__pid_alive(pid_t pid, uint64_t start)
{
    if (pid <= 0)
        return false;
    bool dead = false;
    uint64_t now = ddpc__proc_start_time(pid, &dead);
    if (dead)
        return false;
    if (start != 0 && now != 0)
        return now == start;
    return kill(pid, 0) == 0 || errno == EPERM; /* no /proc view of it: existence only */
}

uint64_t ddpc__pid_namespace(void)
{
    char link[64] = {0};
    ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1); /* "pid:[4026531836]" */
    const char *p = n > 0 ? strchr(link, '[') : NULL;
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

void ddpc__host_name(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0)
        out[0] = '\0';
    out[cap - 1] = '\0';
}
