// SPDX-License-Identifier: MIT
/* The CUDA runtime core: which GPU this process uses, its one non-blocking stream, its cuBLAS and
 * cuBLASLt handles (TF32 off, one workspace set once so neither allocates during steps), error
 * checks and the grow-only scratch slots. Invariant: a process opens at most one GPU and never
 * closes it, so the stream, handles and table stay valid for the process's lifetime and every
 * kernel runs in order on that one stream. */
#include "kernels/cuda/cuda_impl.h"

#include <atomic>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>

/* cuBLAS wants 32 MiB on Hopper for its best kernels (4 MiB is enough before sm_90). */
#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

static std::mutex open_lock;
static std::atomic<bool> opened; /* set once, after everything it guards */
static int open_device = -1;
static cudaStream_t stream;
static cublasHandle_t blas;
static cublasLtHandle_t blas_lt; /* the epilogue products' (gemm_lt.cu); shares blas_workspace */
static void *blas_workspace;
static ddpc_kernel_table table;
static char description[640]; /* prop.name is up to 256 bytes */
static thread_local bool thread_current;

static void *scratch_ptr[DDPC__CUDA_SCRATCH_COUNT];
static size_t scratch_bytes[DDPC__CUDA_SCRATCH_COUNT];

extern "C" bool ddpc_cuda_built(void)
{
    return true;
}

static void say(char *why, size_t cap, const char *msg, const char *detail)
{
    if (why && cap)
        snprintf(why, cap, msg, detail);
}

extern "C" int ddpc_cuda_devices(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    /* A failed count leaves its error as the "last error"; clear it so no later launch check
     * reports it as its own. */
    (void)cudaGetLastError();
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (e == cudaErrorInsufficientDriver) {
        /* Either no driver at all (version 0) or one older than the runtime linked in. */
        int drv = 0, rt = 0;
        (void)cudaDriverGetVersion(&drv);
        (void)cudaRuntimeGetVersion(&rt);
        (void)cudaGetLastError();
        if (drv <= 0) {
            say(why, cap, "no CUDA driver on this machine (%s)", cudaGetErrorString(e));
        } else if (why && cap) {
            snprintf(why, cap,
                     "the CUDA driver (%d.%d) is older than this build's CUDA runtime "
                     "(%d.%d): update the driver or build with an older CUDA toolkit",
                     drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        }
        return 0;
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n <= 0)) {
        if (visible)
            say(why, cap, "no GPU visible (CUDA_VISIBLE_DEVICES='%s')", visible);
        else
            say(why, cap, "no GPU found (%s)", cudaGetErrorString(cudaErrorNoDevice));
        return 0;
    }
    if (e != cudaSuccess) {
        say(why, cap, "the CUDA runtime cannot count GPUs (%s)", cudaGetErrorString(e));
        return 0;
    }
    return n;
}

/* Everything open needs, in order; on failure the handles made so far are released and the
 * process may try again (or fall back to the CPU). */
static ddpc_status open_locked(int dev, int count)
{
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        return ddpc_errorf(DDPC_EINTERNAL, "GPU %d cannot be made current: %s", dev,
                           cudaGetErrorString(e));
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ddpc_errorf(DDPC_EINTERNAL, "GPU %d: cannot read its properties: %s", dev,
                           cudaGetErrorString(e));
    }
    e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ddpc_errorf(DDPC_EINTERNAL, "GPU %d: cannot create a stream: %s", dev,
                           cudaGetErrorString(e));
    }
    e = cudaMalloc(&blas_workspace, BLAS_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamDestroy(stream);
        return ddpc_errorf(DDPC_ENOMEM, "GPU %d: no memory for cuBLAS's %zu MiB workspace: %s", dev,
                           BLAS_WORKSPACE_BYTES >> 20, cudaGetErrorString(e));
    }
    ddpc__cuda_count_alloc();
    cublasStatus_t s = cublasCreate(&blas);
    /* Default math: CUBLAS_COMPUTE_32F stays true fp32 (no TF32), as PyTorch's default
     * allow_tf32 = False for matmuls; the bf16/fp16 products ask for 16-bit inputs explicitly. */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetStream(blas, stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetWorkspace(blas, blas_workspace, BLAS_WORKSPACE_BYTES);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtCreate(&blas_lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (blas)
            cublasDestroy(blas);
        blas = nullptr;
        blas_lt = nullptr;
        cudaFree(blas_workspace);
        cudaStreamDestroy(stream);
        return ddpc_errorf(DDPC_EINTERNAL, "GPU %d: cuBLAS cannot start: %s", dev,
                           cublasGetStatusString(s));
    }
    const char *cand = ddpc__cuda_candidates(); /* a run's log says which kernels it ran */
    snprintf(description, sizeof description, "%s (GPU %d of %d, %.1f GiB, sm_%d%d%s%.200s)",
             prop.name, dev, count, (double)prop.totalGlobalMem / (double)(1u << 30), prop.major,
             prop.minor, cand ? "; candidate kernels " : "", cand ? cand : "");
    table = ddpc__cuda_table;
    table.device = dev;
    open_device = dev;
    opened = true;
    thread_current = true;
    return DDPC_OK;
}

