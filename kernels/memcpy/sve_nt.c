/* SVE copy with non-temporal loads and stores (ldnt1b/stnt1b: a hint that the data will not
 * be reused, so a big copy need not evict the caches), two vectors per iteration, aligned
 * pointers (the kernel table declares align: 64); tail of up to two predicated vectors. */
#include <arm_sve.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t vb = svcntb(), step = 2 * vb, full = n - n % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += step) {
        svuint8_t a = svldnt1_u8(all, src + i), b = svldnt1_vnum_u8(all, src + i, 1);
        svstnt1_u8(all, dst + i, a);
        svstnt1_vnum_u8(all, dst + i, 1, b);
    }
    svbool_t p0 = svwhilelt_b8_u64(i, n), p1 = svwhilelt_b8_u64(i + vb, n);
    svuint8_t a = svldnt1_u8(p0, src + i), b = svldnt1_vnum_u8(p1, src + i, 1);
    svstnt1_u8(p0, dst + i, a);
    svstnt1_vnum_u8(p1, dst + i, 1, b);
}
