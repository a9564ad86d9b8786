/* Copy family driver (paper Fig. 2): runs whichever copy_kernel it is linked with on
 * aligned buffers between the ROI markers, then proves the copy byte for byte. */
#include "copy.h"
#include "harness.h"

/* Set-up and checks, outside the ROI: kept off SVE, which QEMU emulates slower (harness.h). The
 * code around the kernel call is the same either way, for both compilers and every build. */
HARNESS_NO_SVE int main(int argc, char **argv)
{
    static const char *const keys[] = {NULL};
    harness_init(argc, argv, keys);
    size_t n = harness_size();

    uint8_t *src = harness_alloc(n, 64);
    uint8_t *dst = harness_alloc(n, 64);
    harness_fill_bytes(src, n, 0x636f7079u);
    for (size_t i = 0; i < n; i++)   /* poison: every byte differs from what is expected */
        dst[i] = (uint8_t)~src[i];

    HARNESS_ROI((void)0, copy_kernel(dst, src, n));

    size_t i = harness_first_mismatch(dst, src, n);
    if (i < n)
        harness_fail("dst at index %zu: got 0x%02x expected 0x%02x", i, dst[i], src[i]);
    harness_ok(harness_fnv1a(dst, n));
}
