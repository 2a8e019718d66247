// SPDX-License-Identifier: MIT
/* The one loop that writes a whole buffer to a descriptor: files, pipes and sockets alike. Every
 * layer that writes raw bytes (checkpoint files, the rank-prefixed log, the shm rendezvous, the
 * metrics lines) goes through here, so short writes, EINTR and SIGPIPE are handled once. */
#include <ddpc/fs.h>

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

int ddpc_fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    bool socket = true; /* until send says otherwise: MSG_NOSIGNAL keeps a closed peer an error */
    while (len > 0) {
        ssize_t w = socket ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
        if (w < 0 && errno == ENOTSOCK && socket) {
            socket = false;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if (w == 0)
            return ENOSPC; /* nothing written and no error: treat as a full device */
        p += w;
        len -= (size_t)w;
    }
    return 0;
}
