// SPDX-License-Identifier: MIT
/* One worker process: forked into its own process group (so a signal to the group reaches every
 * process it started), killed by the kernel when the launcher dies (PR_SET_PDEATHSIG; the guard
 * takes the rest of its group), stdout and stderr on pipes, stdin from /dev/null (a background
 * group that reads the terminal would be stopped by SIGTTIN). Invariant: the worker stays a zombie
 * from the moment its exit is seen until ddpc__worker_finish reaps it, so its pid, which is also
 * its process group id, cannot be reused while the launcher may still signal that group. */
#include "launch/launch_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* In the child, between fork and exec: only async-signal-safe calls (and snprintf on a stack
 * buffer, which is safe here because the launcher is single-threaded). */
static void child_exec(const int pipes[2][2], const char *path, char *const *argv,
                       char *const *envp, const sigset_t *child_mask, pid_t launcher)
{
    setpgid(0, 0);
    /* Die with the launcher; if it died before this line, the signal will never come. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(127);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO);
    dup2(pipes[0][1], STDOUT_FILENO);
    dup2(pipes[1][1], STDERR_FILENO);
    sigprocmask(SIG_SETMASK, child_mask, NULL);
    execve(path, argv, envp);
    char msg[512];
    int n = snprintf(msg, sizeof msg, "ddpc run: cannot execute '%s': %s\n", path, strerror(errno));
    if (n > 0)
        (void)!write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(127);
}

ddpc_status ddpc__worker_spawn(ddpc__worker *w, const char *path, char *const *argv,
                               char *const *envp, const sigset_t *child_mask)
{
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    for (int s = 0; s < 2; s++) {
        if (pipe(pipes[s]) != 0 || fcntl(pipes[s][0], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(pipes[s][1], F_SETFD, FD_CLOEXEC) != 0) {
            int e = errno;
            for (int k = 0; k < 2; k++) {
                close_fd(&pipes[k][0]);
                close_fd(&pipes[k][1]);
            }
            return ddpc_errorf(DDPC_EIO, "cannot create output pipes for rank %d: %s", w->rank,
                               strerror(e));
        }
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec((const int(*)[2])pipes, path, argv, envp, child_mask, launcher);
    int e = errno;
    for (int s = 0; s < 2; s++)
        close_fd(&pipes[s][1]);
    if (pid < 0) {
        close_fd(&pipes[0][0]);
        close_fd(&pipes[1][0]);
        return ddpc_errorf(DDPC_EIO, "cannot start rank %d: fork failed: %s", w->rank, strerror(e));
    }
    /* Also from the parent, so the group exists before the first signal we might send;
     * EACCES means the child already exec'd, after its own setpgid. */
    setpgid(pid, pid);
    w->pid = pid;
    ddpc__guard_add(w->guard, pid);
    for (int s = 0; s < 2; s++) {
        w->fds[s] = pipes[s][0];
        fcntl(w->fds[s], F_SETFL, fcntl(w->fds[s], F_GETFL) | O_NONBLOCK);
    }
    w->exited = w->reaped = false;
    return DDPC_OK;
}

bool ddpc__worker_poll_exit(ddpc__worker *w)
{
    if (w->exited || w->pid <= 0)
        return w->exited;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
        w->exited = true;
        w->failed = !(info.si_code == CLD_EXITED && info.si_status == 0);
        /* the status waitpid will give, known now: a failure is reported before the reaping */
        w->wait_status = info.si_code == CLD_EXITED   ? (info.si_status & 0xff) << 8
                         : info.si_code == CLD_DUMPED ? (info.si_status & 0x7f) | 0x80
                                                      : info.si_status & 0x7f;
    }
    return w->exited;
}

void ddpc__worker_signal(ddpc__worker *w, int sig)
{
    if (w->pid > 0 && !w->reaped)
        kill(-w->pid, sig);
}

/* Up to `rounds` reads of pipe `stream`; *drained is set when the pipe is empty or closed. */
static ddpc_status read_rounds(ddpc__worker *w, int stream, int rounds, bool *drained)
{
    char buf[65536];
    *drained = false;
    for (int round = 0; round < rounds && w->fds[stream] >= 0; round++) {
        ssize_t n = read(w->fds[stream], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            ddpc__line_flush(&w->bufs[stream], &w->sinks[stream]);
            close_fd(&w->fds[stream]);
            break;
        }
        DDPC_TRY(ddpc__line_feed(&w->bufs[stream], buf, (size_t)n, &w->sinks[stream]));
        if (round + 1 == rounds)
            return DDPC_OK;
    }
    *drained = true;
    return DDPC_OK;
}

ddpc_status ddpc__worker_read(ddpc__worker *w, int stream)
{
    bool drained;
    /* A few reads per call, so one chatty worker cannot starve the others or the monitor. */
    return read_rounds(w, stream, 4, &drained);
}

void ddpc__worker_finish(ddpc__worker *w)
{
    if (w->pid > 0 && !w->reaped) {
        kill(-w->pid, SIGKILL);
        ddpc__guard_remove(w->guard, w->pid);
        int status = 0;
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
        }
        w->wait_status = status;
        w->exited = w->reaped = true;
    }
    /* Whatever the dead group wrote is in the pipes now; take it without waiting for an EOF that
     * a process outside the group could hold back. */
    for (int st = 0; st < 2; st++) {
        bool drained = false;
        while (!drained && read_rounds(w, st, 64, &drained) == DDPC_OK) {
        }
        ddpc__line_flush(&w->bufs[st], &w->sinks[st]);
        close_fd(&w->fds[st]);
    }
    if (w->log) {
        if (fclose(w->log) != 0 && w->log_errno == 0)
            w->log_errno = errno;
        w->log = NULL;
    }
}
