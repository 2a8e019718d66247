// SPDX-License-Identifier: MIT
/* Just enough of CUDA to run a kernel's device code on the host (C++17). A block is blockDim.x
 * fibers on one host thread, switched at barriers (x86-64: six saved registers and the stack
 * pointer; elsewhere ucontext, whose switches make system calls): warps of 32 meet at one for
 * __syncwarp and the shuffles, the block at another for __syncthreads, and a barrier that can
 * never be met (a thread returned, or the warp or block split between barriers) is reported
 * through emu_failures, not hung. Between two barriers each fiber runs alone, in ascending or
 * descending thread order, alternating from one barrier phase to the next and from one block to
 * the next, so a read of another thread's write without a barrier between them sees stale data in
 * one of the two orders. WMMA fragments hold the whole 16x16 tile, in lane 0 only (the kernels
 * read fragments through stores alone, so the other lanes only check the rules), and loads and
 * stores check WMMA's 32-byte alignment and leading dimension rules; bf16/fp16 convert with
 * ddpc/half.h's round-to-nearest-even. A .cu file fences its host side (launches, streams,
 * cuBLAS, CUB) with `#ifndef DDPC_CUDA_EMULATE`, which this header defines; a test includes it,
 * then the .cu file. Invariant: blocks run one after another, so a kernel that waits for another
 * block's results in flight would hang here as it might on a GPU; `__shared__` is a static
 * variable, which is one block's because only one block runs at a time. */
#ifndef DDPC_TESTS_CUDA_EMU_H
#define DDPC_TESTS_CUDA_EMU_H

#include <ddpc/device.h> /* what kernels/cuda/cuda_impl.h gives the .cu files */
#include <ddpc/half.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n) alignas(n)
#define __shared__ static
#ifndef DDPC_CUDA_EMULATE
#define DDPC_CUDA_EMULATE 1
#endif

struct emu_dim {
    unsigned x, y, z;
};
static emu_dim threadIdx, blockIdx; /* the running fiber's */
static emu_dim gridDim, blockDim;

struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w)
{
    return float4{x, y, z, w};
}

struct uint2 {
    unsigned x, y;
};
static inline uint2 make_uint2(unsigned x, unsigned y)
{
    return uint2{x, y};
}

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

struct __nv_bfloat16 {
    uint16_t bits;
};
struct __half {
    uint16_t bits;
};
static inline __nv_bfloat16 __float2bfloat16_rn(float x)
{
    return __nv_bfloat16{ddpc_f32_to_bf16(x)};
}
static inline __half __float2half_rn(float x)
{
    return __half{ddpc_f32_to_f16(x)};
}
static inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 h)
{
    return h.bits;
}
static inline uint16_t __half_as_ushort(__half h)
{
    return h.bits;
}
static inline __half __ushort_as_half(uint16_t b)
{
    return __half{b};
}
static inline float __half2float(__half h)
{
    return ddpc_f16_to_f32(h.bits);
}
static inline float emu_to_float(__nv_bfloat16 h)
{
    return ddpc_bf16_to_f32(h.bits);
}
static inline float emu_to_float(__half h)
{
    return ddpc_f16_to_f32(h.bits);
}
static inline float emu_to_float(float x)
{
    return x;
}

/* Device math. The _rn intrinsics round once to nearest even, as IEEE operations on the host do
 * when nothing is contracted (the emulation tests compile with -ffp-contract=off): so a kernel
 * written with them computes here exactly the bits it computes on a GPU. Elsewhere nvcc may fuse
 * a * b + c into one FMA and the host does not, and the GPU's expf/sqrtf/rsqrtf/__expf are within
 * a few ulp of the host's (correctly rounded or nearly) functions: compare such code within a
 * tolerance, never bitwise. */
