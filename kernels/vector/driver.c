/* MPI_Type_vector pack/unpack driver (paper Fig. 4/9): builds the strided and packed
 * buffers, runs whichever vector_kernel it is linked with between the ROI markers, and
 * checks every block and, for unpack, that every gap between blocks is left untouched. */
#include <string.h>

#include "harness.h"
#include "vector.h"

/* The reference: the same block copy, element by element (never with SVE, never through
 * memcpy, so independent of every kernel variant; the compiler may use Advanced SIMD, see
 * HARNESS_REFERENCE). `blen` and `sbytes` are multiples of sizeof(T); the paper's layout,
 * one element per block, has a loop of its own (no inner loop of one iteration per block). */
#define DEFINE_REFERENCE(T)                                                                  \
    static HARNESS_REFERENCE void reference_##T(unsigned char *packed, unsigned char *unpacked, \
                                                size_t count, size_t blen, size_t sbytes,     \
                                                int pack)                                     \
    {                                                                                        \
        typedef T __attribute__((may_alias)) elem; /* the buffers were written as bytes */ \
        size_t n = blen / sizeof(T), s = sbytes / sizeof(T);                                 \
        elem *p = (elem *)packed, *u = (elem *)unpacked;                                     \
        if (n == 1 && s == 2 && pack) { /* a constant stride: de-interleaving loads */      \
            HARNESS_REFERENCE_LOOP                                                           \
            for (size_t k = 0; k < count; k++)                                               \
                p[k] = u[2 * k];                                                             \
        } else if (n == 1 && pack) {                                                         \
            HARNESS_REFERENCE_LOOP                                                           \
            for (size_t k = 0; k < count; k++)                                               \
                p[k] = u[k * s];                                                             \
        } else if (n == 1) {                                                                 \
            HARNESS_REFERENCE_LOOP                                                           \
            for (size_t k = 0; k < count; k++)                                               \
                u[k * s] = p[k];                                                             \
        } else {                                                                             \
            HARNESS_REFERENCE_LOOP                                                           \
            for (size_t k = 0; k < count; k++) {                                             \
                HARNESS_REFERENCE_LOOP                                                       \
                for (size_t j = 0; j < n; j++) {                                             \
                    if (pack)                                                                \
                        p[k * n + j] = u[k * s + j];                                         \
                    else                                                                     \
                        u[k * s + j] = p[k * n + j];                                         \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_REFERENCE(uint64_t)
DEFINE_REFERENCE(uint32_t)
DEFINE_REFERENCE(uint8_t)

/* The same signature and call sites as the byte-wise reference it replaced: main()'s set-up
 * of the kernel call lies inside the ROI, so main() must compile to the same code (the ROI
 * counts stay those of the golden files). */
static HARNESS_NOIPA void reference(unsigned char *packed, unsigned char *unpacked,
                                    size_t count, size_t blen, size_t sbytes, int pack)
{
    /* A preparation (harness.h): what it writes, computed once per size in a batch. */
    if (harness_prep_begin(pack ? packed : unpacked, pack ? count * blen : count * sbytes, NULL, 0)) {
        if (blen % 8 == 0 && sbytes % 8 == 0)
            reference_uint64_t(packed, unpacked, count, blen, sbytes, pack);
        else if (blen % 4 == 0 && sbytes % 4 == 0)
            reference_uint32_t(packed, unpacked, count, blen, sbytes, pack);
        else
            reference_uint8_t(packed, unpacked, count, blen, sbytes, pack);
    }
    harness_prep_end();
}

/* The whole output against the reference (harness.h); main() calls it as before. */
static HARNESS_NOIPA size_t first_mismatch(const unsigned char *a, const unsigned char *b, size_t n)
{
    return harness_first_mismatch(a, b, n);
}

static unsigned long long element(const unsigned char *p, size_t i, size_t esize)
{
    unsigned long long v = 0;
    memcpy(&v, p + i * esize, esize);   /* little-endian: low bytes */
    return v;
}

/* The poison loops in main() go 32 bits at a time over buffers written as bytes (every block, gap
 * and buffer is a multiple of sizeof(float)): a byte at a time they were half of every unpack
 * run's emulated instructions. main()'s code around the kernel call lies inside the ROI, so each
 * loop keeps a shape that leaves that code unchanged for both compilers and every build (checked
 * by disassembly; the regression set's ROI counts are those of the byte loops). */
typedef uint32_t __attribute__((may_alias)) word;

/* GCC vectorizes the poison loops with SVE, which QEMU emulates several times slower than
 * Advanced SIMD: kept off SVE, a GCC unpack VLA job takes 1.3-1.8 s instead of 3.4 s. Not with
 * clang, whose loops cost little already and whose VLA build would move main()'s ROI window. */
#if defined(__GNUC__) && !defined(__clang__)
HARNESS_NO_SVE
#endif
int main(int argc, char **argv)
{
    static const char *const keys[] = {"dir", "dtype", "blocklen", "stride", NULL};
    static const char *const dirs[] = {"pack", "unpack", NULL};
    static const char *const dtypes[] = {"float", "double", NULL};
    harness_init(argc, argv, keys);

    int pack = harness_param_choice("dir", dirs) == 0;
    size_t esize = harness_param_choice("dtype", dtypes) == 0 ? sizeof(float) : sizeof(double);
    size_t blocklen = harness_param_size("blocklen");
    size_t stride = harness_param_size("stride");
    size_t size = harness_size();
    if (strcmp(vector_kernel_dir, dirs[!pack]) != 0)
        harness_usage_error("dir=%s but this binary's kernel is %s", dirs[!pack],
                            vector_kernel_dir);
    if (blocklen < 1 || stride < blocklen)
        harness_usage_error("need 1 <= blocklen <= stride, got blocklen=%zu stride=%zu",
                            blocklen, stride);
    size_t blen = blocklen * esize;
    if (blen / esize != blocklen || size % blen != 0)
        harness_usage_error("size %zu is not a multiple of blocklen*sizeof(dtype) = %zu", size,
                            blen);
    size_t count = size / blen;
    size_t sbytes = stride * esize;
    if (sbytes / esize != stride || (count && sbytes > (size_t)-1 / count))
        harness_usage_error("unpacked extent count*stride*esize overflows");
    size_t extent = count * sbytes;

    unsigned char *packed = harness_alloc(size, 64);
    unsigned char *unpacked = harness_alloc(extent, 64);
    unsigned char *expect = harness_alloc(pack ? size : extent, 64);
    unsigned char *out = pack ? packed : unpacked;
    size_t out_bytes = pack ? size : extent;

    /* Input filled, reference computed, output poisoned so every byte must be written:
     * pack: the whole packed buffer is the complement of the expected one;
     * unpack: block bytes complemented, gap bytes keep a sentinel the kernel must not touch. */
    if (pack) {
        harness_fill_bytes(unpacked, extent, 0x7061636bu);
        reference(expect, unpacked, count, blen, sbytes, 1);
        for (size_t i = 0; i < size / 4; i++)   /* size is a multiple of sizeof(float) */
            ((word *)packed)[i] = ~((word *)expect)[i];
    } else {
        harness_fill_bytes(packed, size, 0x756e7061u);
        for (size_t i = 0; i < extent; i += 4) {   /* extent is a multiple of sizeof(float) */
            uint32_t w = 0xa5a5a5a5u ^ (uint32_t)(i * 0x3b3b3b3bu);
            memcpy(expect + i, &w, 4);
        }
        memcpy(unpacked, expect, extent);
        reference(packed, expect, count, blen, sbytes, 0);
        for (size_t k = 0; k < count; k++)
            for (size_t b = 0; b < blen / 4; b++)   /* blen is a multiple of sizeof(float) */
                ((word *)(unpacked + k * sbytes))[b] = ~((word *)(expect + k * sbytes))[b];
    }

    HARNESS_ROI((void)0, vector_kernel(packed, unpacked, count, blocklen, stride, esize));

    size_t i = first_mismatch(out, expect, out_bytes);
    if (i < out_bytes) {
        size_t e = i / esize;
        const char *what = pack ? "packed" : (i % sbytes < blen ? "unpacked block" : "unpacked gap");
        harness_fail("%s element at index %zu: got 0x%0*llx expected 0x%0*llx", what, e,
                     (int)(2 * esize), element(out, e, esize), (int)(2 * esize),
                     element(expect, e, esize));
    }
    harness_ok(harness_fnv1a(out, out_bytes));
}
