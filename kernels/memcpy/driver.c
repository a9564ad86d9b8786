/* memcpy family driver: copies `size` bytes from src + src_offset to dst + dst_offset (both
 * buffers page aligned), then proves the copy byte for byte and that nothing past dst + size
 * was written (a tail must stop at the size, whatever the unroll width).
 *
 * `align` is the alignment the variant declares in the kernel table: a variant that requires
 * aligned pointers refuses misaligned ones here, before the ROI, with a usage error (exit 2)
 * naming the fix, instead of copying at a cost it was not written for. */
#include <inttypes.h>

#include "harness.h"
#include "memcpy.h"

#define GUARD 256   /* bytes past the end of dst that must stay untouched */
#define POISON 0xa5

/* Set-up and checks, outside the ROI: kept off SVE, which QEMU emulates slower (harness.h). The
 * code around the kernel call is the same either way, for both compilers and every build. */
HARNESS_NO_SVE int main(int argc, char **argv)
{
    static const char *const keys[] = {"align", "src_offset", "dst_offset", NULL};
    harness_init(argc, argv, keys);
    size_t n = harness_size(), align = harness_param_size("align");
    size_t soff = harness_param_size("src_offset"), doff = harness_param_size("dst_offset");
    if (align == 0 || (align & (align - 1)) || align > HARNESS_PAGE)
        harness_usage_error("align=%zu: the kernel table's align must be a power of two from 1 to %u", align, HARNESS_PAGE);
    if (soff >= HARNESS_PAGE || doff >= HARNESS_PAGE)
        harness_usage_error("src_offset=%zu dst_offset=%zu: offsets are below %u", soff, doff, HARNESS_PAGE);

    uint8_t *src = (uint8_t *)harness_alloc(n + HARNESS_PAGE, HARNESS_PAGE) + soff;
    uint8_t *dst = (uint8_t *)harness_alloc(n + HARNESS_PAGE + GUARD, HARNESS_PAGE) + doff;
    if ((uintptr_t)src % align || (uintptr_t)dst % align)
        harness_usage_error("this variant requires %zu-byte aligned pointers (kernel table: align: %zu), but src is %" PRIuPTR
                            " and dst %" PRIuPTR " bytes past a %zu-byte boundary (src_offset=%zu dst_offset=%zu): use offsets "
                            "that are multiples of %zu, or a variant declared with align: 1",
                            align, align, (uintptr_t)src % align, (uintptr_t)dst % align, align, soff, doff, align);
    harness_fill_bytes(src, n, 0x6d656d63u);
    for (size_t i = 0; i < n; i++)   /* poison: every copied byte must change */
        dst[i] = (uint8_t)~src[i];
    for (size_t g = n; g < n + GUARD; g++)   /* src past its end reads 0: a write there shows */
        dst[g] = POISON;

    HARNESS_ROI((void)0, memcpy_kernel(dst, src, n));

    size_t i = harness_first_mismatch(dst, src, n);
    if (i < n)
        harness_fail("dst at index %zu of %zu: got 0x%02x expected 0x%02x", i, n, dst[i], src[i]);
    for (size_t g = n; g < n + GUARD; g++)
        if (dst[g] != POISON)
            harness_fail("wrote past the end: dst[%zu] changed (size %zu)", g, n);
    harness_ok(harness_fnv1a(dst, n));
}
