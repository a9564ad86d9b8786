/*
 * inscount.c - QEMU 7.2 TCG plugin: SVE-aware instruction counts, whole run
 * and region of interest (between hint #0x40 and hint #0x41), by class.
 *
 * Build:
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -std=c11 -o libinscount.so inscount.c tbstats.c
 * Classifier test tool (host; hex words on stdin -> class names):
 *   gcc -O2 -Wall -Wextra -std=c11 -DCLASSIFY_MAIN -o classify inscount.c
 * Use:
 *   qemu-aarch64 -plugin ./libinscount.so,out=counts.json ./prog args
 * Arguments: out=<path> (required). Unknown keys are rejected.
 *
 * Output (docs/contracts.md section 3): one JSON object with "client",
 * "plugin_api", "markers", "whole" and "roi" ({"total", "sve", "classes"}),
 * and "roi_functions" ([{"symbol", "total", "sve"}] sorted by total, the
 * instructions without a symbol under "?"). roi and roi_functions are null
 * when the markers are not balanced.
 *
 * Counting: one inline counter per translation block and callbacks on the
 * two marker instructions only (tbstats.c); classification is done once per
 * static instruction at exit.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- instruction classes ---------------------------------------------- */

enum {
    C_SVE_GATHER,
    C_SVE_SCATTER,
    C_SVE_FIRST_FAULT,
    C_SVE_CONTIG_LOAD,
    C_SVE_CONTIG_STORE,
    C_SVE_PRED,
    C_SVE_REDUCE,
    C_SVE_MOVPRFX,
    C_SVE_OTHER,
    C_SIMD_LDST,
    C_SIMD,
    C_SCALAR_LDST,
    C_BRANCH,
    C_SCALAR_OTHER,
    N_CLASSES
};

static const char *const class_names[N_CLASSES] = {
    "sve_gather",    "sve_scatter",      "sve_first_fault", "sve_contig_load",
    "sve_contig_store", "sve_pred",      "sve_reduce",      "sve_movprfx",
    "sve_other",     "simd_ldst",        "simd",            "scalar_ldst",
    "branch",        "scalar_other",
};

/*
 * The class table: bit patterns, most significant bit (31) first, '0'/'1'
 * must match, '.' is don't care, spaces are ignored (they follow the field
 * boundaries of the Arm ARM encoding index). ORDER MATTERS: the first
 * matching row wins, and the rows are in class order (docs/contracts.md).
 * Consequences that the rows rely on:
 *   - gather rows exclude the first-fault forms (bit 13 = ff = 1), which
 *     fall through to sve_first_fault;
 *   - each SVE space ends with a catch-all row (contiguous loads, stores,
 *     sve_other for everything with op0 = 0010), so every SVE encoding
 *     (insn & 0x1e000000) == 0x04000000 lands in exactly one sve_* class and
 *     no other encoding does;
 *   - the last row matches everything (scalar_other).
 * Decisions: SVE prefetches count with the load form they share (contiguous
 * prf* -> sve_contig_load, vector-addressed prf* -> sve_gather), as scalar
 * PRFM counts in scalar_ldst; LD1R*, LD1RQ/RO, LDR Z/P -> sve_contig_load;
 * LDNT1/STNT1 with vector addresses -> sve_gather/sve_scatter; sve_pred =
 * instructions writing a predicate register or FFR (while*, ptrue(s),
 * pfalse, pfirst, pnext, brk*, predicate logical and/orr/eor/bic/nand/nor/
 * orn/sel and their mov/not aliases, predicate permutes zip/uzp/trn/rev/
 * punpk, integer and FP compares cmp* fcm* fac*, match/nmatch, rdffr,
 * setffr, wrffr) plus PTEST; CTERM, CNTP and INC/DEC by predicate count are
 * sve_other (scalar results); SVC/HVC/BRK and system instructions are
 * scalar_other; exclusive, acquire/release and atomic memory operations are
 * scalar_ldst.
 */
struct class_row {
    const char *bits;
    int cls;
};

