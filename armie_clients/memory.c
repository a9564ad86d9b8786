/*
 * memory.c - QEMU 7.2 TCG plugin: memory instructions and bytes in the
 * region of interest (between hint #0x40 and hint #0x41), by memory class.
 *
 * Build: analysis/stages/build.py plugin_cmd (gcc -shared ... -std=gnu11 memory.c
 * decode.c -ltbstats: the counting core, built first as libtbstats.so).
 * Memory classes and bytes come from the decoder table shared with
 * inscount (decode.c); tests/decode_driver.c prints them for any word.
 * Use:
 *   qemu-aarch64 -cpu max,sve-default-vector-length=64 \
 *       -plugin ./libmemory.so,out=mem.json,vl=512 ./prog args
 * Arguments: out=<path> and vl=<bits> (required; the vector length the guest
 * runs at, valid under the SVE VL rule the build passes as SVE_VL_MIN,
 * SVE_VL_MAX and SVE_VL_STEP from analysis/core/config.py; a batch of runs,
 * tbstats.h, gives one per run: vl=<bits>:<bits>:...). Unknown keys are
 * rejected.
 *
 * Output (docs/contracts.md section 3): "client", "plugin_api", "markers",
 * "vl", "sve_bytes": "derived", "sve_bytes_note", and
 * "roi": {"classes": {<memclass>: {"insns", "bytes"}},
 *         "qemu_observed": {"loads", "stores", "other"}}  (null when unbalanced).
 *
 * Bytes are derived from each instruction's encoding (x its ROI executions):
 *   - scalar and SIMD&FP: exact (size fields, pairs x2, LD1-4/ST1-4
 *     multiple-structure register counts and Q bit, single-structure
 *     element counts, LDR Q = 16);
 *   - SVE: at vl bits with every predicate lane active, an upper bound
 *     (contiguous: VL/esize elements of msize bytes, dtype/msz/esz fields;
 *     LD2-4/ST2-4 and LDNT1/STNT1: n full vectors; gather/scatter: VL/32 or
 *     VL/64 elements of msize bytes; LD1R* one element, LD1RQ 16, LD1RO 32;
 *     LDR/STR Z = VL/8, P = VL/64 bytes). First-fault/non-fault loads count
 *     as if no lane faulted.
 *   - prefetches (PRFM, PRFUM, SVE PRF*) count instructions with 0 bytes;
 *   - atomic read-modify-write instructions (CAS*, CASP*, SWP*, LD<op>,
 *     ST<op>) count once as scalar_load and once as scalar_store;
 *   - MOPS (CPY*, SET*) and MTE tag instructions: counted, bytes 0 (unknown);
 *     DC ZVA is not a load/store encoding and is not counted.
 * qemu_observed counts the accesses QEMU's own memory instrumentation
 * reports in the ROI (one inline counter per instruction), split into
 * "loads" and "stores" by the instruction's encoding (an atomic counts in
 * both) because QEMU 7.2 does not honour the R/W filter of inline memory
 * ops (observed: an R-only counter counted the stores, a W-only counter every
 * access); "other" = accesses by instructions that are not loads/stores by
 * encoding (expected 0).
 * QEMU 7.2 reports no SVE access at all (SVE loads/stores run in helpers
 * without plugin hooks) and a 16-byte access as two 8-byte ones; hence SVE
 * bytes are derived, not observed.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "tbstats.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

static const char *const CLIENT = "memory";

/* The VL rule is stated once, in analysis/core/config.py; build.plugin_cmd passes it. */
#if !defined(SVE_VL_MIN) || !defined(SVE_VL_MAX) || !defined(SVE_VL_STEP)
#error "build with analysis/stages/build.py plugin_cmd: it defines SVE_VL_MIN, SVE_VL_MAX, SVE_VL_STEP"
#endif

static uint64_t *vls; /* one per run of a batch */
static size_t n_vls;
static uint64_t vl_bits; /* of the run being reported */
static uint64_t m_insns[N_MCLASSES], m_bytes[N_MCLASSES];
static uint64_t obs_loads, obs_stores, obs_other;

static bool parse_vl(const char *s, uint64_t *vl)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v < SVE_VL_MIN || v > SVE_VL_MAX || v % SVE_VL_STEP) {
        return false;
    }
    *vl = v;
    return true;
}

static bool is_store_class(int c)
{
    return c == M_SCALAR_STORE || c == M_SIMD_STORE ||
           c == M_SVE_CONTIG_STORE || c == M_SVE_SCATTER;
}

