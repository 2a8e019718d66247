// SPDX-License-Identifier: MIT
/* vmem.c's granule bookkeeping, over a host buffer whose "device" records every map, unmap and
 * zero: a release unmaps exactly the backed whole granules inside its range (in runs) and zeroes
 * only its backed partial ends; back maps exactly the unbacked granules the range touches; a read
 * copies backed runs and gives zeros for the rest, never touching an unbacked granule (poisoned
 * with 0xAB here). The same bookkeeping drives memory_vmm.cu on a GPU. */
#include "check.h"
#include "kernels/vmem.h"

#include <string.h>

enum { G = 64, NG = 10 };
static unsigned char mem[G * NG];
static int maps, unmaps, zeros;
static size_t zeroed; /* bytes zeroed by the last release */

static ddpc_status rec_map(void *ctx, char *at, size_t bytes, size_t first)
{
    (void)ctx;
    CHECK_EQ_INT((size_t)(at - (char *)mem), first * G);
    memset(at, 0, bytes);
    maps++;
    return DDPC_OK;
}

static ddpc_status rec_unmap(void *ctx, char *at, size_t bytes, size_t first)
{
    (void)ctx;
    CHECK_EQ_INT((size_t)(at - (char *)mem), first * G);
    memset(at, 0xAB, bytes); /* what an unmapped granule "holds": never to be read */
    unmaps++;
    return DDPC_OK;
}

static void rec_zero(void *ctx, char *at, size_t bytes)
{
    (void)ctx;
    memset(at, 0, bytes);
    zeros++;
    zeroed += bytes;
}

static const ddpc__vmem_ops ops = {NULL, rec_map, rec_unmap, rec_zero};

static void reset(ddpc__vmem *v)
{
    for (size_t i = 0; i < sizeof mem; i++)
        mem[i] = (unsigned char)(i % 251 + 1);
    CHECK(ddpc__vmem_init(v, mem, sizeof mem, G) == DDPC_OK);
    maps = unmaps = zeros = 0;
    zeroed = 0;
}

static void copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

static void test_release_whole_granules_only(void)
{
    ddpc__vmem v;
    reset(&v);
    /* [10, 202): granules 1 and 2 whole */
    CHECK_EQ_INT(ddpc__vmem_release(&v, &ops, mem + 10, 3 * G), DDPC_OK);
    CHECK_EQ_INT(v.n_backed, NG - 2);
    CHECK_EQ_INT(unmaps, 1); /* one run */
    CHECK_EQ_INT(zeroed, (G - 10) + 10);
    CHECK(!ddpc__vmem_is_backed(&v, mem + G, 1) && ddpc__vmem_is_backed(&v, mem, 1));
    unsigned char h[G * NG];
    ddpc__vmem_read(&v, h, mem, sizeof h, copy);
    for (size_t i = 0; i < sizeof h; i++) {
        unsigned char want = i >= 10 && i < 10 + 3 * G ? 0 : (unsigned char)(i % 251 + 1);
        if (h[i] != want) {
            printf("  byte %zu is %u, not %u\n", i, h[i], want);
            CHECK(false);
            break;
        }
    }
    /* Inside one granule: zeroed only, nothing unmapped; twice released: nothing more to do. */
    CHECK_EQ_INT(ddpc__vmem_release(&v, &ops, mem + 5 * G + 3, 20), DDPC_OK);
    CHECK_EQ_INT(unmaps, 1);
    CHECK_EQ_INT(mem[5 * G + 3], 0);
    CHECK_EQ_INT(mem[5 * G + 23], (5 * G + 23) % 251 + 1);
    int z = zeros;
    CHECK_EQ_INT(ddpc__vmem_release(&v, &ops, mem + G, 2 * G), DDPC_OK);
    CHECK_EQ_INT(unmaps, 1);
    CHECK_EQ_INT(zeros, z);
    ddpc__vmem_fini(&v);
}

static void test_back_maps_touched_granules(void)
{
    ddpc__vmem v;
    reset(&v);
    CHECK_EQ_INT(ddpc__vmem_release(&v, &ops, mem, sizeof mem), DDPC_OK);
    CHECK_EQ_INT(v.n_backed, 0);
    CHECK_EQ_INT(ddpc__vmem_back(&v, &ops, mem + G - 1, 2), DDPC_OK); /* granules 0 and 1 */
    CHECK_EQ_INT(v.n_backed, 2);
    CHECK_EQ_INT(maps, 1);
    CHECK_EQ_INT(ddpc__vmem_back(&v, &ops, mem, 3 * G), DDPC_OK); /* only granule 2 is new */
    CHECK_EQ_INT(v.n_backed, 3);
    CHECK_EQ_INT(maps, 2);
    CHECK_EQ_INT(ddpc__vmem_back(&v, &ops, mem, sizeof mem), DDPC_OK);
    CHECK_EQ_INT(v.n_backed, NG);
    for (size_t i = 0; i < sizeof mem; i++)
        if (mem[i] != 0) {
            CHECK(false);
            break;
        }
    ddpc__vmem_fini(&v);
}

int main(void)
{
    RUN_TEST(test_release_whole_granules_only);
    RUN_TEST(test_back_maps_touched_granules);
    return check_summary();
}
