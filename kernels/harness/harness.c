/* Implementation of harness.h: one place for the command-line contract (docs/contracts.md
 * section 1), so every kernel binary parses, checks the VL, fails and reports identically. */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 16

static struct {
    const char *prog;
    unsigned vl_asked;
    unsigned vl_seen;
    size_t size;
    const char *const *keys;
    const char *values[MAX_PARAMS];
} h;

static void vmessage(const char *prefix, const char *fmt, va_list ap)
{
    fflush(stdout);
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void harness_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("FAIL: ", fmt, ap);
    va_end(ap);
    exit(HARNESS_EXIT_FAIL);
}

void harness_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("usage error: ", fmt, ap);
    va_end(ap);
    fprintf(stderr, "usage: %s <vl_bits> <size> [key=value ...]", h.prog ? h.prog : "kernel");
    for (size_t k = 0; h.keys && h.keys[k]; k++)
        fprintf(stderr, " %s=...", h.keys[k]);
    fputc('\n', stderr);
    exit(HARNESS_EXIT_USAGE);
}

/* Non-negative decimal integer, digits only (leading zeros allowed); 0 on failure. */
static int parse_size(const char *s, size_t *out)
{
    size_t v = 0;
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        size_t d = (size_t)(*s - '0');
        if (v > (SIZE_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static unsigned read_vl_bits(void)
{
#ifdef __ARM_FEATURE_SVE
    uint64_t bytes;
    __asm__ volatile("rdvl %0, #1" : "=r"(bytes));
    return (unsigned)(bytes * 8);
#else
    return 0; /* a host build without SVE: the perf backend's host-native baselines */
#endif
}

static int key_index(const char *key, size_t len)
{
    for (int k = 0; h.keys && h.keys[k]; k++)
        if (strlen(h.keys[k]) == len && strncmp(h.keys[k], key, len) == 0)
            return k;
    return -1;
}

void harness_init_vls(int argc, char **argv, const char *const *keys, unsigned built_bits)
{
    static const char *const none[] = {NULL};
    size_t vl;

    h.prog = argc > 0 ? argv[0] : "kernel";
    h.keys = keys ? keys : none;
    int nkeys = 0;
    while (h.keys[nkeys])
        nkeys++;
    if (nkeys > MAX_PARAMS)
        harness_usage_error("internal: more than %d parameters declared", MAX_PARAMS);

    if (argc < 3)
        harness_usage_error("expected at least 2 arguments, got %d", argc > 0 ? argc - 1 : 0);
#ifdef __ARM_FEATURE_SVE
    if (!parse_size(argv[1], &vl) || vl < 128 || vl > 2048 || vl % 128 != 0)
        harness_usage_error("vl_bits '%s' is not a multiple of 128 in [128, 2048]", argv[1]);
#else
    if (!parse_size(argv[1], &vl) || vl != 0)
        harness_usage_error("vl_bits '%s': this build has no SVE, the only VL is 0", argv[1]);
#endif
    if (!parse_size(argv[2], &h.size))
        harness_usage_error("size '%s' is not a non-negative decimal integer", argv[2]);
    h.vl_asked = (unsigned)vl;

    for (int a = 3; a < argc; a++) {
        const char *eq = strchr(argv[a], '=');
        if (!eq || eq == argv[a])
            harness_usage_error("argument '%s' is not key=value", argv[a]);
        int k = key_index(argv[a], (size_t)(eq - argv[a]));
        if (k < 0)
            harness_usage_error("unknown parameter '%.*s'", (int)(eq - argv[a]), argv[a]);
        if (h.values[k])
            harness_usage_error("parameter '%s' given twice", h.keys[k]);
        h.values[k] = eq + 1;
    }
    for (int k = 0; k < nkeys; k++)
        if (!h.values[k])
            harness_usage_error("missing parameter '%s'", h.keys[k]);

    h.vl_seen = read_vl_bits();
    if (h.vl_seen != h.vl_asked) {
        fprintf(stderr, "FAIL: VL mismatch: asked %u bits, running at %u bits\n", h.vl_asked,
                h.vl_seen);
        exit(HARNESS_EXIT_VL);
    }
    if (built_bits == 0)
        built_bits = HARNESS_BUILT_SVE_BITS;
    if (built_bits != 0 && built_bits != h.vl_asked) {
        fprintf(stderr,
                "FAIL: VL mismatch: asked %u bits, binary built for %u bits "
                "(-msve-vector-bits), running at %u bits\n",
                h.vl_asked, built_bits, h.vl_seen);
        exit(HARNESS_EXIT_VL);
    }
}

unsigned harness_vl_bits(void) { return h.vl_seen; }
size_t harness_size(void) { return h.size; }

const char *harness_param(const char *key)
{
    int k = key_index(key, strlen(key));
    if (k < 0)
        harness_usage_error("internal: parameter '%s' was not declared to harness_init", key);
    return h.values[k];
}

size_t harness_param_size(const char *key)
{
    size_t v;
    const char *s = harness_param(key);
    if (!parse_size(s, &v))
        harness_usage_error("%s='%s' is not a non-negative decimal integer", key, s);
    return v;
}

int harness_param_choice(const char *key, const char *const *choices)
{
    const char *s = harness_param(key);
    for (int c = 0; choices[c]; c++)
        if (strcmp(s, choices[c]) == 0)
            return c;
    fprintf(stderr, "usage error: %s='%s' is not one of:", key, s);
    for (int c = 0; choices[c]; c++)
        fprintf(stderr, " %s", choices[c]);
    fputc('\n', stderr);
    exit(HARNESS_EXIT_USAGE);
}

void *harness_alloc(size_t bytes, size_t align)
{
    size_t rounded = bytes < align ? align : (bytes + align - 1) / align * align;
    if (rounded < bytes)
        harness_fail("allocation of %zu bytes overflows", bytes);
    void *p = aligned_alloc(align, rounded);
    if (!p)
        harness_fail("cannot allocate %zu bytes aligned to %zu", bytes, align);
    memset(p, 0, rounded);
    return p;
}

uint64_t harness_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Stateless per word (hash of seed + index), so the compiler can vectorize it: the fill
 * runs outside the ROI but inside every whole-program count and every run's time. */
void harness_fill_bytes(void *p, size_t bytes, uint64_t seed)
{
    unsigned char *b = p;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t r = harness_hash(seed + i);
        memcpy(b + 8 * i, &r, 8);
    }
    uint64_t r = harness_hash(seed + words);
    for (size_t j = 8 * words; j < bytes; j++, r >>= 8)
        b[j] = (unsigned char)r;
}

/* FNV-1a over little-endian 64-bit words, then the remaining bytes: a word at a time, eight
 * words per iteration (two loads and a branch less per word than one at a time), keeps
 * checksumming a 4 MiB result cheap under emulation. */
uint64_t harness_fnv1a(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    uint64_t x = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        uint64_t w0, w1, w2, w3, w4, w5, w6, w7;   /* not an array: GCC would copy it to the stack */
        memcpy(&w0, b + i, 8);
        memcpy(&w1, b + i + 8, 8);
        memcpy(&w2, b + i + 16, 8);
        memcpy(&w3, b + i + 24, 8);
        memcpy(&w4, b + i + 32, 8);
        memcpy(&w5, b + i + 40, 8);
        memcpy(&w6, b + i + 48, 8);
        memcpy(&w7, b + i + 56, 8);
        x = (x ^ w0) * 0x100000001b3ull;
        x = (x ^ w1) * 0x100000001b3ull;
        x = (x ^ w2) * 0x100000001b3ull;
        x = (x ^ w3) * 0x100000001b3ull;
        x = (x ^ w4) * 0x100000001b3ull;
        x = (x ^ w5) * 0x100000001b3ull;
        x = (x ^ w6) * 0x100000001b3ull;
        x = (x ^ w7) * 0x100000001b3ull;
    }
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        x = (x ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return x;
}

static HARNESS_SCALAR size_t first_difference(const unsigned char *a, const unsigned char *b, size_t n)
{
    HARNESS_NOVEC_LOOP
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* Advanced SIMD, not SVE (HARNESS_NO_SVE): QEMU runs it faster than an SVE loop at every VL
 * but the longest, and about as fast as glibc's memcmp. No early exit: a loop without one
 * vectorizes, and an equal buffer is read to its end anyway. */
HARNESS_NO_SVE size_t harness_first_mismatch(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    uint64_t diff = 0;
    size_t words = n / 8;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
    for (size_t i = 0; i < words; i++) {
        uint64_t u, v;
        memcpy(&u, x + 8 * i, 8);
        memcpy(&v, y + 8 * i, 8);
        diff |= u ^ v;
    }
    for (size_t i = 8 * words; i < n; i++)
        diff |= (uint64_t)(x[i] ^ y[i]);
    return diff ? first_difference(x, y, n) : n;
}

void harness_ok(uint64_t checksum)
{
    printf("ok vl=%u size=%zu checksum=%016llx\n", h.vl_seen, h.size,
           (unsigned long long)checksum);
    fflush(stdout);
    exit(HARNESS_EXIT_OK);
}
