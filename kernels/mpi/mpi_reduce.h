/* MPI_Reduce_local rows (paper Fig. 10) around the unchanged count-sweep reduce driver:
 * that driver is compiled for them with reduce_kernels renamed to mpi_reduce_kernels (the
 * family's cflags), and each row defines that table (MPI_REDUCE_DEFINE_TABLE below), one
 * entry per op x dtype of REDUCE_MATRIX, whose function calls MPI_Reduce_local. */
#ifndef MPI_REDUCE_H
#define MPI_REDUCE_H
#include <limits.h>
#include <mpi.h>

#include "../reduce/ops.h"
#include "harness.h"

extern const struct reduce_entry mpi_reduce_kernels[];
extern const size_t mpi_reduce_kernels_count;

/* The MPI datatype of each dtype name of the kernel table. */
#define MPI_TYPE_float MPI_FLOAT
#define MPI_TYPE_double MPI_DOUBLE
#define MPI_TYPE_int8 MPI_INT8_T
#define MPI_TYPE_int16 MPI_INT16_T
#define MPI_TYPE_int32 MPI_INT32_T
#define MPI_TYPE_int64 MPI_INT64_T
#define MPI_TYPE_uint8 MPI_UINT8_T
#define MPI_TYPE_uint16 MPI_UINT16_T
#define MPI_TYPE_uint32 MPI_UINT32_T
#define MPI_TYPE_uint64 MPI_UINT64_T

/* MPI counts are int: refuse (exit 2) what does not fit rather than truncate. */
static inline int mpi_reduce_count(size_t n)
{
    if (n > (size_t)INT_MAX)
        harness_usage_error("%zu elements do not fit an MPI count (int)", n);
    return (int)n;
}

/* A row's source defines MPI_REDUCE_OP(op, dname), the MPI_Op of each entry, then expands
 * MPI_REDUCE_DEFINE_TABLE: per entry a function mpi_reduce_<op>_<dtype> that calls
 * MPI_Reduce_local with that op, and the mpi_reduce_kernels table the driver reads. */
#define MPI_REDUCE_CALL(op, dname, T)                                                         \
    static void mpi_reduce_##op##_##dname(const void *in, void *inout, size_t count)         \
    {                                                                                         \
        MPI_Reduce_local(in, inout, mpi_reduce_count(count), MPI_TYPE_##dname,                \
                         MPI_REDUCE_OP(op, dname));                                           \
    }
#define MPI_REDUCE_ENTRY(op, dname, T) {#op, #dname, sizeof(T), mpi_reduce_##op##_##dname},
#define MPI_REDUCE_DEFINE_TABLE                                                               \
    REDUCE_MATRIX(MPI_REDUCE_CALL)                                                            \
    const struct reduce_entry mpi_reduce_kernels[] = {REDUCE_MATRIX(MPI_REDUCE_ENTRY)};       \
    const size_t mpi_reduce_kernels_count = sizeof mpi_reduce_kernels / sizeof mpi_reduce_kernels[0];

#endif
