/* Reduction driver (paper Fig. 6/10): finds the op x dtype entry of whichever variant it is
 * linked with, runs it between the ROI markers on deterministic data (with +0/-0 pairs and,
 * for max/min with nan=1, NaNs), and checks the result bit for bit against the scalar
 * reference built from the same ops.h macros. Built with -DREDUCE_IEEE_FILLS (a family whose
 * kernels compute MAX/MIN with FMAX/FMIN, nan policy ieee) it writes no signed zeros: FMAX
 * orders +0 above -0, the C macro does not. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops.h"
#include "reference.h"

/* The reference of every op x dtype: reference.c, compiled once per compiler. */
#define REF_ENTRY(op, dname, T) {#op, #dname, sizeof(T), ref_##op##_##dname},
static const struct reduce_entry refs[] = {REDUCE_MATRIX(REF_ENTRY)};

static const struct reduce_entry *lookup(const struct reduce_entry *t, size_t n, const char *op,
                                         const char *dtype)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].op, op) == 0 && strcmp(t[i].dtype, dtype) == 0)
            return &t[i];
    return NULL;
}

static void put(void *p, size_t i, size_t esize, uint64_t bits)
{
    memcpy((char *)p + i * esize, &bits, esize);   /* little-endian: the low esize bytes */
}

static uint64_t get(const void *p, size_t i, size_t esize)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * esize, esize);
    return v;
}

/* NaN encodings: quiet with a payload, the same negative, signaling. */
static uint64_t fp_nan(size_t esize, int kind, uint64_t payload)
{
    uint64_t sign = esize == 4 ? 0x80000000u : 0x8000000000000000u;
    uint64_t qnan = esize == 4 ? 0x7fc00000u : 0x7ff8000000000000u;
    uint64_t inf = esize == 4 ? 0x7f800000u : 0x7ff0000000000000u;
    uint64_t pmask = esize == 4 ? 0x3fffffu : 0x7ffffffffffffu;
    payload = (payload & pmask) | 1;
    return kind == 0 ? qnan | payload : kind == 1 ? sign | qnan | payload : inf | payload;
}

#ifdef REDUCE_IEEE_FILLS
#define FILL_SIGNED_ZEROS(in, io, i) ((void)0)
#else
#define FILL_SIGNED_ZEROS(in, io, i) (in[i + 3] = 0.0, io[i + 3] = -0.0, in[i + 5] = -0.0, io[i + 5] = 0.0)
#endif

/* fill_T: fill_T_now as a preparation (harness.h), computed once per size in a batch. Not
 * inlined: clang resolves the fills[] table and would inline so small a function into main(),
 * whose code around the kernel call lies inside the ROI (it moved clang's ROI counts by 1). */
#define DEFINE_PREPARED_FILL(T)                                                           \
    static __attribute__((noinline)) void fill_##T(T *restrict in, T *restrict io, size_t n, int nan, uint64_t seed) \
    {                                                                                   \
        if (harness_prep_begin(in, n * sizeof(T), io, n * sizeof(T)))                   \
            fill_##T##_now(in, io, n, nan, seed);                                       \
        harness_prep_end();                                                             \
    }

/* Finite values k/16 (exact in float); every 16 elements: +0/-0 in both orders, an equal
 * pair and, with nan, a NaN in `in`, in `inout`, in both, and a signaling NaN. One typed loop
 * per type so the compiler vectorizes it: the fill is outside the ROI, once per size in a batch. */
#define DEFINE_FILL_FP(T)                                                                \
    static void fill_##T##_now(T *restrict in, T *restrict io, size_t n, int nan, uint64_t seed) \
    {                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                \
            uint64_t r = harness_hash(seed + i);                                        \
            in[i] = (T)((int)(r % 2001) - 1000) / 16;                                   \
            io[i] = (T)((int)((r >> 20) % 2001) - 1000) / 16;                           \
        }                                                                               \
        for (size_t i = 0; i + 16 <= n; i += 16) {                                      \
            uint64_t r = harness_hash(~seed - i);                                       \
            FILL_SIGNED_ZEROS(in, io, i);                                               \
            io[i + 9] = in[i + 9];                                                      \
            if (!nan)                                                                   \
                continue;                                                               \
            put(in, i + 7, sizeof(T), fp_nan(sizeof(T), 0, r >> 40));                  \
            put(io, i + 11, sizeof(T), fp_nan(sizeof(T), 1, r >> 40));                  \
            put(in, i + 13, sizeof(T), fp_nan(sizeof(T), 0, r >> 30));                  \
            put(io, i + 13, sizeof(T), fp_nan(sizeof(T), 1, r >> 50));                  \
            put(in, i + 15, sizeof(T), fp_nan(sizeof(T), 2, r >> 40));                  \
        }                                                                               \
    }                                                                                    \
    DEFINE_PREPARED_FILL(T)
DEFINE_FILL_FP(float)
DEFINE_FILL_FP(double)

/* Values whose SUM/PROD cannot overflow the type after C's integer promotion (narrow types
 * compute in int and wrap on conversion, unsigned wide types wrap by definition): full range
 * except uint16 [0, 2^15) and signed 32/64-bit within +-2^(bits/2-1). */
static inline uint64_t int_value(uint64_t r, unsigned bits, int is_signed)
{
    if (is_signed && bits >= 32)
        return (r >> (64 - bits / 2)) - (1ull << (bits / 2 - 1));
    if (!is_signed && bits == 16)
        return r & 0x7fff;
    return r;
}

