// SPDX-License-Identifier: MIT
/* Deadline-bounded reads and writes of whole buffers on a (blocking) socket, for the store. */
#include "comm/store_wire.h"

#include <ddpc/timer.h>

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Milliseconds left until `deadline`, at most 1000; 0 once past. */
static int ms_left(double deadline)
{
    double ms = (deadline - ddpc_time_now()) * 1e3;
    return ms <= 0 ? 0 : ms > 1000 ? 1000 : (int)ms + 1;
}

/* Waits until fd is ready for `events` or the deadline passed (false). */
static bool wait_ready(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int rc = poll(&p, 1, ms_left(deadline));
        if (rc > 0)
            return true;
        if (rc < 0 && errno != EINTR)
            return false;
        if (ddpc_time_now() > deadline)
            return false;
    }
}

bool ddpc__store_read(int fd, void *buf, size_t len, double deadline, bool *timed_out)
{
    char *p = buf;
    *timed_out = false;
    while (len > 0) {
        if (!wait_ready(fd, POLLIN, deadline)) {
            *timed_out = ddpc_time_now() > deadline;
            return false;
        }
        ssize_t got = recv(fd, p, len, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got <= 0)
            return false;
        p += got;
        len -= (size_t)got;
    }
    return true;
}

bool ddpc__store_write(int fd, const void *buf, size_t len, double deadline)
{
    const char *p = buf;
    while (len > 0) {
        if (!wait_ready(fd, POLLOUT, deadline))
            return false;
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (w <= 0)
            return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
}
