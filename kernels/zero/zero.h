/* The one interface between the buffer_is_zero driver and its interchangeable kernels:
 * 1 when the len bytes at buf are all zero, else 0. Every variant first tests the first,
 * middle and last 8-byte words (a non-zero byte is most often near one of them, so most
 * non-zero buffers leave at once), then ORs blocks together and tests once per block, as
 * QEMU's own util/bufferiszero.c does. */
#ifndef ZERO_H
#define ZERO_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

int buffer_is_zero(const uint8_t *buf, size_t len);

/* An unaligned 8-byte load (one ldr). */
static inline uint64_t zero_load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* A buffer too short for the variant's blocks: byte by byte. */
static inline int zero_bytes(const uint8_t *buf, size_t len)
{
    uint8_t t = 0;
    for (size_t i = 0; i < len; i++)
        t |= buf[i];
    return t == 0;
}

/* The cheap early test: 1 when the first, middle or last word is non-zero (len >= 8). */
static inline int zero_early_nonzero(const uint8_t *buf, size_t len)
{
    return (zero_load64(buf) | zero_load64(buf + ((len / 2) & ~(size_t)7)) | zero_load64(buf + len - 8)) != 0;
}

#endif
