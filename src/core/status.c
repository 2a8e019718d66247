// SPDX-License-Identifier: MIT
/* Status names and the thread-local last-error message (one per thread, overwritten by each error). */
#include <ddpc/status.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char last_error[1024];

const char *ddpc_status_name(ddpc_status s)
{
    switch (s) {
#define DDPC_STATUS_CASE(name, value, desc) \
    case name:                              \
        return #name;
        DDPC_STATUS_TABLE(DDPC_STATUS_CASE)
#undef DDPC_STATUS_CASE
    }
    return "DDPC_UNKNOWN";
}

ddpc_status ddpc_errorf(ddpc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *ddpc_last_error(void)
{
    return last_error;
}

void ddpc_clear_error(void)
{
    last_error[0] = '\0';
}

void ddpc__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "ddpc: internal invariant broken at %s:%d: %s\n", file, line, expr);
    abort();
}
