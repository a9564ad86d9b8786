/*
 * decode.c - the A64 decoder shared by the armie_clients plugins: one
 * ordered table gives each 32-bit encoding its instruction class
 * (inscount), its memory class and the rule for its bytes (memory), so the
 * two clients cannot disagree on what an SVE load or store is.
 *
 * Compiled into each client plugin (analysis/stages/build.py plugin_cmd: <client>.c
 * decode.c); the host test driver tests/decode_driver.c links it too.
 */
#include "decode.h"

#include <stdio.h>

const char *const insn_class_names[N_CLASSES] = {
    "sve_gather",    "sve_scatter",      "sve_first_fault", "sve_contig_load",
    "sve_contig_store", "sve_pred",      "sve_reduce",      "sve_movprfx",
    "sve_other",     "simd_ldst",        "simd",            "scalar_ldst",
    "branch",        "scalar_other",
};

const char *const mem_class_names[N_MCLASSES] = {
    "scalar_load",      "scalar_store",     "simd_load",  "simd_store",
    "sve_contig_load",  "sve_contig_store", "sve_gather", "sve_scatter",
    "sve_first_fault",  "prefetch",
};

/* A row's memory class is one of enum mem_class, or: */
enum {
    MEM_NONE = -1, /* not a memory instruction */
    MEM_LDST = -2, /* non-SVE load/store: class and bytes from decode_ldst() */
};

/*
 * Bytes of one SVE access, vlb = vector bytes, msz = bits 24:23; every
 * predicate lane is assumed active (an upper bound). First-fault and
 * non-fault loads count as if no lane faulted.
 */
enum bytes_rule {
    B_ZERO,      /* prefetch, or not memory */
    B_FIXED,     /* arg bytes (LD1RQ 16, LD1RO 32) */
    B_VL_SHR,    /* vlb >> arg: LDR/STR Z 0, LDR/STR P 3, 128-bit elements 1-2 */
    B_ELEM,      /* LD1R*: one element, dtype = msz:bits 14:13 */
    B_CONTIG,    /* VL/esize elements of msize, dtype = bits 24:21 */
    B_CONTIG_ST, /* ST1*: VL/esize elements of msize, esz = bits 22:21 */
    B_NVEC_2221, /* bits 22:21 + 1 vectors (LD2-4, ST2-4, LDNT1, STNT1) */
    B_NVEC_MSZ,  /* msz + 1 vectors (LD2-4Q) */
    B_NVEC_2322, /* bits 23:22 + 1 vectors (ST2-4Q) */
    B_GATHER,    /* VL >> arg elements of 1 << msz bytes (arg 2: 32-bit, 3: 64-bit) */
};

/*
 * The table: bit patterns, most significant bit (31) first, '0'/'1'
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
 *   - the last row matches everything (scalar_other);
 *   - a row may be preceded by narrower rows of the same class that only
 *     set its memory rule apart (they follow the memory client's split of
 *     the SVE load/store spaces).
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
 * Memory: SVE prefetches and PRFM count as instructions with 0 bytes;
 * gathers/scatters VL/32 or VL/64 elements of msize; LD1R* one element;
 * non-SVE loads and stores are decoded by decode_ldst() below.
 */
struct row {
    const char *bits;
    int cls;
    int mem;  /* enum mem_class, MEM_NONE or MEM_LDST */
    int rule; /* enum bytes_rule (SVE rows) */
    int arg;
};

#define NOMEM MEM_NONE, B_ZERO, 0
#define LDST MEM_LDST, B_ZERO, 0
#define PRF M_PREFETCH, B_ZERO, 0

