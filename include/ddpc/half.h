// SPDX-License-Identifier: MIT
/* 16-bit floating point storage: bfloat16 (8-bit exponent, 7-bit mantissa) and IEEE binary16,
 * held as uint16_t bits. Conversions from f32 round to nearest even; NaN stays NaN, overflow
 * becomes infinity, f16 keeps subnormals. Reentrant. */
#ifndef DDPC_HALF_H
#define DDPC_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint16_t ddpc_f32_to_bf16(float f);
float ddpc_bf16_to_f32(uint16_t h);
uint16_t ddpc_f32_to_f16(float f);
float ddpc_f16_to_f32(uint16_t h);

/* dst (n) = src (n) converted; bf16 selects bfloat16, otherwise binary16. */
void ddpc_f32_to_half_array(uint16_t *dst, const float *src, size_t n, int bf16);
void ddpc_half_to_f32_array(float *dst, const uint16_t *src, size_t n, int bf16);
/* dst (n) = src (n) rounded to bfloat16 (bf16) or binary16 and widened back: the f32 value a
 * 16-bit store and load would give. dst may equal src. */
void ddpc_round_half_array(float *dst, const float *src, size_t n, int bf16);

#ifdef __cplusplus
}
#endif
#endif
