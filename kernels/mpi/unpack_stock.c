/* Stock Open MPI unpack (paper Fig. 9, "stock"): MPI_Unpack into one MPI_Type_vector(count,
 * blocklen, stride) through the library's datatype engine; type built and freed in the ROI
 * (size-independent, removed by the size-0 baseline). */
#include <mpi.h>

#include "mpi_vector.h"
#include "../vector/vector.h"

const char vector_kernel_dir[] = "unpack";

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    MPI_Datatype type = mpi_vector_type(count, blocklen, stride, esize);
    int pos = 0;
    MPI_Unpack(packed, mpi_vector_int(count * blocklen * esize), &pos, unpacked, 1, type,
               MPI_COMM_SELF);
    MPI_Type_free(&type);
}
