/* The x86-64 counterparts of the SVE copies (host builds only: the kernel table marks their
 * rows host_isa: x86_64), AVX2 through intrinsics with a per-function target attribute, so
 * no row needs extra flags. A process on a CPU without AVX2 stops before main. */
#ifndef X86_COPIES_H
#define X86_COPIES_H
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "memcpy.h"

#define X86_AVX2 __attribute__((target("avx2"))) static inline
/* The kernels calling them are AVX2 code too (so the copies inline into them). */
#define X86_KERNEL HARNESS_KERNEL __attribute__((target("avx2")))
#define PREFETCH_AHEAD 512   /* bytes: 16 iterations of 32 bytes, 8 cache lines */

__attribute__((constructor)) static void x86_need_avx2(void)
{
    if (!__builtin_cpu_supports("avx2")) {
        fprintf(stderr, "usage error: this copy needs AVX2, which this CPU lacks: pick the loop or libc variant\n");
        exit(HARNESS_EXIT_USAGE);
    }
}

static inline void tail_bytes(uint8_t *restrict dst, const uint8_t *restrict src, size_t i, size_t n)
{
    for (; i < n; i++)
        dst[i] = src[i];
}

/* 32 bytes per iteration, aligned load and store (align: 32). */
X86_AVX2 void copy_avx2(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm256_store_si256((__m256i *)(dst + i), _mm256_load_si256((const __m256i *)(src + i)));
    tail_bytes(dst, src, i, n);
}

/* Streaming (non-temporal) stores, then sfence so the copy is visible when it returns (align: 32). */
X86_AVX2 void copy_avx2_stream(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm256_stream_si256((__m256i *)(dst + i), _mm256_load_si256((const __m256i *)(src + i)));
    _mm_sfence();
    tail_bytes(dst, src, i, n);
}

/* Streaming stores plus a prefetch of the source PREFETCH_AHEAD bytes ahead, once per line (align: 32). */
X86_AVX2 void copy_avx2_stream_prefetch(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        _mm_prefetch((const char *)(src + i + PREFETCH_AHEAD), _MM_HINT_NTA);
        __m256i a = _mm256_load_si256((const __m256i *)(src + i)), b = _mm256_load_si256((const __m256i *)(src + i + 32));
        _mm256_stream_si256((__m256i *)(dst + i), a);
        _mm256_stream_si256((__m256i *)(dst + i + 32), b);
    }
    _mm_sfence();
    tail_bytes(dst, src, i, n);
}

/* Unrolled x4: 128 bytes per iteration, unaligned loads and stores (align: 1). */
X86_AVX2 void copy_avx2_x4(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i)), b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(src + i + 64)), d = _mm256_loadu_si256((const __m256i *)(src + i + 96));
        _mm256_storeu_si256((__m256i *)(dst + i), a);
        _mm256_storeu_si256((__m256i *)(dst + i + 32), b);
        _mm256_storeu_si256((__m256i *)(dst + i + 64), c);
        _mm256_storeu_si256((__m256i *)(dst + i + 96), d);
    }
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
    tail_bytes(dst, src, i, n);
}

#endif
