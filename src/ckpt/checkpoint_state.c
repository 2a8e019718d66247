// SPDX-License-Identifier: MIT
/* state.json of a checkpoint: the training counters, the effective config, the model and
 * optimizer types, each file's size and CRC-32 and, for a sharded checkpoint, the ZeRO stage,
 * the model's tensor table and the manifest of each shard file's flat ranges. Written by hand
 * (strings escaped as JSON), read with the strict parser of json.c. Invariant: the file's last
 * member "state_crc32" is the CRC-32 of the file's bytes with its own 8 hex digits replaced by '0',
 * so a flipped byte anywhere, even one that leaves valid JSON, is detected. */
#include "ckpt/checkpoint_impl.h"

#include <ddpc/alloc.h>
#include <ddpc/fs.h>

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/json.h"

#define SELF_KEY "\"state_crc32\": \""
#define STATE_MAX ((size_t)64 << 20)

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = ddpc_malloc(cap);
        if (!p) {
            b->oom = true;
            return;
        }
        if (b->len)
            memcpy(p, b->buf, b->len);
        ddpc_free(b->buf);
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void puts_(sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w > 0)
        put(b, tmp, (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1);
}

/* s as a JSON string: quotes, backslashes and control bytes escaped; UTF-8 passes as is. */
static void put_string(sbuf *b, const char *s)
{
    put(b, "\"", 1);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            put(b, esc, 2);
        } else if (c == '\n') {
            put(b, "\\n", 2);
        } else if (c == '\t') {
            put(b, "\\t", 2);
        } else if (c < 0x20) {
            putf(b, "\\u%04x", c);
        } else {
            put(b, s, 1);
        }
    }
    put(b, "\"", 1);
}

/* "tensors": the model's table; "shards": each file and its [lo, len] ranges. */
static void put_manifest(sbuf *b, const ddpc__ckpt_extra *x)
{
    puts_(b, "  \"tensors\": [");
    for (size_t i = 0; i < x->n_tensors; i++) {
        const ddpc__ckpt_tensor *t = &x->tensors[i];
        puts_(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        put_string(b, t->name);
        putf(b, ", \"offset\": %zu, \"shape\": [", t->offset);
        for (int d = 0; d < t->ndim; d++)
            putf(b, d ? ", %" PRId64 : "%" PRId64, t->shape[d]);
        puts_(b, "]}");
    }
    puts_(b, "\n  ],\n  \"shards\": [");
    for (size_t f = 0; f < x->n_files; f++) {
        puts_(b, f ? ",\n    {\"file\": " : "\n    {\"file\": ");
        put_string(b, x->files[f].name);
        puts_(b, ", \"ranges\": [");
        for (size_t k = x->first[f]; k < x->first[f + 1]; k++)
            putf(b, k > x->first[f] ? ", [%zu, %zu]" : "[%zu, %zu]", x->ranges[k].lo,
                 x->ranges[k].len);
        puts_(b, "]}");
    }
    puts_(b, "\n  ],\n");
}

ddpc_status ddpc__ckpt_state_format(const ddpc_ckpt_state *s, const ddpc__ckpt_extra *x, char **out,
                                    size_t *len)
{
    sbuf b = {0};
    bool sharded = x->zero_stage > 0;
    putf(&b, "{\n  \"format\": \"ddpc-checkpoint\",\n  \"format_version\": %d,\n", sharded ? 2 : 1);
    puts_(&b, "  \"ddpc_version\": ");
    put_string(&b, DDPC_VERSION);
    putf(&b,
         ",\n  \"step\": %" PRId64 ",\n  \"epoch\": %" PRId64 ",\n  \"epoch_step\": %" PRId64 ",\n",
         s->step, s->epoch, s->epoch_step);
    putf(&b, "  \"samples_seen\": %" PRId64 ",\n  \"global_batch\": %" PRId64 ",\n",
         s->samples_seen, s->global_batch);
    putf(&b, "  \"world\": %d,\n  \"seed\": \"%" PRIu64 "\",\n  \"skipped_steps\": %" PRId64 ",\n",
         s->world, s->seed, s->skipped_steps);
    if (s->loss_scaling) /* %.9g round-trips every float */
        putf(&b, "  \"loss_scale\": {\"scale\": %.9g, \"growth_tracker\": %" PRId64 "},\n",
             (double)s->loss_scale, s->loss_scale_growth_tracker);
    if (sharded)
        putf(&b, "  \"zero_stage\": %d,\n", x->zero_stage);
    puts_(&b, "  \"model\": {\"type\": ");
    put_string(&b, x->model_type);
    putf(&b, ", \"num_params\": %" PRId64 "},\n", x->num_params);
    puts_(&b, "  \"optimizer\": {\"type\": ");
    put_string(&b, x->optim_type);
    putf(&b, ", \"step_count\": %" PRId64 "},\n", x->optim_step_count);
    if (sharded)
        put_manifest(&b, x);
    puts_(&b, "  \"files\": {");
    for (size_t i = 0; i < x->n_files; i++) {
        puts_(&b, i ? ",\n    " : "\n    ");
        put_string(&b, x->files[i].name);
        putf(&b, ": {\"bytes\": %" PRIu64 ", \"crc32\": %" PRIu32 "}", x->files[i].bytes,
             x->files[i].crc);
    }
    puts_(&b, "\n  },\n  \"config\": ");
    put_string(&b, s->config ? s->config : "");
    puts_(&b, ",\n  " SELF_KEY "00000000\"\n}\n");
    if (b.oom) {
        ddpc_free(b.buf);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory formatting %s", DDPC__CKPT_STATE);
    }
    char *hex = b.buf + b.len - 12; /* the 8 zeros before "\"\n}\n" */
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)b.buf, (uInt)b.len);
    char digits[9];
    snprintf(digits, sizeof digits, "%08" PRIx32, crc);
    memcpy(hex, digits, 8);
    *out = b.buf;
    *len = b.len;
    return DDPC_OK;
}

