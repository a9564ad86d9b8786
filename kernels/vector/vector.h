/* The one interface between the MPI_Type_vector driver and its pack/unpack kernels.
 * Layout: `count` blocks of `blocklen` elements of `esize` (4 or 8) bytes; block k starts
 * at element k*stride of the unpacked buffer and at element k*blocklen of the packed one. */
#ifndef VECTOR_H
#define VECTOR_H
#include <stddef.h>

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize);

/* "pack" or "unpack": which direction this kernel object implements, so the driver can
 * refuse a dir= parameter that does not match the binary. */
extern const char vector_kernel_dir[];

#endif
