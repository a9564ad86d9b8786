/* The unpack side of the paper's Fig. 9 measurement: MPI_Sendrecv on MPI_COMM_SELF from a
 * contiguous buffer into one MPI_Type_vector(count, blocklen, stride), so the library
 * unpacks it on the way (ob1 + self BTL). */
#include <mpi.h>

#include "mpi_vector.h"
#include "../vector/vector.h"

const char vector_kernel_dir[] = "unpack";

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    MPI_Datatype type = mpi_vector_type(count, blocklen, stride, esize);
    MPI_Sendrecv(packed, mpi_vector_int(count * blocklen * esize), MPI_BYTE, 0, 9, unpacked,
                 1, type, 0, 9, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Type_free(&type);
}
