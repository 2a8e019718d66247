// SPDX-License-Identifier: MIT
/* An RFC 4180 record reader over a file's bytes in memory (csv.c), for the CSV dataset.
 * Invariant: after a successful ddpc__csv_next, cell i of the record is the NUL-terminated text
 * at text + cell[i] (quotes removed, "" unescaped), valid until the next call; `line` is the line
 * the record starts on (1-based), so messages can name it. */
#ifndef DDPC_DATA_CSV_H
#define DDPC_DATA_CSV_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *path; /* for messages */
    const char *buf;  /* (len) the file's bytes, borrowed */
    size_t len, pos;
    int64_t next_line; /* line of the byte at pos */
    int64_t line;      /* the current record's first line */
    char *text;        /* (text_cap) the record's cells, each NUL-terminated */
    size_t text_len, text_cap;
    size_t *cell; /* (cap_cells) offsets into text */
    size_t n_cells, cap_cells;
} ddpc__csv;

/* A reader over buf (len bytes, borrowed until fini). */
void ddpc__csv_init(ddpc__csv *r, const char *path, const char *buf, size_t len);
void ddpc__csv_fini(ddpc__csv *r);
/* Reads the next record, skipping blank lines: *got = false at the end of the file. Errors name
 * the path and line: DDPC_EFORMAT for a quote that is not closed or is followed by anything but a
 * comma or the line's end, DDPC_ENOMEM. */
ddpc_status ddpc__csv_next(ddpc__csv *r, bool *got);

#endif
