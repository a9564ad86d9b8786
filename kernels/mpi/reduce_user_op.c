/* A kernel of the count sweep as an MPI user-defined op (paper Fig. 10, SVE and scalar
 * lines): for every op x dtype, MPI_Op_create (before main, outside the ROI) wraps the entry
 * of the linked kernel object's reduce_kernels table (kernels/reduce/acle.c or
 * elementwise.c, unchanged), and the ROI runs MPI_Reduce_local with that op. The ROI thus
 * holds the count sweep's kernel plus the library's call overhead, nothing else. */
#include "mpi_reduce.h"
#include "mpi_session.h"

/* Entries numbered in REDUCE_MATRIX order, the order of every reduce_kernels table. */
enum {
#define INDEX(op, dname, T) USER_INDEX_##op##_##dname,
    REDUCE_MATRIX(INDEX)
#undef INDEX
    USER_COUNT
};

/* The MPI_User_function of each entry: the kernel takes (in, inout, count) as the library
 * passes them. */
#define DEFINE_USER_FN(op, dname, T)                                                         \
    static void user_fn_##op##_##dname(void *in, void *inout, int *len, MPI_Datatype *type) \
    {                                                                                        \
        (void)type;                                                                          \
        reduce_kernels[USER_INDEX_##op##_##dname].fn(in, inout, (size_t)*len);              \
    }
REDUCE_MATRIX(DEFINE_USER_FN)

static MPI_Op user_ops[USER_COUNT];

__attribute__((constructor(MPI_SESSION_AFTER_INIT))) static void create_ops(void)
{
#define CREATE(op, dname, T)                                                          \
    MPI_Op_create(user_fn_##op##_##dname, 1, &user_ops[USER_INDEX_##op##_##dname]);
    REDUCE_MATRIX(CREATE)
#undef CREATE
}

#define MPI_REDUCE_OP(op, dname) user_ops[USER_INDEX_##op##_##dname]
MPI_REDUCE_DEFINE_TABLE