static inline uint32_t __float_as_uint(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float __uint_as_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline float __fadd_rn(float a, float b)
{
    return a + b;
}
static inline float __fsub_rn(float a, float b)
{
    return a - b;
}
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}
static inline float __fdiv_rn(float a, float b)
{
    return a / b;
}
static inline float __fsqrt_rn(float a)
{
    return sqrtf(a);
}
static inline float __fmaf_rn(float a, float b, float c)
{
    return fmaf(a, b, c);
}
static inline double __dadd_rn(double a, double b)
{
    return a + b;
}
static inline double __dsqrt_rn(double a)
{
    return sqrt(a);
}
static inline float __double2float_rn(double a)
{
    return (float)a;
}
/* The GPU's fast exponential (ex2.approx, about 2 ulp plus an error growing with |x|); glibc
 * declares a __expf of its own, so the name is a macro. */
static inline float emu_expf(float x)
{
    return expf(x);
}
#define __expf emu_expf
static inline float rsqrtf(float x)
{
    return 1.0f / sqrtf(x);
}
static inline int64_t min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static inline int64_t max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}
static inline int atomicOr(int *p, int v)
{
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
}
static inline int atomicAdd(int *p, int v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline float atomicAdd(float *p, float v)
{
    float old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do
        want = old + v;
    while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

/* One block's shared state: its fibers, its shuffle slots and its dynamic shared memory. */
enum { EMU_MAX_WARPS = 32 };
enum emu_state { EMU_READY, EMU_AT_BLOCK, EMU_AT_WARP, EMU_DONE };
/* A saved execution context: emu_switch(&from, to) saves the running one into `from` and resumes
 * `to`; emu_ctx_start prepares a fresh one on a stack to run emu_fiber_main. */
#if defined(__x86_64__)
typedef void *emu_ctx; /* the stack pointer, the callee-saved registers pushed below it */
extern "C" void emu_switch(emu_ctx *from, emu_ctx to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
static void emu_fiber_main();
static inline void emu_ctx_start(emu_ctx *c, char *stack, size_t size)
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                   /* emu_fiber_main's return address: it never returns */
    *--sp = (void *)emu_fiber_main; /* where emu_switch's ret goes */
    for (int i = 0; i < 6; i++)
        *--sp = NULL; /* rbp, rbx, r12..r15 */
    *c = sp;
}
#else
typedef ucontext_t emu_ctx;
static inline void emu_switch(emu_ctx *from, emu_ctx &to)
{
    swapcontext(from, &to);
}
static void emu_fiber_main();
static inline void emu_ctx_start(emu_ctx *c, char *stack, size_t size)
{
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = NULL;
    makecontext(c, emu_fiber_main, 0);
}
#endif

struct emu_fiber {
    emu_ctx ctx;
    emu_state state;
};
struct emu_block {
    emu_ctx sched;
    emu_fiber *fib;
    unsigned threads, cur;
    /* Two sets of shuffle slots per warp, used in turn: a lane can only write the set again after
     * every lane passed the next shuffle's barrier, so one barrier per shuffle suffices. */
    uint64_t shfl[2][EMU_MAX_WARPS][32];
    unsigned shfl_turn[EMU_MAX_WARPS * 32];
    int vote;
    unsigned char *smem;
};
static emu_block *emu_cur;
static int emu_failures;

static inline void emu_fail(const char *what)
{
    fprintf(stderr, "cuda_emu: %s\n", what);
    emu_failures++;
}

#define FLASH_SMEM(name) unsigned char *name = emu_cur->smem
static inline unsigned emu_warp()
{
    return threadIdx.x / 32;
}
/* The running fiber waits in `st` until the scheduler releases it. */
static inline void emu_wait(emu_state st)
{
    emu_fiber *f = &emu_cur->fib[emu_cur->cur];
    f->state = st;
    emu_switch(&f->ctx, emu_cur->sched);
}
static inline void __syncthreads()
{
    emu_wait(EMU_AT_BLOCK);
}
static inline void __syncwarp()
{
    emu_wait(EMU_AT_WARP);
}
/* Every lane's v, read by lane `src(lane)`; lanes whose source is outside the warp keep their
 * own v (as __shfl_down_sync does). */
template <typename T, typename Src> static inline T emu_shfl(unsigned mask, T v, Src src)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    if (mask != 0xffffffffu)
        emu_fail("a shuffle with a partial mask");
    const unsigned w = emu_warp(), lane = threadIdx.x % 32, from = src(lane);
    const unsigned turn = emu_cur->shfl_turn[threadIdx.x]++ % 2;
    memcpy(&emu_cur->shfl[turn][w][lane], &v, sizeof v);
    __syncwarp();
    T r = v;
    if (from < 32)
        memcpy(&r, &emu_cur->shfl[turn][w][from], sizeof r);
    return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    return emu_shfl(mask, v, [&](unsigned lane) { return lane ^ (unsigned)lane_mask; });
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta)
{
    return emu_shfl(mask, v, [&](unsigned lane) { return lane + delta; });
}
/* __syncthreads that also returns whether p was nonzero in any thread of the block. */
static inline int __syncthreads_or(int p)
{
    __syncthreads(); /* a previous call's readers are done */
    if (threadIdx.x == 0)
        emu_cur->vote = 0;
    __syncthreads();
    if (p)
        emu_cur->vote = 1;
    __syncthreads();
    return emu_cur->vote;
}
/* __ldg reads through the read-only cache: a plain load here. */
template <typename T> static inline T __ldg(const T *p)
{
    return *p;
}

namespace nvcuda
{
namespace wmma
{
struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
struct row_major {
};
struct col_major {
};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulator knows 16x16x16 only");
    float x[256]; /* (row, col) at x[row * 16 + col]; meaningful in lane 0 */
};

/* WMMA's rules: a 256-bit aligned pointer; ldm a multiple of 16 bytes. */
template <typename T> static inline void emu_check(const T *p, unsigned ldm)
{
    if ((uintptr_t)p % 32 != 0)
        emu_fail("WMMA pointer not 32-byte aligned");
    if (ldm * sizeof(T) % 16 != 0)
        emu_fail("WMMA leading dimension not a multiple of 16 bytes");
}

template <typename Use, typename T, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                                    unsigned ldm)
{
    emu_check(p, ldm);
    if (threadIdx.x % 32 != 0)
        return;
    const bool col = std::is_same<Layout, col_major>::value;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = emu_to_float(col ? p[c * ldm + r] : p[r * ldm + c]);
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                    unsigned ldm, layout_t l)
{
    emu_check(p, ldm);
    if (threadIdx.x % 32 != 0)
        return;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t l)
{
    emu_check(p, ldm);
    if (threadIdx.x % 32 != 0)
        return;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c];
}

static inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v)
{
    if (threadIdx.x % 32 != 0)
        return;
    for (int i = 0; i < 256; i++)
        f.x[i] = v;
}

template <typename T, typename La, typename Lb>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, T, La> &a,
                            const fragment<matrix_b, 16, 16, 16, T, Lb> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    if (threadIdx.x % 32 != 0)
        return;
    float out[256];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = c.x[r * 16 + n];
            for (int k = 0; k < 16; k++)
                s += a.x[r * 16 + k] * b.x[k * 16 + n];
            out[r * 16 + n] = s;
        }
    memcpy(d.x, out, sizeof out);
}
} // namespace wmma
} // namespace nvcuda

/* Runs fn() as every thread of every block of a grid of gx x gy blocks of `threads` (x only), with
 * `smem` bytes of dynamic shared memory (filled with NaN bytes before each block, so a read before
 * a write shows). Blocks run one after another. */
static void (*emu_body)(void *);
static void *emu_body_arg;
static void emu_fiber_main()
{
    emu_body(emu_body_arg);
    emu_fiber *f = &emu_cur->fib[emu_cur->cur];
    f->state = EMU_DONE;
    emu_switch(&f->ctx, emu_cur->sched); /* never resumed */
}

/* Releases the waiters whose barrier is complete; false when none could go on. */
static bool emu_release(emu_block *b)
{
    bool any = false;
    unsigned at_block = 0, done = 0;
    for (unsigned t = 0; t < b->threads; t++) {
        at_block += b->fib[t].state == EMU_AT_BLOCK;
        done += b->fib[t].state == EMU_DONE;
    }
    if (at_block > 0 && at_block + done == b->threads) {
        if (done > 0)
            emu_fail("__syncthreads after some of the block's threads returned");
        for (unsigned t = 0; t < b->threads; t++)
            if (b->fib[t].state == EMU_AT_BLOCK)
                b->fib[t].state = EMU_READY;
        return true;
    }
    for (unsigned w = 0; w < b->threads / 32; w++) {
        unsigned n = 0;
        for (unsigned l = 0; l < 32; l++)
            n += b->fib[w * 32 + l].state == EMU_AT_WARP;
        if (n == 32) {
            for (unsigned l = 0; l < 32; l++)
                b->fib[w * 32 + l].state = EMU_READY;
            any = true;
        }
    }
    return any;
}

