/* Hand-written SVE copy, one vector per iteration: the reference point for what the
 * compiler makes of the C loop, and the 4x baseline of the four-vector copy. */
#include <arm_sve.h>

#include "copy.h"

void copy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    svbool_t pg = svwhilelt_b8_u64(i, n);
    while (svptest_first(svptrue_b8(), pg)) {   /* whilelo sets the flags: b.first */
        svst1_u8(pg, dst + i, svld1_u8(pg, src + i));
        i += svcntb();
        pg = svwhilelt_b8_u64(i, n);
    }
}
