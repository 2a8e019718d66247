// SPDX-License-Identifier: MIT
/* Wall-clock timing for progress lines and benchmarks. */
#ifndef DDPC_TIMER_H
#define DDPC_TIMER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on a monotonic clock; only differences are meaningful. Thread safe. */
double ddpc_time_now(void);

#ifdef __cplusplus
}
#endif
#endif
