// SPDX-License-Identifier: MIT
/* libFuzzer harness for `ddpc run --hostfile`'s parser (src/launch/mpirun.c) and the host-name
 * check it and --master-addr share (src/launch/hostname.c). Built and run by tests/fuzz/run.sh.
 * The input is written as a hostfile and parsed; then each of its lines, cut at a NUL, is checked
 * as a host name. An accepted name must be one that can reach ssh and mpirun safely (no leading
 * '-', at most 253 characters, only letters, digits, '-', '.' and an IPv6 address's ':', some
 * letter or digit unless an address), and every refusal's reason, and the hostfile's error
 * message, must be printable whatever the buffer's size. */
#include "launch/launch_impl.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void remove_file(void)
{
    unlink(path);
}

static void check_reason(const char *why, size_t cap)
{
    size_t n = strnlen(why, cap);
    if (n == cap)
        abort(); /* not terminated inside the buffer */
    for (size_t i = 0; i < n; i++)
        if (!isprint((unsigned char)why[i]))
            abort(); /* a terminal escape from the file would reach the user's screen */
}

static void check_name(const char *name)
{
    char why[512], small[7];
    bool ok = ddpc__host_check(name, why, sizeof why);
    if (ok != ddpc__host_check(name, small, sizeof small))
        abort();
    if (!ok) {
        check_reason(why, sizeof why);
        check_reason(small, sizeof small);
        return;
    }
    size_t len = strlen(name);
    if (len == 0 || len > 253 || name[0] == '-')
        abort();
    bool alnum = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != ':')
            abort();
        alnum = alnum || isalnum(c);
    }
    unsigned char addr[16];
    bool literal = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    if (!alnum && !literal)
        abort(); /* "." or "-.-" name no host ("::", an address, has no letter or digit) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/ddpc_fuzz_hostfile_%d", (int)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    int hosts = -1;
    ddpc_status s = ddpc__hostfile_hosts(path, &hosts);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (s == DDPC_OK && (hosts < 1 || (size_t)hosts > lines))
        abort();
    if (s != DDPC_OK && s != DDPC_EFORMAT)
        abort(); /* the file is there and readable: only its contents can be wrong */
    check_reason(ddpc_last_error(), 4096);

    char name[512];
    for (size_t at = 0; at < size;) {
        size_t end = at;
        while (end < size && data[end] != '\n')
            end++;
        size_t n = end - at < sizeof name - 1 ? end - at : sizeof name - 1;
        memcpy(name, data + at, n);
        name[n] = '\0';
        check_name(name);
        at = end + 1;
    }
    return 0;
}
