/*
 * tbstats.h - translation-block execution statistics with ROI accounting,
 * shared by the armie_clients QEMU 7.2 plugins (inscount, opcodes, memory):
 * built as libtbstats.so, which the three clients link, so that when QEMU
 * loads them together there is one translation callback, one TB counter and
 * one pair of marker callbacks for all of them.
 *
 * Counting scheme (fast: one inline add per executed TB, callbacks only on
 * the two marker instructions):
 *   - every translated TB gets a record {vaddr, n, encodings, symbols} and
 *     ONE inline "execs += 1" at TB entry;
 *   - the ROI markers hint #0x40 (0xd503281f, begin) and hint #0x41
 *     (0xd503283f, end) get an insn_exec_cb. Begin snapshots every record's
 *     exec counter; end accumulates execs - snapshot into roi_execs. The TB
 *     holding the marker was already counted at its entry, so begin adds +1
 *     to its instructions after the marker and end adds -1 to the marker and
 *     the instructions after it (per-record adjustments);
 *   - several sequential begin/end pairs are summed; a begin inside an ROI
 *     or an end outside one marks the run unbalanced (roi reported null).
 *   - optional (memory client): a per-instruction inline counter of the
 *     memory accesses QEMU's own instrumentation reports (reads and writes
 *     together: QEMU 7.2 does not apply the R/W filter of inline memory ops
 *     reliably), snapshotted the same way. It needs no adjustment: accesses
 *     are counted when they happen, not at TB entry.
 *   - the preparation markers (TBS_PREP_BEGIN/END) take their share out of
 *     the whole-run count the same way: snapshot at begin, execs - snapshot
 *     accumulated into prep_execs at end, with the mirror adjustments.
 * Per-instruction whole-run count = record execs - prep_execs + whole
 * adjustments; ROI count = record roi_execs + adjustments covering the
 * instruction's index.
 * Limits: an instruction that faults in the middle of a TB leaves the rest of
 * the TB counted (as with every TB-entry inline counter); single vCPU
 * (user mode), inline adds are not atomic.
 */
#ifndef ARMIE_TBSTATS_H
#define ARMIE_TBSTATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "qemu_plugin_api.h"

/* The core is its own shared object (libtbstats.so) that the clients link:
 * loaded once per process, so all clients share one TB counter. */
#define TBS_API __attribute__((visibility("default")))

#define TBS_ROI_BEGIN 0xd503281fu /* hint #0x40 */
#define TBS_ROI_END 0xd503283fu   /* hint #0x41 */
/* Batch mode: a process that runs several cells (kernels/harness/harness.c) executes
 * hint #0x42 before each run and after the last. Each marker ends the run being counted:
 * every client writes <out>.<run> (run = 0, 1, ...) for it, and every counter restarts
 * from zero, so each file counts exactly what one run executed. A process without the
 * marker writes <out> at exit, as before. */
#define TBS_RUN_MARK 0xd503285fu  /* hint #0x42 */
/* A run's preparation (harness_prep_begin/end, kernels/include/harness.h): inputs and the
 * expected output, computed by the first run of a batch that needs them and copied by the
 * others. What executes between these markers is left out of the whole-run count, so every
 * run counts the same whether it computed or copied; ROI counts are not affected. */
#define TBS_PREP_BEGIN 0xd503287fu /* hint #0x43 */
#define TBS_PREP_END 0xd503289fu   /* hint #0x44 */

/* One static instruction (one translation of it) as seen at exit. */
typedef struct tbs_insn {
    uint32_t enc;        /* 32-bit A64 encoding */
    const char *sym;     /* symbol from QEMU's symbol table, may be NULL */
    uint64_t vaddr;
    uint64_t whole;      /* executions over the whole run, preparation excluded */
    uint64_t roi;        /* executions inside the ROI(s) */
    uint64_t roi_mem;    /* memory accesses QEMU reported in the ROI (mem mode) */
} tbs_insn;

typedef void (*tbs_insn_fn)(const tbs_insn *insn, void *userdata);

/* Refuse any plugin API version other than 1 (QEMU 7.2); 0 = ok, -1 = refuse. */
TBS_API int tbs_check_api(const char *client, const qemu_info_t *info);

/*
 * Split "key=value" (value may be empty). Returns false (after printing an
 * error) when there is no '=' or the key is too long.
 */
TBS_API bool tbs_split_arg(const char *client, const char *arg, char *key,
                   size_t keysz, const char **val);

/* Handle the keys common to all clients (out=). true if consumed. */
TBS_API bool tbs_common_arg(const char *key, const char *val);

/* After parsing: check the common keys (out= is required). 0 ok, -1 error. */
TBS_API int tbs_check_args(const char *client);

/*
 * A client's own keys: return 1 when `key` is one of them and its value is
 * good, 0 when it is not a key of this client, -1 (after printing why) when
 * the value is bad.
 */
typedef int (*tbs_arg_fn)(const char *key, const char *val);

/*
 * What every client's qemu_plugin_install does first: refuse another API
 * version, split each key=value, take out=, hand other keys to `own` (may be
 * NULL), reject unknown keys naming `accepted`, and require out=.
 * 0 ok, -1 error (QEMU then refuses to start).
 */
TBS_API int tbs_parse_args(const char *client, const qemu_info_t *info, int argc,
                   char **argv, tbs_arg_fn own, const char *accepted);

/*
 * Register the client (its exit report runs once at exit) and, for the
 * first client of the process, the translation callback. 0 ok, -1 error.
 * mem_counters: count QEMU's memory accesses (ROI only, tbs_insn.roi_mem);
 * symbols: fill tbs_insn.sym (else NULL).
 */
TBS_API int tbs_start(qemu_plugin_id_t id, bool mem_counters, bool symbols,
              void (*report)(void));

/* The run of a batch being counted (0, 1, ...); -1 in a process of one run. */
TBS_API long tbs_segment(void);

/* Preparation regions the whole count left out (TBS_PREP_BEGIN/END). */
TBS_API uint64_t tbs_preps(void);

/* Markers seen and whether they form B == E >= 1 sequential pairs. */
TBS_API uint64_t tbs_roi_begins(void);
TBS_API uint64_t tbs_roi_ends(void);
TBS_API bool tbs_roi_balanced(void);

/* Visit every recorded instruction (every translation of it). */
TBS_API void tbs_foreach(tbs_insn_fn fn, void *userdata);

/* How many instructions tbs_foreach() visits. */
TBS_API size_t tbs_n_insns(void);

/* calloc that aborts (naming the client) when memory runs out. */
TBS_API void *tbs_xcalloc(size_t n, size_t size);

/*
 * Sort n records of `size` bytes by `cmp`, fold each run of equal records
 * into its first with `add`, and return the number of distinct records (the
 * clients' group-by: per symbol, per encoding).
 */
TBS_API size_t tbs_group(void *base, size_t n, size_t size,
                 int (*cmp)(const void *, const void *),
                 void (*add)(void *into, const void *from));

/*
 * JSON output: tbs_json_open() opens "<out>.tmp" and writes the common head
 * ("{", client, plugin_api, markers) without a trailing comma;
 * tbs_json_close() writes the closing brace, flushes and renames the file to
 * <out> (atomic for readers). Both print an error and return NULL/-1 on
 * failure.
 */
TBS_API FILE *tbs_json_open(const char *client);
TBS_API int tbs_json_close(const char *client, FILE *f);
TBS_API void tbs_json_string(FILE *f, const char *s);

#endif /* ARMIE_TBSTATS_H */
