/* ROI markers for the perf backend (native runs, docs/contracts.md section 5).
 *
 * The perf backend starts the kernel as `perf stat --control fd:CTL,ACK -D -1 ... -- kernel`:
 * counters start disabled and count only between the "enable" and "disable" commands this
 * object writes at each measured ROI, so perf's totals are the ROI's, summed over the
 * measured calls. The driver repeats its call through HARNESS_ROI: the first WARMUP calls
 * are run but not measured. Wall time is taken here, inside the enabled window, so the
 * control round trips are not timed.
 *
 * Environment (all optional; without them one call, timed, not counted):
 *   SVE_HARNESS_CALLS=k  SVE_HARNESS_WARMUP=w  SVE_HARNESS_FLUSH_BYTES=n (stream over n bytes
 *   before every call: the paper flushes the caches for the reductions)
 *   SVE_HARNESS_PERF_CTL_FD / SVE_HARNESS_PERF_ACK_FD (the descriptors given to --control)
 *   SVE_HARNESS_TIMES=path (written at exit: warmup, calls, measured, then ns per call)
 *
 * SVE builds also set the VL: a constructor calls prctl(PR_SVE_SET_VL) with argv[1] before
 * main runs any SVE code; harness_init then checks it with rdvl and exits 3 if the CPU
 * granted another VL (a request is rounded down to a VL the CPU offers). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sve_vl.h"

#ifdef __ARM_FEATURE_SVE
#include <sys/prctl.h>
#ifndef PR_SVE_SET_VL
#define PR_SVE_SET_VL 50
#endif
#endif

static struct {
    unsigned warmup, calls, started, measured;
    size_t flush_bytes;
    volatile unsigned char *flush_buf;
    int ctl_fd, ack_fd;
    const char *times_path;
    unsigned long long *ns;
    struct timespec t0;
} m = {.calls = 1, .ctl_fd = -1, .ack_fd = -1};

static unsigned long env_number(const char *name, unsigned long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end) {
        fprintf(stderr, "usage error: %s='%s' is not a non-negative integer\n", name, s);
        exit(HARNESS_EXIT_USAGE);
    }
    return v;
}

static void write_times(void)
{
    if (!m.times_path)
        return;
    FILE *f = fopen(m.times_path, "w");
    if (!f)
        return; /* the backend reports the missing file */
    fprintf(f, "warmup %u\ncalls %u\nmeasured %u\n", m.warmup, m.calls, m.measured);
    for (unsigned i = 0; i < m.measured; i++)
        fprintf(f, "%llu\n", m.ns[i]);
    fclose(f);
}

/* glibc passes argc/argv to constructors: the VL must be set before main's SVE code. */
static void __attribute__((constructor)) roi_perf_init(int argc, char **argv)
{
#ifdef __ARM_FEATURE_SVE
    unsigned long bits = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    if (sve_vl_valid(bits) && prctl(PR_SVE_SET_VL, bits / 8) < 0) {
        fprintf(stderr, "FAIL: prctl(PR_SVE_SET_VL, %lu bytes): %s\n", bits / 8, strerror(errno));
        exit(HARNESS_EXIT_VL);
    }
#else
    (void)argc;
    (void)argv;
#endif
    m.warmup = (unsigned)env_number("SVE_HARNESS_WARMUP", 0);
    m.calls = (unsigned)env_number("SVE_HARNESS_CALLS", 1);
    m.flush_bytes = env_number("SVE_HARNESS_FLUSH_BYTES", 0);
    m.ctl_fd = (int)env_number("SVE_HARNESS_PERF_CTL_FD", (unsigned long)-1);
    m.ack_fd = (int)env_number("SVE_HARNESS_PERF_ACK_FD", (unsigned long)-1);
    m.times_path = getenv("SVE_HARNESS_TIMES");
    m.ns = calloc(m.calls ? m.calls : 1, sizeof *m.ns);
    if (m.flush_bytes)
        m.flush_buf = harness_alloc(m.flush_bytes, HARNESS_PAGE);
    if (!m.ns)
        harness_fail("cannot allocate the per-call time table");
    atexit(write_times);
}

unsigned harness_calls(void) { return m.warmup + m.calls; }

static volatile unsigned flush_sink;

/* Read the whole flush buffer, one access per 64 bytes (the smallest line we target):
 * what the kernel touched is evicted and its dirty lines are written back before the call. */
void harness_before_call(void)
{
    unsigned sum = 0;
    for (size_t i = 0; i < m.flush_bytes; i += 64)
        sum += m.flush_buf[i];
    flush_sink = sum;
}

/* One perf control command and, when an ack descriptor was given, its "ack\n" (perf may
 * follow it with a NUL, which the next read skips). */
static void perf_command(const char *cmd)
{
    if (m.ctl_fd < 0)
        return;
    size_t len = strlen(cmd);
    if (write(m.ctl_fd, cmd, len) != (ssize_t)len)
        harness_fail("perf control: cannot write '%s': %s", cmd, strerror(errno));
    if (m.ack_fd < 0)
        return;
    char c;
    ssize_t r;
    while ((r = read(m.ack_fd, &c, 1)) == 1 && c != '\n')
        ;
    if (r != 1)
        harness_fail("perf control: no ack for '%s'", cmd);
}

static int measuring(void) { return m.started > m.warmup && m.measured < m.calls; }

void roi_begin(void)
{
    m.started++;
    if (!measuring())
        return;
    perf_command("enable\n");
    clock_gettime(CLOCK_MONOTONIC, &m.t0);
}

void roi_end(void)
{
    if (!measuring())
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    perf_command("disable\n");
    m.ns[m.measured++] = (unsigned long long)(t1.tv_sec - m.t0.tv_sec) * 1000000000ull +
                         (unsigned long long)(t1.tv_nsec - m.t0.tv_nsec);
}
