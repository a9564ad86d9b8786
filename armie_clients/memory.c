/*
 * memory.c - QEMU 7.2 TCG plugin: memory instructions and bytes in the
 * region of interest (between hint #0x40 and hint #0x41), by memory class.
 *
 * Build:
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -std=c11 -o libmemory.so memory.c tbstats.c
 * Decoder test tool (host; "vl" bits as argv[1], hex words on stdin):
 *   gcc -O2 -Wall -Wextra -std=c11 -DCLASSIFY_MAIN -o memclassify memory.c
 * Use:
 *   qemu-aarch64 -cpu max,sve-default-vector-length=64 \
 *       -plugin ./libmemory.so,out=mem.json,vl=512 ./prog args
 * Arguments: out=<path> and vl=<bits> (required; multiple of 128 in
 * 128..2048, the vector length the guest runs at). Unknown keys are rejected.
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

enum {
    M_SCALAR_LOAD,
    M_SCALAR_STORE,
    M_SIMD_LOAD,
    M_SIMD_STORE,
    M_SVE_CONTIG_LOAD,
    M_SVE_CONTIG_STORE,
    M_SVE_GATHER,
    M_SVE_SCATTER,
    M_SVE_FIRST_FAULT,
    M_PREFETCH,
    N_MCLASSES
};

static const char *const mclass_names[N_MCLASSES] = {
    "scalar_load",      "scalar_store",     "simd_load",  "simd_store",
    "sve_contig_load",  "sve_contig_store", "sve_gather", "sve_scatter",
    "sve_first_fault",  "prefetch",
};

struct macc {
    int cls;
    uint64_t bytes; /* per execution */
};

static inline uint32_t bits(uint32_t w, int hi, int lo)
{
    return (w >> lo) & ((1u << (hi - lo + 1)) - 1);
}

/* SVE dtype (4 bits) -> log2 memory size / log2 element size */
static const uint8_t dtype_msz[16] = { 0, 0, 0, 0, 2, 1, 1, 1,
                                       1, 1, 2, 2, 0, 0, 0, 3 };
static const uint8_t dtype_esz[16] = { 0, 1, 2, 3, 3, 1, 2, 3,
                                       3, 2, 2, 3, 3, 2, 1, 3 };

static int put(struct macc *out, int n, int cls, uint64_t bytes)
{
    out[n].cls = cls;
    out[n].bytes = bytes;
    return n + 1;
}

