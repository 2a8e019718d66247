// SPDX-License-Identifier: MIT
/* Helpers of the collective conformance suite: deterministic inputs every rank can regenerate for
 * every other rank, a reference reduction computed independently of src/comm (exact sums in
 * double, then the dtype's rounding), and a forking spawner that starts N ranks with
 * torchrun-style environment variables, as a platform would. */
#ifndef DDPC_TESTS_CONFORMANCE_UTIL_H
#define DDPC_TESTS_CONFORMANCE_UTIL_H

#include <ddpc/comm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* buf: (n) of dt; element i holds rank's value for (i, salt): a multiple of 1/4 in [-2, 2] for
 * floats, so sums over <= 64 ranks are exact in every float dtype; a wider integer otherwise. */
void conf_fill(void *buf, size_t n, ddpc_dtype dt, int rank, int salt);
/* Non-exact values (for determinism checks). */
void conf_fill_random(void *buf, size_t n, ddpc_dtype dt, int rank);
/* want: (n) = op over ranks 0..world-1 of conf_fill values at indices offset..offset+n-1. */
void conf_reference_reduce(void *want, size_t n, ddpc_dtype dt, ddpc_reduce_op op, int world,
                           int salt, size_t offset);
double conf_get(const void *buf, size_t i, ddpc_dtype dt);
uint64_t conf_hash(const void *buf, size_t bytes);

#endif
