/* The reduction semantics every reduce variant must reproduce bit for bit: Open MPI's C op
 * macros (ompi/mca/op/base/op_base_functions.c), applied as inout[i] = op(inout[i], in[i]),
 * and the table entry type through which the driver finds a variant's op x dtype function.
 * The op x dtype list itself is REDUCE_MATRIX(X) from the generated reduce_matrix.h
 * (configs/kernels.yaml): X(op, dtype name, C type). */
#ifndef REDUCE_OPS_H
#define REDUCE_OPS_H
#include <stddef.h>
#include <stdint.h>

#include "reduce_matrix.h"

/* Open MPI: FUNC_FUNC ops compute *(b) = current_func(*(b), *(a)), OP_FUNC ops *(b) op= *(a),
 * with b = inout and a = in. A NaN on either side of MAX/MIN yields in (comparison false). */
#define REDUCE_FUNC_max(a, b) ((a) > (b) ? (a) : (b))
#define REDUCE_FUNC_min(a, b) ((a) < (b) ? (a) : (b))

#define REDUCE_STEP_max(b, a) ((b) = REDUCE_FUNC_max((b), (a)))
#define REDUCE_STEP_min(b, a) ((b) = REDUCE_FUNC_min((b), (a)))
#define REDUCE_STEP_sum(b, a) ((b) += (a))
#define REDUCE_STEP_prod(b, a) ((b) *= (a))
#define REDUCE_STEP_band(b, a) ((b) &= (a))
#define REDUCE_STEP_bor(b, a) ((b) |= (a))
#define REDUCE_STEP_bxor(b, a) ((b) ^= (a))

typedef void (*reduce_fn)(const void *in, void *inout, size_t count);

struct reduce_entry {
    const char *op;
    const char *dtype;
    size_t esize;
    reduce_fn fn;
};

/* Defined by each variant object: one entry per X of REDUCE_MATRIX, in that order. */
extern const struct reduce_entry reduce_kernels[];
extern const size_t reduce_kernels_count;

/* Define `const struct reduce_entry reduce_kernels[]` and its count from functions named
 * PREFIX_<op>_<dtype>, which the variant has defined with the same X-macro. */
#define REDUCE_ENTRY_(prefix, op, dname, T) {#op, #dname, sizeof(T), prefix##_##op##_##dname},
#define REDUCE_DEFINE_TABLE(X_ENTRY)                                                  \
    const struct reduce_entry reduce_kernels[] = {REDUCE_MATRIX(X_ENTRY)};           \
    const size_t reduce_kernels_count = sizeof reduce_kernels / sizeof reduce_kernels[0];

#endif
