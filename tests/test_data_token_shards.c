// SPDX-License-Identifier: MIT
/* Tests for src/data/token_shards.c: shards of a known stream in all three layouts (llm.c
 * version 1 uint16, version 2 uint32, raw uint16), cut into pieces of uneven lengths (some shorter
 * than a window) so that many windows cross shard boundaries; every sample of every layout must
 * equal the stream's window, and the file system's state is left as found. Malformed shards are
 * covered through `ddpc train` in tests/cli_train_tokens.sh. */
#include <ddpc/alloc.h>
#include <ddpc/data.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

enum { N_TOKENS = 5000, BLOCK = 16, VOCAB = 40000 };

static char tmpdir[64];
static int32_t stream[N_TOKENS];

static void put_le(FILE *f, uint32_t v, int width)
{
    for (int b = 0; b < width; b++)
        fputc((int)(v >> (8 * b)) & 0xff, f);
}

/* Writes stream[from, from+n) as shard `name` in `layout` (0 llm.c v1, 1 llm.c v2, 2 raw). */
static void write_shard(const char *name, int layout, int64_t from, int64_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    if (layout != 2)
        for (int i = 0; i < 256; i++)
            put_le(f, i == 0 ? 20240520u : i == 1 ? (uint32_t)layout + 1 : i == 2 ? (uint32_t)n : 0,
                   4);
    for (int64_t i = 0; i < n; i++)
        put_le(f, (uint32_t)stream[from + i], layout == 1 ? 4 : 2);
    fclose(f);
}

/* The stream in shards of uneven lengths: 1, 7, 16 (a window), 17, 1000, ... */
static void write_layout(const char *prefix, int layout)
{
    static const int64_t cuts[] = {1, 7, 16, 17, 1000, 3, 1500, 2};
    int64_t at = 0;
    for (size_t i = 0; at < N_TOKENS; i++) {
        int64_t n = i < sizeof cuts / sizeof cuts[0] ? cuts[i] : N_TOKENS - at;
        char name[64];
        snprintf(name, sizeof name, "%s_%03zu.bin", prefix, i);
        write_shard(name, layout, at, n);
        at += n;
    }
}

static void check_layout(const char *prefix, int layout)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "%s/%s_*.bin", tmpdir, prefix);
    ddpc_dataset *d = NULL;
    ddpc_token_file_format f = layout == 2 ? DDPC_TOKEN_FILE_U16 : DDPC_TOKEN_FILE_LLMC;
    CHECK(ddpc_dataset_token_shards_create(&d, pattern, f, BLOCK, VOCAB) == DDPC_OK);
    if (!d)
        return;
    CHECK_EQ_INT(ddpc_dataset_size(d), (N_TOKENS - 1) / BLOCK);
    CHECK_EQ_INT(ddpc_dataset_num_classes(d), VOCAB);
    int64_t bad = 0;
    for (int64_t i = 0; i < ddpc_dataset_size(d); i++) {
        int32_t tok[BLOCK], tgt[BLOCK];
        CHECK(ddpc_dataset_get_batch(d, &i, 1, NULL, tok, tgt) == DDPC_OK);
        bad += memcmp(tok, stream + i * BLOCK, sizeof tok) != 0;
        bad += memcmp(tgt, stream + i * BLOCK + 1, sizeof tgt) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    ddpc_dataset_destroy(d);
}

static void test_llmc_v1(void)
{
    check_layout("v1", 0);
}

static void test_llmc_v2(void)
{
    check_layout("v2", 1);
}

static void test_raw_u16(void)
{
    check_layout("raw", 2);
}

/* A llm.c shard read as raw uint16 keeps its header as tokens: a wrong format is caught by the
 * vocabulary check (the magic's low half, 20240520 & 0xffff = 55432, exceeds 40000). */
static void test_header_as_raw_is_caught(void)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "%s/v1_*.bin", tmpdir);
    ddpc_dataset *d = NULL;
    CHECK(ddpc_dataset_token_shards_create(&d, pattern, DDPC_TOKEN_FILE_U16, BLOCK, VOCAB) ==
          DDPC_EFORMAT);
    CHECK_STR_CONTAINS(ddpc_last_error(), "v1_000.bin: token 0 is id 55432");
    CHECK(d == NULL);
}

static void test_no_leaks(void)
{
    int64_t live = ddpc_alloc_live_bytes();
    check_layout("v1", 0);
    CHECK_EQ_INT(ddpc_alloc_live_bytes(), live);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddpc_shards_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    uint64_t x = 88172645463325252ull; /* xorshift64: any ids below 2^16 */
    for (int i = 0; i < N_TOKENS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        stream[i] = (int32_t)(x % VOCAB);
    }
    write_layout("v1", 0);
    write_layout("v2", 1);
    write_layout("raw", 2);
    RUN_TEST(test_llmc_v1);
    RUN_TEST(test_llmc_v2);
    RUN_TEST(test_raw_u16);
    RUN_TEST(test_header_as_raw_is_caught);
    RUN_TEST(test_no_leaks);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    CHECK(system(cmd) == 0);
    return check_summary();
}
