// SPDX-License-Identifier: MIT
/* Host names as `ddpc run` accepts them, in a hostfile or in --master-addr: an IPv4 or IPv6
 * literal, or a DNS name of at most 253 characters whose labels are 1 to 63 letters, digits and
 * '-' (RFC 1123) and do not start or end with '-'. Such a name can never reach ssh or mpirun as an
 * option ('-oProxyCommand=...') nor overflow a buffer of theirs (a 5,000-character name). */
#include "launch/launch_impl.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

enum { HOST_MAX = 253, LABEL_MAX = 63, SHOWN = 40 };

const char *ddpc__host_shown(const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name), k = 0;
    for (; k < n && k < SHOWN && k + 4 < cap; k++)
        buf[k] = isprint((unsigned char)name[k]) ? name[k] : '?';
    if (k < n && k + 4 < cap)
        memcpy(buf + k, "...", 3), k += 3;
    buf[k] = '\0';
    return buf;
}

/* The first fault of a DNS name, written to why; NULL when it has none. */
static const char *dns_fault(const char *name, char *why, size_t cap)
{
    size_t len = strlen(name), at = 0;
    if (len > 0 && name[len - 1] == '.')
        len--; /* an absolute name ("node1.example.") */
    if (len == 0) {
        snprintf(why, cap, "has no label (the root \".\" names no host)");
        return why;
    }
    while (at < len) {
        size_t end = at;
        while (end < len && name[end] != '.') {
            unsigned char c = (unsigned char)name[end];
            if (!isalnum(c) && c != '-') {
                if (isprint(c))
                    snprintf(why, cap, "has the character '%c' at position %zu", c, end + 1);
                else
                    snprintf(why, cap, "has the byte 0x%02x at position %zu", c, end + 1);
                return why;
            }
            end++;
        }
        if (end == at || end - at > LABEL_MAX) {
            snprintf(why, cap, "has a label of %zu characters at position %zu (1 to %d allowed)",
                     end - at, at + 1, LABEL_MAX);
            return why;
        }
        if (name[at] == '-' || name[end - 1] == '-') {
            snprintf(why, cap, "has a label that starts or ends with '-' at position %zu", at + 1);
            return why;
        }
        at = end + 1;
    }
    return NULL;
}

bool ddpc__host_check(const char *name, char *why, size_t cap)
{
    char show[SHOWN + 8], fault[128];
    size_t len = strlen(name);
    unsigned char addr[16];
    if (len == 0) {
        snprintf(why, cap, "the host name is empty");
        return false;
    }
    if (name[0] == '-') {
        snprintf(why, cap,
                 "host name '%s' starts with '-', which ssh and mpirun would take for an option",
                 ddpc__host_shown(name, show, sizeof show));
        return false;
    }
    if (len > HOST_MAX) {
        snprintf(why, cap, "host name '%s' is %zu characters long; DNS names have at most %d",
                 ddpc__host_shown(name, show, sizeof show), len, HOST_MAX);
        return false;
    }
    if (inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1)
        return true;
    if (dns_fault(name, fault, sizeof fault)) {
        snprintf(why, cap,
                 "host name '%s' is not an IPv4 or IPv6 address nor a DNS name (letters, digits "
                 "and '-' in labels separated by '.'): it %s",
                 ddpc__host_shown(name, show, sizeof show), fault);
        return false;
    }
    return true;
}
