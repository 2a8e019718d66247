// SPDX-License-Identifier: MIT
/* Token shards: llm.c's .bin files (a 1 KiB header of 256 int32, then uint16 or uint32 tokens)
 * and nanoGPT's raw uint16 .bin, matched by a glob, mapped read-only and read as one stream.
 * Invariant: every shard's size agrees with its header and every id is below the vocabulary,
 * checked once at creation, so a batch copy never fails and never reads past a mapping. */
#define _DEFAULT_SOURCE
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    LLMC_MAGIC = 20240520,  /* llm.c dev/data/data_common.py */
    LLMC_HEADER_INTS = 256, /* header[0] magic, [1] version, [2] token count */
    LLMC_HEADER_BYTES = LLMC_HEADER_INTS * 4
};

static int64_t read_le(const uint8_t *p, int width)
{
    if (width == 2)
        return (int64_t)p[0] | (int64_t)p[1] << 8;
    return (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Maps `path` read-only into *s, through the regular-files door (a FIFO would block). */
static ddpc_status map_file(const char *path, ddpc__token_shard *s)
{
    int fd;
    uint64_t size;
    DDPC_TRY(ddpc_open_regular(path, NULL, NULL, &fd, &size));
    ddpc_status r = DDPC_OK;
    if (size == 0)
        r = ddpc_errorf(DDPC_EFORMAT, "%s: empty file, no tokens", path);
    if (r == DDPC_OK) {
        s->map_len = (size_t)size;
        s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (s->map == MAP_FAILED) {
            s->map = NULL;
            r = ddpc_errorf(DDPC_EIO, "%s: cannot map %zu bytes: %s", path, s->map_len,
                            strerror(errno));
        }
    }
    close(fd);
    return r;
}

/* Reads the layout of a mapped file: where its tokens start, their width and count. */
static ddpc_status parse_layout(const char *path, ddpc_token_file_format format,
                                ddpc__token_shard *s)
{
    const uint8_t *p = s->map;
    size_t size = s->map_len;
    if (format == DDPC_TOKEN_FILE_U16) {
        if (size % 2)
            return ddpc_errorf(DDPC_EFORMAT,
                               "%s: %zu bytes, an odd size for raw uint16 tokens (truncated?)",
                               path, size);
        s->tok = p, s->width = 2, s->n = (int64_t)(size / 2);
        return DDPC_OK;
    }
    int64_t magic = size >= 4 ? read_le(p, 4) : -1;
    if (size < LLMC_HEADER_BYTES || magic != LLMC_MAGIC)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: not an llm.c token shard (no %d-byte header with magic %d); raw "
                           "uint16 tokens need data.format: uint16",
                           path, LLMC_HEADER_BYTES, LLMC_MAGIC);
    int64_t version = read_le(p + 4, 4), count = read_le(p + 8, 4);
    if (version != 1 && version != 2)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: llm.c shard version %lld, but ddpc reads version 1 (uint16 tokens) "
                           "and 2 (uint32 tokens)",
                           path, (long long)version);
    if (count <= 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: the header's token count %lld is not positive",
                           path, (long long)count);
    s->width = version == 1 ? 2 : 4;
    uint64_t want = LLMC_HEADER_BYTES + (uint64_t)count * (uint64_t)s->width;
    if (size != want)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: %zu bytes, but its header gives %lld tokens of %d bytes (%llu "
                           "bytes with the header): %s",
                           path, size, (long long)count, s->width, (unsigned long long)want,
                           size < want ? "truncated" : "trailing bytes after the tokens");
    s->tok = p + LLMC_HEADER_BYTES, s->n = count;
    return DDPC_OK;
}

/* Every id of s below vocab, else the first one that is not, with its position. The scan goes
 * chunk by chunk, each dropped from this process's resident set once read (a read-only private
 * mapping refaults from the page cache), so checking a corpus larger than memory stays small. */
