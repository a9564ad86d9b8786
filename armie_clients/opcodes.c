/*
 * opcodes.c - QEMU 7.2 TCG plugin: histogram of the 32-bit instruction
 * encodings executed in the region of interest (between hint #0x40 and
 * hint #0x41), and optionally over the whole run.
 *
 * Build: analysis/stages/build.py plugin_cmd (gcc -shared ... -std=gnu11 opcodes.c
 * decode.c -ltbstats: the counting core, built first as libtbstats.so).
 * Use:
 *   qemu-aarch64 -plugin ./libopcodes.so,out=opcodes.json[,whole=on] ./prog args
 * Arguments: out=<path> (required), whole=on|off (default off).
 * Unknown keys are rejected.
 *
 * Output (docs/contracts.md section 3): "client", "plugin_api", "markers",
 * "roi": [{"encoding": "0xa400a000", "count": N}, ...] (count > 0 only,
 * sorted by count descending, then encoding; null when the markers are not
 * balanced) and "whole": the same list over the whole run with whole=on,
 * null otherwise. Mnemonics are decoded offline (analysis/, binutils
 * objdump): QEMU 7.2's disassembler does not know SVE.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbstats.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

static const char *const CLIENT = "opcodes";

struct op {
    uint32_t enc;
    uint64_t roi, whole;
};

/* one entry per static instruction counted, grouped by encoding at exit */
static struct op *ops;
static size_t ops_n;
static bool want_whole;

static void add_insn(const tbs_insn *in, void *ud)
{
    (void)ud;
    if (in->roi || (want_whole && in->whole)) {
        struct op *o = &ops[ops_n++];
        o->enc = in->enc;
        o->roi = in->roi;
        o->whole = in->whole;
    }
}

static int cmp_enc(const void *a, const void *b)
{
    const struct op *x = a, *y = b;
    return x->enc < y->enc ? -1 : x->enc > y->enc;
}

static void op_add(void *into, const void *from)
{
    struct op *x = into;
    const struct op *y = from;
    x->roi += y->roi;
    x->whole += y->whole;
}

static int cmp_roi(const void *a, const void *b)
{
    const struct op *x = a, *y = b;
    if (x->roi != y->roi) {
        return x->roi < y->roi ? 1 : -1;
    }
    return x->enc < y->enc ? -1 : x->enc > y->enc;
}

static int cmp_whole(const void *a, const void *b)
{
    const struct op *x = a, *y = b;
    if (x->whole != y->whole) {
        return x->whole < y->whole ? 1 : -1;
    }
    return x->enc < y->enc ? -1 : x->enc > y->enc;
}

static void put_list(FILE *f, struct op *list, size_t n, bool roi)
{
    size_t k, shown = 0;

    qsort(list, n, sizeof(*list), roi ? cmp_roi : cmp_whole);
    fprintf(f, "[");
    for (k = 0; k < n; k++) {
        uint64_t c = roi ? list[k].roi : list[k].whole;
        if (!c) {
            continue;
        }
        fprintf(f, "%s\n    {\"encoding\": \"0x%08x\", \"count\": %llu}",
                shown ? "," : "", list[k].enc, (unsigned long long)c);
        shown++;
    }
    fprintf(f, "%s]", shown ? "\n  " : "");
}

static void report(void)
{
    FILE *f;

    /* once per run of a batch: each report starts from zero */
    free(ops);
    ops_n = 0;
    ops = tbs_xcalloc(tbs_n_insns(), sizeof(*ops));
    tbs_foreach(add_insn, NULL);
    ops_n = tbs_group(ops, ops_n, sizeof(*ops), cmp_enc, op_add);
    f = tbs_json_open(CLIENT);
    if (!f) {
        return;
    }
    fprintf(f, ",\n  \"roi\": ");
    if (tbs_roi_balanced()) {
        put_list(f, ops, ops_n, true);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"whole\": ");
    if (want_whole) {
        put_list(f, ops, ops_n, false);
    } else {
        fprintf(f, "null");
    }
    tbs_json_close(CLIENT, f);
}

static int parse_arg(const char *key, const char *val)
{
    if (strcmp(key, "whole") != 0) {
        return 0;
    }
    if (!qemu_plugin_bool_parse(key, val, &want_whole)) {
        fprintf(stderr, "%s: whole=%s: expected on or off\n", CLIENT, val);
        return -1;
    }
    return 1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info, int argc,
                                           char **argv)
{
    if (tbs_parse_args(CLIENT, info, argc, argv, parse_arg,
                       "out=<path>, whole=on|off") != 0) {
        return -1;
    }
    return tbs_start(id, false, false, report);
}
