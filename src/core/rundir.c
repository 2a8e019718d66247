// SPDX-License-Identifier: MIT
/* Run directory guards: the job lock, config.yaml, writability probes. The lock is a ddpc_fs_lock
 * (flock(2)) on <dir>/.lock: the kernel releases it when the holder's descriptor closes, at exit or
 * death, so it is never stale; the pid in the file is only for the message. config.yaml is rebuilt
 * as a tree from the dump's dotted keys, because the config parser takes nested mappings only. */
#include <ddpc/alloc.h>
#include <ddpc/fs.h>
#include <ddpc/rundir.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ddpc_status ddpc_rundir_lock_acquire(const char *dir, ddpc_rundir_lock **out)
{
    *out = NULL;
    char path[1100];
    DDPC_TRY(ddpc_mkdirs(dir));
    snprintf(path, sizeof path, "%s/.lock", dir);
    return ddpc_fs_lock_acquire(path, "run directory", dir, "use another run_dir or stop that job",
                                true, out);
}

void ddpc_rundir_unlock(ddpc_rundir_lock *l)
{
    ddpc_fs_lock_release(l);
}

/* A node of the key tree: a value (leaf) or children; `first` / `next` keep first-seen order. */
typedef struct node {
    const char *name;
    size_t name_len;
    const char *value; /* up to the end of its line */
    size_t value_len;
    int first, next; /* indices into the node array, -1 for none */
} node;

static int child(node *nodes, int *n, int parent, const char *name, size_t len)
{
    int *link = &nodes[parent].first;
    while (*link >= 0) {
        node *c = &nodes[*link];
        if (c->name_len == len && strncmp(c->name, name, len) == 0)
            return *link;
        link = &c->next;
    }
    nodes[*n] = (node){.name = name, .name_len = len, .first = -1, .next = -1};
    *link = (*n)++;
    return *link;
}

static bool is_index(const node *c)
{
    return c->name_len > 0 && strspn(c->name, "0123456789") >= c->name_len;
}

static void emit(FILE *f, const node *nodes, int parent, int indent)
{
    for (int i = nodes[parent].first; i >= 0; i = nodes[i].next) {
        const node *c = &nodes[i];
        if (is_index(c))
            fprintf(f, "%*s-", indent, "");
        else
            fprintf(f, "%*s%.*s:", indent, "", (int)c->name_len, c->name);
        if (c->first < 0)
            fprintf(f, " %.*s\n", (int)c->value_len, c->value);
        else {
            fputc('\n', f);
            emit(f, nodes, i, indent + 2);
        }
    }
}

/* Parses the dump's lines into nodes (cap >= strlen(dump) + 2 entries), node 0 the root. */
static void build_tree(const char *dump, node *nodes, int cap, int *n)
{
    nodes[0] = (node){.first = -1, .next = -1};
    *n = 1;
    for (const char *line = dump; *line && *n < cap;) {
        const char *end = strchr(line, '\n');
        end = end ? end : line + strlen(line);
        const char *colon = strstr(line, ": ");
        if (colon && colon < end) {
            int at = 0;
            for (const char *k = line; k < colon;) {
                const char *dot = memchr(k, '.', (size_t)(colon - k));
                const char *stop = dot ? dot : colon;
                at = child(nodes, n, at, k, (size_t)(stop - k));
                k = stop + (dot ? 1 : 0);
            }
            nodes[at].value = colon + 2;
            nodes[at].value_len = (size_t)(end - colon - 2);
        }
        line = *end ? end + 1 : end;
    }
}

ddpc_status ddpc_rundir_write_config(const char *dir, const char *dump)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    int cap = (int)strlen(dump) + 2; /* every key component takes at least two bytes */
    node *nodes = ddpc_malloc((size_t)cap * sizeof *nodes);
    if (!nodes)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory writing '%s'", path);
    int n;
    build_tree(dump, nodes, cap, &n);
    ddpc_fs_out o;
    ddpc_status s = ddpc_fs_out_open(&o, path, NULL);
    if (s == DDPC_OK) {
        fprintf(o.f,
                "# The effective configuration of this run (every key read, defaults included);\n"
                "# `ddpc train %s` runs it again.\n",
                path);
        emit(o.f, nodes, 0, 0);
        s = ddpc_fs_out_commit(&o, false);
    }
    ddpc_free(nodes);
    return s;
}

ddpc_status ddpc_dir_check_writable(const char *dir)
{
    char probe[DDPC_FS_PATH_MAX + 32];
    DDPC_TRY(ddpc_mkdirs(dir));
    if (snprintf(probe, sizeof probe, "%s/.ddpc-probe-XXXXXX", dir) >= (int)sizeof probe)
        return ddpc_errorf(DDPC_EINVAL, "cannot write in '%.60s...': path too long", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot write in '%s': %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return DDPC_OK;
}

ddpc_status ddpc_path_check_writable(const char *path)
{
    char target[DDPC_FS_PATH_MAX], dir[DDPC_FS_PATH_MAX];
    /* What will be replaced: a symlink's target, and never a directory, device, FIFO or socket. */
    DDPC_TRY(ddpc_fs_out_target(path, NULL, target, sizeof target));
    const char *slash = strrchr(target, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == target)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - target), target);
    ddpc_status s = ddpc_dir_check_writable(dir);
    if (s != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(s, "cannot write '%s' (%s)", path, why);
    }
    return DDPC_OK;
}
