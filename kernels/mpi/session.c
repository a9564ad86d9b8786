/* The MPI process around an unchanged count-sweep driver (kernels/vector/driver.c,
 * kernels/reduce/driver.c): MPI_Init runs before main() and MPI_Finalize at exit, so the
 * driver's arguments, fill, ROI and verification are those of the count sweep, and every
 * MPI row (stock library call or user kernel) runs in the same initialised MPI process.
 * Linked into every binary of a family declared `mpi: true` in configs/kernels.yaml.
 * Started as a singleton: the runner sets OMPI_MCA_ess_singleton_isolated=1 (without it
 * Open MPI tries to start an orted daemon, which fails under qemu-aarch64). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_session.h"

static void session_end(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

__attribute__((constructor(MPI_SESSION_PRIORITY))) static void session_begin(void)
{
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fputs("FAIL: MPI_Init failed (is OMPI_MCA_ess_singleton_isolated=1 set?)\n", stderr);
        exit(1);
    }
    atexit(session_end);
}
