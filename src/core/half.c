/* bf16 and f16 conversions. bf16 is the top half of an f32, rounded to nearest even; f16 goes
 * through the compiler's _Float16 (F16C instructions with -march=native, exact IEEE rounding). */
#include <ddpc/half.h>

#include <string.h>

uint16_t ddpc_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and non-zero in the top half */
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float ddpc_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t ddpc_f32_to_f16(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

float ddpc_f16_to_f32(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, sizeof h);
    return (float)h;
}

void ddpc_f32_to_half_array(uint16_t *restrict dst, const float *restrict src, size_t n, int bf16)
{
    if (bf16) {
        for (size_t i = 0; i < n; i++)
            dst[i] = ddpc_f32_to_bf16(src[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            dst[i] = ddpc_f32_to_f16(src[i]);
    }
}

void ddpc_half_to_f32_array(float *restrict dst, const uint16_t *restrict src, size_t n, int bf16)
{
    if (bf16) {
        for (size_t i = 0; i < n; i++)
            dst[i] = ddpc_bf16_to_f32(src[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            dst[i] = ddpc_f16_to_f32(src[i]);
    }
}
