// SPDX-License-Identifier: MIT
/* Shared by the subcommands that take CONFIG [key=value ...]. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int ddpc_cli_fail(const char *cmd)
{
    fprintf(stderr, "ddpc %s: %s\n", cmd, ddpc_last_error());
    return 1;
}

bool ddpc_cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* Whether a help flag stands where CONFIG or a flag would (a flag's value is skipped). */
static bool asks_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (ddpc_cli_is_help(argv[i]))
            return true;
        /* "--key VALUE" takes the next argument; "--key=VALUE", bare flags and key=value don't. */
        if (i > 0 && strncmp(argv[i], "--", 2) == 0 && !strchr(argv[i], '=') &&
            ddpc_cli_flag_takes(i + 1 < argc ? argv[i + 1] : NULL))
            i++;
    }
    return false;
}

int ddpc_cli_load_config(int argc, char **argv, ddpc_config **out, char *name, size_t name_cap)
{
    *out = NULL;
    if (asks_help(argc, argv))
        return DDPC_CLI_HELP;
    if (argc < 1 || strchr(argv[0], '=')) {
        fprintf(stderr, "ddpc: expected a CONFIG file before key=value overrides\n");
        return 2;
    }
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    snprintf(name, name_cap, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot && dot != name)
        *dot = '\0';
    size_t len = strlen(argv[0]);
    if (len > 3 && strcmp(argv[0] + len - 3, ".py") == 0) {
        /* a seed's config.py is code: running it would need Python inside every rank */
        fprintf(stderr,
                "ddpc: '%s' is a Python file: Python configs are not supported, since reading one "
                "means running it; write the values as YAML (key: value, one per line; "
                "docs/config.md), or have your script print YAML and pass that file\n",
                argv[0]);
        return 2;
    }
    ddpc_config *c = NULL;
    if (ddpc_config_load(&c, argv[0]) != DDPC_OK)
        return 1;
    char *plugins[DDPC_CLI_MAX_PLUGINS]; /* --plugin PATH, in order; argv's strings */
    size_t n_plugins = 0;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        int taken = ddpc_cli_plugin_flag(argc, argv, &i, plugins, &n_plugins);
        if (taken >= 0)
            rc = taken;
        else if (strncmp(argv[i], "--", 2) == 0)
            rc = ddpc_cli_apply_flag(c, argc, argv, &i);
        else if (ddpc_config_set(c, argv[i], i) != DDPC_OK)
            rc = 1;
    }
    /* before the trainer resolves model.type and data.type */
    if (rc == 0)
        rc = ddpc_cli_load_plugins(c, plugins, n_plugins, argc);
    if (rc != 0) {
        ddpc_config_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}
