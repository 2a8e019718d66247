// SPDX-License-Identifier: MIT
/* libFuzzer harness for a checkpoint's state.json (src/ckpt/checkpoint_state.c and the sharded
 * manifest of checkpoint_manifest.c). Built and run by tests/fuzz/run.sh. The input's
 * "state_crc32" (its last occurrence) is set to the right value first, so mutations reach the
 * parser and the manifest check instead of stopping at the checksum. Every input must parse or
 * fail cleanly; a crash found here becomes a case in tests/test_train_checkpoint_shard.c. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include <ddpc/alloc.h>

#include "ckpt/checkpoint_impl.h"

#define SELF_KEY "\"state_crc32\": \""

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = ddpc_malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *at = NULL;
    for (char *p = text; (p = strstr(p, SELF_KEY)) != NULL; p++)
        at = p;
    size_t off = at ? (size_t)(at - text) + strlen(SELF_KEY) : 0;
    if (at && off + 8 <= size) {
        memset(text + off, '0', 8);
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text, (uInt)size);
        char digits[9];
        snprintf(digits, sizeof digits, "%08x", (unsigned)crc);
        memcpy(text + off, digits, 8);
    }
    ddpc_ckpt_state s;
    ddpc__ckpt_extra x;
    if (ddpc__ckpt_state_parse(text, size, "fuzz", &s, &x) == DDPC_OK) {
        if (x.zero_stage > 0)
            (void)ddpc__ckpt_manifest_check(&x, "fuzz");
        ddpc_ckpt_state_fini(&s);
        ddpc__ckpt_extra_fini(&x);
    }
    ddpc_free(text);
    return 0;
}