static ddpc_status check_ids(const char *path, const ddpc__token_shard *s, int64_t vocab)
{
    const int64_t chunk = (int64_t)(64 << 20) / s->width; /* tokens; a multiple of the page */
    for (int64_t at = 0; at < s->n; at += chunk) {
        int64_t end = at + chunk < s->n ? at + chunk : s->n;
        for (int64_t i = at; i < end; i++) {
            int64_t id = read_le(s->tok + i * s->width, s->width);
            if (id >= vocab)
                return ddpc_errorf(DDPC_EFORMAT,
                                   "%s: token %lld is id %lld, outside model.vocab_size %lld",
                                   path, (long long)i, (long long)id, (long long)vocab);
        }
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t from = (uintptr_t)(s->tok + at * s->width) & ~(page - 1);
        uintptr_t to = (uintptr_t)(s->tok + end * s->width) & ~(page - 1);
        if (to > from) /* advice only: failure changes nothing but memory use */
            (void)madvise((void *)from, to - from, MADV_DONTNEED);
    }
    return DDPC_OK;
}

static ddpc_status open_shards(ddpc_dataset *d, const glob_t *g, ddpc_token_file_format format,
                               int64_t vocab)
{
    d->shards = ddpc_calloc(g->gl_pathc, sizeof *d->shards);
    if (!d->shards)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %zu token shards", g->gl_pathc);
    for (size_t i = 0; i < g->gl_pathc; i++) {
        ddpc__token_shard *s = &d->shards[i];
        const char *path = g->gl_pathv[i];
        d->n_shards = (int64_t)i + 1; /* freeing sees every mapping made */
        DDPC_TRY(map_file(path, s));
        DDPC_TRY(parse_layout(path, format, s));
        DDPC_TRY(check_ids(path, s, vocab));
        s->start = d->n_tokens;
        d->n_tokens += s->n;
    }
    return DDPC_OK;
}

ddpc_status ddpc_dataset_token_shards_create(ddpc_dataset **out, const char *pattern,
                                             ddpc_token_file_format format, int64_t block_size,
                                             int64_t vocab_size)
{
    *out = NULL;
    if (!pattern || !pattern[0])
        return ddpc_errorf(DDPC_EINVAL, "token shards: no file pattern given");
    if (vocab_size < 2 || vocab_size > INT32_MAX)
        return ddpc_errorf(DDPC_EINVAL, "%s: vocab_size %lld is outside [2, 2^31-1]", pattern,
                           (long long)vocab_size);
    glob_t g;
    int rc = glob(pattern, GLOB_ERR, NULL, &g); /* sorted by name */
    if (rc == GLOB_NOMATCH)
        return ddpc_errorf(DDPC_EIO, "%s: no file matches", pattern);
    if (rc != 0) {
        globfree(&g);
        return ddpc_errorf(DDPC_EIO, "%s: cannot list the matching files", pattern);
    }
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_TOKENS);
    ddpc_status r = d ? open_shards(d, &g, format, vocab_size)
                      : ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for the dataset", pattern);
    globfree(&g);
    if (r == DDPC_OK) {
        d->classes = vocab_size;
        r = ddpc__dataset_set_windows(d, block_size, pattern);
    }
    if (r != DDPC_OK) {
        ddpc_dataset_destroy(d);
        return r;
    }
    *out = d;
    return DDPC_OK;
}

void ddpc__token_shards_copy(const ddpc_dataset *d, int64_t start, int64_t len, int32_t *out)
{
    /* The last shard starting at or before `start`; a window may run on into the next ones. */
    int64_t lo = 0, hi = d->n_shards - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (d->shards[mid].start <= start)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int64_t k = lo, done = 0; done < len; k++) {
        const ddpc__token_shard *s = &d->shards[k];
        int64_t from = start + done - s->start, take = s->n - from;
        if (take > len - done)
            take = len - done;
        for (int64_t j = 0; j < take; j++)
            out[done + j] = (int32_t)read_le(s->tok + (from + j) * s->width, s->width);
        done += take;
    }
}

void ddpc__token_shards_free(ddpc_dataset *d)
{
    for (int64_t i = 0; i < d->n_shards; i++)
        if (d->shards[i].map)
            munmap(d->shards[i].map, d->shards[i].map_len);
    ddpc_free(d->shards);
    d->shards = NULL;
    d->n_shards = 0;
}
