/* SVE copy unrolled x2 with software prefetch: each iteration asks for the source
 * PREFETCH_AHEAD iterations ahead (prfb, streaming hint). A prefetch past the end of the
 * buffer is harmless (it never faults); the tail is up to two predicated vectors. */
#include <arm_sve.h>

#include "harness.h"
#include "memcpy.h"

#define PREFETCH_AHEAD 4   /* iterations */

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t vb = svcntb(), step = 2 * vb, full = n - n % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += step) {
        svprfb(all, src + i + PREFETCH_AHEAD * step, SV_PLDL1STRM);
        svuint8_t a = svld1_u8(all, src + i), b = svld1_vnum_u8(all, src + i, 1);
        svst1_u8(all, dst + i, a);
        svst1_vnum_u8(all, dst + i, 1, b);
    }
    svbool_t p0 = svwhilelt_b8_u64(i, n), p1 = svwhilelt_b8_u64(i + vb, n);
    svuint8_t a = svld1_u8(p0, src + i), b = svld1_vnum_u8(p1, src + i, 1);
    svst1_u8(p0, dst + i, a);
    svst1_vnum_u8(p1, dst + i, 1, b);
}
