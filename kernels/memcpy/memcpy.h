/* The one interface between the memcpy family's driver and its interchangeable copies. */
#ifndef MEMCPY_H
#define MEMCPY_H
#include <stddef.h>
#include <stdint.h>

void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n);

#endif
