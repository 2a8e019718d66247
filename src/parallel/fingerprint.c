// SPDX-License-Identifier: MIT
/* Cross-rank agreement check run when the reducer is created: every rank describes its model
 * (one entry per tensor: name and shape) and the caller's fingerprint text (one entry per line),
 * hashes each entry, and all ranks gather all hashes. Every rank finds the same first mismatch,
 * so all of them fail with the same sentence naming both sides. */
#include "parallel/reducer_impl.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

#define ENTRY_MAX 192

/* Writes entry i (tensors first, then fingerprint lines) into out; returns false past the end. */
static bool entry_text(const ddpc_reducer *r, size_t i, char out[ENTRY_MAX])
{
    size_t nt = ddpc_model_num_tensors(r->model);
    if (i < nt) {
        const ddpc_param *p = ddpc_model_tensor(r->model, i);
        int len = snprintf(out, ENTRY_MAX, "tensor %s (", p->name);
        for (int d = 0; d < p->ndim && len < ENTRY_MAX; d++)
            len += snprintf(out + len, (size_t)(ENTRY_MAX - len), "%s%lld", d ? ", " : "",
                            (long long)p->shape[d]);
        if (len < ENTRY_MAX)
            snprintf(out + len, (size_t)(ENTRY_MAX - len), ")");
        return true;
    }
    const char *s = r->cfg.fingerprint;
    for (size_t line = nt; s && *s; line++) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (line == i) {
            snprintf(out, ENTRY_MAX, "config %.*s", (int)(n < ENTRY_MAX - 8 ? n : ENTRY_MAX - 8), s);
            return true;
        }
        s = end ? end + 1 : s + n;
    }
    snprintf(out, ENTRY_MAX, "nothing");
    return false;
}

static int64_t entry_hash(const char *text)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (int64_t)(h | 1); /* never 0: 0 marks a missing entry */
}

static size_t count_entries(const ddpc_reducer *r)
{
    char text[ENTRY_MAX];
    size_t n = 0;
    while (entry_text(r, n, text))
        n++;
    return n;
}

/* Tells every rank what rank 0 and rank `r` have at entry i, and fails with that sentence. */
static ddpc_status report(ddpc_reducer *red, size_t i, int r)
{
    int32_t zero[ENTRY_MAX / 4], other[ENTRY_MAX / 4]; /* text carried as int32 words */
    entry_text(red, i, (char *)zero);
    memcpy(other, zero, sizeof other);
    DDPC_TRY(ddpc_pg_broadcast(red->host, zero, ENTRY_MAX / 4, DDPC_DTYPE_I32, 0));
    DDPC_TRY(ddpc_pg_broadcast(red->host, other, ENTRY_MAX / 4, DDPC_DTYPE_I32, r));
    ((char *)zero)[ENTRY_MAX - 1] = ((char *)other)[ENTRY_MAX - 1] = '\0';
    return ddpc_errorf(DDPC_EINVAL, "the replicas differ: rank 0 has %s where rank %d has %s "
                       "(every rank must build the same model from the same config)",
                       (const char *)zero, r, (const char *)other);
}

ddpc_status ddpc__reducer_check_fingerprint(ddpc_reducer *r)
{
    int world = ddpc_pg_world_size(r->host);
    int64_t mine = (int64_t)count_entries(r), longest = mine;
    DDPC_TRY(ddpc_pg_all_reduce(r->host, &longest, &longest, 1, DDPC_DTYPE_I64, DDPC_REDUCE_MAX));
    size_t n = (size_t)longest;
    int64_t *hashes = ddpc_calloc(n + 1, sizeof *hashes);
    int64_t *all = ddpc_calloc((n + 1) * (size_t)world, sizeof *all);
    ddpc_status st = DDPC_OK;
    if (!hashes || !all) {
        st = ddpc_errorf(DDPC_ENOMEM, "out of memory comparing model fingerprints");
        goto done; /* every rank allocates the same small sizes; a failure here ends the job */
    }
    char text[ENTRY_MAX];
    for (size_t i = 0; i < (size_t)mine; i++) {
        entry_text(r, i, text);
        hashes[i] = entry_hash(text);
    }
    st = ddpc_pg_all_gather(r->host, hashes, all, n + 1, DDPC_DTYPE_I64);
    for (size_t i = 0; st == DDPC_OK && i < n; i++)
        for (int k = 1; k < world; k++)
            if (all[(size_t)k * (n + 1) + i] != all[i]) {
                st = report(r, i, k);
                goto done;
            }
done:
    ddpc_free(hashes);
    ddpc_free(all);
    return st;
}
