// SPDX-License-Identifier: MIT
/* Both all_reduce paths of the gloo backend, bitwise against the rank-order reduction, on the test
 * bed (gloo_conformance.sh starts it as ranks with a platform's variables): the per-block shm
 * pipeline, which large messages take only where cross-memory attach is unavailable, and the
 * direct (CMA) path, at sizes of many blocks, f32 sum and bf16 avg, in place and not.
 * Drives the backend's function table directly so it can force the path. */
#include "comm/gloo_impl.h"
#include "conformance_util.h"

#include <ddpc/alloc.h>
#include <ddpc/half.h>
#include <ddpc/timer.h>

#include <stdio.h>
#include <string.h>

/* The shm backend's definition: inputs in rank order, f32 accumulation, AVG divides, rounded once.
 */
static void reference(void *want, size_t n, ddpc_dtype dt, ddpc_reduce_op op, int world)
{
    size_t es = ddpc_dtype_size(dt);
    float *acc = ddpc_malloc(n * 4), *x = ddpc_malloc(n * 4);
    void *in = ddpc_malloc(n * es);
    for (int r = 0; r < world; r++) {
        conf_fill_random(in, n, dt, r);
        if (dt == DDPC_DTYPE_BF16)
            ddpc_half_to_f32_array(x, in, n, 1);
        else
            memcpy(x, in, n * 4);
        for (size_t i = 0; i < n; i++)
            acc[i] = r == 0 ? x[i] : acc[i] + x[i];
    }
    if (op == DDPC_REDUCE_AVG)
        for (size_t i = 0; i < n; i++)
            acc[i] = acc[i] / (float)world;
    if (dt == DDPC_DTYPE_BF16)
        ddpc_f32_to_half_array(want, acc, n, 1);
    else
        memcpy(want, acc, n * 4);
    ddpc_free(in);
    ddpc_free(x);
    ddpc_free(acc);
}

int main(void)
{
    ddpc_comm_env env;
    if (ddpc_comm_env_discover(&env) != DDPC_OK) {
        fprintf(stderr, "gloo_paths: %s\n", ddpc_last_error());
        return 1;
    }
    const ddpc__pg_backend *ops = NULL;
    void *state = NULL;
    if (ddpc__gloo_create(&env, ddpc_time_now() + 60, &ops, &state) != DDPC_OK) {
        fprintf(stderr, "rank %d: gloo_paths: %s\n", env.rank, ddpc_last_error());
        return 1;
    }
    ddpc__gloo_state *st = state;
    bool cma = st->direct;
    const size_t counts[] = {300007, ((size_t)1 << 20) + 5};
    int failures = 0;
    uint64_t seq = 0;
    for (int path = 0; path < 2; path++) {
        st->direct = path == 1 && cma;
        for (int c = 0; c < 2; c++) {
            for (int t = 0; t < 2; t++) {
                ddpc_dtype dt = t ? DDPC_DTYPE_BF16 : DDPC_DTYPE_F32;
                ddpc_reduce_op op = t ? DDPC_REDUCE_AVG : DDPC_REDUCE_SUM;
                size_t n = counts[c], es = ddpc_dtype_size(dt);
                char *send = ddpc_malloc(n * es), *recv = ddpc_malloc(n * es);
                char *want = ddpc_malloc(n * es);
                conf_fill_random(send, n, dt, env.rank);
                reference(want, n, dt, op, env.world_size);
                bool in_place = c == 1;
                ddpc__coll coll = {.kind = DDPC__COLL_ALL_REDUCE,
                                   .send = send,
                                   .recv = in_place ? send : recv,
                                   .count = n,
                                   .dtype = dt,
                                   .op = op,
                                   .seq = seq++,
                                   .deadline = ddpc_time_now() + 60};
                ddpc_status s = ops->run(state, &coll);
                if (s != DDPC_OK || memcmp(coll.recv, want, n * es) != 0) {
                    fprintf(stderr, "rank %d: %s path, %s %s n=%zu%s: %s\n", env.rank,
                            st->direct ? "direct" : "block", ddpc_dtype_name(dt),
                            ddpc_reduce_op_name(op), n, in_place ? " in place" : "",
                            s != DDPC_OK ? ddpc_last_error() : "differs from the rank-order sum");
                    failures++;
                }
                ddpc_free(send);
                ddpc_free(recv);
                ddpc_free(want);
                if (s != DDPC_OK)
                    break;
            }
        }
    }
    ops->destroy(state);
    if (failures == 0 && env.rank == 0)
        printf("gloo paths: block%s all passed\n", cma ? " and direct" : " (no CMA here)");
    return failures ? 1 : 0;
}