static const struct row rows[] = {
    /* SVE 32-bit gather loads (bit 13 = ff must be 0) and gather prefetch */
    { "1000010 00 .0 ..... 0.0 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 2 }, /* ld1b/sb [x, z.s] */
    { "1000010 01 .. ..... 0.0 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 2 }, /* ld1h/sh [x, z.s] */
    { "1000010 10 .. ..... 010 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 2 }, /* ld1w [x, z.s] */
    { "1000010 .. 01 ..... 1.0 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 2 }, /* ld1* [z.s, #imm] */
    { "1000010 .. 00 ..... 10. ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 2 }, /* ldnt1* [z.s, x] */
    { "1000010 00 .1 ..... 0.. ... ..... .....", C_SVE_GATHER, PRF }, /* prf* [x, z.s] */
    { "1000010 .. 00 ..... 111 ... ..... .....", C_SVE_GATHER, PRF }, /* prf* [z.s, #imm] */
    /* SVE 64-bit gather: prefetches and ld1q first (bit 13 is not ff) */
    { "1100010 00 .1 ..... 0.. ... ..... .....", C_SVE_GATHER, PRF }, /* prf* [x, z.d, xtw] */
    { "1100010 00 11 ..... 1.. ... ..... .....", C_SVE_GATHER, PRF }, /* prf* [x, z.d, lsl] */
    { "1100010 .. 00 ..... 111 ... ..... .....", C_SVE_GATHER, PRF }, /* prf* [z.d, #imm] */
    { "1100010 00 00 ..... 101 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_VL_SHR, 0 }, /* ld1q (SVE2.1) */
    { "1100010 .. .. ..... ..0 ... ..... .....", C_SVE_GATHER, M_SVE_GATHER, B_GATHER, 3 }, /* ld1*, ldnt1* */
    /* SVE scatter stores */
    { "1110010 .. 1. ..... 1.0 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 2 }, /* st1* [x, z.s] */
    { "1110010 .. .. ..... 1.0 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 3 }, /* st1* [x, z.d] */
    { "1110010 .. 11 ..... 101 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 2 }, /* st1* [z.s, #imm] */
    { "1110010 .. .. ..... 101 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 3 }, /* st1* [x, z.d] / [z.d, #imm] */
    { "1110010 .. 01 ..... 001 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_VL_SHR, 0 }, /* st1q */
    { "1110010 .. 1. ..... 001 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 2 }, /* stnt1* [z.s, x] */
    { "1110010 .. .. ..... 001 ... ..... .....", C_SVE_SCATTER, M_SVE_SCATTER, B_GATHER, 3 }, /* stnt1* [z.d, x] */
    /* SVE first-fault and non-fault loads */
    { "1000010 00 .0 ..... 0.1 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_GATHER, 2 }, /* ldff1b gather */
    { "1000010 01 .. ..... 0.1 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_GATHER, 2 }, /* ldff1h gather */
    { "1000010 10 .. ..... 011 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_GATHER, 2 }, /* ldff1w gather */
    { "1000010 .. 01 ..... 1.1 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_GATHER, 2 }, /* ldff1* [z.s, #imm] */
    { "1100010 .. .. ..... ..1 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_GATHER, 3 }, /* ldff1* 64-bit gather */
    { "1010010 .... ..... 011 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_CONTIG, 0 }, /* ldff1* [x, x] */
    { "1010010 .... 1.... 101 ... ..... .....", C_SVE_FIRST_FAULT, M_SVE_FIRST_FAULT, B_CONTIG, 0 }, /* ldnf1* [x, #imm] */
    /* SVE contiguous loads */
    { "1000010 110 ...... 010 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 0 }, /* ldr z */
    { "1000010 110 ...... 0.0 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 3 }, /* ldr p */
    { "1000010 .. 1 ...... 1.. ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_ELEM, 0 }, /* ld1r* */
    { "1000010 11 1. ..... 0.. ... ..... .....", C_SVE_CONTIG_LOAD, PRF }, /* prf* [x, #imm] */
    { "1000010 .. 00 ..... 110 ... ..... .....", C_SVE_CONTIG_LOAD, PRF }, /* prf* [x, x] */
    { "1010010 .... ..... 010 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_CONTIG, 0 }, /* ld1* [x, x] */
    { "1010010 .... ..... 101 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_CONTIG, 0 }, /* ld1* [x, #imm] */
    { "1010010 .... ..... 110 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_NVEC_2221, 0 }, /* ldnt1, ld2-4 [x, x] */
    { "1010010 .... 1.... 111 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_NVEC_MSZ, 0 }, /* ld2-4q [x, #imm] */
    { "1010010 .... ..... 111 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_NVEC_2221, 0 }, /* ldnt1, ld2-4 [x, #imm] */
    { "1010010 11.. 1.... 001 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 1 }, /* ld1d .q [x, #imm] */
    { "1010010 .... 1.... 001 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 2 }, /* ld1w .q [x, #imm] */
    { "1010010 ..01 ..... 00. ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_FIXED, 32 }, /* ld1ro* */
    { "1010010 .... ..... 00. ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_FIXED, 16 }, /* ld1rq* */
    { "1010010 ..01 ..... 100 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_NVEC_MSZ, 0 }, /* ld2-4q [x, x] */
    { "1010010 11.. ..... 100 ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 1 }, /* ld1d .q [x, x] */
    { "1010010 .. .. ..... ... ... ..... .....", C_SVE_CONTIG_LOAD, M_SVE_CONTIG_LOAD, B_VL_SHR, 2 }, /* ld1w .q [x, x] */
    /* SVE contiguous stores (all remaining stores: st1*, stnt1, st2-4, str) */
    { "1110010 110 ...... 000 ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_VL_SHR, 3 }, /* str p */
    { "1110010 .. .. ..... 000 ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_NVEC_2322, 0 }, /* st2-4q */
    { "1110010 110 ...... 010 ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_VL_SHR, 0 }, /* str z */
    { "1110010 .. .. ..... 010 ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_CONTIG_ST, 0 }, /* st1* [x, x] */
    { "1110010 .... 0.... 111 ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_CONTIG_ST, 0 }, /* st1* [x, #imm] */
    { "1110010 .. .. ..... ... ... ..... .....", C_SVE_CONTIG_STORE, M_SVE_CONTIG_STORE, B_NVEC_2221, 0 }, /* stnt1, st2-4 */
    /* SVE predicate-generating (and ptest) */
    { "00100100 .. . ..... ... ... ..... .....", C_SVE_PRED, NOMEM }, /* cmp* vectors, unsigned imm */
    { "00100101 .. 0 ..... ... ... ..... .....", C_SVE_PRED, NOMEM }, /* cmp* imm, p logical, brk*, ptest, ptrue, pfalse, rdffr, pfirst, pnext */
    { "00100101 0010 1.00 1001 000 .... .....", C_SVE_PRED, NOMEM }, /* setffr, wrffr */
    { "00100101 .. 1 ..... 000 ... ..... .....", C_SVE_PRED, NOMEM }, /* while{lt,le,lo,ls,gt,ge,hi,hs} */
    { "00100101 .. 1 ..... 001 100 ..... .....", C_SVE_PRED, NOMEM }, /* whilerw, whilewr */
    { "00100101 .. 1 ..... 01. ... ..... .....", C_SVE_PRED, NOMEM }, /* psel, SVE2.1 while pairs, pext, ptrue pn */
    { "00000101 .. 1 ..... 010 ... ..... .....", C_SVE_PRED, NOMEM }, /* zip/uzp/trn/rev p, punpk */
    { "01100101 .. 0 ..... 01. ... ..... .....", C_SVE_PRED, NOMEM }, /* fcmge/gt/eq/ne vectors */
    { "01100101 .. 0 ..... 11. ... ..... .....", C_SVE_PRED, NOMEM }, /* fcmuo, facge, facgt */
    { "01100101 .. 0100 .. 001 ... ..... .....", C_SVE_PRED, NOMEM }, /* fcm* #0.0 */
    { "01000101 .. 1 ..... 100 ... ..... .....", C_SVE_PRED, NOMEM }, /* match, nmatch */
    /* SVE reductions (not the movprfx rows at 00000100 .. 010 00. 001) */
    { "00000100 .. 000 ... 001 ... ..... .....", C_SVE_REDUCE, NOMEM }, /* saddv, uaddv, addqv */
    { "00000100 .. 001 ... 001 ... ..... .....", C_SVE_REDUCE, NOMEM }, /* smaxv umaxv sminv uminv (+qv) */
    { "00000100 .. 011 ... 001 ... ..... .....", C_SVE_REDUCE, NOMEM }, /* orv eorv andv (+qv) */
    { "01100101 .. 000 ... 001 ... ..... .....", C_SVE_REDUCE, NOMEM }, /* faddv fmaxnmv fminnmv fmaxv fminv */
    { "01100101 .. 011 000 001 ... ..... .....", C_SVE_REDUCE, NOMEM }, /* fadda */
    /* SVE movprfx */
    { "00000100 .. 010 00. 001 ... ..... .....", C_SVE_MOVPRFX, NOMEM }, /* predicated */
    { "00000100 00 1 00000 101111 ..... .....", C_SVE_MOVPRFX, NOMEM },  /* unpredicated */
    /* everything else with op0 = 0010 */
    { "...0010. ........ ........ ........", C_SVE_OTHER, NOMEM },
    /* non-SVE loads/stores (op0 = x1x0): bit 26 = V selects SIMD&FP, except
     * for the MOPS CPY* rows at ..011101 with bits 11:10 = 01 */
    { "..00110. ........ ........ ........", C_SIMD_LDST, LDST }, /* ld1-4/st1-4 structures */
    { "..011100 ........ ........ ........", C_SIMD_LDST, LDST }, /* ldr (literal) */
    { "..011101 ........ ....1... ........", C_SIMD_LDST, LDST }, /* ldapur/stlur (FEAT_LRCPC3) */
    { "..011101 ........ ....00.. ........", C_SIMD_LDST, LDST }, /* (unallocated, V = 1) */
    { "..1.110. ........ ........ ........", C_SIMD_LDST, LDST }, /* ldp/stp, ldr/str */
    /* Advanced SIMD and scalar FP data processing (op0 = x111) */
    { "....111. ........ ........ ........", C_SIMD, NOMEM },
    { "....1.0. ........ ........ ........", C_SCALAR_LDST, LDST }, /* incl. prfm, exclusives, atomics */
    /* branches */
    { ".00101.. ........ ........ ........", C_BRANCH, NOMEM }, /* b, bl */
    { "01010100 ........ ........ ........", C_BRANCH, NOMEM }, /* b.cond, bc.cond */
    { ".011010. ........ ........ ........", C_BRANCH, NOMEM }, /* cbz, cbnz */
    { ".011011. ........ ........ ........", C_BRANCH, NOMEM }, /* tbz, tbnz */
    { "1101011. ........ ........ ........", C_BRANCH, NOMEM }, /* br, blr, ret (+pauth), eret, drps */
    { "........ ........ ........ ........", C_SCALAR_OTHER, NOMEM },
};

#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

static uint32_t row_mask[N_ROWS], row_pattern[N_ROWS];

bool decode_init(void)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        uint32_t mask = 0, pat = 0;
        int nbits = 0;

        for (const char *p = rows[r].bits; *p; p++) {
            if (*p == ' ') {
                continue;
            }
            if (*p != '0' && *p != '1' && *p != '.') {
                fprintf(stderr, "decode: row %zu has '%c'\n", r, *p);
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
            fprintf(stderr, "decode: row %zu has %d bits\n", r, nbits);
            return false;
        }
        row_mask[r] = mask;
        row_pattern[r] = pat;
    }
    return true;
}

/* The first matching row; the last row matches every encoding. */
static const struct row *lookup(uint32_t insn)
{
    size_t r = 0;

    while (r < N_ROWS - 1 && (insn & row_mask[r]) != row_pattern[r]) {
        r++;
    }
    return &rows[r];
}

int decode_class(uint32_t insn)
{
    return lookup(insn)->cls;
}

bool decode_is_sve(uint32_t insn)
{
    return (insn & 0x1e000000u) == 0x04000000u;
}

static inline uint32_t bits(uint32_t w, int hi, int lo)
{
    return (w >> lo) & ((1u << (hi - lo + 1)) - 1);
}

static int put(struct mem_access *out, int n, int cls, uint64_t bytes)
{
    out[n].cls = cls;
    out[n].bytes = bytes;
    return n + 1;
}

/* SVE dtype (4 bits) -> log2 memory size / log2 element size */
static const uint8_t dtype_msz[16] = { 0, 0, 0, 0, 2, 1, 1, 1,
                                       1, 1, 2, 2, 0, 0, 0, 3 };
static const uint8_t dtype_esz[16] = { 0, 1, 2, 3, 3, 1, 2, 3,
                                       3, 2, 2, 3, 3, 2, 1, 3 };

static uint64_t sve_bytes(const struct row *r, uint32_t w, uint64_t vlb)
{
    uint32_t msz = bits(w, 24, 23);

    switch (r->rule) {
    case B_FIXED:
        return (uint64_t)r->arg;
    case B_VL_SHR:
        return vlb >> r->arg;
    case B_ELEM:
        return 1u << dtype_msz[msz << 2 | bits(w, 14, 13)];
    case B_CONTIG: {
        uint32_t dt = bits(w, 24, 21);
        return (vlb >> dtype_esz[dt]) << dtype_msz[dt];
    }
    case B_CONTIG_ST: {
        uint32_t esz = bits(w, 22, 21);
        if ((msz == 2 && esz == 0) || (msz == 3 && esz == 2)) {
            esz = 4; /* st1w/st1d of 128-bit elements */
        }
        return (vlb >> esz) << msz;
    }
    case B_NVEC_2221:
        return (bits(w, 22, 21) + 1) * vlb;
    case B_NVEC_MSZ:
        return (msz + 1) * vlb;
    case B_NVEC_2322:
        return (bits(w, 23, 22) + 1) * vlb;
    case B_GATHER:
        return (vlb >> r->arg) << msz;
    default:
        return 0;
    }
}

/* Non-SVE loads and stores (op0 = x1x0). */
static int decode_ldst(uint32_t w, struct mem_access *out)
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


int decode_mem(uint32_t insn, uint64_t vl_bits, struct mem_access out[2])
{
    const struct row *r = lookup(insn);

    if (r->mem == MEM_LDST) {
        return decode_ldst(insn, out);
    }
    if (r->mem == MEM_NONE) {
        return 0;
    }
    return put(out, 0, r->mem, sve_bytes(r, insn, vl_bits / 8));
}
