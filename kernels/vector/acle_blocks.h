/* The two building blocks of Algorithm 1 shared by pack_acle.c and unpack_acle.c:
 * the contiguous multi-vector copy of one long block, and the offset vector that maps the
 * lanes of one vector onto whole small blocks (built once per call with svindex). */
#ifndef ACLE_BLOCKS_H
#define ACLE_BLOCKS_H
#include <arm_sve.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* One block of n bytes: four vectors per svld4/svst4 (as the paper's copy, Listing 1),
 * then at most four one-vector predicated steps. */
static inline void acle_copy_block(uint8_t *restrict d, const uint8_t *restrict s, size_t n)
{
    const size_t vl = svcntb();
    const svbool_t all = svptrue_b8();
    size_t i = 0;
    for (; n - i >= 4 * vl; i += 4 * vl)
        svst4_u8(all, d + i, svld4_u8(all, s + i));
    for (; i < n; i += vl) {
        svbool_t pg = svwhilelt_b8_u64(i, n);
        svst1_u8(pg, d + i, svld1_u8(pg, s + i));
    }
}

/* Lane l (l < nb*blocklen) holds element l % blocklen of block l / blocklen, which sits at
 * element offset (l / blocklen) * stride + l % blocklen = l + (l / blocklen) * (stride -
 * blocklen) of the strided buffer. For blocklen 1 (the paper's case) that is svindex(0,
 * stride). Otherwise the offsets are built once per call in scalar code and loaded: the
 * vector form (svdiv + svmla, i.e. UDIVR and MAD) is miscomputed by gem5 v24.0.0.1 (README,
 * "gem5"), and it is not in the hot loop. */
static HARNESS_SCALAR void acle_offsets_table(void *out, size_t lanes, size_t esize, uint64_t blocklen,
                                              uint64_t stride)
{
    HARNESS_NOVEC_LOOP
    for (uint64_t l = 0; l < lanes; l++) {
        uint64_t v = l + (l / blocklen) * (stride - blocklen);
        if (esize == 4)
            ((uint32_t *)out)[l] = (uint32_t)v;
        else
            ((uint64_t *)out)[l] = v;
    }
}

static inline svuint32_t acle_offsets_u32(uint32_t blocklen, uint32_t stride)
{
    if (blocklen == 1)
        return svindex_u32(0, stride);
    uint32_t table[2048 / 32];
    acle_offsets_table(table, svcntw(), 4, blocklen, stride);
    return svld1_u32(svptrue_b32(), table);
}

static inline svuint64_t acle_offsets_u64(uint64_t blocklen, uint64_t stride)
{
    if (blocklen == 1)
        return svindex_u64(0, stride);
    uint64_t table[2048 / 64];
    acle_offsets_table(table, svcntd(), 8, blocklen, stride);
    return svld1_u64(svptrue_b64(), table);
}

#endif
