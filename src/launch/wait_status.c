// SPDX-License-Identifier: MIT
/* How a worker ended, in words and as a shell exit code: "exit code 3" / 3, "signal SIGKILL" /
 * 137. Signal names come from a fixed table of the POSIX signals, since strsignal() gives
 * descriptions ("Killed"), not names. */
#include "launch/launch_impl.h"

#include <signal.h>
#include <sys/wait.h>

static const struct {
    int signo;
    const char *name;
} signal_names[] = {
    {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
};

const char *ddpc_launch_signal_name(int signo, char *buf, size_t cap)
{
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++) {
        if (signal_names[i].signo == signo) {
            snprintf(buf, cap, "%s", signal_names[i].name);
            return buf;
        }
    }
    snprintf(buf, cap, "SIG%d", signo);
    return buf;
}

static bool core_dumped(int wait_status)
{
#ifdef WCOREDUMP
    return WCOREDUMP(wait_status);
#else
    return (wait_status & 0x80) != 0; /* where every Unix we know keeps the flag */
#endif
}

const char *ddpc_launch_describe_wait(int wait_status, char *buf, size_t cap)
{
    char name[32];
    if (WIFEXITED(wait_status))
        snprintf(buf, cap, "exit code %d", WEXITSTATUS(wait_status));
    else if (WIFSIGNALED(wait_status))
        snprintf(buf, cap, "signal %s%s",
                 ddpc_launch_signal_name(WTERMSIG(wait_status), name, sizeof name),
                 core_dumped(wait_status) ? " (core dumped)" : "");
    else
        snprintf(buf, cap, "wait status 0x%x", (unsigned)wait_status);
    return buf;
}

int ddpc_launch_exit_code(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}
