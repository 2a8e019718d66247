// SPDX-License-Identifier: MIT
/* The shm rendezvous messages, one '\n'-terminated ASCII line each:
 *   hello: "ddpc-shm-hello VERSION rank=R world=W pid=P host=H\n"
 *   reply: "ddpc-shm-ok SEGMENT\n" or "ddpc-shm-error MESSAGE\n"
 * The parsers take bytes from the network: every field is checked (decimal without sign or
 * leading zeros, in range; host and segment from a small alphabet; message printable), the line
 * must end exactly at the buffer's end, and nothing is read past `len`. */
#include "comm/shm_impl.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char HELLO[] = "ddpc-shm-hello ";
static const char OK[] = "ddpc-shm-ok ";
static const char ERR[] = "ddpc-shm-error ";

typedef struct {
    const char *p, *end;
} cursor;

static bool eat(cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool eat_int(cursor *c, int *out)
{
    long long v = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - start < 10) {
        v = v * 10 + (*c->p - '0');
        c->p++;
    }
    size_t n = (size_t)(c->p - start);
    if (n == 0 || (n > 1 && start[0] == '0') || v > INT_MAX ||
        (c->p < c->end && *c->p >= '0' && *c->p <= '9'))
        return false;
    *out = (int)v;
    return true;
}

static bool name_char(char ch, bool slash)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == '_' || (slash && ch == '/');
}

/* Copies the rest of the line up to the '\n' that must end the buffer, at most cap - 1 chars of
 * kind 0 (host: [A-Za-z0-9._-]), 1 (segment: the same and '/') or 2 (message: printable). */
static bool eat_rest(cursor *c, char *out, size_t cap, size_t min, int kind)
{
    size_t n = 0;
    while (c->p < c->end && *c->p != '\n') {
        char ch = *c->p++;
        bool good = kind == 2 ? (ch >= 0x20 && ch <= 0x7e) : name_char(ch, kind == 1);
        if (!good || n + 1 >= cap)
            return false;
        out[n++] = ch;
    }
    out[n] = '\0';
    return n >= min && c->p < c->end && *c->p == '\n' && c->p + 1 == c->end;
}

int ddpc__shm_hello_format(char *out, size_t cap, const ddpc__shm_hello *h)
{
    return snprintf(out, cap, "%s%d rank=%d world=%d pid=%d host=%s\n", HELLO, h->version, h->rank,
                    h->world, h->pid, h->host);
}

ddpc_status ddpc__shm_hello_parse(const char *buf, size_t len, ddpc__shm_hello *out)
{
    cursor c = {buf, buf + len};
    ddpc__shm_hello h;
    memset(&h, 0, sizeof h);
    bool good = len <= DDPC__SHM_LINE_MAX && eat(&c, HELLO) && eat_int(&c, &h.version) &&
                eat(&c, " rank=") && eat_int(&c, &h.rank) && eat(&c, " world=") &&
                eat_int(&c, &h.world) && eat(&c, " pid=") && eat_int(&c, &h.pid) &&
                eat(&c, " host=") && eat_rest(&c, h.host, sizeof h.host, 0, 0);
    if (!good || h.version < 1 || h.world < 1 || h.pid < 1)
        return ddpc_errorf(DDPC_EFORMAT, "malformed shm rendezvous hello (%zu bytes)", len);
    *out = h;
    return DDPC_OK;
}

int ddpc__shm_reply_format(char *out, size_t cap, bool ok, const char *text)
{
    char clean[DDPC__SHM_REPLY_TEXT_MAX + 1]; /* longer messages are cut; names never are */
    size_t n = 0;
    for (; text[n] && n + 1 < sizeof clean; n++) /* messages must stay one printable line */
        clean[n] = (text[n] >= 0x20 && text[n] <= 0x7e) ? text[n] : '?';
    clean[n] = '\0';
    return snprintf(out, cap, "%s%s\n", ok ? OK : ERR, clean);
}

ddpc_status ddpc__shm_reply_parse(const char *buf, size_t len, bool *ok, char *text, size_t cap)
{
    cursor c = {buf, buf + len};
    bool good = false;
    if (len <= DDPC__SHM_LINE_MAX && cap > 0) {
        size_t limit = cap < DDPC__SHM_REPLY_TEXT_MAX + 1 ? cap : DDPC__SHM_REPLY_TEXT_MAX + 1;
        if (eat(&c, OK)) {
            *ok = true;
            limit = limit < DDPC__SHM_NAME_CAP ? limit : DDPC__SHM_NAME_CAP;
            good = eat_rest(&c, text, limit, 2, 1) && text[0] == '/' && !strchr(text + 1, '/');
        } else if (eat(&c, ERR)) {
            *ok = false;
            good = eat_rest(&c, text, limit, 1, 2);
        }
    }
    if (!good)
        return ddpc_errorf(DDPC_EFORMAT, "malformed shm rendezvous reply (%zu bytes)", len);
    return DDPC_OK;
}
