// SPDX-License-Identifier: MIT
/* Tests for the TensorBoard writer's pieces that the event files depend on: CRC-32C (published
 * check values), TFRecord framing (lengths, masked CRCs, refusal when it does not fit), and the
 * hand-encoded Event bytes of a version, a START and a one-scalar summary (protobuf wire format,
 * spelled out here byte by byte). The files as a whole are decoded independently by
 * tests/cli_train_tb.sh. */
#include "metrics/tb_impl.h"

#include <string.h>

#include "check.h"

static void test_crc32c(void)
{
    CHECK_EQ_INT(ddpc__crc32c("123456789", 9), 0xE3069283u);
    CHECK_EQ_INT(ddpc__crc32c("", 0), 0u);
    unsigned char zeros[32] = {0};
    CHECK_EQ_INT(ddpc__crc32c(zeros, 32), 0x8A9136AAu); /* RFC 3720 B.4: 32 bytes of zeros */
    uint32_t c = ddpc__crc32c("123456789", 9);
    CHECK_EQ_INT(ddpc__crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_framing(void)
{
    unsigned char out[64];
    size_t n = ddpc__tfrecord_frame("hello", 5, out, sizeof out);
    CHECK_EQ_INT(n, 5 + DDPC__TFRECORD_OVERHEAD);
    CHECK_EQ_INT(out[0], 5);
    for (int i = 1; i < 8; i++)
        CHECK_EQ_INT(out[i], 0);
    CHECK_EQ_INT(le32(out + 8), ddpc__crc32c_masked(out, 8));
    CHECK(memcmp(out + 12, "hello", 5) == 0);
    CHECK_EQ_INT(le32(out + 17), ddpc__crc32c_masked("hello", 5));
    CHECK_EQ_INT(ddpc__tfrecord_frame("hello", 5, out, 20), 0); /* 21 needed */
}

static void test_events(void)
{
    unsigned char buf[256], sub[256];
    ddpc__pb e = {.buf = buf, .cap = sizeof buf, .sub = sub, .sub_cap = sizeof sub};
    /* wall_time 0.5 = 0x3FE0000000000000, step 0, file_version "v" */
    ddpc__tb_event_version(&e, 0.5, "v");
    const unsigned char version[] = {0x09, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F, 0x10, 0x00, 0x1A, 1, 'v'};
    CHECK_EQ_INT(e.len, sizeof version);
    CHECK(!e.overflow && memcmp(buf, version, sizeof version) == 0);

    /* step 300 = varint AC 02; session_log (field 7) {status (1): START (1)} */
    ddpc__tb_event_start(&e, 0.5, 300);
    const unsigned char start[] = {0x09, 0,    0,    0,    0,    0, 0,    0xE0,
                                   0x3F, 0x10, 0xAC, 0x02, 0x3A, 2, 0x08, 1};
    CHECK_EQ_INT(e.len, sizeof start);
    CHECK(memcmp(buf, start, sizeof start) == 0);

    /* summary (field 5) {value (1) {tag (1) "a", simple_value (2) 1.0f = 0x3F800000}} */
    ddpc__tb_event_summary_begin(&e, 0.5, 1);
    ddpc__tb_event_summary_add(&e, "a", 1.0f);
    ddpc__tb_event_summary_end(&e);
    const unsigned char summary[] = {0x09, 0,    0,    0,    0,  0,    0,   0xE0,
                                     0x3F, 0x10, 0x01, 0x2A, 10, 0x0A, 8,   0x0A,
                                     1,    'a',  0x15, 0,    0,  0x80, 0x3F};
    CHECK_EQ_INT(e.len, sizeof summary);
    CHECK(memcmp(buf, summary, sizeof summary) == 0);

    /* a negative step is a 10-byte varint, as protobuf encodes int64 */
    ddpc__tb_event_start(&e, 0.5, -1);
    CHECK_EQ_INT(e.len, 9 + 1 + 10 + 4);

    /* too small a buffer: overflow is reported, nothing is written past it */
    ddpc__pb small = {.buf = buf, .cap = 12, .sub = sub, .sub_cap = sizeof sub};
    ddpc__tb_event_version(&small, 0.5, "brain.Event:2");
    CHECK(small.overflow);
    CHECK(small.len <= 12);
}

int main(void)
{
    RUN_TEST(test_crc32c);
    RUN_TEST(test_framing);
    RUN_TEST(test_events);
    return check_summary();
}
