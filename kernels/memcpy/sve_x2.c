/* SVE copy unrolled x2: two whole vectors per iteration, then a tail of up to two predicated
 * vectors (no loop), so a size that is not a multiple of 2 x VL bytes is still exact. */
#include <arm_sve.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t vb = svcntb(), step = 2 * vb, full = n - n % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += step) {
        svuint8_t a = svld1_u8(all, src + i), b = svld1_vnum_u8(all, src + i, 1);
        svst1_u8(all, dst + i, a);
        svst1_vnum_u8(all, dst + i, 1, b);
    }
    svbool_t p0 = svwhilelt_b8_u64(i, n), p1 = svwhilelt_b8_u64(i + vb, n);
    svuint8_t a = svld1_u8(p0, src + i), b = svld1_vnum_u8(p1, src + i, 1);
    svst1_u8(p0, dst + i, a);
    svst1_vnum_u8(p1, dst + i, 1, b);
}
