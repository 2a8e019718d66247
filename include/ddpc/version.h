// SPDX-License-Identifier: MIT
/* ddpc's version: the one place it is defined. CMake reads the three numbers below for the
 * project VERSION (the shared library's SONAME, ddpc.pc, ddpcConfigVersion.cmake, the .deb), so
 * the headers, the library and the packages cannot disagree. Bump them here only. */
#ifndef DDPC_VERSION_H
#define DDPC_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_VERSION_MAJOR 0
#define DDPC_VERSION_MINOR 1
#define DDPC_VERSION_PATCH 0

#define DDPC__VERSION_STR2(x) #x
#define DDPC__VERSION_STR(x) DDPC__VERSION_STR2(x)
/* "MAJOR.MINOR.PATCH" of the headers this code was compiled against. */
#define DDPC_VERSION                                                                               \
    DDPC__VERSION_STR(DDPC_VERSION_MAJOR)                                                          \
    "." DDPC__VERSION_STR(DDPC_VERSION_MINOR) "." DDPC__VERSION_STR(DDPC_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library linked at run time, which differs from DDPC_VERSION when a
 * program runs against another libddpc.so than the one it was built with. A static string. */
const char *ddpc_version(void);

#ifdef __cplusplus
}
#endif
#endif
