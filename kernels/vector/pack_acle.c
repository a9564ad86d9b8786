/* The paper's SVE pack of MPI_Type_vector (Algorithm 1): blocks of at least one vector are
 * copied block by block with multi-vector contiguous copies; smaller blocks are gathered
 * floor(VL/blocklen) whole blocks at a time with one gather load + one contiguous store,
 * through an offset vector built once. */
#include "acle_blocks.h"
#include "vector.h"

const char vector_kernel_dir[] = "pack";

static void pack_large(uint8_t *restrict p, const uint8_t *restrict u, size_t count,
                       size_t blen, size_t sbytes)
{
    for (size_t k = 0; k < count; k++)
        acle_copy_block(p + k * blen, u + k * sbytes, blen);
}

static void pack_small_u32(uint32_t *restrict p, const uint32_t *restrict u, size_t count,
                           size_t blocklen, size_t stride)
{
    const size_t nb = svcntw() / blocklen;          /* whole blocks per vector */
    const svuint32_t idx = acle_offsets_u32((uint32_t)blocklen, (uint32_t)stride);
    const svbool_t pm = svwhilelt_b32_u64(0, nb * blocklen);
    const size_t pstep = nb * blocklen, ustep = nb * stride;
    const uint32_t *const uend = u + count / nb * ustep;

    for (; u != uend; u += ustep, p += pstep)
        svst1_u32(pm, p, svld1_gather_u32index_u32(pm, u, idx));
    svbool_t pg = svwhilelt_b32_u64(0, count % nb * blocklen);
    svst1_u32(pg, p, svld1_gather_u32index_u32(pg, u, idx));
}

static void pack_small_u64(uint64_t *restrict p, const uint64_t *restrict u, size_t count,
                           size_t blocklen, size_t stride)
{
    const size_t nb = svcntd() / blocklen;
    const svuint64_t idx = acle_offsets_u64(blocklen, stride);
    const svbool_t pm = svwhilelt_b64_u64(0, nb * blocklen);
    const size_t pstep = nb * blocklen, ustep = nb * stride;
    const uint64_t *const uend = u + count / nb * ustep;

    for (; u != uend; u += ustep, p += pstep)
        svst1_u64(pm, p, svld1_gather_u64index_u64(pm, u, idx));
    svbool_t pg = svwhilelt_b64_u64(0, count % nb * blocklen);
    svst1_u64(pg, p, svld1_gather_u64index_u64(pg, u, idx));
}

void vector_kernel(void *restrict packed, void *restrict unpacked, size_t count,
                   size_t blocklen, size_t stride, size_t esize)
{
    const size_t lanes = svcntb() / esize;
    if (blocklen >= lanes)
        pack_large(packed, unpacked, count, blocklen * esize, stride * esize);
    else if (esize == 4 && lanes * stride <= UINT32_MAX)   /* 32-bit offsets must fit */
        pack_small_u32(packed, unpacked, count, blocklen, stride);
    else if (esize == 8)
        pack_small_u64(packed, unpacked, count, blocklen, stride);
    else
        pack_large(packed, unpacked, count, blocklen * esize, stride * esize);
}
