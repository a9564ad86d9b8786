/* SVE copy for aligned pointers (the kernel table declares align: 64): whole vectors under an
 * all-true predicate (no whilelo per iteration), then one predicated vector for the tail. */
#include <arm_sve.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t vb = svcntb(), full = n - n % vb;
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; i < full; i += vb)
        svst1_u8(all, dst + i, svld1_u8(all, src + i));
    svbool_t pg = svwhilelt_b8_u64(i, n);
    svst1_u8(pg, dst + i, svld1_u8(pg, src + i));
}
