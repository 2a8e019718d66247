// SPDX-License-Identifier: MIT
/* libFuzzer harness for the token-shard reader (src/data/token_shards.c): llm.c's header and
 * raw uint16 files. Built and run by tests/fuzz/run.sh. The first two bytes choose the block
 * size, the vocabulary and where the rest is cut into two shards (or none, one file); the shards
 * are opened in both formats and, when accepted, every window is read, so a header that lies
 * about its size would read past a mapping (ASan) and an id over the vocabulary is caught. */
#include <ddpc/data.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void remove_dir(void)
{
    char path[96];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/s%d.bin", dir, i);
        unlink(path);
    }
    rmdir(dir);
}

static void write_file(int i, const uint8_t *p, size_t n)
{
    char path[96];
    snprintf(path, sizeof path, "%s/s%d.bin", dir, i);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n))
        abort();
    fclose(f);
}

static void read_all(size_t size, ddpc_token_file_format format, int64_t block, int64_t vocab)
{
    char pattern[96];
    snprintf(pattern, sizeof pattern, "%s/s*.bin", dir);
    ddpc_dataset *d = NULL;
    ddpc_status s = ddpc_dataset_token_shards_create(&d, pattern, format, block, vocab);
    if (s != DDPC_OK) {
        if (d || (s != DDPC_EFORMAT && s != DDPC_EINVAL))
            abort(); /* readable files: only their contents can be wrong */
        return;
    }
    int64_t n = ddpc_dataset_size(d), shape[3];
    ddpc_dataset_sample_shape(d, shape);
    if (n < 1 || shape[0] != block || (uint64_t)(n * block) > size) /* at most a token a byte */
        abort();
    int32_t *tok = malloc((size_t)block * sizeof *tok), *tgt = malloc((size_t)block * sizeof *tgt);
    if (!tok || !tgt)
        abort();
    for (int64_t i = 0; i < n; i++) {
        if (ddpc_dataset_get_batch(d, &i, 1, NULL, tok, tgt) != DDPC_OK)
            abort();
        for (int64_t t = 0; t < block; t++)
            if (tok[t] < 0 || tok[t] >= vocab || tgt[t] < 0 || tgt[t] >= vocab ||
                (t + 1 < block && tgt[t] != tok[t + 1]))
                abort();
    }
    int64_t past = n;
    if (ddpc_dataset_get_batch(d, &past, 1, NULL, tok, tgt) != DDPC_EINVAL)
        abort();
    free(tok);
    free(tgt);
    ddpc_dataset_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t vocabs[] = {2, 50257, 65536, INT32_MAX};
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ddpc_fuzz_shards_XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(remove_dir);
    }
    if (size < 2)
        return 0;
    int64_t block = 1 + (data[0] & 15), vocab = vocabs[(data[0] >> 4) & 3];
    bool two = data[0] & 64;
    const uint8_t *rest = data + 2;
    size_t n = size - 2, cut = two ? (size_t)data[1] * n / 255 : n;
    write_file(0, rest, cut);
    char second[96];
    snprintf(second, sizeof second, "%s/s1.bin", dir);
    if (two)
        write_file(1, rest + cut, n - cut);
    else
        unlink(second);
    read_all(n, DDPC_TOKEN_FILE_LLMC, block, vocab);
    read_all(n, DDPC_TOKEN_FILE_U16, block, vocab);
    return 0;
}
