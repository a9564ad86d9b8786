/* MPI_Reduce_local rows (paper Fig. 10) around the unchanged count-sweep reduce driver:
 * that driver is compiled for them with reduce_kernels renamed to mpi_reduce_kernels (the
 * family's cflags), and each row defines that table, one entry per op x dtype of
 * REDUCE_MATRIX, whose function calls MPI_Reduce_local. */
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

#endif