/* SVE memory encodings (op0 = 0010, bit 31 = 1); vlb = vector bytes. */
static int decode_sve(uint32_t w, uint64_t vlb, struct macc *out)
{
    uint32_t g = w >> 25, op1513 = bits(w, 15, 13), msz = bits(w, 24, 23);
    uint32_t b22 = bits(w, 22, 22), b21 = bits(w, 21, 21), b15 = op1513 >> 2;
    uint32_t b2221 = bits(w, 22, 21), b20 = bits(w, 20, 20);
    uint32_t ff = op1513 & 1;

    switch (g) {
    case 0x42: /* 1000010: 32-bit gather and unsized contiguous */
        if (bits(w, 24, 22) == 6 && (op1513 & 5) == 0) {
            return put(out, 0, M_SVE_CONTIG_LOAD, op1513 ? vlb : vlb / 8);
        }
        if (b22 && b15) { /* ld1r*: one element */
            uint32_t dt = msz << 2 | bits(w, 14, 13);
            return put(out, 0, M_SVE_CONTIG_LOAD, 1u << dtype_msz[dt]);
        }
        if ((bits(w, 24, 22) == 7 && !b15) ||
            (b2221 == 0 && op1513 >= 6) || (msz == 0 && b21 && !b15)) {
            return put(out, 0, M_PREFETCH, 0);
        }
        if (b2221 == 0 && bits(w, 15, 14) == 2) { /* ldnt1 [z.s, x] */
            return put(out, 0, M_SVE_GATHER, (vlb / 4) << msz);
        }
        if ((msz == 0 && !b21 && !b15) || (msz == 1 && !b15) ||
            (msz == 2 && bits(w, 15, 14) == 1) || (b2221 == 1 && b15)) {
            return put(out, 0, ff ? M_SVE_FIRST_FAULT : M_SVE_GATHER,
                       (vlb / 4) << msz);
        }
        return 0;
    case 0x52: { /* 1010010: contiguous loads */
        uint32_t dt = bits(w, 24, 21);
        uint64_t contig = (vlb >> dtype_esz[dt]) << dtype_msz[dt];
        switch (op1513) {
        case 2:
            return put(out, 0, M_SVE_CONTIG_LOAD, contig);
        case 3:
            return put(out, 0, M_SVE_FIRST_FAULT, contig);
        case 5:
            return put(out, 0, b20 ? M_SVE_FIRST_FAULT : M_SVE_CONTIG_LOAD,
                       contig);
        case 6: /* ldnt1, ld2-4 [x, x] */
            return put(out, 0, M_SVE_CONTIG_LOAD, (b2221 + 1) * vlb);
        case 7: /* ldnt1, ld2-4 [x, #imm]; ld2-4q */
            return put(out, 0, M_SVE_CONTIG_LOAD,
                       (b20 ? msz + 1 : b2221 + 1) * vlb);
        case 0:
        case 1:
            if (op1513 == 1 && b20) { /* ld1w/ld1d 128-bit elements */
                return put(out, 0, M_SVE_CONTIG_LOAD,
                           vlb / 16 * (msz == 3 ? 8 : 4));
            }
            return put(out, 0, M_SVE_CONTIG_LOAD, b2221 == 1 ? 32 : 16);
        default: /* 4: ld2-4q [x, x], ld1w/ld1d 128-bit elements */
            if (b2221 == 1) {
                return put(out, 0, M_SVE_CONTIG_LOAD, (msz + 1) * vlb);
            }
            return put(out, 0, M_SVE_CONTIG_LOAD,
                       vlb / 16 * (msz == 3 ? 8 : 4));
        }
    }
    case 0x62: /* 1100010: 64-bit gather */
        if ((msz == 0 && b21 && !b15) || (bits(w, 24, 21) == 3 && b15) ||
            (b2221 == 0 && op1513 == 7)) {
            return put(out, 0, M_PREFETCH, 0);
        }
        if (bits(w, 24, 21) == 0 && op1513 == 5) { /* ld1q */
            return put(out, 0, M_SVE_GATHER, vlb);
        }
        if (b2221 == 0 && b15) { /* ldnt1 [z.d, x] */
            return put(out, 0, M_SVE_GATHER, (vlb / 8) << msz);
        }
        return put(out, 0, ff ? M_SVE_FIRST_FAULT : M_SVE_GATHER,
                   (vlb / 8) << msz);
    case 0x72: /* 1110010: stores */
        switch (op1513) {
        case 0:
            if (bits(w, 24, 22) == 6) { /* str p */
                return put(out, 0, M_SVE_CONTIG_STORE, vlb / 8);
            }
            return put(out, 0, M_SVE_CONTIG_STORE,
                       (bits(w, 23, 22) + 1) * vlb); /* st2-4q */
        case 2:
        case 7:
            if (op1513 == 2 && bits(w, 24, 22) == 6) { /* str z */
                return put(out, 0, M_SVE_CONTIG_STORE, vlb);
            }
            if (op1513 == 2 || !b20) { /* st1* */
                uint32_t esz = b2221;
                if (msz == 2 && esz == 0) {
                    esz = 4;
                } else if (msz == 3 && esz == 2) {
                    esz = 4;
                }
                return put(out, 0, M_SVE_CONTIG_STORE, (vlb >> esz) << msz);
            }
            /* stnt1, st2-4 [x, #imm] */
            return put(out, 0, M_SVE_CONTIG_STORE, (b2221 + 1) * vlb);
        case 3:
            return put(out, 0, M_SVE_CONTIG_STORE, (b2221 + 1) * vlb);
        case 4:
        case 6:
            return put(out, 0, M_SVE_SCATTER, (vlb / (b22 ? 4 : 8)) << msz);
        case 5:
            return put(out, 0, M_SVE_SCATTER,
                       (vlb / (b2221 == 3 ? 4 : 8)) << msz);
        default: /* 1: stnt1 [z, x], st1q */
            if (b2221 == 1) {
                return put(out, 0, M_SVE_SCATTER, vlb);
            }
            return put(out, 0, M_SVE_SCATTER, (vlb / (b22 ? 4 : 8)) << msz);
        }
    default:
        return 0;
    }
}

