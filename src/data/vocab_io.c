// SPDX-License-Identifier: MIT
/* Saving and loading vocabularies: a header line, then "<token>\t<count>" per id. A token never
 * holds a tab or a newline (both are white space to the tokenizer), so the last tab of a line
 * separates the token from its count. */
#include "data/textfile.h"
#include "data/vocab_impl.h"

#include <ddpc/fs.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "# ddpc vocab v1"

ddpc_status ddpc_vocab_save(const ddpc_vocab *v, const char *path)
{
    ddpc_fs_out o;
    DDPC_TRY(ddpc_fs_out_open(&o, path, "vocabulary"));
    fprintf(o.f, HEADER " tokenize=%s min_freq=%" PRId64 " size=%" PRId64 "\n",
            ddpc_tokenize_name(v->tok), v->min_freq, v->size);
    for (int64_t i = 0; i < v->size; i++)
        fprintf(o.f, "%s\t%" PRId64 "\n", v->tokens[i], v->counts[i]);
    return ddpc_fs_out_commit(&o, false);
}

/* Parses the header: tokenize, min_freq, size. */
static ddpc_status parse_header(const char *path, const char *s, size_t n, ddpc_tokenize *tok,
                                int64_t *min_freq, int64_t *size)
{
    char line[256], mode[16];
    long long mf, sz;
    int used = 0;
    snprintf(line, sizeof line, "%.*s", (int)(n < 255 ? n : 255), s);
    if (n >= 255 ||
        sscanf(line, HEADER " tokenize=%15s min_freq=%lld size=%lld%n", mode, &mf, &sz, &used) !=
            3 ||
        line[used] != '\0')
        return ddpc_errorf(DDPC_EFORMAT,
                           "%s:1: not a ddpc vocabulary (expected '" HEADER
                           " tokenize=<word|char> min_freq=<n> size=<n>')",
                           path);
    if (strcmp(mode, "word") != 0 && strcmp(mode, "char") != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s:1: tokenize must be word or char, got '%s'", path,
                           mode);
    if (mf < 1 || sz < DDPC_VOCAB_SPECIALS || sz > INT32_MAX)
        return ddpc_errorf(DDPC_EFORMAT, "%s:1: min_freq %lld or size %lld out of range", path, mf,
                           sz);
    *tok = strcmp(mode, "char") == 0 ? DDPC_TOKENIZE_CHAR : DDPC_TOKENIZE_WORD;
    *min_freq = mf;
    *size = sz;
    return DDPC_OK;
}

/* Entry `id` from line s[0, n). */
static ddpc_status parse_entry(ddpc_vocab *v, const char *path, int64_t line, int64_t id,
                               const char *s, size_t n)
{
    const char *tab = NULL;
    for (size_t i = n; i > 0 && !tab; i--)
        tab = s[i - 1] == '\t' ? s + i - 1 : NULL;
    char num[32], *end;
    size_t nl = tab ? n - (size_t)(tab - s) - 1 : 0;
    if (!tab || nl == 0 || nl >= sizeof num)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: expected '<token><TAB><count>'", path,
                           (long long)line);
    memcpy(num, tab + 1, nl);
    num[nl] = '\0';
    errno = 0;
    long long count = strtoll(num, &end, 10);
    size_t tn = (size_t)(tab - s);
    if (*end != '\0' || errno != 0 || count < 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: count '%s' is not a number >= 0", path,
                           (long long)line, num);
    if (tn == 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: empty token", path, (long long)line);
    if (id < DDPC_VOCAB_SPECIALS &&
        (strlen(ddpc__vocab_specials[id]) != tn || memcmp(ddpc__vocab_specials[id], s, tn) != 0))
        return ddpc_errorf(DDPC_EFORMAT, "%s:%lld: id %lld must be the special token %s", path,
                           (long long)line, (long long)id, ddpc__vocab_specials[id]);
    return ddpc__vocab_set(v, id, s, tn, count);
}

static ddpc_status load(ddpc__textfile *f, const char *path, ddpc_vocab **out)
{
    const char *s;
    size_t n;
    ddpc_tokenize tok = DDPC_TOKENIZE_WORD;
    int64_t min_freq = 1, size = 0;
    if (!ddpc__textfile_next(f, &s, &n))
        return ddpc_errorf(DDPC_EFORMAT, "%s: empty file, not a ddpc vocabulary", path);
    DDPC_TRY(parse_header(path, s, n, &tok, &min_freq, &size));
    int64_t entries = ddpc__textfile_count_lines(f) - 1;
    if (entries != size)
        return ddpc_errorf(DDPC_EFORMAT, "%s: the header says %lld tokens but %lld lines follow",
                           path, (long long)size, (long long)entries);
    ddpc_vocab *v = ddpc__vocab_alloc(size);
    if (!v)
        return ddpc_errorf(DDPC_ENOMEM, "%s: out of memory for %lld tokens", path, (long long)size);
    v->tok = tok;
    v->min_freq = min_freq;
    ddpc_status st = DDPC_OK;
    for (int64_t id = 0; st == DDPC_OK && id < size && ddpc__textfile_next(f, &s, &n); id++)
        st = parse_entry(v, path, f->line, id, s, n);
    if (st == DDPC_OK)
        st = ddpc__vocab_index(v, path);
    if (st != DDPC_OK) {
        ddpc_vocab_destroy(v);
        return st;
    }
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_vocab_load(ddpc_vocab **out, const char *path)
{
    *out = NULL;
    ddpc__textfile f;
    DDPC_TRY(ddpc__textfile_read(&f, path));
    ddpc_status st = load(&f, path, out);
    ddpc__textfile_free(&f);
    return st;
}
