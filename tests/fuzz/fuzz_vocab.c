// SPDX-License-Identifier: MIT
/* libFuzzer harness for the vocabulary files and the tokenizer (src/data/vocab*.c). Built by
 * tests/fuzz/run.sh. The input is written to a temporary file and (1) loaded as a vocabulary: an
 * accepted one has its specials at ids 0..3, every id's token maps back to its id, and a save and
 * reload gives an equal vocabulary; (2) used as a corpus for a word and a char vocabulary, whose
 * encoding of the input's first line decodes to text that encodes to the same ids. */
#include <ddpc/vocab.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_loaded(const ddpc_vocab *v, const char *save_path)
{
    static const char *const specials[] = {"<pad>", "<bos>", "<eos>", "<unk>"};
    for (int32_t i = 0; i < 4; i++)
        if (strcmp(ddpc_vocab_token(v, i), specials[i]) != 0)
            abort();
    for (int32_t i = 0; i < ddpc_vocab_size(v); i++) {
        const char *t = ddpc_vocab_token(v, i);
        if (ddpc_vocab_id(v, t, strlen(t)) != i)
            abort();
    }
    ddpc_vocab *w = NULL;
    if (ddpc_vocab_save(v, save_path) != DDPC_OK || ddpc_vocab_load(&w, save_path) != DDPC_OK ||
        !ddpc_vocab_equal(v, w))
        abort();
    ddpc_vocab_destroy(w);
}

static void round_trip(const char *path, ddpc_tokenize tok, const char *line)
{
    ddpc_vocab *v = NULL;
    if (ddpc_vocab_build(&v, path, tok, 1, 0) != DDPC_OK)
        return;
    static int32_t ids[4096], again[4096];
    static char text[65536];
    int64_t n, m;
    ddpc_vocab_encode(v, line, ids, 4096, &n);
    if (n <= 4096 && ddpc_vocab_decode(v, ids, n, text, sizeof text) < sizeof text) {
        ddpc_vocab_encode(v, text, again, 4096, &m);
        /* a corpus token spelled like a special encodes to it and decodes to nothing */
        bool special = false;
        for (int64_t i = 0; i < n; i++)
            special |= ids[i] < 4;
        if (!special && (m != n || memcmp(ids, again, (size_t)n * sizeof *ids) != 0))
            abort();
    }
    ddpc_vocab_destroy(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64], save[64];
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/ddpc_fuzz_vocab_%d", (int)getpid());
        snprintf(save, sizeof save, "/tmp/ddpc_fuzz_vocab_%d.out", (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    ddpc_vocab *v = NULL;
    if (ddpc_vocab_load(&v, path) == DDPC_OK) {
        check_loaded(v, save);
        ddpc_vocab_destroy(v);
    }
    static char line[65536];
    size_t n = size < sizeof line - 1 ? size : sizeof line - 1;
    memcpy(line, data, n);
    line[n] = '\0';
    round_trip(path, DDPC_TOKENIZE_WORD, line);
    round_trip(path, DDPC_TOKENIZE_CHAR, line);
    return 0;
}
