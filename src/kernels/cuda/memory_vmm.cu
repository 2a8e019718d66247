// SPDX-License-Identifier: MIT
/* The CUDA table's releasable memory (reserve / release / back), for ZeRO-2/3's flat buffers:
 * CUDA's virtual memory management, as PyTorch's expandable segments use it. A reserve takes an
 * address range (cuMemAddressReserve) and maps one physical allocation per granule (cuMemCreate +
 * cuMemMap + cuMemSetAccess, granularity from cuMemGetAllocationGranularity, 2 MiB on H100), so a
 * release can unmap and free single granules (cuMemUnmap only takes whole mappings) and a back maps
 * fresh zeroed ones. vmem.c decides which granules; this file only talks to the driver.
 * The driver API is reached through the runtime's cudaGetDriverEntryPointByVersion, so libcuda is
 * never linked and a machine without a driver still runs the CPU path. Without VMM (an old driver,
 * a device without the attribute) reserve is alloc, release zeroes and back does nothing: the
 * values are the same, only the memory is not given back (release_note says why; the trainer
 * logs it). A driver call that fails is returned as a status naming it: nothing here aborts
 * on the driver's refusal to map or unmap. */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/vmem.h"

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

struct driver {
    decltype(&cuMemAddressReserve) address_reserve;
    decltype(&cuMemAddressFree) address_free;
    decltype(&cuMemCreate) create;
    decltype(&cuMemRelease) release;
    decltype(&cuMemMap) map;
    decltype(&cuMemUnmap) unmap;
    decltype(&cuMemSetAccess) set_access;
    decltype(&cuMemGetAllocationGranularity) granularity;
    decltype(&cuDeviceGetAttribute) attribute;
    decltype(&cuDeviceGet) device_get;
};

/* One reserved range: its granule table and one driver handle per granule (0 when unmapped). */
struct region {
    ddpc__vmem v;
    std::vector<CUmemGenericAllocationHandle> handles;
};

std::mutex lock;
driver drv;
int state = -1; /* -1 not asked yet, 0 no VMM, 1 VMM */
char note[192];  /* with state 0: why, for release_note */
size_t granule;
CUmemAllocationProp prop;
CUmemAccessDesc access;
std::vector<region *> regions;

bool entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

/* Resolves the driver's entry points and asks the device; false (note says why) when VMM is
 * out. */
bool vmm_on(void)
{
    if (state >= 0)
        return state == 1;
    state = 0;
    (void)ddpc__cuda_stream(); /* our GPU current on this thread */
    int ordinal = 0;
    DDPC_CUDA_CHECK(cudaGetDevice(&ordinal));
    const char *why = nullptr;
#define DDPC_ENTRY(f, name) entry(name, reinterpret_cast<void **>(&drv.f))
    bool found = DDPC_ENTRY(address_reserve, "cuMemAddressReserve") &&
                 DDPC_ENTRY(address_free, "cuMemAddressFree") &&
                 DDPC_ENTRY(create, "cuMemCreate") && DDPC_ENTRY(release, "cuMemRelease") &&
                 DDPC_ENTRY(map, "cuMemMap") &&
                 DDPC_ENTRY(unmap, "cuMemUnmap") && DDPC_ENTRY(set_access, "cuMemSetAccess") &&
                 DDPC_ENTRY(granularity, "cuMemGetAllocationGranularity") &&
                 DDPC_ENTRY(attribute, "cuDeviceGetAttribute") &&
                 DDPC_ENTRY(device_get, "cuDeviceGet");
#undef DDPC_ENTRY
    CUdevice dev = 0;
    int supported = 0;
    if (!found)
        why = "the driver lacks its virtual memory entry points";
    else if (drv.device_get(&dev, ordinal) != CUDA_SUCCESS ||
             drv.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                           dev) != CUDA_SUCCESS ||
             !supported)
        why = "the device does not support virtual memory management";
    if (!why) {
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = ordinal;
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (drv.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
            granule == 0)
            why = "the driver gave no allocation granularity";
    }
    if (why) {
        snprintf(note, sizeof note, "GPU %d: %s, so ZeRO-2/3 zero the memory they release "
                 "instead of giving it back", ordinal, why);
        return false;
    }
    state = 1;
    return true;
}

