// SPDX-License-Identifier: MIT
/* Strict parsers for SLURM's compressed lists: host lists ("node[01-04,07],gpu7") and
 * tasks-per-node lists ("2(x3),1"), as SLURM writes them into SLURM_JOB_NODELIST and
 * SLURM_STEP_TASKS_PER_NODE. Invariant: the cursor never passes the terminating NUL, numbers have
 * at most 9 digits (so they fit an int), and output is written only within `cap`. */
#include "comm/env_impl.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_DIGITS 9

typedef struct {
    const char *var, *text; /* for messages */
    const char *p;          /* next unread byte */
    const char *what;       /* "host list" or "tasks-per-node list" */
} cursor;

static ddpc_status bad(const cursor *c, const char *why)
{
    return ddpc_errorf(DDPC_EINVAL, "%s=%s is not a valid %s: %s at byte %zu", c->var, c->text,
                       c->what, why, (size_t)(c->p - c->text));
}

static bool is_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

/* A decimal number of 1..MAX_DIGITS digits; *digits receives how many. */
static ddpc_status number(cursor *c, int *value, int *digits)
{
    int v = 0, n = 0;
    while (*c->p >= '0' && *c->p <= '9') {
        if (n == MAX_DIGITS)
            return bad(c, "number with more than 9 digits");
        v = v * 10 + (*c->p - '0');
        c->p++;
        n++;
    }
    if (n == 0)
        return bad(c, "expected a number");
    *value = v;
    *digits = n;
    return DDPC_OK;
}

static int sat_mul(int a, int b)
{
    return (b != 0 && a > INT_MAX / b) ? INT_MAX : a * b;
}

static int sat_add(int a, int b)
{
    return a > INT_MAX - b ? INT_MAX : a + b;
}

/* One bracket group after '[': ranges "lo[-hi]" separated by ','. Appends the group's first value
 * (zero-padded to the width of its lo) to host[*len] when `host` is not NULL; *size receives
 * how many values the group names. */
static ddpc_status bracket(cursor *c, char *host, size_t *len, int *size)
{
    int total = 0;
    bool first = true;
    for (;;) {
        int lo = 0, hi = 0, lo_digits = 0, hi_digits = 0;
        DDPC_TRY(number(c, &lo, &lo_digits));
        hi = lo;
        if (*c->p == '-') {
            c->p++;
            DDPC_TRY(number(c, &hi, &hi_digits));
            if (hi < lo)
                return bad(c, "descending range");
        }
        if (first && host) {
            if (*len + (size_t)lo_digits > DDPC__HOSTNAME_MAX)
                return bad(c, "host name longer than 255 bytes");
            *len +=
                (size_t)snprintf(host + *len, DDPC__HOSTNAME_MAX + 1 - *len, "%0*d", lo_digits, lo);
        }
        first = false;
        total = sat_add(total, hi - lo + 1);
        if (*c->p == ']') {
            c->p++;
            *size = total;
            return DDPC_OK;
        }
        if (*c->p != ',')
            return bad(c, *c->p ? "expected ',' or ']' in brackets" : "unclosed '['");
        c->p++;
    }
}

/* One host-list entry: name characters and bracket groups up to a top-level ',' or the end.
 * Writes the entry's first host name into host (DDPC__HOSTNAME_MAX + 1 bytes); *hosts receives
 * how many names it expands to. */
static ddpc_status entry(cursor *c, char *host, int *hosts)
{
    size_t len = 0;
    int n = 1;
    host[0] = '\0';
    while (*c->p && *c->p != ',') {
        if (is_name_char(*c->p)) {
            if (len == DDPC__HOSTNAME_MAX)
                return bad(c, "host name longer than 255 bytes");
            host[len++] = *c->p++;
            host[len] = '\0';
        } else if (*c->p == '[') {
            int size = 0;
            c->p++;
            DDPC_TRY(bracket(c, host, &len, &size));
            n = sat_mul(n, size);
        } else {
            return bad(c, *c->p == ']' ? "unmatched ']'" : "unexpected character");
        }
    }
    if (len == 0)
        return bad(c, "empty host name");
    *hosts = n;
    return DDPC_OK;
}

static ddpc_status hostlist(const char *var, const char *list, char *first, int *count)
{
    cursor c = {var, list, list, "host list"};
    char host[DDPC__HOSTNAME_MAX + 1];
    int total = 0;
    for (int i = 0;; i++) {
        int hosts = 0;
        DDPC_TRY(entry(&c, host, &hosts));
        if (i == 0)
            memcpy(first, host, strlen(host) + 1);
        total = sat_add(total, hosts);
        if (*c.p == '\0')
            break;
        c.p++; /* the ',' between entries */
    }
    *count = total;
    return DDPC_OK;
}

ddpc_status ddpc__slurm_hostlist_first(const char *var, const char *list, char *out, size_t cap)
{
    char first[DDPC__HOSTNAME_MAX + 1];
    int count;
    DDPC_TRY(hostlist(var, list, first, &count));
    size_t n = strlen(first);
    if (n >= cap)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s: first host '%s' is longer than %zu bytes", var,
                           list, first, cap - 1);
    memcpy(out, first, n + 1);
    return DDPC_OK;
}

ddpc_status ddpc__slurm_hostlist_count(const char *var, const char *list, int *count)
{
    char first[DDPC__HOSTNAME_MAX + 1];
    return hostlist(var, list, first, count);
}

ddpc_status ddpc__slurm_tasks_on_node(const char *var, const char *spec, int node, int *tasks)
{
    cursor c = {var, spec, spec, "tasks-per-node list"};
    int seen = 0, found = -1, digits;
    for (;;) {
        int n = 0, reps = 1;
        DDPC_TRY(number(&c, &n, &digits));
        if (n == 0)
            return bad(&c, "zero tasks on a node");
        if (c.p[0] == '(' && c.p[1] == 'x') {
            c.p += 2;
            DDPC_TRY(number(&c, &reps, &digits));
            if (reps == 0)
                return bad(&c, "zero repetitions");
            if (*c.p != ')')
                return bad(&c, "expected ')'");
            c.p++;
        }
        if (found < 0 && node >= seen && node - seen < reps)
            found = n;
        seen = sat_add(seen, reps);
        if (*c.p == '\0')
            break;
        if (*c.p != ',')
            return bad(&c, "expected ',' or '(x'");
        c.p++;
    }
    if (found < 0)
        return ddpc_errorf(DDPC_EINVAL, "%s=%s names %d nodes, but this is node %d", var, spec,
                           seen, node);
    *tasks = found;
    return DDPC_OK;
}
