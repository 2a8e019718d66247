// SPDX-License-Identifier: MIT
/* What a changed key does to a resumed run (the one table), and the differences between two
 * effective configurations. Invariant: rules are matched first to last and a key no rule names is
 * DDPC__CHANGE_TRAINING, so a new key is refused on resume, never silently accepted; the dump texts
 * are read, never modified. */
#include "train/config_diff.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pattern is a dotted key whose components may be "*" (any one component); one ending in '.'
 * matches every key under it. */
static const struct {
    const char *pattern;
    ddpc__change_kind kind;
} rules[] = {
    /* Factors of world x batch x accumulation: a change is judged by the global batch, which a
     * reshard keeps (fewer ranks, larger batches) and a different experiment does not. */
    {"data.batch_size", DDPC__CHANGE_BATCH},
    {"tasks.*.batch_size", DDPC__CHANGE_BATCH},
    {"optim.grad_accum_steps", DDPC__CHANGE_BATCH},
    {"parallel.replicas", DDPC__CHANGE_BATCH},
    /* The run's length: a longer one extends it. */
    {"max_steps", DDPC__CHANGE_LENGTH},
    {"epochs", DDPC__CHANGE_LENGTH},
    /* The same training laid out differently: a checkpoint reshards to any stage and world, and
     * is the same file whichever device wrote it. */
    {"zero.stage", DDPC__CHANGE_RESHARD},
    {"device", DDPC__CHANGE_RESHARD},
    {"parallel.mode", DDPC__CHANGE_RESHARD},
    {"dist.backend", DDPC__CHANGE_RESHARD},
    {"ddp.bucket_cap_mb", DDPC__CHANGE_RESHARD},
    {"ddp.first_bucket_mb", DDPC__CHANGE_RESHARD},
    {"ddp.find_unused_parameters", DDPC__CHANGE_RESHARD},
    {"model.activation_checkpointing", DDPC__CHANGE_RESHARD}, /* recomputes the same values */
    /* Nothing trained depends on these: outputs, logging, evaluation, cadences, speed. */
    /* Where the plugins' code was loaded from, not what is trained: model.type, data.type and
     * the types' own keys say that, and the checkpoint's tensor names and shapes are checked on
     * load. A plugin rebuilt elsewhere (another prefix, another build directory) must resume. */
    {"plugins", DDPC__CHANGE_COSMETIC},
    {"run_dir", DDPC__CHANGE_COSMETIC},
    {"resume", DDPC__CHANGE_COSMETIC},
    {"state", DDPC__CHANGE_COSMETIC},
    {"weights_out", DDPC__CHANGE_COSMETIC},
    {"init_from", DDPC__CHANGE_COSMETIC}, /* the checkpoint's parameters replace what it loads */
    {"init_strict", DDPC__CHANGE_COSMETIC},
    {"checkpoint.", DDPC__CHANGE_COSMETIC},
    {"log_every", DDPC__CHANGE_COSMETIC},
    {"log.", DDPC__CHANGE_COSMETIC},
    {"stats_sync_every", DDPC__CHANGE_COSMETIC},
    {"eval_every", DDPC__CHANGE_COSMETIC},
    {"eval_batches", DDPC__CHANGE_COSMETIC},
    {"test_batches", DDPC__CHANGE_COSMETIC},
    {"eval_beam_size", DDPC__CHANGE_COSMETIC},
    {"data.eval_batch_size", DDPC__CHANGE_COSMETIC},
    {"predict.", DDPC__CHANGE_COSMETIC},
    {"num_threads", DDPC__CHANGE_COSMETIC},
    {"data.num_workers", DDPC__CHANGE_COSMETIC},
    {"data.prefetch_factor", DDPC__CHANGE_COSMETIC},
    {"data.log_indices", DDPC__CHANGE_COSMETIC},
    {"dist.timeout_s", DDPC__CHANGE_COSMETIC},
    {"flight.", DDPC__CHANGE_COSMETIC},
    {"profile.", DDPC__CHANGE_COSMETIC},
    {"bench.", DDPC__CHANGE_COSMETIC},
    {"memory.", DDPC__CHANGE_COSMETIC},
    {"fault.", DDPC__CHANGE_COSMETIC},
};