#define DEFINE_FILL_INT(T, is_signed)                                                    \
    static void fill_##T##_now(T *restrict in, T *restrict io, size_t n, int nan, uint64_t seed) \
    {                                                                                    \
        (void)nan;                                                                       \
        for (size_t i = 0; i < n; i++) {                                                 \
            in[i] = (T)int_value(harness_hash(seed + 2 * i), 8 * sizeof(T), is_signed);  \
            io[i] = (T)int_value(harness_hash(seed + 2 * i + 1), 8 * sizeof(T), is_signed); \
        }                                                                                \
    }                                                                                     \
    DEFINE_PREPARED_FILL(T)
DEFINE_FILL_INT(int8_t, 1)
DEFINE_FILL_INT(int16_t, 1)
DEFINE_FILL_INT(int32_t, 1)
DEFINE_FILL_INT(int64_t, 1)
DEFINE_FILL_INT(uint8_t, 0)
DEFINE_FILL_INT(uint16_t, 0)
DEFINE_FILL_INT(uint32_t, 0)
DEFINE_FILL_INT(uint64_t, 0)

typedef void (*fill_fn)(void *in, void *io, size_t n, int nan, uint64_t seed);
static const struct {
    const char *dtype;
    fill_fn fill;
} fills[] = {
    {"float", (fill_fn)fill_float},     {"double", (fill_fn)fill_double},
    {"int8", (fill_fn)fill_int8_t},     {"int16", (fill_fn)fill_int16_t},
    {"int32", (fill_fn)fill_int32_t},   {"int64", (fill_fn)fill_int64_t},
    {"uint8", (fill_fn)fill_uint8_t},   {"uint16", (fill_fn)fill_uint16_t},
    {"uint32", (fill_fn)fill_uint32_t}, {"uint64", (fill_fn)fill_uint64_t},
};

/* The inputs of one call: `in` and `inout` filled for dtype (the kernel overwrites inout,
 * so a repeated call refills both first). */
static void fill_inputs(const char *dtype, void *in, void *inout, size_t n, int nan, uint64_t seed)
{
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++)
        if (strcmp(fills[i].dtype, dtype) == 0)
            fills[i].fill(in, inout, n, nan, seed);
}

/* expect = inout's initial values, where the reference then reduces `in` into: a preparation
 * (harness.h), computed once per size in a batch and read back by the host, not copied by
 * glibc's memcpy (SVE, which QEMU emulates slowly) in every run. Called where main() called
 * memcpy, with its arguments, so that main() keeps its code around the kernel call. */
static HARNESS_NOIPA void *start_expected(void *expect, const void *inout, size_t size)
{
    if (harness_prep_begin(expect, size, NULL, 0))
        memcpy(expect, inout, size);
    harness_prep_end();
    return expect;
}

static void list_valid(void)
{
    fputs("valid op/dtype combinations:", stderr);
    for (size_t i = 0; i < reduce_kernels_count; i++)
        fprintf(stderr, " %s/%s", reduce_kernels[i].op, reduce_kernels[i].dtype);
    fputc('\n', stderr);
}

/* Set-up and checks, outside the ROI: kept off SVE, which QEMU emulates slower (harness.h). The
 * code around the kernel call is the same either way, for both compilers and every build. */
HARNESS_NO_SVE int main(int argc, char **argv)
{
    static const char *const keys[] = {"op", "dtype", "nan", NULL};
    static const char *const nans[] = {"0", "1", NULL};
    harness_init(argc, argv, keys);

    const char *op = harness_param("op"), *dtype = harness_param("dtype");
    int nan = harness_param_choice("nan", nans);
    const struct reduce_entry *k = lookup(reduce_kernels, reduce_kernels_count, op, dtype);
    const struct reduce_entry *ref = lookup(refs, sizeof refs / sizeof refs[0], op, dtype);
    if (!k || !ref || k->esize != ref->esize) {
        list_valid();
        harness_usage_error("no kernel for op=%s dtype=%s", op, dtype);
    }
    if (nan && strcmp(op, "max") != 0 && strcmp(op, "min") != 0)
        harness_usage_error("nan=1 is only defined for op=max and op=min (op=%s)", op);
    size_t esize = k->esize, size = harness_size();
    if (size % esize != 0)
        harness_usage_error("size %zu is not a multiple of sizeof(%s) = %zu", size, dtype, esize);
    size_t n = size / esize;

    void *in = harness_alloc(size, 64), *inout = harness_alloc(size, 64);
    void *expect = harness_alloc(size, 64);
    uint64_t seed = 0x726564u + esize;
    fill_inputs(dtype, in, inout, n, nan, seed);
    start_expected(expect, inout, size);
    ref->fn(in, expect, n);

    HARNESS_ROI(fill_inputs(dtype, in, inout, n, nan, seed), k->fn(in, inout, n));

    size_t i = harness_first_mismatch(inout, expect, size) / esize;
    if (i < n)
        harness_fail("inout (%s %s) at index %zu: got 0x%0*llx expected 0x%0*llx", op, dtype, i,
                     (int)(2 * esize), (unsigned long long)get(inout, i, esize), (int)(2 * esize),
                     (unsigned long long)get(expect, i, esize));
    harness_ok(harness_fnv1a(inout, size));
}
