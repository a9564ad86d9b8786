/* buffer_is_zero, SVE: four vectors ORed per block under an all-true predicate and one
 * compare-and-test per block; the tail (fewer than four vectors) is one predicated block
 * (zeroing loads: inactive lanes read as 0), so the kernel has exactly one loop:
 * floor(len / (4 x VL bytes)) iterations (the kernel table's expect: loop). */
#include <arm_sve.h>

#include "harness.h"
#include "zero.h"

HARNESS_KERNEL int buffer_is_zero(const uint8_t *buf, size_t len)
{
    if (len >= 8 && zero_early_nonzero(buf, len))
        return 0;
    const size_t vb = svcntb(), step = 4 * vb, full = len - len % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += step) {
        svuint8_t t = svorr_u8_x(all, svorr_u8_x(all, svld1_u8(all, buf + i), svld1_u8(all, buf + i + vb)),
                                 svorr_u8_x(all, svld1_u8(all, buf + i + 2 * vb), svld1_u8(all, buf + i + 3 * vb)));
        if (svptest_any(all, svcmpne_n_u8(all, t, 0)))
            return 0;
    }
    svuint8_t t = svorr_u8_x(all,
                             svorr_u8_x(all, svld1_u8(svwhilelt_b8_u64(i, len), buf + i),
                                        svld1_u8(svwhilelt_b8_u64(i + vb, len), buf + i + vb)),
                             svorr_u8_x(all, svld1_u8(svwhilelt_b8_u64(i + 2 * vb, len), buf + i + 2 * vb),
                                        svld1_u8(svwhilelt_b8_u64(i + 3 * vb, len), buf + i + 3 * vb)));
    return !svptest_any(all, svcmpne_n_u8(all, t, 0));
}
