/*
 * decode.h - the A64 instruction decoder shared by the armie_clients
 * plugins: one ordered table gives every 32-bit encoding its instruction
 * class (inscount), its memory kind and the rule for its bytes (memory).
 */
#ifndef ARMIE_DECODE_H
#define ARMIE_DECODE_H

#include <stdbool.h>
#include <stdint.h>

/* Instruction classes, in the order of docs/contracts.md section 3. */
enum insn_class {
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

/* Memory classes, in the order of docs/contracts.md section 3. */
enum mem_class {
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

extern const char *const insn_class_names[N_CLASSES];
extern const char *const mem_class_names[N_MCLASSES];

/* One memory access of one execution: its class and bytes. */
struct mem_access {
    int cls;
    uint64_t bytes;
};

/* Turn the table's bit strings into masks; false (after printing why) if a
 * row is malformed. Call once before the functions below. */
bool decode_init(void);

/* The instruction class of an encoding. */
int decode_class(uint32_t insn);

/* SVE: op0 (bits 28:25) = 0010; the sum of the sve_* classes. */
bool decode_is_sve(uint32_t insn);

/*
 * The memory accesses of one execution of `insn` at `vl_bits` (0..2 of
 * them; an atomic read-modify-write is one load and one store). SVE bytes
 * assume every predicate lane active.
 */
int decode_mem(uint32_t insn, uint64_t vl_bits, struct mem_access out[2]);

#endif /* ARMIE_DECODE_H */
