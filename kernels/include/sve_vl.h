/* The SVE vector-length rule of the kernel binaries: a multiple of 128 bits from 128 to 2048
 * (the lengths the Arm architecture allows). harness.c checks a run's vl_bits with it and
 * sets the VL of a batch's runs; roi_perf.c sets the VL of a native run.
 *
 * The Python side states the same rule (VL_MIN, VL_MAX, VL_STEP in analysis/core/config.py)
 * and hands it to the QEMU plugins and gem5's script as data; tests/test_backends.py checks
 * that the two agree. */
#ifndef SVE_VL_H
#define SVE_VL_H

#define SVE_VL_MIN 128
#define SVE_VL_MAX 2048
#define SVE_VL_STEP 128

#define SVE_VL_TEXT_(x) #x
#define SVE_VL_TEXT(x) SVE_VL_TEXT_(x)
/* The rule in words, for messages: "a multiple of 128 in [128, 2048]". */
#define SVE_VL_RULE \
    "a multiple of " SVE_VL_TEXT(SVE_VL_STEP) " in [" SVE_VL_TEXT(SVE_VL_MIN) ", " SVE_VL_TEXT(SVE_VL_MAX) "]"

static inline int sve_vl_valid(unsigned long bits)
{
    return bits >= SVE_VL_MIN && bits <= SVE_VL_MAX && bits % SVE_VL_STEP == 0;
}

#endif