static const struct class_row class_rows[] = {
    /* SVE 32-bit gather loads (bit 13 = ff must be 0) and gather prefetch */
    { "1000010 00 .0 ..... 0.0 ... ..... .....", C_SVE_GATHER }, /* ld1b/sb [x, z.s] */
    { "1000010 01 .. ..... 0.0 ... ..... .....", C_SVE_GATHER }, /* ld1h/sh [x, z.s] */
    { "1000010 10 .. ..... 010 ... ..... .....", C_SVE_GATHER }, /* ld1w [x, z.s] */
    { "1000010 .. 01 ..... 1.0 ... ..... .....", C_SVE_GATHER }, /* ld1* [z.s, #imm] */
    { "1000010 .. 00 ..... 10. ... ..... .....", C_SVE_GATHER }, /* ldnt1* [z.s, x] */
    { "1000010 00 .1 ..... 0.. ... ..... .....", C_SVE_GATHER }, /* prf* [x, z.s] */
    { "1000010 .. 00 ..... 111 ... ..... .....", C_SVE_GATHER }, /* prf* [z.s, #imm] */
    /* SVE 64-bit gather: prefetches and ld1q first (bit 13 is not ff) */
    { "1100010 00 .1 ..... 0.. ... ..... .....", C_SVE_GATHER }, /* prf* [x, z.d, xtw] */
    { "1100010 00 11 ..... 1.. ... ..... .....", C_SVE_GATHER }, /* prf* [x, z.d, lsl] */
    { "1100010 .. 00 ..... 111 ... ..... .....", C_SVE_GATHER }, /* prf* [z.d, #imm] */
    { "1100010 00 00 ..... 101 ... ..... .....", C_SVE_GATHER }, /* ld1q (SVE2.1) */
    { "1100010 .. .. ..... ..0 ... ..... .....", C_SVE_GATHER }, /* ld1*, ldnt1* */
    /* SVE scatter stores */
    { "1110010 .. .. ..... 1.0 ... ..... .....", C_SVE_SCATTER }, /* st1* [x, z] */
    { "1110010 .. .. ..... 101 ... ..... .....", C_SVE_SCATTER }, /* st1* [x, z.d] / [z, #imm] */
    { "1110010 .. .. ..... 001 ... ..... .....", C_SVE_SCATTER }, /* stnt1* [z, x], st1q */
    /* SVE first-fault and non-fault loads */
    { "1000010 00 .0 ..... 0.1 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1b gather */
    { "1000010 01 .. ..... 0.1 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1h gather */
    { "1000010 10 .. ..... 011 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1w gather */
    { "1000010 .. 01 ..... 1.1 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1* [z.s, #imm] */
    { "1100010 .. .. ..... ..1 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1* 64-bit gather */
    { "1010010 .... ..... 011 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldff1* [x, x] */
    { "1010010 .... 1.... 101 ... ..... .....", C_SVE_FIRST_FAULT }, /* ldnf1* [x, #imm] */
    /* SVE contiguous loads */
    { "1000010 110 ...... 0.0 ... ..... .....", C_SVE_CONTIG_LOAD }, /* ldr p / ldr z */
    { "1000010 .. 1 ...... 1.. ... ..... .....", C_SVE_CONTIG_LOAD }, /* ld1r* */
    { "1000010 11 1. ..... 0.. ... ..... .....", C_SVE_CONTIG_LOAD }, /* prf* [x, #imm] */
    { "1000010 .. 00 ..... 110 ... ..... .....", C_SVE_CONTIG_LOAD }, /* prf* [x, x] */
    { "1010010 .. .. ..... ... ... ..... .....", C_SVE_CONTIG_LOAD }, /* ld1*, ldnt1, ld2-4, ld1rq/ro */
    /* SVE contiguous stores (all remaining stores: st1*, stnt1, st2-4, str) */
    { "1110010 .. .. ..... ... ... ..... .....", C_SVE_CONTIG_STORE },
    /* SVE predicate-generating (and ptest) */
    { "00100100 .. . ..... ... ... ..... .....", C_SVE_PRED }, /* cmp* vectors, unsigned imm */
    { "00100101 .. 0 ..... ... ... ..... .....", C_SVE_PRED }, /* cmp* imm, p logical, brk*, ptest, ptrue, pfalse, rdffr, pfirst, pnext */
    { "00100101 0010 1.00 1001 000 .... .....", C_SVE_PRED }, /* setffr, wrffr */
    { "00100101 .. 1 ..... 000 ... ..... .....", C_SVE_PRED }, /* while{lt,le,lo,ls,gt,ge,hi,hs} */
    { "00100101 .. 1 ..... 001 100 ..... .....", C_SVE_PRED }, /* whilerw, whilewr */
    { "00100101 .. 1 ..... 01. ... ..... .....", C_SVE_PRED }, /* psel, SVE2.1 while pairs, pext, ptrue pn */
    { "00000101 .. 1 ..... 010 ... ..... .....", C_SVE_PRED }, /* zip/uzp/trn/rev p, punpk */
    { "01100101 .. 0 ..... 01. ... ..... .....", C_SVE_PRED }, /* fcmge/gt/eq/ne vectors */
    { "01100101 .. 0 ..... 11. ... ..... .....", C_SVE_PRED }, /* fcmuo, facge, facgt */
    { "01100101 .. 0100 .. 001 ... ..... .....", C_SVE_PRED }, /* fcm* #0.0 */
    { "01000101 .. 1 ..... 100 ... ..... .....", C_SVE_PRED }, /* match, nmatch */
    /* SVE reductions (not the movprfx rows at 00000100 .. 010 00. 001) */
    { "00000100 .. 000 ... 001 ... ..... .....", C_SVE_REDUCE }, /* saddv, uaddv, addqv */
    { "00000100 .. 001 ... 001 ... ..... .....", C_SVE_REDUCE }, /* smaxv umaxv sminv uminv (+qv) */
    { "00000100 .. 011 ... 001 ... ..... .....", C_SVE_REDUCE }, /* orv eorv andv (+qv) */
    { "01100101 .. 000 ... 001 ... ..... .....", C_SVE_REDUCE }, /* faddv fmaxnmv fminnmv fmaxv fminv */
    { "01100101 .. 011 000 001 ... ..... .....", C_SVE_REDUCE }, /* fadda */
    /* SVE movprfx */
    { "00000100 .. 010 00. 001 ... ..... .....", C_SVE_MOVPRFX }, /* predicated */
    { "00000100 00 1 00000 101111 ..... .....", C_SVE_MOVPRFX },  /* unpredicated */
    /* everything else with op0 = 0010 */
    { "...0010. ........ ........ ........", C_SVE_OTHER },
    /* non-SVE loads/stores (op0 = x1x0): bit 26 = V selects SIMD&FP, except
     * for the MOPS CPY* rows at ..011101 with bits 11:10 = 01 */
    { "..00110. ........ ........ ........", C_SIMD_LDST }, /* ld1-4/st1-4 structures */
    { "..011100 ........ ........ ........", C_SIMD_LDST }, /* ldr (literal) */
    { "..011101 ........ ....10.. ........", C_SIMD_LDST }, /* ldapur/stlur (FEAT_LRCPC3) */
    { "..1.110. ........ ........ ........", C_SIMD_LDST }, /* ldp/stp, ldr/str */
    /* Advanced SIMD and scalar FP data processing (op0 = x111) */
    { "....111. ........ ........ ........", C_SIMD },
    { "....1.0. ........ ........ ........", C_SCALAR_LDST }, /* incl. prfm, exclusives, atomics */
    /* branches */
    { ".00101.. ........ ........ ........", C_BRANCH }, /* b, bl */
    { "01010100 ........ ........ ........", C_BRANCH }, /* b.cond, bc.cond */
    { ".011010. ........ ........ ........", C_BRANCH }, /* cbz, cbnz */
    { ".011011. ........ ........ ........", C_BRANCH }, /* tbz, tbnz */
    { "1101011. ........ ........ ........", C_BRANCH }, /* br, blr, ret (+pauth), eret, drps */
    { "........ ........ ........ ........", C_SCALAR_OTHER },
};

#define N_ROWS (sizeof(class_rows) / sizeof(class_rows[0]))

static uint32_t row_mask[N_ROWS], row_pattern[N_ROWS];

/* Turn the bit strings into mask/pattern pairs; false if a row is malformed. */
static bool class_table_init(void)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        uint32_t mask = 0, pat = 0;
        int nbits = 0;

        for (const char *p = class_rows[r].bits; *p; p++) {
            if (*p == ' ') {
                continue;
            }
            if (*p != '0' && *p != '1' && *p != '.') {
                return false;
            }
            mask <<= 1;
            pat <<= 1;
            if (*p != '.') {
                mask |= 1;
                pat |= (uint32_t)(*p == '1');
            }
            nbits++;
        }
        if (nbits != 32) {
            fprintf(stderr, "inscount: class row %zu has %d bits\n", r, nbits);
            return false;
        }
        row_mask[r] = mask;
        row_pattern[r] = pat;
    }
    return true;
}

static int classify(uint32_t insn)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        if ((insn & row_mask[r]) == row_pattern[r]) {
            return class_rows[r].cls;
        }
    }
    return C_SCALAR_OTHER;
}

static bool is_sve(uint32_t insn)
{
    return (insn & 0x1e000000u) == 0x04000000u;
}

#ifdef CLASSIFY_MAIN
/* Host test tool: hex words on stdin, one class name per word on stdout. */
int main(void)
{
    unsigned long w;

    if (!class_table_init()) {
        return 2;
    }
    while (scanf("%lx", &w) == 1) {
        uint32_t insn = (uint32_t)w;
        printf("%08x %s %d\n", insn, class_names[classify(insn)],
               is_sve(insn) ? 1 : 0);
    }
    return 0;
}
#else /* the plugin */

#include "tbstats.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

static const char *const CLIENT = "inscount";

struct counts {
    uint64_t total, sve, cls[N_CLASSES];
};

struct func {
    const char *name;
    uint64_t total, sve;
};

/* small open-addressing table symbol -> ROI totals */
static struct func *funcs;
static size_t funcs_cap, funcs_n;

static struct counts whole, roi;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    }
    return h;
}

