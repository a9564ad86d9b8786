/* The paper's measurement of Fig. 9: the message sent by the process to itself,
 * MPI_Sendrecv on MPI_COMM_SELF from one MPI_Type_vector(count, blocklen, stride) into a
 * contiguous buffer, so the library packs it on the way (ob1 + self BTL). */
#include <mpi.h>

#include "mpi_vector.h"
#include "../vector/vector.h"

const char vector_kernel_dir[] = "pack";

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    MPI_Datatype type = mpi_vector_type(count, blocklen, stride, esize);
    MPI_Sendrecv(unpacked, 1, type, 0, 9, packed, mpi_vector_int(count * blocklen * esize),
                 MPI_BYTE, 0, 9, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Type_free(&type);
}
