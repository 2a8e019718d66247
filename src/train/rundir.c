/* Run directory guards: the job lock, config.yaml, writability probes. The lock is flock(2) on
 * <dir>/.lock: the kernel releases it when the holder's descriptor closes, at exit or death, so
 * it is never stale; the pid in the file is only for the message. config.yaml is rebuilt as a
 * tree from the dump's dotted keys, because the config parser takes nested mappings only. */
#include <ddpc/alloc.h>
#include <ddpc/fs.h>
#include <ddpc/rundir.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct ddpc_rundir_lock {
    int fd;
};

ddpc_status ddpc_rundir_lock_acquire(const char *dir, ddpc_rundir_lock **out)
{
    *out = NULL;
    char path[1100];
    DDPC_TRY(ddpc_mkdirs(dir));
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot create '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return ddpc_errorf(DDPC_EINVAL,
                               "run directory '%s' is in use by another job (pid %s); use another "
                               "run_dir or stop that job",
                               dir, pid[0] ? pid : "unknown");
        return ddpc_errorf(DDPC_EIO, "cannot lock '%s': %s", path, strerror(e));
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        int e = errno;
        close(fd);
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    ddpc_rundir_lock *l = ddpc_malloc(sizeof *l);
    if (!l) {
        close(fd);
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for the run directory lock");
    }
    l->fd = fd;
    *out = l;
    return DDPC_OK;
}

void ddpc_rundir_unlock(ddpc_rundir_lock *l)
{
    if (!l)
        return;
    close(l->fd); /* releases the flock */
    ddpc_free(l);
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
    char path[1100], tmp[1100];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    snprintf(tmp, sizeof tmp, "%s/.config.yaml.XXXXXX", dir);
    int cap = (int)strlen(dump) + 2; /* every key component takes at least two bytes */
    node *nodes = ddpc_malloc((size_t)cap * sizeof *nodes);
    if (!nodes)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory writing '%s'", path);
    int n;
    build_tree(dump, nodes, cap, &n);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        ddpc_free(nodes);
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    fprintf(f,
            "# The effective configuration of this run (every key read, defaults included);\n"
            "# `ddpc train %s` runs it again.\n",
            path);
    emit(f, nodes, 0, 0);
    ddpc_free(nodes);
    bool ok = fflush(f) == 0 && !ferror(f);
    int e = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return DDPC_OK;
    e = ok ? errno : e;
    unlink(tmp);
    return ddpc_errorf(DDPC_EIO, "cannot write '%s': %s", path, strerror(e));
}

ddpc_status ddpc_dir_check_writable(const char *dir)
{
    char probe[1100];
    DDPC_TRY(ddpc_mkdirs(dir));
    snprintf(probe, sizeof probe, "%s/.ddpc-probe-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return ddpc_errorf(DDPC_EIO, "cannot write in '%s': %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return DDPC_OK;
}

ddpc_status ddpc_path_check_writable(const char *path)
{
    char dir[1024];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ddpc_errorf(DDPC_EIO, "cannot write '%s': it is a directory", path);
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    ddpc_status s = ddpc_dir_check_writable(dir);
    if (s != DDPC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(s, "cannot write '%s' (%s)", path, why);
    }
    return DDPC_OK;
}