region *find(const void *p)
{
    for (region *r : regions)
        if (ddpc__vmem_contains(&r->v, p))
            return r;
    return nullptr;
}

/* DDPC_EIO naming the driver call that failed on the granule at `at`, with CUDA's code. */
ddpc_status driver_failed(const char *call, CUresult e, const char *at)
{
    return ddpc_errorf(DDPC_EIO, "GPU memory: %s of the %zu-byte granule at %p failed (CUresult "
                       "%d), so ZeRO-2/3 cannot give back or take again its released memory",
                       call, granule, static_cast<const void *>(at), static_cast<int>(e));
}

ddpc_status unmap_run(region *r, char *at, size_t bytes, size_t first)
{
    for (size_t i = 0; i < bytes / granule; i++) {
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(at + i * granule);
        CUresult e = drv.unmap(p, granule);
        if (e != CUDA_SUCCESS)
            return driver_failed("cuMemUnmap", e, at + i * granule);
        e = drv.release(r->handles[first + i]);
        r->handles[first + i] = 0; /* unmapped: the address is free again either way */
        if (e != CUDA_SUCCESS)
            return driver_failed("cuMemRelease", e, at + i * granule);
    }
    return DDPC_OK;
}

ddpc_status op_map(void *ctx, char *at, size_t bytes, size_t first)
{
    region *r = static_cast<region *>(ctx);
    size_t n = bytes / granule;
    for (size_t i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(at + i * granule);
        size_t mapped = i; /* granules of the run to undo on a failure */
        const char *call = "cuMemCreate";
        CUresult e = drv.create(&h, granule, &prop, 0);
        if (e == CUDA_SUCCESS) {
            call = "cuMemMap";
            e = drv.map(p, granule, 0, h, 0);
            if (e != CUDA_SUCCESS)
                (void)drv.release(h);
        }
        if (e == CUDA_SUCCESS) {
            r->handles[first + i] = h;
            mapped = i + 1;
            call = "cuMemSetAccess";
            e = drv.set_access(p, granule, &access, 1);
        }
        if (e != CUDA_SUCCESS) { /* nothing of the run stays mapped (best effort), then say why */
            (void)unmap_run(r, at, mapped * granule, first);
            if (e == CUDA_ERROR_OUT_OF_MEMORY)
                return ddpc_errorf(DDPC_ENOMEM, "GPU memory: out of device memory mapping a "
                                   "%zu-byte granule (%s)", granule, call);
            return driver_failed(call, e, at + i * granule);
        }
    }
    DDPC_CUDA_CHECK(cudaMemsetAsync(at, 0, bytes, ddpc__cuda_stream()));
    return DDPC_OK;
}

/* cuMemUnmap does not promise to wait for kernels still using the range (PyTorch synchronizes
 * before it too): everything queued on any stream finishes first. */
ddpc_status op_unmap(void *ctx, char *at, size_t bytes, size_t first)
{
    ddpc__cuda_synchronize();
    DDPC_CUDA_CHECK(cudaDeviceSynchronize());
    return unmap_run(static_cast<region *>(ctx), at, bytes, first);
}

void op_zero(void *, char *at, size_t bytes)
{
    DDPC_CUDA_CHECK(cudaMemsetAsync(at, 0, bytes, ddpc__cuda_stream()));
}

ddpc__vmem_ops ops_of(region *r)
{
    return ddpc__vmem_ops{r, op_map, op_unmap, op_zero};
}

void copy_to_host(void *dst, const void *src, size_t n)
{
    DDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, ddpc__cuda_stream()));
}

} // namespace

