// SPDX-License-Identifier: MIT
/* Sampler lifecycle and queries common to every kind: config checks, the source table
 * (sizes and offsets of the concatenated global index space), epoch changes and torch's strided
 * split. Invariant: after create, nothing allocates; set_epoch only rewrites `out`. */
#include "data/sampler_impl.h"

#include <ddpc/alloc.h>

#include <string.h>

static const char *const kind_names[DDPC_SAMPLER_COUNT] = {"distributed", "rank_split", "case",
                                                           "task_shard"};

const char *ddpc_sampler_kind_name(ddpc_sampler_kind kind)
{
    return (unsigned)kind < DDPC_SAMPLER_COUNT ? kind_names[kind] : "unknown";
}

ddpc_status ddpc_sampler_kind_parse(const char *name, ddpc_sampler_kind *out)
{
    for (int k = 0; k < DDPC_SAMPLER_COUNT; k++)
        if (name && strcmp(name, kind_names[k]) == 0) {
            *out = (ddpc_sampler_kind)k;
            return DDPC_OK;
        }
    return ddpc_errorf(DDPC_EINVAL,
                       "sampler: unknown kind '%s' (expected distributed, rank_split, case or "
                       "task_shard)",
                       name ? name : "(null)");
}

ddpc_sampler_config ddpc_sampler_config_default(void)
{
    return (ddpc_sampler_config){
        .kind = DDPC_SAMPLER_DISTRIBUTED,
        .world = 1,
        .shuffle = true,
        .down_sample_ratio = 1.0,
        .last_right_index = -1};
}

ddpc_status ddpc__sampler_alloc(int64_t **p, int64_t count, const char *what)
{
    *p = ddpc_malloc((size_t)(count > 0 ? count : 1) * sizeof **p);
    if (!*p)
        return ddpc_errorf(DDPC_ENOMEM, "sampler: out of memory for %lld %s", (long long)count,
                           what);
    return DDPC_OK;
}

int64_t ddpc__sampler_split_strided(const int64_t *list, int64_t n, int world, int rank,
                                    bool drop_last, int64_t *out)
{
    /* torch: num_samples = ceil(n / world), or floor(n / world) with drop_last; the padded list
     * repeats itself from the start as often as needed (n < world repeats it several times). */
    int64_t per = drop_last ? n / world : (n + world - 1) / world;
    if (out)
        for (int64_t k = 0; k < per; k++)
            out[k] = list[(rank + k * world) % n];
    return per;
}

/* Checks the fields every kind shares and copies the source sizes into s. */
static ddpc_status init_sources(ddpc_sampler *s, const ddpc_sampler_config *c)
{
    if (c->world < 1)
        return ddpc_errorf(DDPC_EINVAL, "sampler: world must be >= 1, got %d", c->world);
    if (c->rank < 0 || c->rank >= c->world)
        return ddpc_errorf(DDPC_EINVAL, "sampler: rank %d is outside [0, world = %d)", c->rank,
                           c->world);
    bool one = c->kind == DDPC_SAMPLER_DISTRIBUTED || c->kind == DDPC_SAMPLER_CASE;
    const char *kind = ddpc_sampler_kind_name(c->kind);
    if (one && c->size < 0)
        return ddpc_errorf(DDPC_EINVAL, "%s sampler: size must be >= 0, got %lld", kind,
                           (long long)c->size);
    if (!one && (c->num_sources < 1 || !c->sizes))
        return ddpc_errorf(DDPC_EINVAL,
                           "%s sampler: num_sources must be >= 1 with sizes given, "
                           "got %d sources (sizes %s)",
                           kind, c->num_sources, c->sizes ? "set" : "NULL");
    s->num_sources = one ? 1 : c->num_sources;
    DDPC_TRY(ddpc__sampler_alloc(&s->sizes, s->num_sources, "source sizes"));
    DDPC_TRY(ddpc__sampler_alloc(&s->offsets, s->num_sources + 1, "source offsets"));
    s->offsets[0] = 0;
    for (int i = 0; i < s->num_sources; i++) {
        int64_t n = one ? c->size : c->sizes[i];
        if (n < 0 || n > INT64_MAX / 4 - s->offsets[i])
            return ddpc_errorf(DDPC_EINVAL, "%s sampler: sizes[%d] = %lld is negative or too large",
                               kind, i, (long long)n);
        s->sizes[i] = n;
        s->offsets[i + 1] = s->offsets[i] + n;
    }
    return DDPC_OK;
}

