// SPDX-License-Identifier: MIT
/* TFRecord framing, the container of TensorBoard's event files: per record the length (uint64,
 * little-endian), the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data
 * (all CRCs little-endian uint32). CRC-32C is the Castagnoli polynomial, reflected (0x82F63B78);
 * the mask rotates right by 15 and adds 0xa282ead8, as TensorFlow's record writer does. */
#include "metrics/tb_impl.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

uint32_t ddpc__crc32c(const void *data, size_t len)
{
    pthread_once(&table_once, make_table);
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t ddpc__crc32c_masked(const void *data, size_t len)
{
    uint32_t c = ddpc__crc32c(data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (unsigned char)(v >> (8 * i));
}

size_t ddpc__tfrecord_frame(const void *data, size_t len, unsigned char *out, size_t cap)
{
    size_t need = len + DDPC__TFRECORD_OVERHEAD;
    if (need > cap)
        return 0;
    put_le(out, len, 8);
    put_le(out + 8, ddpc__crc32c_masked(out, 8), 4);
    memcpy(out + 12, data, len);
    put_le(out + 12 + len, ddpc__crc32c_masked(data, len), 4);
    return need;
}
