/* The small API every kernel program links against (harness.o): it turns the command-line
 * contract of docs/contracts.md section 1 (arguments, VL check, exit codes, the one stdout
 * line) into a few calls, so a driver only allocates, fills, runs its kernel between
 * roi_begin()/roi_end() and verifies. Usable by anyone bringing their own kernel. */
#ifndef HARNESS_H
#define HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* Exit codes of the contract. */
enum { HARNESS_EXIT_OK = 0, HARNESS_EXIT_FAIL = 1, HARNESS_EXIT_USAGE = 2, HARNESS_EXIT_VL = 3 };

/* A scalar reference the compiler must not vectorize, and a routine that must stay a real,
 * non-inlined, non-cloned call. GCC applies both per function; clang has no per-function
 * "no vectorize", so put HARNESS_NOVEC_LOOP right before each loop of a reference too. */
#if defined(__clang__)
#define HARNESS_SCALAR __attribute__((noinline))
#define HARNESS_NOVEC_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#define HARNESS_NOIPA __attribute__((noinline))
#elif defined(__GNUC__)
#define HARNESS_SCALAR __attribute__((noinline, optimize("no-tree-vectorize")))
#define HARNESS_NOVEC_LOOP
#define HARNESS_NOIPA __attribute__((noipa))
#else
#define HARNESS_SCALAR
#define HARNESS_NOVEC_LOOP
#define HARNESS_NOIPA
#endif

/* A reference that may be vectorized with Advanced SIMD but never with SVE: independent of
 * the SVE code under test and of the compiler's SVE vectorization, and several times cheaper
 * to emulate than a scalar loop (a reference runs once per size in a batch, see
 * harness_prep_begin, and in every run of a process of its own). AArch64 GCC and
 * clang (each spells "without SVE" its own way); elsewhere (a host build) it is
 * HARNESS_SCALAR. Put HARNESS_REFERENCE_LOOP right before each loop of such a reference:
 * nothing where the attribute already keeps SVE out, HARNESS_NOVEC_LOOP where it is scalar. */
#if defined(__clang__) && defined(__aarch64__)
#define HARNESS_REFERENCE __attribute__((noinline, target("no-sve")))
#define HARNESS_REFERENCE_LOOP
#elif defined(__GNUC__) && defined(__aarch64__)
#define HARNESS_REFERENCE __attribute__((noinline, target("+nosve")))
#define HARNESS_REFERENCE_LOOP
#else
#define HARNESS_REFERENCE HARNESS_SCALAR
#define HARNESS_REFERENCE_LOOP HARNESS_NOVEC_LOOP
#endif

/* Code outside the ROI kept off SVE (scalar or Advanced SIMD): QEMU emulates most SVE
 * instructions with a helper call and a loop over the lanes, several times slower per byte
 * than Advanced SIMD or scalar code, at every VL but the longest (fills, comparisons). */
#if defined(__clang__) && defined(__aarch64__)
#define HARNESS_NO_SVE __attribute__((target("no-sve")))
#elif defined(__GNUC__) && defined(__aarch64__)
#define HARNESS_NO_SVE __attribute__((target("+nosve")))
#else
#define HARNESS_NO_SVE
#endif

/* A kernel kept in a function of its own (not inlined into main), so the ROI shows it by
 * name and `./harness explain` finds its loop. */
#if defined(__GNUC__)
#define HARNESS_KERNEL __attribute__((noinline))
#else
#define HARNESS_KERNEL
#endif

#if defined(__GNUC__)
#define HARNESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HARNESS_NORETURN __attribute__((noreturn))
#else
#define HARNESS_PRINTF(f, a)
#define HARNESS_NORETURN
#endif

/* The memcpy a kernel calls (the kernel table's `memcpy` field): glibc's memcpy, which
 * IFUNC resolves for the CPU it runs on, unless the build defines HARNESS_MEMCPY as one of
 * glibc's variants (`-DHARNESS_MEMCPY=__memcpy_generic`; Debian 12's static arm64 libc.a
 * exports them as global symbols), which the kernel then calls directly whatever the CPU. */
#ifdef HARNESS_MEMCPY
void *HARNESS_MEMCPY(void *restrict dst, const void *restrict src, size_t n);
#else
#define HARNESS_MEMCPY memcpy
#endif

/* The VL (bits) this translation unit was built for with -msve-vector-bits, 0 for VLA. */
#ifdef __ARM_FEATURE_SVE_BITS
#define HARNESS_BUILT_SVE_BITS __ARM_FEATURE_SVE_BITS
#else
#define HARNESS_BUILT_SVE_BITS 0
#endif

/* Parse `<vl_bits> <size> [key=value ...]` and check the VL. `keys` is the NULL-terminated
 * list of parameters the family takes; every one is required, any other key is an error.
 * Usage errors exit 2; a VL other than the one asked for (or, for a VLS build, other than
 * the one built for) exits 3. A macro, so the VLS check sees the caller's build flags. */
#define harness_init(argc, argv, keys) \
    harness_init_vls((argc), (argv), (keys), HARNESS_BUILT_SVE_BITS)
