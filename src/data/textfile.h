// SPDX-License-Identifier: MIT
/* Whole text files in memory, walked line by line: the vocabulary and the translation dataset read
 * their files through this. Invariant: the buffer is NUL-terminated, so a line can be scanned up
 * to '\n' or NUL without a length. */
#ifndef DDPC_DATA_TEXTFILE_H
#define DDPC_DATA_TEXTFILE_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *buf; /* (len + 1) the file's bytes and a NUL; owned */
    size_t len;
    size_t pos;   /* start of the next line */
    int64_t line; /* 1-based number of the line last returned; 0 before the first */
} ddpc__textfile;

/* Limits on a text file (a corpus, predict.input, a vocabulary): bytes in a line (without its
 * '\n'), and in the file. Reading stops at the first byte past either, so an endless input
 * (/dev/zero, a pipe that never ends) is refused within bounded memory. */
#define DDPC__TEXTFILE_MAX_LINE (1 << 20)
#define DDPC__TEXTFILE_MAX_BYTES ((size_t)4 << 30)

/* Reads `path` whole (ddpc_read_file: a regular file or a pipe). DDPC_EIO names the path and the
 * reason; DDPC_EFORMAT names the line of a NUL byte (text has none) or of a line longer than
 * DDPC__TEXTFILE_MAX_LINE, or a file larger than DDPC__TEXTFILE_MAX_BYTES; DDPC_ENOMEM. */
ddpc_status ddpc__textfile_read(ddpc__textfile *f, const char *path);
/* The next line (not NUL-terminated: it ends at '\n' or the end of the file) in *s, *n bytes,
 * without the '\n' and a '\r' before it; false after the last line. A file ending in '\n' has no
 * empty line after it. */
bool ddpc__textfile_next(ddpc__textfile *f, const char **s, size_t *n);
/* Lines in the file, counted as next returns them. */
int64_t ddpc__textfile_count_lines(const ddpc__textfile *f);
void ddpc__textfile_free(ddpc__textfile *f);

#endif