/* Checks the self checksum of text (modified in a copy only). */
static ddpc_status check_self_crc(const char *text, size_t len, const char *origin,
                                  uint32_t *self)
{
    const char *at = NULL;
    for (const char *p = text; (p = strstr(p, SELF_KEY)) != NULL; p++)
        at = p;
    size_t off = at ? (size_t)(at - text) + strlen(SELF_KEY) : 0;
    if (!at || off + 9 > len || text[off + 8] != '"')
        return ddpc_errorf(DDPC_EFORMAT, "%s: no \"state_crc32\" (corrupt checkpoint)", origin);
    char *copy = ddpc_malloc(len + 1);
    if (!copy)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory checking %s", origin);
    memcpy(copy, text, len);
    memset(copy + off, '0', 8);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)copy, (uInt)len);
    ddpc_free(copy);
    char digits[9];
    snprintf(digits, sizeof digits, "%08" PRIx32, crc);
    if (memcmp(digits, text + off, 8) != 0)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: CRC-32 %s does not match its state_crc32 %.8s "
                           "(corrupt checkpoint)",
                           origin, digits, text + off);
    *self = crc;
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_get_int(const ddpc__json *obj, const char *key, const char *origin,
                               int64_t *out)
{
    const ddpc__json *v = ddpc__json_get(obj, key);
    if (!v || v->type != DDPC__JSON_NUMBER || !v->is_int)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"%s\" is missing or not an integer", origin, key);
    *out = v->integer;
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_get_str(const ddpc__json *obj, const char *key, const char *origin,
                               const ddpc__json **out)
{
    *out = ddpc__json_get(obj, key);
    if (!*out || (*out)->type != DDPC__JSON_STRING)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"%s\" is missing or not a string", origin, key);
    return DDPC_OK;
}

static ddpc_status copy_str(const ddpc__json *obj, const char *key, const char *origin, char *dst,
                            size_t cap)
{
    const ddpc__json *v;
    DDPC_TRY(ddpc__ckpt_get_str(obj, key, origin, &v));
    if (v->str_len >= cap)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"%s\" is too long", origin, key);
    memcpy(dst, v->str, v->str_len + 1);
    return DDPC_OK;
}

/* "loss_scale": {"scale": S, "growth_tracker": N}, present only when the run scaled its loss. */
static ddpc_status parse_loss_scale(const ddpc__json *ls, const char *origin, ddpc_ckpt_state *s)
{
    if (!ls)
        return DDPC_OK;
    const ddpc__json *scale = ddpc__json_get(ls, "scale");
    if (ls->type != DDPC__JSON_OBJECT || !scale || scale->type != DDPC__JSON_NUMBER ||
        !(scale->number > 0.0) || !isfinite((float)scale->number))
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"loss_scale\" needs a positive finite \"scale\"",
                           origin);
    DDPC_TRY(ddpc__ckpt_get_int(ls, "growth_tracker", origin, &s->loss_scale_growth_tracker));
    if (s->loss_scale_growth_tracker < 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: negative loss_scale growth_tracker", origin);
    s->loss_scaling = true;
    s->loss_scale = (float)scale->number;
    return DDPC_OK;
}

