/* Reduction driver (paper Fig. 6/10): finds the op x dtype entry of whichever variant it is
 * linked with, runs it between the ROI markers on deterministic data (with +0/-0 pairs and,
 * for max/min with nan=1, NaNs), and checks the result bit for bit against the scalar
 * reference built from the same ops.h macros. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops.h"

/* The scalar reference of every op x dtype, never vectorized. */
#define DEFINE_REF(op, dname, T)                                                        \
    static HARNESS_SCALAR void ref_##op##_##dname(const void *in, void *inout, size_t n) \
    {                                                                                   \
        const T *a = in;                                                                \
        T *b = inout;                                                                   \
        HARNESS_NOVEC_LOOP                                                              \
        for (size_t i = 0; i < n; i++)                                                  \
            REDUCE_STEP_##op(b[i], a[i]);                                               \
    }
REDUCE_MATRIX(DEFINE_REF)
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

static uint64_t fp_bits(double v, size_t esize)
{
    uint64_t b = 0;
    float f = (float)v;
    if (esize == 4)
        memcpy(&b, &f, 4);
    else
        memcpy(&b, &v, 8);
    return b;
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

/* Finite values k/16 (exact in float); every 16 elements: +0/-0 in both orders, an equal
 * pair and, with nan, a NaN in `in`, in `inout`, in both, and a signaling NaN. */
static void fill_fp(void *in, void *inout, size_t n, size_t esize, int nan, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = harness_rand(&s);
        uint64_t x = fp_bits(((int)(r % 2001) - 1000) / 16.0, esize);
        uint64_t y = fp_bits(((int)((r >> 20) % 2001) - 1000) / 16.0, esize);
        uint64_t pz = fp_bits(0.0, esize), nz = fp_bits(-0.0, esize);
        switch (i % 16) {
        case 3: x = pz, y = nz; break;
        case 5: x = nz, y = pz; break;
        case 9: y = x; break;
        case 7: if (nan) x = fp_nan(esize, 0, r >> 40); break;
        case 11: if (nan) y = fp_nan(esize, 1, r >> 40); break;
        case 13: if (nan) x = fp_nan(esize, 0, r >> 30), y = fp_nan(esize, 1, r >> 50); break;
        case 15: if (nan) x = fp_nan(esize, 2, r >> 40); break;
        }
        put(in, i, esize, x);
        put(inout, i, esize, y);
    }
}

/* Values whose SUM/PROD cannot overflow the type after C's integer promotion (narrow types
 * compute in int and wrap on conversion, unsigned wide types wrap by definition): full range
 * except uint16 [0, 2^15) and signed 32/64-bit within +-2^(bits/2-1). */
static void fill_int(void *in, void *inout, size_t n, size_t esize, int is_signed,
                     uint64_t seed)
{
    unsigned bits = (unsigned)esize * 8;
    uint64_t s = seed;
    for (size_t i = 0; i < 2 * n; i++) {
        uint64_t r = harness_rand(&s);
        if (is_signed && bits >= 32)
            r = (r >> (64 - bits / 2)) - (1ull << (bits / 2 - 1));
        else if (!is_signed && bits == 16)
            r &= 0x7fff;
        put(i % 2 ? inout : in, i / 2, esize, r);
    }
}

static void list_valid(void)
{
    fputs("valid op/dtype combinations:", stderr);
    for (size_t i = 0; i < reduce_kernels_count; i++)
        fprintf(stderr, " %s/%s", reduce_kernels[i].op, reduce_kernels[i].dtype);
    fputc('\n', stderr);
}

int main(int argc, char **argv)
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
    int is_fp = strcmp(dtype, "float") == 0 || strcmp(dtype, "double") == 0;
    if (is_fp)
        fill_fp(in, inout, n, esize, nan, 0x726564u + esize);
    else
        fill_int(in, inout, n, esize, dtype[0] != 'u', 0x726564u + esize);
    memcpy(expect, inout, size);
    ref->fn(in, expect, n);

    roi_begin();
    k->fn(in, inout, n);
    roi_end();

    for (size_t i = 0; i < n; i++)
        if (get(inout, i, esize) != get(expect, i, esize))
            harness_fail("inout (%s %s) at index %zu: got 0x%0*llx expected 0x%0*llx", op, dtype,
                         i, (int)(2 * esize), (unsigned long long)get(inout, i, esize),
                         (int)(2 * esize), (unsigned long long)get(expect, i, esize));
    harness_ok(harness_fnv1a(inout, size));
}
