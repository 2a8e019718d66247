// SPDX-License-Identifier: MIT
/* Plugins: a shared library that registers model and data types (ddpc/model_ops.h,
 * ddpc/dataset_ops.h) when loaded, so that the `ddpc` program trains them from a config's
 * `plugins:` list, `--plugin PATH` or DDPC_PLUGINS, as torch's CLI takes `--model.class_path`.
 * Invariant: a plugin's code runs only after its ABI number matched the loader's, and a plugin
 * whose init ran is never unloaded (the registries borrow its tables). See docs/extending.md. */
#ifndef DDPC_PLUGIN_H
#define DDPC_PLUGIN_H

#include <stdint.h>

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin ABI: the layout of everything a plugin hands ddpc (ddpc_model_ops,
 * ddpc_dataset_callbacks, ddpc_data_splits, the factory's and the members' signatures). It is
 * raised whenever one of them changes, so that a plugin built against older headers is refused
 * before any of its code runs, instead of misreading a table. */
#define DDPC_PLUGIN_ABI 1u

/* A plugin's exported symbols; the library is built with -fvisibility=hidden or not. */
#if defined(__GNUC__)
#define DDPC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define DDPC_PLUGIN_EXPORT
#endif

/* Written once at file scope in a plugin's source: exports `ddpc_plugin_abi`, the ABI the plugin
 * was built for, which the loader compares with its own before calling ddpc_plugin_init. */
#define DDPC_PLUGIN_DECLARE_ABI                                                                    \
    DDPC_PLUGIN_EXPORT extern const uint32_t ddpc_plugin_abi;                                      \
    DDPC_PLUGIN_EXPORT const uint32_t ddpc_plugin_abi = DDPC_PLUGIN_ABI

/* Defined by the plugin (with DDPC_PLUGIN_EXPORT), not by ddpc: registers the plugin's types
 * with ddpc_model_register and ddpc_data_register, returning the first failure's status (its
 * message is the loader's error). Called once per process, from the loading thread. A plugin
 * uses ddpc's functions from the program that loads it: build it without linking libddpc. */
DDPC_PLUGIN_EXPORT ddpc_status ddpc_plugin_init(void);

/* Loads the plugin at `path` (dlopen RTLD_NOW | RTLD_LOCAL): checks its ddpc_plugin_abi, then
 * calls its ddpc_plugin_init. A plugin this process has loaded already (the same file, by any
 * path) is checked but not initialised again: DDPC_OK. Errors name `path`: DDPC_EIO when it does
 * not exist or cannot be read; DDPC_EFORMAT for a file that is not a shared library (dlerror's
 * reason, an unresolved symbol included), no ddpc_plugin_abi or ddpc_plugin_init, or another
 * ABI; the init's own status and message otherwise (a type name already registered is
 * DDPC_EINVAL). Symbols ddpc's headers declare must be exported by the loading program:
 * libddpc.so's, or the `ddpc` program's own. One thread at a time, before trainers are created. */
ddpc_status ddpc_plugin_load(const char *path);

#ifdef __cplusplus
}
#endif
#endif
