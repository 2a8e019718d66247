// SPDX-License-Identifier: MIT
/* The plugins a command loads before the trainer resolves the config's types, from three places
 * in this order: CONFIG's `plugins` list (relative paths against CONFIG's directory), --plugin
 * flags (against the working directory) and DDPC_PLUGINS (colon-separated, the same). Invariant:
 * each file is loaded once, whatever the paths that name it, and the config's `plugins` ends up
 * the absolute list that was loaded, so config.yaml and checkpoints record it and
 * `ddpc train RUN_DIR/config.yaml` loads the same plugins from anywhere. */
#define _DEFAULT_SOURCE /* realpath's resolved name */
#include "cli/cli.h"

#include <ddpc/alloc.h>
#include <ddpc/plugin.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLUGINS DDPC_CLI_MAX_PLUGINS

/* The plugins found so far, by resolved path. */
typedef struct {
    char path[MAX_PLUGINS][PATH_MAX];
    size_t n;
} loaded;

/* "PATH (from WHERE)" appended to the loader's message, which names the path already. */
static int fail_from(const char *from)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ddpc_last_error());
    ddpc_errorf(DDPC_EINVAL, "%s (from %s)", msg, from);
    return 1;
}

/* Loads `path` unless a file already loaded resolves to the same name. 0, or 1 with the
 * message set. */
static int load_one(loaded *l, const char *path, const char *from)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        /* the loader says why in its own words (no such file, permission) */
        if (ddpc_plugin_load(path) != DDPC_OK)
            return fail_from(from);
        ddpc_errorf(DDPC_EIO, "plugin '%s': cannot resolve its path", path);
        return fail_from(from);
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->path[i], real) == 0)
            return 0;
    if (l->n == MAX_PLUGINS) {
        ddpc_errorf(DDPC_EINVAL, "plugin '%s': more than %d plugins", path, MAX_PLUGINS);
        return fail_from(from);
    }
    if (ddpc_plugin_load(real) != DDPC_OK)
        return fail_from(from);
    snprintf(l->path[l->n++], PATH_MAX, "%s", real);
    return 0;
}

/* The config's own list: relative paths are CONFIG's directory's. */
static int load_config_list(ddpc_config *c, loaded *l)
{
    const char *list[MAX_PLUGINS];
    size_t n;
    if (ddpc_config_string_list(c, "plugins", list, MAX_PLUGINS, &n) != DDPC_OK)
        return 1;
    const char *src = ddpc_config_source(c);
    const char *slash = src ? strrchr(src, '/') : NULL;
    char from[600];
    snprintf(from, sizeof from, "'plugins' in %s", src ? src : "the config");
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        if (list[i][0] == '/' || !slash)
            snprintf(path, sizeof path, "%s", list[i]);
        else if (snprintf(path, sizeof path, "%.*s/%s", (int)(slash - src), src, list[i]) >=
                 (int)sizeof path) {
            ddpc_errorf(DDPC_EINVAL, "plugin '%s': path too long", list[i]);
            return fail_from(from);
        }
        if (load_one(l, path, from) != 0)
            return 1;
    }
    return 0;
}

/* DDPC_PLUGINS: colon-separated paths; empty entries are skipped, as PATH's are not. */
static int load_env_list(loaded *l)
{
    const char *env = getenv("DDPC_PLUGINS");
    for (const char *p = env; p && *p;) {
        size_t len = strcspn(p, ":");
        if (len >= PATH_MAX) {
            ddpc_errorf(DDPC_EINVAL, "plugin '%.60s...': path too long", p);
            return fail_from("DDPC_PLUGINS");
        }
        if (len > 0) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%.*s", (int)len, p);
            if (load_one(l, path, "DDPC_PLUGINS") != 0)
                return 1;
        }
        p += len + (p[len] == ':');
    }
    return 0;
}

/* `text` as a double-quoted YAML scalar appended to buf (len bytes used of cap); false when it
 * does not fit. */
static bool put_quoted(char *buf, size_t cap, size_t *len, const char *text)
{
    if (*len + 1 >= cap)
        return false;
    buf[(*len)++] = '"';
    for (const char *p = text; *p; p++) {
        if (*len + 3 >= cap)
            return false;
        if (*p == '"' || *p == '\\')
            buf[(*len)++] = '\\';
        buf[(*len)++] = *p;
    }
    buf[(*len)++] = '"';
    buf[*len] = '\0';
    return true;
}

/* Replaces the config's `plugins` with the absolute paths loaded and reads it back, so the
 * effective dump records them. Nothing is recorded when no plugin was named anywhere. */
static int record(ddpc_config *c, const loaded *l, int arg_index)
{
    if (l->n == 0)
        return 0;
    size_t cap = 16 + l->n * (2 * PATH_MAX + 4), len = 0;
    char *text = ddpc_malloc(cap);
    if (!text) {
        ddpc_errorf(DDPC_ENOMEM, "out of memory recording the plugins");
        return 1;
    }
    len = (size_t)snprintf(text, cap, "plugins=[");
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            len += (size_t)snprintf(text + len, cap - len, ", ");
        put_quoted(text, cap, &len, l->path[i]); /* cap fits every path escaped */
    }
    snprintf(text + len, cap - len, "]");
    const char *list[MAX_PLUGINS];
    size_t n;
    int rc = ddpc_config_set(c, text, arg_index) != DDPC_OK ||
             ddpc_config_string_list(c, "plugins", list, MAX_PLUGINS, &n) != DDPC_OK;
    ddpc_free(text);
    return rc;
}

int ddpc_cli_plugin_flag(int argc, char **argv, int *i, char **paths, size_t *n)
{
    const char *arg = argv[*i];
    if (strncmp(arg, "--plugin", 8) != 0 || (arg[8] != '\0' && arg[8] != '='))
        return -1;
    char *path = arg[8] == '=' ? argv[*i] + 9 : NULL;
    if (!path && *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
        path = argv[++*i];
    if (!path || !path[0]) {
        fprintf(stderr, "ddpc: flag '--plugin' needs a PATH (a plugin's shared library)\n");
        return 2;
    }
    if (*n == MAX_PLUGINS) {
        fprintf(stderr, "ddpc: more than %d --plugin flags\n", MAX_PLUGINS);
        return 2;
    }
    paths[(*n)++] = path;
    return 0;
}

int ddpc_cli_load_plugins(ddpc_config *c, char **flags, size_t n_flags, int arg_index)
{
    loaded *l = ddpc_calloc(1, sizeof *l); /* 128 KiB of paths: not the stack's */
    if (!l) {
        ddpc_errorf(DDPC_ENOMEM, "out of memory loading the plugins");
        return 1;
    }
    int rc = 0;
    if (ddpc_config_has(c, "plugins"))
        rc = load_config_list(c, l);
    for (size_t i = 0; i < n_flags && rc == 0; i++)
        rc = load_one(l, flags[i], "--plugin");
    if (rc == 0)
        rc = load_env_list(l);
    if (rc == 0)
        rc = record(c, l, arg_index);
    ddpc_free(l);
    return rc;
}
