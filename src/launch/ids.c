// SPDX-License-Identifier: MIT
/* A job's identities on this host: its rendezvous port, its run id and the program it runs.
 * Invariant: a port returned by ddpc__port_reserve stays bound by the launcher until the job ends,
 * so no other job's bind to port 0 can be given it; rank 0 can still listen on it (SO_REUSEADDR,
 * the launcher's socket never listens). */
#include "launch/launch_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static ddpc_status resolve_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(addr, "0", &hints, &res);
    if (rc != 0 || !res)
        return ddpc_errorf(DDPC_EINVAL, "--master-addr '%s' does not resolve: %s", addr,
                           gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return DDPC_OK;
}

static int sockaddr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

ddpc_status ddpc__port_reserve(const char *addr, int *fd, int *port)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    DDPC_TRY(resolve_addr(addr, &ss, &len));
    int s = socket(ss.ss_family, SOCK_STREAM, 0);
    if (s < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create a socket to pick a free port: %s",
                           strerror(errno));
    /* bind(0) without SO_REUSEADDR: the kernel picks a port no other socket holds. Setting the
     * option afterwards lets rank 0's SO_REUSEADDR listener share it (Linux allows a bind next to
     * a reusable socket that does not listen). */
    int one = 1;
    if (fcntl(s, F_SETFD, FD_CLOEXEC) != 0 || bind(s, (struct sockaddr *)&ss, len) != 0 ||
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        getsockname(s, (struct sockaddr *)&ss, &len) != 0) {
        int e = errno;
        close(s);
        return ddpc_errorf(DDPC_EIO, "cannot reserve a free port on %s: %s", addr, strerror(e));
    }
    *fd = s;
    *port = sockaddr_port(&ss);
    return DDPC_OK;
}

void ddpc__run_id_make(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long ns =
        (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    snprintf(buf, cap, "ddpc-%ld-%llx", (long)getpid(), ns);
}

bool ddpc__run_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 100)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

static bool executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

ddpc_status ddpc__find_program(const char *name, const char *const *envp, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        if (!executable_file(name))
            return ddpc_errorf(DDPC_EINVAL, "program '%s' is not an executable file", name);
        if (strlen(name) >= cap)
            return ddpc_errorf(DDPC_EINVAL, "program path '%.60s...' is too long", name);
        memcpy(out, name, strlen(name) + 1);
        return DDPC_OK;
    }
    const char *path = ddpc_comm_env_lookup(envp, "PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        /* An empty PATH entry means the current directory, as for execvp. */
        int n = dlen ? snprintf(out, cap, "%.*s/%s", (int)dlen, p, name)
                     : snprintf(out, cap, "./%s", name);
        if (n > 0 && (size_t)n < cap && executable_file(out))
            return DDPC_OK;
        if (!colon)
            break;
        p = colon + 1;
    }
    return ddpc_errorf(DDPC_EINVAL, "program '%s' was not found in PATH", name);
}
