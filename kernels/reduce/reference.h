/* The reduce driver's scalar references (reference.c), one per op x dtype of REDUCE_MATRIX:
 * ref_<op>_<dtype>(in, inout, n) reduces `in` into `inout` with the C macro of ops.h. Hidden:
 * GCC then keeps the driver's table of them where it kept the table of its own static
 * references, and main()'s code around the kernel call (inside the ROI) instruction for
 * instruction as it was. */
#ifndef REDUCE_REFERENCE_H
#define REDUCE_REFERENCE_H
#include "ops.h"

#define REDUCE_DECLARE_REF(op, dname, T) \
    __attribute__((visibility("hidden"))) void ref_##op##_##dname(const void *in, void *inout, size_t n);
REDUCE_MATRIX(REDUCE_DECLARE_REF)

#endif
