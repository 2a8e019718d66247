#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pty_run.py OUT PROGRAM [ARGS...]: runs PROGRAM with a pseudo-terminal as its stdin, stdout and
stderr (so isatty() is true, as in an interactive shell), writes every byte it printed to OUT
unchanged (the terminal turns "\\n" into "\\r\\n") and exits with PROGRAM's status. Only the
standard library; gives up after 240 s of silence."""
import os
import pty
import select
import sys


def main():
    out_path, argv = sys.argv[1], sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    out = bytearray()
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 240)
            if not ready:
                break
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    with open(out_path, "wb") as f:
        f.write(out)
    sys.exit(os.waitstatus_to_exitcode(status))


main()
