/* The reduce driver's scalar reference of every op x dtype (reference.h): the C macro, never
 * vectorized with SVE, so its object is the same bytes in every SVE build and is compiled once
 * per compiler (the family's vl_agnostic_sources in configs/kernels.yaml). It was most of the
 * driver's compile: 66 functions, about 0.6 of GCC's 0.85 CPU s for the driver. */
#include "harness.h"
#include "reference.h"

/* GCC may use Advanced SIMD: see HARNESS_REFERENCE. */
#define DEFINE_REF(op, dname, T)                                                        \
    HARNESS_REFERENCE void ref_##op##_##dname(const void *in, void *inout, size_t n)    \
    {                                                                                   \
        const T *a = in;                                                                \
        T *b = inout;                                                                   \
        if (harness_prep_begin(b, n * sizeof(T), NULL, 0)) {                            \
            HARNESS_REFERENCE_LOOP                                                      \
            for (size_t i = 0; i < n; i++)                                              \
                REDUCE_STEP_##op(b[i], a[i]);                                           \
        }                                                                               \
        harness_prep_end();                                                             \
    }
REDUCE_MATRIX(DEFINE_REF)
