/* SVE copy unrolled x4: four whole vectors per iteration (four loads, then four stores), then
 * a tail of up to four predicated vectors (no loop). */
#include <arm_sve.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t vb = svcntb(), step = 4 * vb, full = n - n % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += step) {
        svuint8_t a = svld1_u8(all, src + i), b = svld1_vnum_u8(all, src + i, 1);
        svuint8_t c = svld1_vnum_u8(all, src + i, 2), d = svld1_vnum_u8(all, src + i, 3);
        svst1_u8(all, dst + i, a);
        svst1_vnum_u8(all, dst + i, 1, b);
        svst1_vnum_u8(all, dst + i, 2, c);
        svst1_vnum_u8(all, dst + i, 3, d);
    }
    svbool_t p0 = svwhilelt_b8_u64(i, n), p1 = svwhilelt_b8_u64(i + vb, n);
    svbool_t p2 = svwhilelt_b8_u64(i + 2 * vb, n), p3 = svwhilelt_b8_u64(i + 3 * vb, n);
    svuint8_t a = svld1_u8(p0, src + i), b = svld1_vnum_u8(p1, src + i, 1);
    svuint8_t c = svld1_vnum_u8(p2, src + i, 2), d = svld1_vnum_u8(p3, src + i, 3);
    svst1_u8(p0, dst + i, a);
    svst1_vnum_u8(p1, dst + i, 1, b);
    svst1_vnum_u8(p2, dst + i, 2, c);
    svst1_vnum_u8(p3, dst + i, 3, d);
}
