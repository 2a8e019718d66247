/* ddpc_sysinfo_collect: the host and build facts from core, the MPI library from mpi_info.c, and
 * the distributed launch as rank discovery sees it. Lives in dist because MPI and the launch
 * variables are comm's business; every field is filled even when something is missing. */
#include <ddpc/sysinfo.h>

#include "core/sysinfo_impl.h"
#include "comm/env_impl.h"
#include "comm/mpi_impl.h"

#include <stdio.h>
#include <string.h>

/* The launcher variables that are set, "KEY=VALUE\n" each; long values are cut at 160 bytes. */
static void dist_vars(const char *const *envp, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (const char *const *name = ddpc__dist_env_var_names(); *name; name++) {
        const char *v = ddpc__env_lookup(envp, *name);
        if (v)
            ddpc__strlcatf(buf, cap, "%s=%.160s%s\n", *name, v, strlen(v) > 160 ? "..." : "");
    }
}

void ddpc_sysinfo_collect(ddpc_sysinfo *out)
{
    memset(out, 0, sizeof *out);
    ddpc__sysinfo_host(out);
    ddpc__sysinfo_build(out);
    out->mpi_built = ddpc__mpi_library_version(out->mpi_library, sizeof out->mpi_library);
    ddpc__sysinfo_gpu(out);
    const char *const *envp = ddpc__env_process();
    dist_vars(envp, out->dist_vars, sizeof out->dist_vars);
    out->dist = ddpc_dist_env_single();
    out->dist_status = ddpc_dist_env_parse(envp, &out->dist);
    if (out->dist_status != DDPC_OK)
        snprintf(out->dist_error, sizeof out->dist_error, "%s", ddpc_last_error());
    out->dist_backend = ddpc_pg_choose_backend(&out->dist, DDPC_BACKEND_AUTO);
}