template <typename F>
static void emu_launch2(unsigned gx, unsigned gy, unsigned threads, size_t smem, F fn)
{
    if (threads % 32 != 0 || threads / 32 > EMU_MAX_WARPS || gx == 0 || gy == 0)
        abort();
    enum { STACK = 256 << 10 }; /* WMMA fragments are 1 KiB each */
    gridDim = emu_dim{gx, gy, 1};
    blockDim = emu_dim{threads, 1, 1};
    emu_block b;
    b.threads = threads;
    b.smem = (unsigned char *)aligned_alloc(128, smem ? (smem + 127) / 128 * 128 : 128);
    b.fib = (emu_fiber *)calloc(threads, sizeof(emu_fiber));
    char *stacks = (char *)malloc((size_t)threads * STACK);
    if (!b.smem || !b.fib || !stacks)
        abort();
    emu_cur = &b;
    emu_body = [](void *f) { (*(F *)f)(); };
    emu_body_arg = &fn;
    for (unsigned blk = 0; blk < gx * gy; blk++) {
        memset(b.smem, 0xff, smem); /* NaN floats, NaN halves */
        blockIdx = emu_dim{blk % gx, blk / gx, 0};
        for (unsigned t = 0; t < threads; t++) {
            emu_ctx_start(&b.fib[t].ctx, stacks + (size_t)t * STACK, STACK);
            b.fib[t].state = EMU_READY;
            b.shfl_turn[t] = 0;
        }
        for (unsigned phase = 0;; phase++) {
            for (unsigned i = 0; i < threads; i++) {
                const unsigned t = (phase + blk) % 2 ? threads - 1 - i : i;
                if (b.fib[t].state != EMU_READY)
                    continue;
                b.cur = t;
                threadIdx = emu_dim{t, 0, 0};
                emu_switch(&b.sched, b.fib[t].ctx);
            }
            unsigned done = 0;
            for (unsigned t = 0; t < threads; t++)
                done += b.fib[t].state == EMU_DONE;
            if (done == threads)
                break;
            if (!emu_release(&b)) {
                emu_fail("a barrier that can never be met (the block's threads split)");
                break; /* the waiting fibers are abandoned with their stacks */
            }
        }
    }
    free(stacks);
    free(b.fib);
    free(b.smem);
    emu_cur = NULL;
}

template <typename F> static void emu_launch(unsigned blocks, unsigned threads, size_t smem, F fn)
{
    emu_launch2(blocks, 1, threads, smem, fn);
}

/* For the tests' comparisons: max |a - ref| / max |ref| over n elements (the denominator at least
 * 1e-30); +inf where a is not finite. */
static inline double emu_rel_err(const float *a, const float *ref, int64_t n)
{
    double m = 0.0, s = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        if (!std::isfinite(a[i]))
            return INFINITY;
        m = std::fmax(m, std::fabs((double)a[i] - ref[i]));
        s = std::fmax(s, std::fabs((double)ref[i]));
    }
    return m / s;
}

#endif
