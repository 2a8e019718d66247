// SPDX-License-Identifier: MIT
/* ddpc_comm_report_collect: the communication half of `ddpc env` (the cli prints it beside core's
 * ddpc_sysinfo): the MPI library from mpi_info.c and the distributed launch as rank discovery
 * sees it. Every field is filled even when something is missing or malformed. */
#include <ddpc/comm.h>

#include "comm/env_impl.h"
#include "comm/mpi_impl.h"

#include <stdio.h>
#include <string.h>

/* The launcher variables that are set, "KEY=VALUE\n" each; long values are cut at 160 bytes. */
static void launcher_vars(const char *const *envp, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (const char *const *name = ddpc__dist_env_var_names(); *name && len < cap; name++) {
        const char *v = ddpc_comm_env_lookup(envp, *name);
        if (!v)
            continue;
        int n =
            snprintf(buf + len, cap - len, "%s=%.160s%s\n", *name, v, strlen(v) > 160 ? "..." : "");
        if (n < 0)
            break;
        len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
}

void ddpc_comm_report_collect(ddpc_comm_report *out)
{
    memset(out, 0, sizeof *out);
    out->mpi_built = ddpc__mpi_library_version(out->mpi_library, sizeof out->mpi_library);
    const char *const *envp = ddpc__env_process();
    launcher_vars(envp, out->vars, sizeof out->vars);
    out->env = ddpc_comm_env_single();
    out->status = ddpc_comm_env_parse(envp, &out->env);
    if (out->status != DDPC_OK)
        snprintf(out->error, sizeof out->error, "%s", ddpc_last_error());
    out->backend = ddpc_pg_choose_backend(&out->env, DDPC_BACKEND_AUTO);
}
