/* x86-64 copy split over MT_THREADS threads, each running the streaming + prefetch AVX2 copy
 * (the fastest single-thread copy of large buffers on the machine this was written on) on its
 * part (parts are multiples of 64 bytes, so they stay 32-byte aligned: align: 32; the calling
 * thread takes the first, one thread is started per other part at each call). Thread
 * start-up is inside the ROI: it is part of what a split costs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "x86_copies.h"

#define MT_THREADS 2

/* The perf backend pins each process to one core (taskset); a split needs more, so widen the
 * affinity to every online CPU before main (a process may do this for itself). */
__attribute__((constructor)) static void unpin(void)
{
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
        CPU_SET(c, &all);
    sched_setaffinity(0, sizeof all, &all);
}

struct part {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
};

X86_AVX2 void *copy_part(void *arg)
{
    struct part *p = arg;
    copy_avx2_stream_prefetch(p->dst, p->src, p->n);
    return NULL;
}

HARNESS_KERNEL void memcpy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    struct part parts[MT_THREADS];
    pthread_t tid[MT_THREADS];
    size_t chunk = n / MT_THREADS / 64 * 64, off = 0;
    for (int t = 0; t < MT_THREADS; t++) {
        size_t len = t == MT_THREADS - 1 ? n - off : chunk;
        parts[t] = (struct part){dst + off, src + off, len};
        off += len;
    }
    for (int t = 1; t < MT_THREADS; t++)
        if (pthread_create(&tid[t], NULL, copy_part, &parts[t]) != 0)
            harness_fail("pthread_create failed");
    copy_part(&parts[0]);
    for (int t = 1; t < MT_THREADS; t++)
        pthread_join(tid[t], NULL);
}
