// SPDX-License-Identifier: MIT
/* The version of the library itself (include/ddpc/version.h's numbers as compiled in here), so a
 * program can tell which libddpc it runs against. */
#include <ddpc/version.h>

const char *ddpc_version(void)
{
    return DDPC_VERSION;
}
