// SPDX-License-Identifier: MIT
/* Rank-aware logging (include/ddpc/log.h). Invariant: a message is formatted and prefixed into one
 * buffer and leaves the process in a single write(2) (looping only on a short write), after the
 * stream's own buffer was flushed, so lines keep their order and never interleave mid-line. */
#include <ddpc/log.h>

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define STACK_BYTES 4096

ddpc_log_ranks ddpc_log_ranks_single(void)
{
    return (ddpc_log_ranks){.rank = 0, .world_size = 1, .local_rank = 0};
}

ddpc_log_ranks ddpc_log_ranks_from_pg(const ddpc_pg *pg)
{
    return (ddpc_log_ranks){.rank = ddpc_pg_rank(pg),
                            .world_size = ddpc_pg_world_size(pg),
                            .local_rank = ddpc_pg_local_rank(pg)};
}

ddpc_log_ranks ddpc_log_ranks_from_env(const ddpc_comm_env *env)
{
    return (ddpc_log_ranks){
        .rank = env->rank, .world_size = env->world_size, .local_rank = env->local_rank};
}

bool ddpc_log_enabled(ddpc_log_ranks ranks, ddpc_log_scope scope)
{
    switch (scope) {
    case DDPC_LOG_EVERY_RANK:
        return true;
    case DDPC_LOG_LOCAL_RANK0:
        return ranks.local_rank == 0;
    case DDPC_LOG_GLOBAL_RANK0:
        return ranks.rank == 0;
    }
    return false;
}

int ddpc_log_prefix(ddpc_log_ranks ranks, char *buf, size_t cap)
{
    if (ranks.world_size <= 1) {
        if (cap > 0)
            buf[0] = '\0';
        return 0;
    }
    return snprintf(buf, cap, "[rank %d/%d] ", ranks.rank, ranks.world_size);
}

/* Every line of msg (len bytes) behind the prefix, newline-terminated, into out; returns the
 * length. out must hold len + lines * plen + 1 bytes. */
static size_t prefix_lines(const char *msg, size_t len, const char *prefix, size_t plen, char *out)
{
    size_t n = 0, i = 0;
    do {
        const char *nl = memchr(msg + i, '\n', len - i);
        size_t line = nl ? (size_t)(nl - (msg + i)) : len - i;
        memcpy(out + n, prefix, plen);
        memcpy(out + n + plen, msg + i, line);
        n += plen + line;
        out[n++] = '\n';
        i += line + 1;
    } while (i < len);
    return n;
}

static ddpc_status write_message(FILE *f, const char *buf, size_t n)
{
    if (fflush(f) != 0)
        return ddpc_errorf(DDPC_EIO, "log: flushing the stream failed: %s", strerror(errno));
    int fd = fileno(f);
    if (fd < 0) { /* a memory stream: no descriptor to share, so no interleaving either */
        if (fwrite(buf, 1, n, f) != n || fflush(f) != 0)
            return ddpc_errorf(DDPC_EIO, "log: writing %zu bytes failed: %s", n, strerror(errno));
        return DDPC_OK;
    }
    int err = ddpc_fd_write_all(fd, buf, n);
    if (err != 0)
        return ddpc_errorf(DDPC_EIO, "log: writing %zu bytes to descriptor %d failed: %s", n, fd,
                           strerror(err));
    return DDPC_OK;
}

ddpc_status ddpc_vlogf(FILE *f, ddpc_log_ranks ranks, ddpc_log_scope scope, const char *fmt,
                       va_list ap)
{
    if (!ddpc_log_enabled(ranks, scope))
        return DDPC_OK;
    char prefix[64], msg_stack[STACK_BYTES], out_stack[STACK_BYTES];
    size_t plen = (size_t)ddpc_log_prefix(ranks, prefix, sizeof prefix);
    va_list ap2;
    va_copy(ap2, ap);
    int len = vsnprintf(msg_stack, sizeof msg_stack, fmt, ap);
    char *msg = msg_stack, *out = out_stack, *heap_msg = NULL, *heap_out = NULL;
    ddpc_status st = DDPC_OK;
    if (len < 0) {
        st = ddpc_errorf(DDPC_EINVAL, "log: cannot format '%s'", fmt);
        goto done;
    }
    if ((size_t)len >= sizeof msg_stack) {
        msg = heap_msg = ddpc_malloc((size_t)len + 1);
        if (!msg) {
            st = ddpc_errorf(DDPC_ENOMEM, "log: out of memory for a %d-byte message", len);
            goto done;
        }
        vsnprintf(msg, (size_t)len + 1, fmt, ap2);
    }
    size_t lines = 1;
    for (const char *p = msg; (p = memchr(p, '\n', (size_t)len - (size_t)(p - msg))); p++)
        lines++;
    size_t need = (size_t)len + lines * (plen + 1) + 1;
    if (need > sizeof out_stack) {
        out = heap_out = ddpc_malloc(need);
        if (!out) {
            st = ddpc_errorf(DDPC_ENOMEM, "log: out of memory for a %zu-byte message", need);
            goto done;
        }
    }
    st = write_message(f, out, prefix_lines(msg, (size_t)len, prefix, plen, out));
done:
    va_end(ap2);
    ddpc_free(heap_out);
    ddpc_free(heap_msg);
    return st;
}

ddpc_status ddpc_logf(FILE *f, ddpc_log_ranks ranks, ddpc_log_scope scope, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ddpc_status st = ddpc_vlogf(f, ranks, scope, fmt, ap);
    va_end(ap);
    return st;
}
