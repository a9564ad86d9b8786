/* x86-64 copy: copy_avx2 (x86_copies.h). */
#include "x86_copies.h"

X86_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    copy_avx2(dst, src, n);
}