static struct func *func_slot(const char *name)
{
    size_t i;

    if (2 * (funcs_n + 1) > funcs_cap) {
        size_t ncap = funcs_cap ? 2 * funcs_cap : 256;
        struct func *nf = calloc(ncap, sizeof(*nf));
        if (!nf) {
            abort();
        }
        for (size_t k = 0; k < funcs_cap; k++) {
            if (funcs[k].name) {
                size_t j = str_hash(funcs[k].name) & (ncap - 1);
                while (nf[j].name) {
                    j = (j + 1) & (ncap - 1);
                }
                nf[j] = funcs[k];
            }
        }
        free(funcs);
        funcs = nf;
        funcs_cap = ncap;
    }
    i = str_hash(name) & (funcs_cap - 1);
    while (funcs[i].name && strcmp(funcs[i].name, name) != 0) {
        i = (i + 1) & (funcs_cap - 1);
    }
    if (!funcs[i].name) {
        funcs[i].name = name;
        funcs_n++;
    }
    return &funcs[i];
}

static void add_insn(const tbs_insn *in, void *ud)
{
    int c = classify(in->enc);
    bool sve = is_sve(in->enc);
    (void)ud;

    whole.total += in->whole;
    whole.cls[c] += in->whole;
    whole.sve += sve ? in->whole : 0;
    if (in->roi) {
        struct func *f = func_slot(in->sym ? in->sym : "?");
        roi.total += in->roi;
        roi.cls[c] += in->roi;
        roi.sve += sve ? in->roi : 0;
        f->total += in->roi;
        f->sve += sve ? in->roi : 0;
    }
}

