// SPDX-License-Identifier: MIT
/* Private to src/core: how the file helpers (fs.c, fs_out.c) name a file and what is in its
 * place in their messages, so every door words them alike. */
#ifndef DDPC_CORE_FS_IMPL_H
#define DDPC_CORE_FS_IMPL_H

#include <stddef.h>
#include <sys/types.h>

/* "config 'x.yaml'" or "'x.yaml'" (what NULL) into buf (cap bytes). */
void ddpc__fs_name_of(char *buf, size_t cap, const char *what, const char *path);
/* "a directory", "a FIFO", "a character device", ... for a mode that is not a regular file's. */
const char *ddpc__fs_kind_of(mode_t mode);

#endif
