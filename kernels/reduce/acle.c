/* The reduction written with ACLE SVE intrinsics (the paper's SVE reduction): one predicated
 * loop per op x dtype, whilelo-controlled, no scalar tail. Float MAX/MIN use compare + select,
 * not FMAX/FMIN, so NaN and +0/-0 come out bit-identical to the C macro in ops.h. */
#include <arm_sve.h>

#include "ops.h"

/* Element width in bits and kind (F: floating point, I: integer) of each dtype name. */
#define BITS_float 32
#define BITS_double 64
#define BITS_int8 8
#define BITS_int16 16
#define BITS_int32 32
#define BITS_int64 64
#define BITS_uint8 8
#define BITS_uint16 16
#define BITS_uint32 32
#define BITS_uint64 64
#define KIND_float F
#define KIND_double F
#define KIND_int8 I
#define KIND_int16 I
#define KIND_int32 I
#define KIND_int64 I
#define KIND_uint8 I
#define KIND_uint16 I
#define KIND_uint32 I
#define KIND_uint64 I

#define CNT_8 svcntb
#define CNT_16 svcnth
#define CNT_32 svcntw
#define CNT_64 svcntd
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define WHILE(bits) CAT(svwhilelt_b, bits)
#define PTRUE(bits) CAT(svptrue_b, bits)
#define CNT(bits) CAT(CNT_, bits)

/* new inout = op(inout b, in a), as ops.h. */
#define VOP_max_F(pg, b, a) svsel(svcmpgt(pg, b, a), b, a)
#define VOP_min_F(pg, b, a) svsel(svcmplt(pg, b, a), b, a)
#define VOP_sum_F(pg, b, a) svadd_x(pg, b, a)
#define VOP_prod_F(pg, b, a) svmul_x(pg, b, a)
#define VOP_max_I(pg, b, a) svmax_x(pg, b, a)
#define VOP_min_I(pg, b, a) svmin_x(pg, b, a)
#define VOP_sum_I(pg, b, a) svadd_x(pg, b, a)
#define VOP_prod_I(pg, b, a) svmul_x(pg, b, a)
#define VOP_band_I(pg, b, a) svand_x(pg, b, a)
#define VOP_bor_I(pg, b, a) svorr_x(pg, b, a)
#define VOP_bxor_I(pg, b, a) sveor_x(pg, b, a)
#define VOP_(op, kind) VOP_##op##_##kind
#define VOP(op, kind) VOP_(op, kind)

#define DEFINE_LOOP(op, dname, T)                                                     \
    static void acle_##op##_##dname(const void *in, void *inout, size_t count)        \
    {                                                                                 \
        const T *a = in;                                                              \
        T *b = inout;                                                                 \
        size_t i = 0;                                                                 \
        svbool_t pg = WHILE(BITS_##dname)(i, count);                                  \
        while (svptest_first(PTRUE(BITS_##dname)(), pg)) { /* whilelo sets the flags */ \
            svst1(pg, b + i,                                                          \
                  VOP(op, KIND_##dname)(pg, svld1(pg, b + i), svld1(pg, a + i)));     \
            i += CNT(BITS_##dname)();                                                 \
            pg = WHILE(BITS_##dname)(i, count);                                       \
        }                                                                             \
    }
REDUCE_MATRIX(DEFINE_LOOP)

#define ENTRY(op, dname, T) REDUCE_ENTRY_(acle, op, dname, T)
REDUCE_DEFINE_TABLE(ENTRY)
