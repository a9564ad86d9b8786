/* buffer_is_zero family driver: checks the kernel against a scalar reference on the four
 * inputs (all zero; one non-zero byte at the start, middle, end: the early-exit cases) and
 * on non-zero bytes the early test cannot see (found only by the block loop and its tail),
 * all outside the ROI, in every run; then runs the kernel between the markers on the input
 * `where` names and checks that answer too. */
#include "harness.h"
#include "zero.h"

static HARNESS_SCALAR int reference(const uint8_t *buf, size_t len)
{
    HARNESS_NOVEC_LOOP
    for (size_t i = 0; i < len; i++)
        if (buf[i])
            return 0;
    return 1;
}

static const char *const WHERE[] = {"none", "start", "middle", "end", NULL};

/* Where `where` puts its non-zero byte; len for "none". */
static size_t position(int where, size_t len)
{
    return where == 1 ? 0 : where == 2 ? len / 2 : where == 3 ? len - 1 : len;
}

static void check(uint8_t *buf, size_t len, size_t pos, const char *what)
{
    if (pos < len)
        buf[pos] = 0x5a;
    int got = buffer_is_zero(buf, len), want = reference(buf, len);
    if (pos < len)
        buf[pos] = 0;
    if (got != want)
        harness_fail("%s (byte %zu of %zu non-zero): got %d expected %d", what, pos, len, got, want);
}

/* Set-up and checks, outside the ROI: kept off SVE, which QEMU emulates slower (harness.h). The
 * code around the kernel call is the same either way, for both compilers and every build. */
HARNESS_NO_SVE int main(int argc, char **argv)
{
    static const char *const keys[] = {"where", NULL};
    harness_init(argc, argv, keys);
    int where = harness_param_choice("where", WHERE);
    size_t n = harness_size();
    if (where && n == 0)
        harness_usage_error("where=%s needs a size >= 1 (a buffer to put the non-zero byte in)", WHERE[where]);

    uint8_t *buf = harness_alloc(n, 64);
    for (int w = 0; w < 4; w++)
        if (n || !w)
            check(buf, n, position(w, n), WHERE[w]);
    /* Off the three early-test words: only the loop (or the tail) can find these. */
    const size_t inner[] = {8, n / 4, n / 2 + 8, 3 * n / 4, n - 9, n - 65, n - 300};
    for (size_t k = 0; k < sizeof inner / sizeof inner[0]; k++)
        if (inner[k] < n)
            check(buf, n, inner[k], "inner byte");

    size_t pos = position(where, n);
    if (pos < n)
        buf[pos] = 0x5a;
    int got = 0;
    HARNESS_ROI((void)0, got = buffer_is_zero(buf, n));
    if (got != reference(buf, n))
        harness_fail("ROI call where=%s: got %d expected %d", WHERE[where], got, !got);
    uint8_t result = (uint8_t)got;
    harness_ok(harness_fnv1a(&result, 1));
}