extern "C" ddpc_status ddpc__backend_cuda_open(int local_rank, const ddpc_kernel_table **out)
{
    char why[160] = "";
    int count = ddpc_cuda_devices(why, sizeof why);
    if (count <= 0)
        return ddpc_errorf(DDPC_EINVAL, "device: cuda cannot be used: %s", why);
    int dev = (local_rank < 0 ? 0 : local_rank) % count;
    std::lock_guard<std::mutex> hold(open_lock);
    if (opened) {
        if (dev != open_device)
            return ddpc_errorf(DDPC_EUNSUPPORTED,
                               "this process already uses GPU %d and cannot also use GPU %d "
                               "(one GPU per process: start one rank per GPU)",
                               open_device, dev);
        /* Another thread (the comm thread, a loader) may ask: make the device current there. */
        cudaError_t e = cudaSetDevice(dev);
        if (e != cudaSuccess)
            return ddpc_errorf(DDPC_EINTERNAL, "GPU %d cannot be made current: %s", dev,
                               cudaGetErrorString(e));
        thread_current = true;
        *out = &table;
        return DDPC_OK;
    }
    DDPC_TRY(open_locked(dev, count));
    *out = &table;
    return DDPC_OK;
}

extern "C" const char *ddpc__backend_cuda_describe(void)
{
    return opened ? description : "cuda (no GPU opened)";
}

/* The device is current per host thread: a thread other than the opener (the comm thread, a
 * loader) that reaches a kernel makes the process's GPU current once, so its launches, copies and
 * allocations land on that GPU rather than on GPU 0. */
static void make_current(void)
{
    if (!thread_current && opened) {
        DDPC_CUDA_CHECK(cudaSetDevice(open_device));
        thread_current = true;
    }
}

extern "C" cudaStream_t ddpc__cuda_stream(void)
{
    make_current();
    return stream;
}

/* The process's one GPU, current in this thread: a key for what kernels cache per device. */
extern "C" int ddpc__cuda_device(void)
{
    make_current();
    return open_device;
}

extern "C" cublasHandle_t ddpc__cuda_blas(void)
{
    make_current();
    return blas;
}

extern "C" cublasLtHandle_t ddpc__cuda_blas_lt(void)
{
    make_current();
    return blas_lt;
}

/* cuBLAS and cuBLASLt run in order on the one stream, so they can share one workspace. */
extern "C" void *ddpc__cuda_blas_workspace(size_t *bytes)
{
    *bytes = BLAS_WORKSPACE_BYTES;
    return blas_workspace;
}

extern "C" void ddpc__cuda_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "ddpc: %s:%d: %s: %s (%s)\n", file, line, what, cudaGetErrorString(e),
                cudaGetErrorName(e));
        abort();
    }
}

extern "C" void ddpc__cublas_check(cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "ddpc: %s:%d: %s: %s\n", file, line, what, cublasGetStatusString(s));
        abort();
    }
}

/* Grows by replacement: cudaFree waits for the device, so no kernel still reads the old buffer.
 * Sizes round up to 1 MiB steps so shapes that creep up by a little do not regrow every call. */
extern "C" void *ddpc__cuda_scratch(int slot, size_t bytes)
{
    if (slot < 0 || slot >= DDPC__CUDA_SCRATCH_COUNT) {
        fprintf(stderr, "ddpc: CUDA scratch slot %d does not exist\n", slot);
        abort();
    }
    if (bytes <= scratch_bytes[slot] && scratch_ptr[slot])
        return scratch_ptr[slot];
    make_current();
    size_t want = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (want == 0)
        want = (size_t)1 << 20;
    if (scratch_ptr[slot])
        DDPC_CUDA_CHECK(cudaFree(scratch_ptr[slot]));
    scratch_ptr[slot] = nullptr;
    scratch_bytes[slot] = 0;
    /* A kernel has no error path: running out of device memory for scratch ends the process with
     * the size it wanted, rather than computing something else. */
    DDPC_CUDA_CHECK(cudaMalloc(&scratch_ptr[slot], want));
    scratch_bytes[slot] = want;
    ddpc__cuda_count_alloc();
    return scratch_ptr[slot];
}
