/* Stock Open MPI pack (paper Fig. 9, "stock"): MPI_Pack of one MPI_Type_vector(count,
 * blocklen, stride) through the library's datatype engine. The type is built and freed
 * inside the ROI; its cost does not depend on count, so the size-0 baseline removes it. */
#include <mpi.h>

#include "mpi_vector.h"
#include "../vector/vector.h"

const char vector_kernel_dir[] = "pack";

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    MPI_Datatype type = mpi_vector_type(count, blocklen, stride, esize);
    int pos = 0;
    MPI_Pack(unpacked, 1, type, packed, mpi_vector_int(count * blocklen * esize), &pos,
             MPI_COMM_SELF);
    MPI_Type_free(&type);
}
