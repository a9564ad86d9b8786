/* Template for bringing your own kernel: one C file with main(), nothing else to edit but
 * one row in a kernel table (see README "Your own kernel"). Copy it, replace scale_kernel
 * and the reference, keep the five steps of main().
 *
 * The example scales a float array, y[i] = a * x[i], with one SVE vector per iteration;
 * `size` is the bytes of x (a multiple of 4). */
#include <arm_sve.h>
#include <string.h>

#include "harness.h"

/* The kernel: what the counts measure. HARNESS_KERNEL keeps it out of main() so that the
 * ROI names it and `./harness explain` can show its loop. */
HARNESS_KERNEL void scale_kernel(float *restrict y, const float *restrict x, float a, size_t n)
{
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32_u64(i, n);
        svst1_f32(pg, y + i, svmul_n_f32_x(pg, svld1_f32(pg, x + i), a));
    }
}

/* The scalar reference the result is checked against (never vectorized). */
static HARNESS_SCALAR void scale_reference(float *y, const float *x, float a, size_t n)
{
    HARNESS_NOVEC_LOOP
    for (size_t i = 0; i < n; i++)
        y[i] = a * x[i];
}

int main(int argc, char **argv)
{
    /* 1. Arguments `<vl_bits> <size> [key=value ...]` and the VL check (exit 2 / 3). List
     *    the key=value parameters your kernel takes; this one takes none. */
    static const char *const keys[] = {NULL};
    harness_init(argc, argv, keys);
    size_t size = harness_size();
    if (size % sizeof(float))
        harness_usage_error("size %zu is not a multiple of %zu", size, sizeof(float));
    size_t n = size / sizeof(float);

    /* 2. Inputs, filled deterministically outside the ROI. */
    float *x = harness_alloc(size, 64), *y = harness_alloc(size, 64), *want = harness_alloc(size, 64);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(harness_hash(i) % 1000) / 8.0f;
    const float a = 1.5f;

    /* 3. The kernel between the markers: only this is counted as ROI. */
    roi_begin();
    scale_kernel(y, x, a, n);
    roi_end();

    /* 4. Verification against the scalar reference, outside the ROI (exit 1 on mismatch). */
    scale_reference(want, x, a, n);
    if (memcmp(y, want, size) != 0)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&y[i], &want[i], sizeof(float)) != 0)
                harness_fail("y at index %zu: got %a expected %a", i, (double)y[i], (double)want[i]);

    /* 5. One line on stdout: the VL seen, the size and a checksum of the output. */
    harness_ok(harness_fnv1a(y, size));
}
