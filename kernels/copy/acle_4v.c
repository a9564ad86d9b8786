/* The paper's copy (Listing 1): svld4/svst4 move four vectors per instruction, so the loop
 * runs a quarter of the iterations of a one-vector copy. The main loop uses an all-true
 * predicate (no whilelo per iteration); the last partial 4-vector chunk is one predicated
 * ld4b/st4b over whole 4-byte structures plus at most 3 bytes with ld1b/st1b. */
#include <arm_sve.h>

#include "copy.h"

void copy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    const size_t step = 4 * svcntb();
    const size_t full = n - n % step;
    const svbool_t all = svptrue_b8();
    size_t i = 0;

    for (; i < full; i += step)
        svst4_u8(all, dst + i, svld4_u8(all, src + i));

    /* Tail: structures j in [i/4, n/4), then bytes in [n & ~3, n). */
    svbool_t pg = svwhilelt_b8_u64(i / 4, n / 4);
    svst4_u8(pg, dst + i, svld4_u8(pg, src + i));
    size_t b = n & ~(size_t)3;
    pg = svwhilelt_b8_u64(b, n);
    svst1_u8(pg, dst + b, svld1_u8(pg, src + b));
}
