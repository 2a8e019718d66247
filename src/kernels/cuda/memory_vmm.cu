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
 * values are the same, only the memory is not given back (said once on stderr). */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/vmem.h"

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
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

/* Resolves the driver's entry points and asks the device; false (said once) when VMM is out. */
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
        fprintf(stderr, "ddpc: GPU %d: %s, so ZeRO-2/3 zero the memory they release instead of "
                "giving it back\n", ordinal, why);
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

void unmap_run(region *r, char *at, size_t bytes, size_t first)
{
    for (size_t i = 0; i < bytes / granule; i++) {
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(at + i * granule);
        if (drv.unmap(p, granule) != CUDA_SUCCESS || drv.release(r->handles[first + i]) !=
                                                          CUDA_SUCCESS) {
            fprintf(stderr, "ddpc: cuMemUnmap/cuMemRelease of a %zu-byte granule failed\n",
                    granule);
            abort();
        }
        r->handles[first + i] = 0;
    }
}

bool op_map(void *ctx, char *at, size_t bytes, size_t first)
{
    region *r = static_cast<region *>(ctx);
    size_t n = bytes / granule;
    for (size_t i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h = 0;
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(at + i * granule);
        if (drv.create(&h, granule, &prop, 0) != CUDA_SUCCESS) {
            unmap_run(r, at, i * granule, first); /* out of memory: nothing stays half done */
            return false;
        }
        if (drv.map(p, granule, 0, h, 0) != CUDA_SUCCESS ||
            drv.set_access(p, granule, &access, 1) != CUDA_SUCCESS) {
            fprintf(stderr, "ddpc: cuMemMap/cuMemSetAccess of a %zu-byte granule failed\n",
                    granule);
            abort();
        }
        r->handles[first + i] = h;
    }
    DDPC_CUDA_CHECK(cudaMemsetAsync(at, 0, bytes, ddpc__cuda_stream()));
    return true;
}

/* cuMemUnmap does not promise to wait for kernels still using the range (PyTorch synchronizes
 * before it too): everything queued on any stream finishes first. */
void op_unmap(void *ctx, char *at, size_t bytes, size_t first)
{
    ddpc__cuda_synchronize();
    DDPC_CUDA_CHECK(cudaDeviceSynchronize());
    unmap_run(static_cast<region *>(ctx), at, bytes, first);
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
    if (!ddpc__vmem_back(&r->v, &ops, at, size)) {
        ddpc__vmem_fini(&r->v);
        drv.address_free(base, size);
        delete r;
        return nullptr;
    }
    ddpc__cuda_count_alloc();
    regions.push_back(r);
    return at;
}

extern "C" void ddpc__cuda_release(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(lock);
    region *r = state == 1 ? find(p) : nullptr;
    if (!r) { /* not reserved, or no VMM: the range reads as zeros and stays allocated */
        op_zero(nullptr, static_cast<char *>(p), bytes);
        return;
    }
    ddpc__vmem_ops ops = ops_of(r);
    ddpc__vmem_release(&r->v, &ops, p, bytes);
}

extern "C" bool ddpc__cuda_back(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(lock);
    region *r = state == 1 ? find(p) : nullptr;
    if (!r)
        return true;
    ddpc__vmem_ops ops = ops_of(r);
    return ddpc__vmem_back(&r->v, &ops, p, bytes);
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
    ddpc__vmem_release(&r->v, &ops, r->v.base, r->v.bytes);
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
