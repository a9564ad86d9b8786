/*
 * opcodes.c - QEMU 7.2 TCG plugin: histogram of the 32-bit instruction
 * encodings executed in the region of interest (between hint #0x40 and
 * hint #0x41), and optionally over the whole run.
 *
 * Build:
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -std=c11 -o libopcodes.so opcodes.c tbstats.c
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
    bool used;
    uint64_t roi, whole;
};

/* open-addressing table encoding -> counts */
static struct op *ops;
static size_t ops_cap, ops_n;
static bool want_whole;

static size_t enc_hash(uint32_t e)
{
    return (size_t)((e * 0x9e3779b97f4a7c15ull) >> 20);
}

static struct op *op_slot(uint32_t enc)
{
    size_t i;

    if (2 * (ops_n + 1) > ops_cap) {
        size_t ncap = ops_cap ? 2 * ops_cap : 4096;
        struct op *no = calloc(ncap, sizeof(*no));
        if (!no) {
            abort();
        }
        for (size_t k = 0; k < ops_cap; k++) {
            if (ops[k].used) {
                size_t j = enc_hash(ops[k].enc) & (ncap - 1);
                while (no[j].used) {
                    j = (j + 1) & (ncap - 1);
                }
                no[j] = ops[k];
            }
        }
        free(ops);
        ops = no;
        ops_cap = ncap;
    }
    i = enc_hash(enc) & (ops_cap - 1);
    while (ops[i].used && ops[i].enc != enc) {
        i = (i + 1) & (ops_cap - 1);
    }
    if (!ops[i].used) {
        ops[i].used = true;
        ops[i].enc = enc;
        ops_n++;
    }
    return &ops[i];
}

static void add_insn(const tbs_insn *in, void *ud)
{
    (void)ud;
    if (in->roi || (want_whole && in->whole)) {
        struct op *o = op_slot(in->enc);
        o->roi += in->roi;
        o->whole += in->whole;
    }
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
    struct op *list;
    size_t n = 0;
    FILE *f;

    tbs_foreach(add_insn, NULL);
    list = calloc(ops_n ? ops_n : 1, sizeof(*list));
    if (!list) {
        abort();
    }
    for (size_t k = 0; k < ops_cap; k++) {
        if (ops[k].used) {
            list[n++] = ops[k];
        }
    }
    f = tbs_json_open(CLIENT);
    if (!f) {
        free(list);
        return;
    }
    fprintf(f, ",\n  \"roi\": ");
    if (tbs_roi_balanced()) {
        put_list(f, list, n, true);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"whole\": ");
    if (want_whole) {
        put_list(f, list, n, false);
    } else {
        fprintf(f, "null");
    }
    tbs_json_close(f);
    free(list);
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
    tbs_start(id, false, report);
    return 0;
}