ddpc_status ddpc_sampler_create(const ddpc_sampler_config *c, ddpc_sampler **out)
{
    *out = NULL;
    if (!c || (unsigned)c->kind >= DDPC_SAMPLER_COUNT)
        return ddpc_errorf(DDPC_EINVAL, "sampler: kind %d is not a sampler kind",
                           c ? (int)c->kind : -1);
    ddpc_sampler *s = ddpc_calloc(1, sizeof *s);
    if (!s)
        return ddpc_errorf(DDPC_ENOMEM, "sampler: out of memory");
    s->cfg = *c;
    ddpc_status st = init_sources(s, c);
    if (st == DDPC_OK) {
        switch (c->kind) {
        case DDPC_SAMPLER_DISTRIBUTED:
            st = ddpc__sampler_distributed_init(s);
            break;
        case DDPC_SAMPLER_RANK_SPLIT:
            st = ddpc__sampler_rank_split_init(s);
            break;
        case DDPC_SAMPLER_CASE:
            st = ddpc__sampler_case_init(s);
            break;
        default:
            st = ddpc__sampler_task_shard_init(s);
            break;
        }
    }
    /* The copied config must not point at the caller's arrays after create returns. */
    s->cfg.sizes = s->cfg.left_index = s->cfg.right_index = NULL;
    if (st != DDPC_OK) {
        ddpc_sampler_destroy(s);
        return st;
    }
    ddpc_sampler_set_epoch(s, 0);
    *out = s;
    return DDPC_OK;
}

void ddpc_sampler_destroy(ddpc_sampler *s)
{
    if (!s)
        return;
    ddpc_free(s->sizes);
    ddpc_free(s->offsets);
    ddpc_free(s->lo);
    ddpc_free(s->hi);
    ddpc_free(s->keep);
    ddpc_free(s->owner);
    ddpc_free(s->out);
    ddpc_free(s->work);
    ddpc_free(s->aux);
    ddpc_free(s);
}

void ddpc_sampler_set_epoch(ddpc_sampler *s, int64_t epoch)
{
    s->epoch = epoch < 0 ? 0 : epoch;
    switch (s->cfg.kind) {
    case DDPC_SAMPLER_DISTRIBUTED:
        ddpc__sampler_distributed_fill(s);
        break;
    case DDPC_SAMPLER_RANK_SPLIT:
        ddpc__sampler_rank_split_fill(s);
        break;
    case DDPC_SAMPLER_CASE:
        ddpc__sampler_case_fill(s);
        break;
    default:
        ddpc__sampler_task_shard_fill(s);
        break;
    }
}

int64_t ddpc_sampler_epoch(const ddpc_sampler *s)
{
    return s->epoch;
}

int64_t ddpc_sampler_len(const ddpc_sampler *s)
{
    return s->len;
}

const int64_t *ddpc_sampler_indices(const ddpc_sampler *s)
{
    return s->out;
}

ddpc_sampler_kind ddpc_sampler_kind_of(const ddpc_sampler *s)
{
    return s->cfg.kind;
}

int ddpc_sampler_num_sources(const ddpc_sampler *s)
{
    return s->num_sources;
}

int64_t ddpc_sampler_source_size(const ddpc_sampler *s, int source)
{
    return source >= 0 && source < s->num_sources ? s->sizes[source] : 0;
}

int ddpc_sampler_source_of(const ddpc_sampler *s, int64_t g, int64_t *local)
{
    if (g < 0 || g >= s->offsets[s->num_sources])
        return -1;
    int lo = 0, hi = s->num_sources - 1; /* the last source whose offset is <= g */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (s->offsets[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (local)
        *local = g - s->offsets[lo];
    return lo;
}

int64_t ddpc_sampler_batch_size(const ddpc_sampler *s)
{
    return s->cfg.kind == DDPC_SAMPLER_RANK_SPLIT && s->cfg.streaming ? s->cfg.batch_size : 0;
}

int ddpc_sampler_task_rank(const ddpc_sampler *s, int task)
{
    if (s->cfg.kind != DDPC_SAMPLER_TASK_SHARD || task < 0 || task >= s->num_sources)
        return -1;
    return s->owner[task];
}
