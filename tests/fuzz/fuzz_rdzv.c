// SPDX-License-Identifier: MIT
/* libFuzzer harness for the shm rendezvous messages (src/comm/shm_hello.c), the only bytes the
 * shm backend takes from the network. Built and run by tests/fuzz/run.sh. Every input is parsed
 * as a hello and as a reply; whatever parses must survive a format/parse round trip unchanged,
 * and parsed strings must stay inside the alphabet the format promises. */
#include "comm/shm_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hello(const char *buf, size_t size)
{
    ddpc__shm_hello h, again;
    if (ddpc__shm_hello_parse(buf, size, &h) != DDPC_OK)
        return;
    if (h.version < 1 || h.world < 1 || h.pid < 1 || h.rank < 0)
        abort();
    char line[DDPC__SHM_LINE_MAX + 64];
    int n = ddpc__shm_hello_format(line, sizeof line, &h);
    if (n <= 0 || (size_t)n != size || memcmp(line, buf, size) != 0)
        abort(); /* the format is canonical: what parsed is exactly what would be sent */
    if (ddpc__shm_hello_parse(line, (size_t)n, &again) != DDPC_OK ||
        memcmp(&h, &again, sizeof h) != 0)
        abort();
}

static void check_reply(const char *buf, size_t size)
{
    char text[DDPC__SHM_MSG_CAP];
    bool ok = false;
    if (ddpc__shm_reply_parse(buf, size, &ok, text, sizeof text) != DDPC_OK)
        return;
    size_t len = strlen(text);
    for (size_t i = 0; i < len; i++)
        if (text[i] < 0x20 || text[i] > 0x7e)
            abort();
    if (ok && (text[0] != '/' || strchr(text + 1, '/')))
        abort(); /* a segment name is one path component */
    char line[DDPC__SHM_LINE_MAX + 64];
    int n = ddpc__shm_reply_format(line, sizeof line, ok, text);
    char again[DDPC__SHM_MSG_CAP];
    bool ok2 = !ok;
    if (n <= 0 || ddpc__shm_reply_parse(line, (size_t)n, &ok2, again, sizeof again) != DDPC_OK ||
        ok2 != ok || strcmp(again, text) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: a read past `size` trips ASan */
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    check_hello(buf, size);
    check_reply(buf, size);
    free(buf);
    return 0;
}
