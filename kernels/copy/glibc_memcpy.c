/* The copy through the C library's memcpy (glibc picks its implementation by IFUNC at run
 * time), to compare the library against the compiled and hand-written loops. The length is
 * only known at run time, so the compiler keeps a real call. A kernel table row with
 * `memcpy: <variant>` builds this same source to call that glibc variant directly. */
#include <string.h>

#include "copy.h"
#include "harness.h"

void copy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    HARNESS_MEMCPY(dst, src, n);
}
