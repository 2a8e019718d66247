// SPDX-License-Identifier: MIT
/* CUDA driver, GPUs and NCCL for `ddpc env`, found at run time through dlopen of libcuda.so.1 and
 * libnccl.so.2 so that ddpc neither links nor needs them. An absent library, driver or GPU is a
 * "not found (why)" line, never an error; each library is closed again before returning. */
#include "core/sysinfo_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The CUDA driver API subset we call (cuda.h types: CUresult and CUdevice are int). */
typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_int_fn)(int *out);
typedef int (*cu_device_get_fn)(int *dev, int ordinal);
typedef int (*cu_device_name_fn)(char *name, int len, int dev);
typedef int (*cu_device_mem_fn)(size_t *bytes, int dev);
typedef int (*cu_device_attr_fn)(int *value, int attrib, int dev);
typedef int (*cu_error_string_fn)(int err, const char **str);

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* dlsym's object pointer as a function pointer (POSIX guarantees the representation). */
static void *sym(void *lib, const char *name)
{
    return lib ? dlsym(lib, name) : NULL;
}
#define LOAD(type, lib, name) ((type)(void (*)(void))sym(lib, name))

static const char *dl_why(void)
{
    const char *e = dlerror();
    return e ? e : "unknown dlopen error";
}

static void cu_error(void *lib, int err, char *buf, size_t cap)
{
    cu_error_string_fn str = LOAD(cu_error_string_fn, lib, "cuGetErrorString");
    const char *s = NULL;
    if (str && str(err, &s) == 0 && s)
        snprintf(buf, cap, "%s (CUresult %d)", s, err);
    else
        snprintf(buf, cap, "CUresult %d", err);
}

static void list_gpus(void *lib, ddpc_sysinfo *out)
{
    cu_int_fn count = LOAD(cu_int_fn, lib, "cuDeviceGetCount");
    cu_device_get_fn get = LOAD(cu_device_get_fn, lib, "cuDeviceGet");
    cu_device_name_fn name = LOAD(cu_device_name_fn, lib, "cuDeviceGetName");
    cu_device_mem_fn mem = LOAD(cu_device_mem_fn, lib, "cuDeviceTotalMem_v2");
    cu_device_attr_fn attr = LOAD(cu_device_attr_fn, lib, "cuDeviceGetAttribute");
    int n = 0;
    if (!count || !get || !name || count(&n) != 0 || n < 0)
        return;
    out->gpu_count = n;
    for (int i = 0; i < n && i < DDPC_SYSINFO_MAX_GPUS; i++) {
        int dev = 0, major = 0, minor = 0;
        char buf[96] = "unknown";
        size_t bytes = 0;
        if (get(&dev, i) != 0)
            continue;
        if (name(buf, (int)sizeof buf, dev) != 0)
            snprintf(buf, sizeof buf, "unknown");
        snprintf(out->gpu_names[i], sizeof out->gpu_names[i], "%s", buf);
        if (mem && mem(&bytes, dev) == 0)
            ddpc__strlcatf(out->gpu_names[i], sizeof out->gpu_names[i], ", %.1f GiB",
                           (double)bytes / (1024.0 * 1024.0 * 1024.0));
        if (attr && attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 0 &&
            attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0) {
            ddpc__strlcatf(out->gpu_names[i], sizeof out->gpu_names[i], ", sm_%d%d", major, minor);
            out->gpu_sm[i] = major * 10 + minor;
        }
    }
}

static void cuda(ddpc_sysinfo *out)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(out->cuda_driver, sizeof out->cuda_driver, "not found (%s)", dl_why());
        return;
    }
    cu_init_fn init = LOAD(cu_init_fn, lib, "cuInit");
    cu_int_fn version = LOAD(cu_int_fn, lib, "cuDriverGetVersion");
    int v = 0, err = 0;
    char why[96];
    if (!init || !version) {
        snprintf(out->cuda_driver, sizeof out->cuda_driver,
                 "not usable (libcuda.so.1 lacks cuInit or cuDriverGetVersion)");
    } else if ((err = version(&v)) != 0) {
        cu_error(lib, err, why, sizeof why);
        snprintf(out->cuda_driver, sizeof out->cuda_driver,
                 "not usable (libcuda.so.1 found, cuDriverGetVersion failed: %s)", why);
    } else if ((err = init(0)) != 0) {
        cu_error(lib, err, why, sizeof why);
        snprintf(out->cuda_driver, sizeof out->cuda_driver,
                 "CUDA driver %d.%d (libcuda.so.1), cuInit failed: %s", v / 1000, v % 1000 / 10,
                 why);
    } else {
        snprintf(out->cuda_driver, sizeof out->cuda_driver, "CUDA driver %d.%d (libcuda.so.1)",
                 v / 1000, v % 1000 / 10);
        list_gpus(lib, out);
    }
    out->cuda_driver_version = v;
    dlclose(lib);
}

/* ncclGetVersion's code: major*10000 + minor*100 + patch since NCCL 2.9, major*1000 + ... before.
 */
static void nccl(ddpc_sysinfo *out)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(out->nccl, sizeof out->nccl, "not found (%s)", dl_why());
        return;
    }
    cu_int_fn get_version = LOAD(cu_int_fn, lib, "ncclGetVersion");
    int code = 0;
    if (!get_version || get_version(&code) != 0) {
        snprintf(out->nccl, sizeof out->nccl, "libnccl.so.2 found, ncclGetVersion failed");
    } else {
        int base = code >= 10000 ? 10000 : 1000;
        snprintf(out->nccl, sizeof out->nccl, "NCCL %d.%d.%d (libnccl.so.2)", code / base,
                 code % base / 100, code % 100);
    }
    dlclose(lib);
}

void ddpc__sysinfo_gpu(ddpc_sysinfo *out)
{
    out->gpu_count = 0;
    out->cuda_driver_version = 0;
    for (int i = 0; i < DDPC_SYSINFO_MAX_GPUS; i++)
        out->gpu_names[i][0] = '\0', out->gpu_sm[i] = 0;
    cuda(out);
    nccl(out);
}
