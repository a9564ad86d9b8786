/* The plain loop: 8 bytes per iteration through a scalar register, then the last bytes one
 * by one (the table keeps the compiler from vectorizing it or turning it into memcpy). */
#include <string.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, src + i, 8);
        __builtin_memcpy(dst + i, &w, 8);
    }
    for (; i < n; i++)
        dst[i] = src[i];
}