/* Non-SVE loads and stores (op0 = x1x0). */
static int decode_ldst(uint32_t w, struct macc *out)
{
    uint32_t size = bits(w, 31, 30), V = bits(w, 26, 26), L = bits(w, 22, 22);
    int ld = V ? M_SIMD_LOAD : M_SCALAR_LOAD;
    int st = V ? M_SIMD_STORE : M_SCALAR_STORE;

    if ((w & 0xbf800000u) == 0x0c000000u || (w & 0xbf800000u) == 0x0c800000u) {
        /* Advanced SIMD load/store multiple structures */
        static const uint8_t nregs[16] = { 4, 0, 4, 0, 3, 0, 3, 1,
                                           2, 0, 2, 0, 0, 0, 0, 0 };
        uint64_t n = nregs[bits(w, 15, 12)] * (bits(w, 30, 30) ? 16u : 8u);
        return put(out, 0, L ? M_SIMD_LOAD : M_SIMD_STORE, n);
    }
    if ((w & 0xbf800000u) == 0x0d000000u || (w & 0xbf800000u) == 0x0d800000u) {
        /* Advanced SIMD load/store single structure (and LDnR) */
        uint32_t opc = bits(w, 15, 13), sz = bits(w, 11, 10);
        uint32_t selem = ((opc & 1) << 1 | bits(w, 21, 21)) + 1;
        uint64_t esize;
        switch (opc >> 1) {
        case 0:
            esize = 1;
            break;
        case 1:
            esize = 2;
            break;
        case 2:
            esize = (sz & 1) ? 8 : 4;
            break;
        default:
            esize = 1u << sz;
            break;
        }
        return put(out, 0, L ? M_SIMD_LOAD : M_SIMD_STORE, selem * esize);
    }
    if ((w & 0x3f000000u) == 0x08000000u) {
        /* exclusive, acquire/release, compare and swap */
        uint32_t o2 = bits(w, 23, 23), o1 = bits(w, 21, 21);
        if (!o2 && o1) {
            if (size >= 2) { /* ldxp/stxp */
                return put(out, 0, L ? M_SCALAR_LOAD : M_SCALAR_STORE,
                           2u << size);
            }
            int n = put(out, 0, M_SCALAR_LOAD, 8u << (size & 1)); /* casp */
            return put(out, n, M_SCALAR_STORE, 8u << (size & 1));
        }
        if (o2 && o1) { /* cas */
            int n = put(out, 0, M_SCALAR_LOAD, 1u << size);
            return put(out, n, M_SCALAR_STORE, 1u << size);
        }
        return put(out, 0, L ? M_SCALAR_LOAD : M_SCALAR_STORE, 1u << size);
    }
    if ((w & 0x3b000000u) == 0x18000000u) { /* load register (literal) */
        static const uint8_t gpr[4] = { 4, 8, 4, 0 }, fp[4] = { 4, 8, 16, 0 };
        if (!V && size == 3) {
            return put(out, 0, M_PREFETCH, 0);
        }
        return put(out, 0, ld, V ? fp[size] : gpr[size]);
    }
    if ((w & 0x38000000u) == 0x28000000u) { /* load/store pair */
        uint64_t b;
        if (V) {
            b = 8u << size;
        } else if (size == 1) {
            b = L ? 8 : 16; /* ldpsw / stgp */
        } else {
            b = size == 0 ? 8 : 16;
        }
        return put(out, 0, L ? ld : st, b);
    }
    if ((w & 0x38000000u) == 0x38000000u) { /* load/store register */
        uint32_t opc = bits(w, 23, 22);
        if (!V && !bits(w, 24, 24) && bits(w, 21, 21)) {
            uint32_t o1110 = bits(w, 11, 10);
            if (o1110 == 0) { /* atomic memory operations */
                uint32_t o3 = bits(w, 15, 15), aop = bits(w, 14, 12);
                if (o3 && aop == 4) { /* ldapr */
                    return put(out, 0, M_SCALAR_LOAD, 1u << size);
                }
                if (o3 && aop != 0) { /* ld64b / st64b* */
                    return put(out, 0, aop == 5 ? M_SCALAR_LOAD : M_SCALAR_STORE,
                               64);
                }
                int n = put(out, 0, M_SCALAR_LOAD, 1u << size);
                return put(out, n, M_SCALAR_STORE, 1u << size);
            }
            if (o1110 & 1) { /* ldraa / ldrab */
                return put(out, 0, M_SCALAR_LOAD, 8);
            }
        }
        if (V) {
            uint64_t b = (size == 0 && (opc & 2)) ? 16 : 1u << size;
            return put(out, 0, (opc & 1) ? M_SIMD_LOAD : M_SIMD_STORE, b);
        }
        if (opc == 0) {
            return put(out, 0, M_SCALAR_STORE, 1u << size);
        }
        if (opc == 2 && size == 3) {
            return put(out, 0, M_PREFETCH, 0);
        }
        return put(out, 0, M_SCALAR_LOAD, 1u << size);
    }
    if ((w & 0x3b000000u) == 0x19000000u) { /* ..011001 and ..011101 */
        if (bits(w, 31, 24) == 0xd9 && bits(w, 21, 21)) { /* MTE tags */
            uint32_t opc = bits(w, 23, 22);
            bool tagload = (opc & 1) && bits(w, 11, 10) == 0; /* ldg, ldgm */
            return put(out, 0, tagload ? M_SCALAR_LOAD : M_SCALAR_STORE, 0);
        }
        if (!V && !bits(w, 21, 21) && bits(w, 11, 10) == 0) { /* ldapur/stlur */
            return put(out, 0, bits(w, 23, 22) ? M_SCALAR_LOAD : M_SCALAR_STORE,
                       1u << size);
        }
        if (bits(w, 11, 10) == 1) { /* MOPS cpy*, set* */
            return put(out, 0, M_SCALAR_STORE, 0);
        }
    }
    /* anything else in the load/store space (newer extensions): by L bit,
     * bytes unknown */
    return put(out, 0, L ? ld : st, 0);
}