static int func_cmp(const void *a, const void *b)
{
    const struct func *x = a, *y = b;
    if (x->total != y->total) {
        return x->total < y->total ? 1 : -1;
    }
    return strcmp(x->name, y->name);
}

static void put_counts(FILE *f, const struct counts *c)
{
    fprintf(f, "{\"total\": %llu, \"sve\": %llu, \"classes\": {",
            (unsigned long long)c->total, (unsigned long long)c->sve);
    for (int k = 0; k < N_CLASSES; k++) {
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", class_names[k],
                (unsigned long long)c->cls[k]);
    }
    fprintf(f, "}}");
}

static void report(void)
{
    bool ok = tbs_roi_balanced();
    FILE *f;

    tbs_foreach(add_insn, NULL);
    f = tbs_json_open(CLIENT);
    if (!f) {
        return;
    }
    fprintf(f, ",\n  \"whole\": ");
    put_counts(f, &whole);
    fprintf(f, ",\n  \"roi\": ");
    if (ok) {
        put_counts(f, &roi);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"roi_functions\": ");
    if (ok) {
        struct func *list = calloc(funcs_n ? funcs_n : 1, sizeof(*list));
        size_t n = 0;
        if (!list) {
            abort();
        }
        for (size_t k = 0; k < funcs_cap; k++) {
            if (funcs[k].name) {
                list[n++] = funcs[k];
            }
        }
        qsort(list, n, sizeof(*list), func_cmp);
        fprintf(f, "[");
        for (size_t k = 0; k < n; k++) {
            fprintf(f, "%s\n    {\"symbol\": ", k ? "," : "");
            tbs_json_string(f, list[k].name);
            fprintf(f, ", \"total\": %llu, \"sve\": %llu}",
                    (unsigned long long)list[k].total,
                    (unsigned long long)list[k].sve);
        }
        fprintf(f, "%s]", n ? "\n  " : "");
        free(list);
    } else {
        fprintf(f, "null");
    }
    tbs_json_close(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info, int argc,
                                           char **argv)
{
    if (tbs_parse_args(CLIENT, info, argc, argv, NULL, "out=<path>") != 0 ||
        !class_table_init()) {
        return -1;
    }
    tbs_start(id, false, report);
    return 0;
}

#endif /* CLASSIFY_MAIN */