extern "C" void *ddpc__cuda_reserve(size_t bytes)
{
    std::lock_guard<std::mutex> g(lock);
    if (!vmm_on())
        return ddpc__cuda_alloc(bytes);
    size_t size = (bytes ? bytes + granule - 1 : granule) / granule * granule;
    CUdeviceptr base = 0;
    if (drv.address_reserve(&base, size, granule, 0, 0) != CUDA_SUCCESS)
        return nullptr;
    region *r = new region;
    char *at = reinterpret_cast<char *>(base);
    if (ddpc__vmem_init(&r->v, at, size, granule) != DDPC_OK) {
        drv.address_free(base, size);
        delete r;
        return nullptr;
    }
    r->handles.assign(size / granule, 0);
    /* vmem_init counts every granule backed: map them all (zeroed) before saying so. */
    memset(r->v.backed, 0, size / granule);
    r->v.n_backed = 0;
    ddpc__vmem_ops ops = ops_of(r);
    if (ddpc__vmem_back(&r->v, &ops, at, size) != DDPC_OK) {
        ddpc__vmem_fini(&r->v);
        drv.address_free(base, size);
        delete r;
        return nullptr;
    }
    ddpc__cuda_count_alloc();
    regions.push_back(r);
    return at;
}

extern "C" ddpc_status ddpc__cuda_release(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(lock);
    region *r = state == 1 ? find(p) : nullptr;
    if (!r) { /* not reserved, or no VMM: the range reads as zeros and stays allocated */
        op_zero(nullptr, static_cast<char *>(p), bytes);
        return DDPC_OK;
    }
    ddpc__vmem_ops ops = ops_of(r);
    return ddpc__vmem_release(&r->v, &ops, p, bytes);
}

extern "C" ddpc_status ddpc__cuda_back(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(lock);
    region *r = state == 1 ? find(p) : nullptr;
    if (!r)
        return DDPC_OK;
    ddpc__vmem_ops ops = ops_of(r);
    return ddpc__vmem_back(&r->v, &ops, p, bytes);
}

extern "C" const char *ddpc__cuda_release_note(void)
{
    std::lock_guard<std::mutex> g(lock);
    return state == 0 ? note : nullptr;
}

extern "C" size_t ddpc__cuda_backed_bytes(void)
{
    std::lock_guard<std::mutex> g(lock);
    size_t sum = 0;
    for (region *r : regions)
        sum += r->v.n_backed * r->v.granule;
    return sum;
}

/* A reserved range frees its mapped granules and its addresses; anything else is cudaFree'd. */
extern "C" void ddpc__cuda_free(void *p)
{
    if (!p)
        return;
    std::unique_lock<std::mutex> g(lock);
    region *r = state == 1 ? find(p) : nullptr;
    if (!r) {
        g.unlock();
        (void)ddpc__cuda_stream(); /* makes our GPU current on this thread */
        DDPC_CUDA_CHECK(cudaFree(p)); /* waits for the device, so kernels reading p finish */
        return;
    }
    ddpc__vmem_ops ops = ops_of(r);
    (void)ddpc__vmem_release(&r->v, &ops, r->v.base, r->v.bytes); /* free cannot fail */
    drv.address_free(reinterpret_cast<CUdeviceptr>(r->v.base), r->v.bytes);
    ddpc__vmem_fini(&r->v);
    for (size_t i = 0; i < regions.size(); i++)
        if (regions[i] == r)
            regions.erase(regions.begin() + (long)i);
    delete r;
}

/* A released range reads as zeros here too: its unmapped granules are never touched. */
extern "C" void ddpc__cuda_to_host(void *dst, const void *src, size_t bytes)
{
    std::unique_lock<std::mutex> g(lock);
    region *r = state == 1 && bytes ? find(src) : nullptr;
    if (r)
        ddpc__vmem_read(&r->v, dst, src, bytes, copy_to_host);
    g.unlock();
    if (!r && bytes)
        copy_to_host(dst, src, bytes);
    ddpc__cuda_wait(ddpc__cuda_stream());
}
