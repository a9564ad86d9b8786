/* The two building blocks of Algorithm 1 shared by pack_acle.c and unpack_acle.c:
 * the contiguous multi-vector copy of one long block, and the offset vector that maps the
 * lanes of one vector onto whole small blocks (built once per call with svindex). */
#ifndef ACLE_BLOCKS_H
#define ACLE_BLOCKS_H
#include <arm_sve.h>
#include <stddef.h>
#include <stdint.h>

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
 * blocklen) of the strided buffer. */
static inline svuint32_t acle_offsets_u32(uint32_t blocklen, uint32_t stride)
{
    const svbool_t all = svptrue_b32();
    svuint32_t lane = svindex_u32(0, 1);
    svuint32_t block = svdiv_n_u32_x(all, lane, blocklen);
    return svmla_n_u32_x(all, lane, block, stride - blocklen);
}

static inline svuint64_t acle_offsets_u64(uint64_t blocklen, uint64_t stride)
{
    const svbool_t all = svptrue_b64();
    svuint64_t lane = svindex_u64(0, 1);
    svuint64_t block = svdiv_n_u64_x(all, lane, blocklen);
    return svmla_n_u64_x(all, lane, block, stride - blocklen);
}

#endif
