/* The MPI_Type_vector of the count sweep's vector family (kernels/vector/vector.h layout:
 * `count` blocks of `blocklen` elements of `esize` bytes, block k at element k*stride), as
 * the stock Open MPI rows hand it to the library. */
#ifndef MPI_VECTOR_H
#define MPI_VECTOR_H
#include <limits.h>
#include <mpi.h>
#include <stddef.h>

#include "harness.h"

/* MPI counts are int: refuse (exit 2) what does not fit rather than truncate. */
static inline int mpi_vector_int(size_t v)
{
    if (v > INT_MAX)
        harness_usage_error("%zu does not fit an MPI count (int)", v);
    return (int)v;
}

/* MPI_Type_vector(count, blocklen, stride) of MPI_FLOAT (esize 4) or MPI_DOUBLE (8),
 * committed; the caller frees it. */
static inline MPI_Datatype mpi_vector_type(size_t count, size_t blocklen, size_t stride,
                                           size_t esize)
{
    MPI_Datatype t;
    MPI_Type_vector(mpi_vector_int(count), mpi_vector_int(blocklen), mpi_vector_int(stride),
                    esize == 4 ? MPI_FLOAT : MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

#endif