static void add_insn(const tbs_insn *in, void *ud)
{
    struct mem_access acc[2];
    int n;
    (void)ud;

    if (!in->roi && !in->roi_mem) {
        return;
    }
    n = decode_mem(in->enc, vl_bits, acc);
    for (int i = 0; i < n; i++) {
        m_insns[acc[i].cls] += in->roi;
        m_bytes[acc[i].cls] += in->roi * acc[i].bytes;
        /* QEMU's access count split by the encoding's direction; an atomic
         * (load and store class) counts in both */
        if (is_store_class(acc[i].cls)) {
            obs_stores += in->roi_mem;
        } else {
            obs_loads += in->roi_mem;
        }
    }
    if (!n) {
        obs_other += in->roi_mem;
    }
}

static void report(void)
{
    FILE *f;
    long run = tbs_segment() < 0 ? 0 : tbs_segment();

    if ((size_t)run >= n_vls) {
        fprintf(stderr, "%s: run %ld of the batch has no vl= (%zu given)\n",
                CLIENT, run, n_vls);
        abort();
    }
    vl_bits = vls[run];
    /* once per run of a batch: each report starts from zero */
    memset(m_insns, 0, sizeof(m_insns));
    memset(m_bytes, 0, sizeof(m_bytes));
    obs_loads = obs_stores = obs_other = 0;
    tbs_foreach(add_insn, NULL);
    f = tbs_json_open(CLIENT);
    if (!f) {
        return;
    }
    fprintf(f,
            ",\n  \"vl\": %llu,\n  \"sve_bytes\": \"derived\",\n"
            "  \"sve_bytes_note\": \"SVE bytes are computed from each "
            "encoding at vl bits with every predicate lane active (an upper "
            "bound), because QEMU 7.2 memory callbacks never see SVE "
            "accesses; non-SVE bytes are exact from the encoding; prefetches "
            "count 0 bytes; atomics count as one load and one store; "
            "qemu_observed counts the accesses QEMU reports (none for SVE, "
            "16-byte accesses as two), split into loads and stores by the "
            "instruction encoding; other = accesses of non-load/store "
            "encodings\"",
            (unsigned long long)vl_bits);
    fprintf(f, ",\n  \"roi\": ");
    if (!tbs_roi_balanced()) {
        fprintf(f, "null");
    } else {
        fprintf(f, "{\"classes\": {");
        for (int k = 0; k < N_MCLASSES; k++) {
            fprintf(f, "%s\n    \"%s\": {\"insns\": %llu, \"bytes\": %llu}",
                    k ? "," : "", mem_class_names[k],
                    (unsigned long long)m_insns[k],
                    (unsigned long long)m_bytes[k]);
        }
        fprintf(f,
                "},\n    \"qemu_observed\": {\"loads\": %llu, \"stores\": "
                "%llu, \"other\": %llu}}",
                (unsigned long long)obs_loads, (unsigned long long)obs_stores,
                (unsigned long long)obs_other);
    }
    tbs_json_close(CLIENT, f);
}

static int parse_arg(const char *key, const char *val)
{
    char *list, *tok, *save = NULL;

    if (strcmp(key, "vl") != 0) {
        return 0;
    }
    list = strdup(val);
    vls = tbs_xcalloc(strlen(val) / 2 + 1, sizeof(*vls));
    n_vls = 0;
    for (tok = strtok_r(list, ":", &save); tok;
         tok = strtok_r(NULL, ":", &save)) {
        if (!parse_vl(tok, &vls[n_vls++])) {
            n_vls = 0;
            break;
        }
    }
    free(list);
    if (!n_vls) {
        fprintf(stderr,
                "%s: vl=%s: expected a multiple of %d in %d..%d (bits), or "
                "one per run separated by ':'\n",
                CLIENT, val, SVE_VL_STEP, SVE_VL_MIN, SVE_VL_MAX);
        return -1;
    }
    return 1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info, int argc,
                                           char **argv)
{
    if (tbs_parse_args(CLIENT, info, argc, argv, parse_arg,
                       "out=<path>, vl=<bits>") != 0) {
        return -1;
    }
    if (!n_vls) {
        fprintf(stderr, "%s: missing required argument vl=<bits>\n", CLIENT);
        return -1;
    }
    if (!decode_init()) {
        return -1;
    }
    return tbs_start(id, true, false, report);
}
