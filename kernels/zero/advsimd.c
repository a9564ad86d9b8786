/* buffer_is_zero, Advanced SIMD: four 16-byte vectors ORed per 64-byte block, one umaxv test
 * per block; the last block is loaded overlapping the end, so there is no tail loop. */
#include <arm_neon.h>

#include "harness.h"
#include "zero.h"

static inline uint8x16_t or4(const uint8_t *p)
{
    return vorrq_u8(vorrq_u8(vld1q_u8(p), vld1q_u8(p + 16)), vorrq_u8(vld1q_u8(p + 32), vld1q_u8(p + 48)));
}

HARNESS_KERNEL int buffer_is_zero(const uint8_t *buf, size_t len)
{
    if (len < 64)
        return zero_bytes(buf, len);
    if (zero_early_nonzero(buf, len))
        return 0;
    for (size_t i = 0; i + 64 <= len; i += 64)
        if (vmaxvq_u8(or4(buf + i)))
            return 0;
    return vmaxvq_u8(or4(buf + len - 64)) == 0;
}
