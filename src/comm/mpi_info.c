// SPDX-License-Identifier: MIT
/* The MPI library's identity for `ddpc env`, asked of the library without initialising it
 * (MPI_Get_library_version and MPI_Get_version may be called before MPI_Init, MPI-3.0 8.1.1).
 * Compiled in every build; without DDPC_HAVE_MPI it says so. */
#include "comm/mpi_impl.h"

#include <stdio.h>
#include <string.h>

#ifdef DDPC_HAVE_MPI
#include <mpi.h>

bool ddpc__mpi_library_version(char *buf, size_t cap)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS || len <= 0) {
        snprintf(buf, cap, "unknown (MPI_Get_library_version failed)");
        return true;
    }
    lib[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    lib[strcspn(lib, "\r\n")] = '\0';
    MPI_Get_version(&major, &minor);
    snprintf(buf, cap, "%s; MPI standard %d.%d", lib, major, minor);
    return true;
}

bool ddpc__mpi_is_open_mpi(void)
{
#ifdef OMPI_MAJOR_VERSION
    return true;
#else
    return false;
#endif
}
#else
bool ddpc__mpi_is_open_mpi(void)
{
    return false;
}

bool ddpc__mpi_library_version(char *buf, size_t cap)
{
    snprintf(buf, cap, "not built with MPI");
    return false;
}
#endif
