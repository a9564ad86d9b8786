/* The copy through glibc: its memcpy (IFUNC-resolved; on the host, the host libc's), or with
 * the kernel table's `memcpy: <variant>` glibc's __memcpy_<variant> called directly
 * (HARNESS_MEMCPY, kernels/include/harness.h). */
#include <string.h>

#include "harness.h"
#include "memcpy.h"

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    HARNESS_MEMCPY(dst, src, n);
}
