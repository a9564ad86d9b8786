/* buffer_is_zero, scalar: 8 bytes at a time, four words ORed per block and one test per
 * block (built with -fno-tree-vectorize so it stays scalar). */
#include "harness.h"
#include "zero.h"

HARNESS_KERNEL int buffer_is_zero(const uint8_t *buf, size_t len)
{
    if (len < 8)
        return zero_bytes(buf, len);
    if (zero_early_nonzero(buf, len))
        return 0;
    size_t i = 0;
    for (; i + 32 <= len; i += 32)
        if (zero_load64(buf + i) | zero_load64(buf + i + 8) | zero_load64(buf + i + 16) | zero_load64(buf + i + 24))
            return 0;
    /* Fewer than 32 bytes left: whole words, then the last word (overlapping) covers the rest. */
    uint64_t t = zero_load64(buf + len - 8);
    for (; i + 8 <= len; i += 8)
        t |= zero_load64(buf + i);
    return t == 0;
}
