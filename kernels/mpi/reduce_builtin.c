/* Stock Open MPI reduction (paper Fig. 10, "stock"): MPI_Reduce_local with the library's
 * built-in op (MPI_MAX, MPI_MIN, ...), one entry per op x dtype of the kernel table.
 * Open MPI 4.1 has no aarch64 op component: its built-in ops are plain C loops. */
#include "mpi_reduce.h"

#define MPI_OP_max MPI_MAX
#define MPI_OP_min MPI_MIN
#define MPI_OP_sum MPI_SUM
#define MPI_OP_prod MPI_PROD
#define MPI_OP_band MPI_BAND
#define MPI_OP_bor MPI_BOR
#define MPI_OP_bxor MPI_BXOR

#define MPI_REDUCE_OP(op, dname) MPI_OP_##op
MPI_REDUCE_DEFINE_TABLE
