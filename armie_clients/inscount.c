/*
 * inscount.c - QEMU 7.2 TCG plugin: SVE-aware instruction counts, whole run
 * and region of interest (between hint #0x40 and hint #0x41), by class.
 *
 * Build: analysis/stages/build.py plugin_cmd (gcc -shared ... -std=gnu11 inscount.c
 * decode.c -ltbstats: the counting core, built first as libtbstats.so).
 * Classes come from the decoder table shared with the memory client
 * (decode.c); tests/decode_driver.c prints them for any word.
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

#include "decode.h"
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

static struct counts whole, roi;
/* one entry per static ROI instruction, grouped by symbol at exit */
static struct func *funcs;
static size_t funcs_n;

static void add_insn(const tbs_insn *in, void *ud)
{
    int c = decode_class(in->enc);
    bool sve = decode_is_sve(in->enc);
    (void)ud;

    whole.total += in->whole;
    whole.cls[c] += in->whole;
    whole.sve += sve ? in->whole : 0;
    if (in->roi) {
        struct func *f = &funcs[funcs_n++];
        f->name = in->sym ? in->sym : "?";
        f->total = in->roi;
        f->sve = sve ? in->roi : 0;
        roi.total += in->roi;
        roi.cls[c] += in->roi;
        roi.sve += sve ? in->roi : 0;
    }
}

static int func_by_name(const void *a, const void *b)
{
    return strcmp(((const struct func *)a)->name, ((const struct func *)b)->name);
}

static void func_add(void *into, const void *from)
{
    struct func *x = into;
    const struct func *y = from;
    x->total += y->total;
    x->sve += y->sve;
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
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", insn_class_names[k],
                (unsigned long long)c->cls[k]);
    }
    fprintf(f, "}}");
}

static void report(void)
{
    bool ok = tbs_roi_balanced();
    FILE *f;

    /* once per run of a batch: each report starts from zero */
    memset(&whole, 0, sizeof(whole));
    memset(&roi, 0, sizeof(roi));
    free(funcs);
    funcs_n = 0;
    funcs = tbs_xcalloc(tbs_n_insns(), sizeof(*funcs));
    tbs_foreach(add_insn, NULL);
    funcs_n = tbs_group(funcs, funcs_n, sizeof(*funcs), func_by_name, func_add);
    qsort(funcs, funcs_n, sizeof(*funcs), func_cmp);
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
        fprintf(f, "[");
        for (size_t k = 0; k < funcs_n; k++) {
            fprintf(f, "%s\n    {\"symbol\": ", k ? "," : "");
            tbs_json_string(f, funcs[k].name);
            fprintf(f, ", \"total\": %llu, \"sve\": %llu}",
                    (unsigned long long)funcs[k].total,
                    (unsigned long long)funcs[k].sve);
        }
        fprintf(f, "%s]", funcs_n ? "\n  " : "");
    } else {
        fprintf(f, "null");
    }
    tbs_json_close(CLIENT, f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info, int argc,
                                           char **argv)
{
    if (tbs_parse_args(CLIENT, info, argc, argv, NULL, "out=<path>") != 0 ||
        !decode_init()) {
        return -1;
    }
    return tbs_start(id, false, true, report);
}