void harness_init_vls(int argc, char **argv, const char *const *keys, unsigned built_bits);

unsigned harness_vl_bits(void);   /* VL seen at run time (rdvl), bits */
size_t harness_size(void);        /* the <size> argument, bytes */

/* Parameter accessors; a key not declared to harness_init is a programming error (exit 2). */
const char *harness_param(const char *key);
size_t harness_param_size(const char *key);  /* non-negative decimal integer, else exit 2 */
/* Index of the value in the NULL-terminated `choices`, else exit 2 listing them. */
int harness_param_choice(const char *key, const char *const *choices);

/* stderr message, then exit. harness_fail prefixes "FAIL: " (contract step 5). */
HARNESS_NORETURN HARNESS_PRINTF(1, 2) void harness_fail(const char *fmt, ...);
HARNESS_NORETURN HARNESS_PRINTF(1, 2) void harness_usage_error(const char *fmt, ...);

/* Zeroed memory aligned to `align` (a power of two >= sizeof(void *), e.g. 64 or
 * HARNESS_PAGE); never NULL, at least `align` bytes even when bytes == 0. A mapping of its
 * own, freed when the run ends in a batch (docs/contracts.md section 1): allocate a run's
 * buffers with it, not malloc. */
#define HARNESS_PAGE 4096u
void *harness_alloc(size_t bytes, size_t align);

/* A run's preparation: inputs and expected output that depend on the run's size and
 * parameters but not on its VL (hash fills, scalar references), which are most of what an
 * emulated run executes outside its ROI. Computed by the first run of a batch with that size
 * and those parameters, remembered, and copied by the others (docs/contracts.md section 1):
 *
 *     if (harness_prep_begin(a, a_bytes, b, b_bytes))   // b may be NULL, b_bytes 0
 *         compute a and b;                              // only when nothing is remembered
 *     harness_prep_end();                               // a and b hold the result either way
 *
 * Everything from the begin to the end is left out of the whole-run count (the counting
 * plugins' preparation markers), so a run counts the same whether it computed or copied; the
 * copy after the end is counted in every run of a batch (a process that makes one run, outside
 * a batch, computes in place and copies nothing). What is computed must depend only on the
 * run's size and parameters and on what the run computed before (the same steps in the same
 * order), never on the VL; a run that asks for other sizes than the one remembered fails. */
int harness_prep_begin(void *a, size_t a_bytes, void *b, size_t b_bytes);
void harness_prep_end(void);

/* Deterministic data: splitmix64 stream, its stateless form (hash of an index), and a byte
 * fill from the latter. The hash is inline so that a fill loop calling it vectorizes: fills
 * run outside the ROI, once per size in a batch (harness_prep_begin). */
uint64_t harness_rand(uint64_t *state);
static inline uint64_t harness_hash(uint64_t i)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
void harness_fill_bytes(void *p, size_t bytes, uint64_t seed);

/* FNV-1a 64 over little-endian 64-bit words, then the trailing bytes. */
uint64_t harness_fnv1a(const void *p, size_t bytes);

/* Index of the first byte where a and b differ; n when all n bytes are equal. The whole of
 * both buffers is compared, eight 64-bit words at a time (scalar: the cheapest code for QEMU to
 * run); the byte by byte search runs only to name a mismatch. */
size_t harness_first_mismatch(const void *a, const void *b, size_t n);

/* Print `ok vl=<bits> size=<size> checksum=<16 hex>` on stdout and exit 0. */
HARNESS_NORETURN void harness_ok(uint64_t checksum);

/* Region-of-interest markers, out of line in roi_<backend>.o. */
void roi_begin(void);
void roi_end(void);

/* The measured call, between the markers. Counting backends run it once, as written.
 * Native timing builds (the perf backend compiles with -DHARNESS_REPEAT and links
 * roi_perf.o) run it harness_calls() times: each call is preceded by `reset` (which
 * restores the inputs a call consumes, so every call does the same work; nothing for
 * kernels that do not modify their inputs) and by harness_before_call() (the optional
 * cache flush), both outside the markers. The count builds never see `reset`, so their
 * code is the same as a plain roi_begin(); call; roi_end(); */
#ifdef HARNESS_REPEAT
unsigned harness_calls(void);
void harness_before_call(void);
/* Nonzero while `reset` runs: a preparation it makes again is copied back (harness.c). */
extern int harness_resetting;
#define HARNESS_ROI(reset, call)                                              \
    do {                                                                      \
        for (unsigned harness_call_ = 0; harness_call_ < harness_calls();     \
             harness_call_++) {                                               \
            harness_resetting = 1;                                            \
            reset;                                                            \
            harness_resetting = 0;                                            \
            harness_before_call();                                            \
            roi_begin();                                                      \
            call;                                                             \
            roi_end();                                                        \
        }                                                                     \
    } while (0)
#else
#define HARNESS_ROI(reset, call) \
    do {                         \
        roi_begin();             \
        call;                    \
        roi_end();               \
    } while (0)
#endif

#endif