static bool matches(const char *pattern, const char *key)
{
    size_t pn = strlen(pattern);
    if (pn && pattern[pn - 1] == '.')
        return strncmp(key, pattern, pn) == 0;
    while (*pattern && *key) {
        if (pattern[0] == '*' && (pattern[1] == '.' || pattern[1] == '\0')) {
            pattern++;
            while (*key && *key != '.')
                key++;
        } else if (*pattern++ != *key++) {
            return false;
        }
    }
    return *pattern == '\0' && *key == '\0';
}

ddpc__change_kind ddpc__config_key_kind(const char *key)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (matches(rules[i].pattern, key))
            return rules[i].kind;
    return DDPC__CHANGE_TRAINING;
}

/* One "key: value" line of a dump: [key, key + key_len) and [value, value + value_len). */
typedef struct {
    const char *key, *value;
    size_t key_len, value_len;
} line;

/* The line starting at *at (advanced past it); false at the end of the text. A line without
 * ": " (none in a dump) has an empty value. */
static bool next_line(const char **at, line *l)
{
    const char *p = *at;
    if (!p || !*p)
        return false;
    const char *end = strchr(p, '\n');
    if (!end)
        end = p + strlen(p);
    const char *sep = p;
    while (sep + 1 < end && !(sep[0] == ':' && sep[1] == ' '))
        sep++;
    l->key = p;
    if (sep + 1 < end) {
        l->key_len = (size_t)(sep - p);
        l->value = sep + 2;
    } else {
        l->key_len = (size_t)(end - p);
        l->value = end;
    }
    l->value_len = (size_t)(end - l->value);
    *at = *end ? end + 1 : end;
    return true;
}

static bool find(const char *text, const char *key, size_t key_len, line *out)
{
    const char *at = text;
    while (next_line(&at, out))
        if (out->key_len == key_len && strncmp(out->key, key, key_len) == 0)
            return true;
    return false;
}

/* Whether the whole of [s, s + n) is one decimal number, into *v. */
static bool number(const char *s, size_t n, double *v)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    *v = strtod(buf, &end);
    return *end == '\0' && end != buf;
}

static bool same_value(const line *a, const line *b)
{
    double x, y;
    if (a->value_len == b->value_len && strncmp(a->value, b->value, a->value_len) == 0)
        return true;
    return number(a->value, a->value_len, &x) && number(b->value, b->value_len, &y) && x == y;
}

static void copy_value(char *dst, const line *l)
{
    size_t n = l->value_len;
    if (n < DDPC__CHANGE_VALUE) {
        snprintf(dst, DDPC__CHANGE_VALUE, "%.*s", (int)n, l->value);
        return;
    }
    snprintf(dst, DDPC__CHANGE_VALUE, "%.*s...", DDPC__CHANGE_VALUE - 4, l->value);
}

static void add(ddpc__config_change *out, size_t cap, size_t *n, const line *key, const line *was,
                const line *now)
{
    if (*n < cap) {
        ddpc__config_change *c = &out[*n];
        snprintf(c->key, sizeof c->key, "%.*s", (int)key->key_len, key->key);
        if (was)
            copy_value(c->old_value, was);
        else
            snprintf(c->old_value, sizeof c->old_value, "(none)");
        if (now)
            copy_value(c->new_value, now);
        else
            snprintf(c->new_value, sizeof c->new_value, "(none)");
        c->kind = ddpc__config_key_kind(c->key);
        c->one_sided = !was || !now;
    }
    (*n)++;
}

void ddpc__config_diff(const char *old_text, const char *new_text, ddpc__config_change *out,
                       size_t cap, size_t *n)
{
    *n = 0;
    line l, o;
    for (const char *at = new_text; next_line(&at, &l);) {
        bool had = find(old_text, l.key, l.key_len, &o);
        if (!had || !same_value(&o, &l))
            add(out, cap, n, &l, had ? &o : NULL, &l);
    }
    for (const char *at = old_text; next_line(&at, &o);)
        if (!find(new_text, o.key, o.key_len, &l))
            add(out, cap, n, &o, &o, NULL);
}

bool ddpc__config_text_value(const char *text, const char *key, char *buf, size_t cap)
{
    line l;
    if (!find(text, key, strlen(key), &l))
        return false;
    const char *v = l.value;
    size_t n = l.value_len;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') /* the dump quotes strings that need it */
        v++, n -= 2;
    snprintf(buf, cap, "%.*s", (int)n, v);
    return true;
}
