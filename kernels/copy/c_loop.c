/* The copy as a plain C byte loop, so the compiler decides the code: with the table's flags
 * (no memcpy pattern replacement) it is the compiler-vectorized copy the paper calls
 * memcpy (c_vec); with vectorization also off it is the scalar copy (c_scalar). */
#include "copy.h"

void copy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}
