/* The element-wise reduction exactly as Open MPI's C loop (one function per op x dtype from
 * the ops.h macros), left to the compiler: as built it is the auto-vectorized baseline of
 * the paper (c_autovec); with vectorization off it is the scalar variant (c_scalar). */
#include "ops.h"

#define DEFINE_LOOP(op, dname, T)                                                   \
    static void elementwise_##op##_##dname(const void *in, void *inout, size_t count) \
    {                                                                               \
        const T *a = in;                                                            \
        T *b = inout;                                                               \
        for (size_t i = 0; i < count; i++)                                          \
            REDUCE_STEP_##op(b[i], a[i]);                                           \
    }
REDUCE_MATRIX(DEFINE_LOOP)

#define ENTRY(op, dname, T) REDUCE_ENTRY_(elementwise, op, dname, T)
REDUCE_DEFINE_TABLE(ENTRY)
