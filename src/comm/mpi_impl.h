// SPDX-License-Identifier: MIT
/* Private to src/comm: what the mpi backend's files share. mpi.h itself is included only by
 * src/comm/mpi*.c, so this header stays free of MPI types. */
#ifndef DDPC_COMM_MPI_IMPL_H
#define DDPC_COMM_MPI_IMPL_H

#include <stdbool.h>
#include <stddef.h>

/* The MPI library's own description (first line of MPI_Get_library_version, which MPI allows
 * before MPI_Init) and the MPI standard version into buf (cap bytes); false, with "not built
 * with MPI" in buf, in builds without the mpi backend. */
bool ddpc__mpi_library_version(char *buf, size_t cap);

/* True when the MPI library built in is Open MPI (it needs a PMI server under srun). */
bool ddpc__mpi_is_open_mpi(void);

#endif