/* Memory accesses of one execution of insn at vl bits; returns 0..2. */
static int mem_decode(uint32_t w, uint64_t vl_bits, struct macc out[2])
{
    if ((w & 0x1e000000u) == 0x04000000u) {
        return (w >> 31) ? decode_sve(w, vl_bits / 8, out) : 0;
    }
    if ((w & 0x0a000000u) == 0x08000000u) {
        return decode_ldst(w, out);
    }
    return 0;
}

static bool parse_vl(const char *s, uint64_t *vl)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v < 128 || v > 2048 || v % 128) {
        return false;
    }
    *vl = v;
    return true;
}

#ifdef CLASSIFY_MAIN
/* Host test tool: memclassify <vl_bits>; hex words on stdin; prints
 * "<word> <class>:<bytes> [<class>:<bytes>]" or "<word> -". */
int main(int argc, char **argv)
{
    unsigned long w;
    uint64_t vl;

    if (argc != 2 || !parse_vl(argv[1], &vl)) {
        fprintf(stderr, "usage: memclassify <vl bits>\n");
        return 2;
    }
    while (scanf("%lx", &w) == 1) {
        struct macc acc[2];
        int n = mem_decode((uint32_t)w, vl, acc);
        printf("%08lx", w);
        if (!n) {
            printf(" -");
        }
        for (int i = 0; i < n; i++) {
            printf(" %s:%llu", mclass_names[acc[i].cls],
                   (unsigned long long)acc[i].bytes);
        }
        printf("\n");
    }
    return 0;
}
#else /* the plugin */

#include "tbstats.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

static const char *const CLIENT = "memory";

static uint64_t vl_bits;
static uint64_t m_insns[N_MCLASSES], m_bytes[N_MCLASSES];
static uint64_t obs_loads, obs_stores, obs_other;

static bool is_store_class(int c)
{
    return c == M_SCALAR_STORE || c == M_SIMD_STORE ||
           c == M_SVE_CONTIG_STORE || c == M_SVE_SCATTER;
}

static void add_insn(const tbs_insn *in, void *ud)
{
    struct macc acc[2];
    int n;
    (void)ud;

    if (!in->roi && !in->roi_mem) {
        return;
    }
    n = mem_decode(in->enc, vl_bits, acc);
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
                    k ? "," : "", mclass_names[k],
                    (unsigned long long)m_insns[k],
                    (unsigned long long)m_bytes[k]);
        }
        fprintf(f,
                "},\n    \"qemu_observed\": {\"loads\": %llu, \"stores\": "
                "%llu, \"other\": %llu}}",
                (unsigned long long)obs_loads, (unsigned long long)obs_stores,
                (unsigned long long)obs_other);
    }
    tbs_json_close(f);
}

static int parse_arg(const char *key, const char *val)
{
    if (strcmp(key, "vl") != 0) {
        return 0;
    }
    if (!parse_vl(val, &vl_bits)) {
        fprintf(stderr,
                "%s: vl=%s: expected a multiple of 128 in 128..2048 (bits)\n",
                CLIENT, val);
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
    if (!vl_bits) {
        fprintf(stderr, "%s: missing required argument vl=<bits>\n", CLIENT);
        return -1;
    }
    tbs_start(id, true, report);
    return 0;
}

#endif /* CLASSIFY_MAIN */
