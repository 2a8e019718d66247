// SPDX-License-Identifier: MIT
/* Helpers for the sampler tests: build a sampler, compare one rank's list with an expected one,
 * and gather every rank's list back into torch's padded (strided) order. */
#ifndef DDPC_TESTS_SAMPLER_TESTUTIL_H
#define DDPC_TESTS_SAMPLER_TESTUTIL_H

#include <ddpc/sampler.h>

#include <stdint.h>

#include "check.h"

#define MAXN 4096

static inline ddpc_sampler *make(ddpc_sampler_config c)
{
    ddpc_sampler *s = NULL;
    ddpc_status st = ddpc_sampler_create(&c, &s);
    if (st != DDPC_OK)
        fprintf(stderr, "sampler_create: %s\n", ddpc_last_error());
    return s;
}

/* Checks that rank `rank`'s list at `epoch` equals want (n). */
static inline int expect_list(ddpc_sampler_config c, int rank, int64_t epoch, const int64_t *want,
                              int64_t n)
{
    c.rank = rank;
    ddpc_sampler *s = make(c);
    if (!s)
        return 0;
    ddpc_sampler_set_epoch(s, epoch);
    int ok = ddpc_sampler_len(s) == n;
    for (int64_t k = 0; ok && k < n; k++)
        ok = ddpc_sampler_indices(s)[k] == want[k];
    if (!ok) {
        fprintf(stderr, "rank %d got:", rank);
        for (int64_t k = 0; k < ddpc_sampler_len(s); k++)
            fprintf(stderr, " %lld", (long long)ddpc_sampler_indices(s)[k]);
        fprintf(stderr, "\n");
    }
    ddpc_sampler_destroy(s);
    return ok;
}

/* padded (world * per) = the ranks' lists interleaved back into torch's padded order
 * (entry r + k * world from rank r's k-th index); returns per, or -1 if counts differ. */
static inline int64_t gather_strided(ddpc_sampler_config c, int64_t epoch, int64_t *padded)
{
    int64_t per = -1;
    for (int r = 0; r < c.world; r++) {
        c.rank = r;
        ddpc_sampler *s = make(c);
        if (!s)
            return -1;
        ddpc_sampler_set_epoch(s, epoch);
        int64_t len = ddpc_sampler_len(s);
        if (per >= 0 && len != per)
            per = -2;
        else if (per != -2)
            per = len;
        for (int64_t k = 0; per >= 0 && k < len; k++)
            padded[r + k * c.world] = ddpc_sampler_indices(s)[k];
        ddpc_sampler_destroy(s);
    }
    return per < 0 ? -1 : per;
}

#endif