static ddpc_status parse_tree(const ddpc__json *j, const char *origin, ddpc_ckpt_state *s,
                              ddpc__ckpt_extra *x)
{
    int64_t v;
    const ddpc__json *str;
    if (j->type != DDPC__JSON_OBJECT)
        return ddpc_errorf(DDPC_EFORMAT, "%s: not a JSON object", origin);
    DDPC_TRY(ddpc__ckpt_get_str(j, "format", origin, &str));
    if (strcmp(str->str, "ddpc-checkpoint") != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: format is '%s', not ddpc-checkpoint", origin,
                           str->str);
    DDPC_TRY(ddpc__ckpt_get_int(j, "format_version", origin, &v));
    if (v < 1 || v > DDPC_CKPT_FORMAT_VERSION)
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s: format_version %lld is not supported (this ddpc "
                           "reads up to %d)",
                           origin, (long long)v, DDPC_CKPT_FORMAT_VERSION);
    DDPC_TRY(copy_str(j, "ddpc_version", origin, s->version, sizeof s->version));
    DDPC_TRY(ddpc__ckpt_get_int(j, "step", origin, &s->step));
    DDPC_TRY(ddpc__ckpt_get_int(j, "epoch", origin, &s->epoch));
    DDPC_TRY(ddpc__ckpt_get_int(j, "epoch_step", origin, &s->epoch_step));
    DDPC_TRY(ddpc__ckpt_get_int(j, "samples_seen", origin, &s->samples_seen));
    DDPC_TRY(ddpc__ckpt_get_int(j, "global_batch", origin, &s->global_batch));
    DDPC_TRY(ddpc__ckpt_get_int(j, "skipped_steps", origin, &s->skipped_steps));
    DDPC_TRY(parse_loss_scale(ddpc__json_get(j, "loss_scale"), origin, s));
    DDPC_TRY(ddpc__ckpt_get_int(j, "world", origin, &v));
    if (v < 0 || v > INT32_MAX)
        return ddpc_errorf(DDPC_EFORMAT, "%s: world %lld is out of range", origin, (long long)v);
    s->world = (int)v;
    DDPC_TRY(ddpc__ckpt_get_str(j, "seed", origin, &str));
    char *end = NULL;
    s->seed = strtoull(str->str, &end, 10);
    if (!str->str[0] || *end)
        return ddpc_errorf(DDPC_EFORMAT, "%s: seed '%s' is not a number", origin, str->str);
    const ddpc__json *model = ddpc__json_get(j, "model"), *optim = ddpc__json_get(j, "optimizer");
    if (!model || !optim)
        return ddpc_errorf(DDPC_EFORMAT, "%s: \"model\" or \"optimizer\" is missing", origin);
    DDPC_TRY(copy_str(model, "type", origin, x->model_type, sizeof x->model_type));
    DDPC_TRY(ddpc__ckpt_get_int(model, "num_params", origin, &x->num_params));
    DDPC_TRY(copy_str(optim, "type", origin, x->optim_type, sizeof x->optim_type));
    DDPC_TRY(ddpc__ckpt_get_int(optim, "step_count", origin, &x->optim_step_count));
    DDPC_TRY(ddpc__ckpt_manifest_parse(j, origin, x));
    s->zero_stage = x->zero_stage;
    DDPC_TRY(ddpc__ckpt_get_str(j, "config", origin, &str));
    s->config = ddpc_malloc(str->str_len + 1);
    if (!s->config)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory reading %s", origin);
    memcpy(s->config, str->str, str->str_len + 1);
    return DDPC_OK;
}

ddpc_status ddpc__ckpt_state_parse(const char *text, size_t len, const char *origin,
                                   ddpc_ckpt_state *s, ddpc__ckpt_extra *x)
{
    memset(s, 0, sizeof *s);
    memset(x, 0, sizeof *x);
    uint32_t self = 0;
    DDPC_TRY(check_self_crc(text, len, origin, &self));
    ddpc__json *j = NULL;
    DDPC_TRY(ddpc__json_parse(&j, text, len, origin));
    ddpc_status st = ddpc__json_check_unique_keys(j, origin);
    if (st == DDPC_OK)
        st = parse_tree(j, origin, s, x);
    s->state_crc = self;
    ddpc__json_free(j);
    if (st != DDPC_OK) {
        ddpc_ckpt_state_fini(s);
        ddpc__ckpt_extra_fini(x);
    }
    return st;
}

ddpc_status ddpc__ckpt_state_load(const char *ckpt, ddpc_ckpt_state *s, ddpc__ckpt_extra *x)
{
    char path[DDPC__CKPT_PATH_MAX];
    memset(s, 0, sizeof *s);
    memset(x, 0, sizeof *x);
    DDPC_TRY(ddpc__ckpt_join(path, sizeof path, ckpt, DDPC__CKPT_STATE));
    char *text = NULL;
    size_t len = 0;
    bool missing;
    DDPC_TRY(ddpc_read_regular_file(path, NULL, STATE_MAX, &missing, &text, &len));
    if (missing) /* the last file a save writes */
        return ddpc_errorf(DDPC_EFORMAT, "%s is missing (incomplete checkpoint)", path);
    ddpc_status st = ddpc__ckpt_state_parse(text, len, path, s, x);
    ddpc_free(text);
    return st;
}

ddpc_status ddpc_ckpt_read_state(const char *path, ddpc_ckpt_state *s)
{
    if (!path || !s)
        return ddpc_errorf(DDPC_EINVAL, "checkpoint read_state: path or state is NULL");
    ddpc__ckpt_extra x;
    ddpc_status st = ddpc__ckpt_state_load(path, s, &x);
    ddpc__ckpt_extra_fini(&x);
    return st;
}

void ddpc_ckpt_state_fini(ddpc_ckpt_state *s)
{
    if (!s)
        return;
    ddpc_free(s->config);
    s->config = NULL;
}
