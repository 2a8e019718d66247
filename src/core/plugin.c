// SPDX-License-Identifier: MIT
/* The plugin loader: dlopen, the ABI check, then the plugin's own init. Invariant: no code of the
 * plugin runs before its ABI matched (RTLD_NOW resolves symbols but runs only the library's ELF
 * constructors, which a plugin should not use), and a library whose init was called stays loaded
 * for the process's life, since the registries keep pointers into it. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <ddpc/plugin.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* dlerror's text without the "PATH: " it usually starts with (the message names the path). */
static const char *dl_reason(const char *path)
{
    const char *e = dlerror();
    if (!e)
        return "unknown reason";
    size_t n = strlen(path);
    if (strncmp(e, path, n) == 0 && strncmp(e + n, ": ", 2) == 0)
        return e + n + 2;
    return e;
}

ddpc_status ddpc_plugin_load(const char *path)
{
    if (!path || !path[0])
        return ddpc_errorf(DDPC_EINVAL, "plugin: an empty path");
    struct stat st;
    if (stat(path, &st) != 0)
        return ddpc_errorf(DDPC_EIO, "plugin '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ddpc_errorf(DDPC_EIO, "plugin '%s' is not a regular file", path);
    /* dlopen searches the library path for a name without '/': a plugin is a file, not a name */
    char local[4096];
    if (!strchr(path, '/')) {
        if (snprintf(local, sizeof local, "./%s", path) >= (int)sizeof local)
            return ddpc_errorf(DDPC_EINVAL, "plugin '%.60s...': path too long", path);
        path = local;
    }
    /* The same file loaded before (by any path: the loader compares device and inode) is
     * checked as a plugin like a new one, but not initialised again. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    bool loaded_before = h != NULL;
    dlerror();
    if (!h)
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return ddpc_errorf(DDPC_EFORMAT, "plugin '%s' cannot be loaded: %s", path, dl_reason(path));
    const uint32_t *abi = (const uint32_t *)dlsym(h, "ddpc_plugin_abi");
    /* dlsym's object pointer as a function pointer (POSIX guarantees the representation) */
    ddpc_status (*init)(void) = (ddpc_status(*)(void))(void (*)(void))dlsym(h, "ddpc_plugin_init");
    if (!abi || !init) {
        dlclose(h);
        return ddpc_errorf(DDPC_EFORMAT,
                           "plugin '%s' is not a ddpc plugin: it exports no %s (define "
                           "ddpc_plugin_init and write DDPC_PLUGIN_DECLARE_ABI; ddpc/plugin.h)",
                           path, !init ? "ddpc_plugin_init" : "ddpc_plugin_abi");
    }
    if (*abi != DDPC_PLUGIN_ABI) {
        uint32_t got = *abi;
        dlclose(h);
        return ddpc_errorf(DDPC_EFORMAT,
                           "plugin '%s' was built for plugin ABI %u, this ddpc has ABI %u: "
                           "rebuild it against this ddpc's headers",
                           path, (unsigned)got, (unsigned)DDPC_PLUGIN_ABI);
    }
    if (loaded_before) {
        dlclose(h); /* drops only the reference RTLD_NOLOAD took */
        return DDPC_OK;
    }
    ddpc_clear_error();
    ddpc_status s = init();
    if (s == DDPC_OK)
        return DDPC_OK;
    /* the handle stays open: types the init registered before failing point into it */
    char why[768];
    snprintf(why, sizeof why, "%s", ddpc_last_error()[0] ? ddpc_last_error() : "no message");
    return ddpc_errorf(s, "plugin '%s': ddpc_plugin_init failed (%s): %s", path,
                       ddpc_status_name(s), why);
}
