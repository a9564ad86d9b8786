/* The per-block unpack loop written inline, element by element, so the compiler sees the
 * whole strided access and decides the code itself (the "compiler-vectorized" variant next
 * to the Open MPI-style blocks_call). One-element blocks, the paper's case, get their own
 * call with a constant block length, so the inner loop disappears and GCC 12 vectorizes
 * across blocks with scatter stores; longer blocks are left as the plain nested loop (GCC 12
 * turns its inner loop into a memcpy call per block). */
#include <stdint.h>

#include "vector.h"

const char vector_kernel_dir[] = "unpack";

#define DEFINE_UNPACK(T)                                                                  \
    static inline void unpack_##T(const T *restrict p, T *restrict u, size_t count,     \
                                  size_t blocklen, size_t stride)                       \
    {                                                                                   \
        for (size_t k = 0; k < count; k++)                                              \
            for (size_t e = 0; e < blocklen; e++)                                       \
                u[k * stride + e] = p[k * blocklen + e];                                \
    }
DEFINE_UNPACK(uint32_t)
DEFINE_UNPACK(uint64_t)

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    if (esize == 4) {
        if (blocklen == 1)
            unpack_uint32_t(packed, unpacked, count, 1, stride);
        else
            unpack_uint32_t(packed, unpacked, count, blocklen, stride);
    } else {
        if (blocklen == 1)
            unpack_uint64_t(packed, unpacked, count, 1, stride);
        else
            unpack_uint64_t(packed, unpacked, count, blocklen, stride);
    }
}
