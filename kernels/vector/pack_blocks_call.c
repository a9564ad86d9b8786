/* Pack the way Open MPI's datatype engine does it (the paper's stock baseline): one call
 * per block to a copy routine that is neither inlined nor cloned, so the compiler cannot
 * vectorize across blocks and the instruction count stays flat across VLs. Which memcpy
 * the routine calls is the kernel table's `memcpy` field (glibc's IFUNC choice by default). */
#include <string.h>

#include "harness.h"
#include "vector.h"

const char vector_kernel_dir[] = "pack";

static HARNESS_NOIPA void copy_block(void *restrict d, const void *restrict s, size_t len)
{
    HARNESS_MEMCPY(d, s, len);
}

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    unsigned char *dst = packed;
    const unsigned char *src = unpacked;
    size_t blen = blocklen * esize, sbytes = stride * esize;

    for (size_t k = 0; k < count; k++)
        copy_block(dst + k * blen, src + k * sbytes, blen);
}
