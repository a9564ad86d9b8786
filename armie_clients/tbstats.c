/*
 * tbstats.c - translation-block execution statistics with ROI accounting,
 * the JSON file writer and the argument/API-version handling shared by the
 * armie_clients QEMU 7.2 plugins. See tbstats.h for the counting scheme.
 *
 * Built once as the plugins' shared core by analysis/stages/build.py plugin_cmd:
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -std=gnu11 \
 *       -o libtbstats.so tbstats.c
 * Each client links it (-ltbstats, found beside it through -rpath $ORIGIN).
 */
#define _POSIX_C_SOURCE 200809L
#include "tbstats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One translation of one TB. Allocated once, never moved: QEMU holds
 * pointers to its counters. */
typedef struct tbs_rec {
    uint64_t execs;     /* inline counter, +1 at every TB entry */
    uint64_t roi_start; /* execs at the current ROI begin */
    uint64_t roi_execs; /* executions accumulated over closed ROIs */
    uint64_t prep_start; /* execs at the current preparation's begin */
    uint64_t prep_execs; /* executions inside closed preparations */
    uint64_t vaddr;
    uint32_t n;
    uint32_t *enc;
    const char **sym;
    int64_t *adj; /* NULL, or n deltas: adj[k] applies to insns k..n-1 */
    int64_t *wadj; /* the same for the whole count (the TB of a run marker) */
    uint64_t *mem;     /* mem mode, 2n: accesses[n], accesses at begin[n] */
    uint64_t *mem_roi; /* mem mode, n: accesses over closed ROIs */
} tbs_rec;

/* Userdata of a marker instruction's exec callback. */
typedef struct tbs_mark {
    tbs_rec *rec;
    uint32_t idx;
} tbs_mark;

static tbs_rec **recs;
static size_t n_recs, cap_recs;
static size_t n_insns; /* the sum of recs[i]->n */
static bool want_mem, want_syms;

/* The records by address (open addressing, linear probing, at most half full): QEMU
 * translates the same code again for every vector length (the VL is in its TB flags) and a
 * batch changes the VL at every run, so without sharing a batch of 16 VLs held 16 records of
 * each TB, and every run mark, marker and report walked all of them. */
static tbs_rec **by_addr;
static size_t cap_addr;

/* The clients loaded in this process: they share this core (one TB counter
 * and one translation callback for all of them) when QEMU loads them from
 * one directory, because the dynamic loader loads libtbstats.so once. */
typedef struct tbs_client {
    const char *name;
    char *out;
    qemu_plugin_id_t id;
    void (*report)(void);
} tbs_client;

#define TBS_MAX_CLIENTS 8
static tbs_client clients[TBS_MAX_CLIENTS];
static int n_clients;
static bool trans_registered;
static qemu_plugin_id_t trans_id;

static uint64_t begins, ends, preps;
static bool in_roi, roi_error, in_prep;
/* The run being counted in a batch (tbstats.h): -1 until the first run marker. */
static long segment = -1;

static char *pending_out; /* out= of the client being installed */
static const char *client_name = "tbstats";

void *tbs_xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", client_name);
        abort();
    }
    return p;
}

/* ---- arguments and API version ---------------------------------------- */

int tbs_check_api(const char *client, const qemu_info_t *info)
{
    client_name = client;
    if (info->version.cur != 1) {
        fprintf(stderr,
                "%s: written for QEMU plugin API version 1 (QEMU 7.2); this "
                "QEMU offers version %d (min %d). Use QEMU 7.2 (Debian 12 "
                "qemu-user).\n",
                client, info->version.cur, info->version.min);
        return -1;
    }
    return 0;
}

bool tbs_split_arg(const char *client, const char *arg, char *key,
                   size_t keysz, const char **val)
{
    const char *eq = strchr(arg, '=');
    size_t len;

    if (!eq) {
        fprintf(stderr, "%s: argument '%s' is not key=value\n", client, arg);
        return false;
    }
    len = (size_t)(eq - arg);
    if (len == 0 || len >= keysz) {
        fprintf(stderr, "%s: bad argument '%s'\n", client, arg);
        return false;
    }
    memcpy(key, arg, len);
    key[len] = '\0';
    *val = eq + 1;
    return true;
}

bool tbs_common_arg(const char *key, const char *val)
{
    if (strcmp(key, "out") == 0) {
        free(pending_out);
        pending_out = strdup(val);
        return true;
    }
    return false;
}

int tbs_check_args(const char *client)
{
    if (!pending_out || !*pending_out) {
        fprintf(stderr, "%s: missing required argument out=<path>\n", client);
        return -1;
    }
    return 0;
}

int tbs_parse_args(const char *client, const qemu_info_t *info, int argc,
                   char **argv, tbs_arg_fn own, const char *accepted)
{
    if (tbs_check_api(client, info) != 0) {
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        char key[64];
        const char *val;
        int r;

        if (!tbs_split_arg(client, argv[i], key, sizeof(key), &val)) {
            return -1;
        }
        if (tbs_common_arg(key, val)) {
            continue;
        }
        r = own ? own(key, val) : 0;
        if (r < 0) {
            return -1;
        }
        if (r == 0) {
            fprintf(stderr, "%s: unknown argument '%s' (accepted: %s)\n",
                    client, argv[i], accepted);
            return -1;
        }
    }
    return tbs_check_args(client);
}

/* ---- ROI marker callbacks --------------------------------------------- */



static void add_delta(int64_t **deltas, uint32_t n, uint32_t from,
                      int64_t delta)
{
    if (from >= n) {
        return;
    }
    if (!*deltas) {
        *deltas = tbs_xcalloc(n, sizeof(**deltas));
    }
    (*deltas)[from] += delta;
}

static void add_adj(tbs_rec *r, uint32_t from, int64_t delta)
{
    add_delta(&r->adj, r->n, from, delta);
}

static void roi_begin_cb(unsigned int vcpu, void *ud)
{
    tbs_mark *m = ud;
    (void)vcpu;

    begins++;
    if (in_roi) { /* nested begin: flag and ignore */
        roi_error = true;
        return;
    }
    in_roi = true;
    for (size_t i = 0; i < n_recs; i++) {
        tbs_rec *r = recs[i];
        r->roi_start = r->execs;
        if (r->mem) {
            memcpy(r->mem + r->n, r->mem, r->n * sizeof(uint64_t));
        }
    }
    /* this TB's entry increment is in the snapshot: the insns after the
     * marker in this execution belong to the ROI */
    add_adj(m->rec, m->idx + 1, +1);
}

static void roi_end_cb(unsigned int vcpu, void *ud)
{
    tbs_mark *m = ud;
    (void)vcpu;

    ends++;
    if (!in_roi) { /* end without begin */
        roi_error = true;
        return;
    }
    in_roi = false;
    for (size_t i = 0; i < n_recs; i++) {
        tbs_rec *r = recs[i];
        r->roi_execs += r->execs - r->roi_start;
        if (r->mem) {
            for (uint32_t k = 0; k < r->n; k++) {
                r->mem_roi[k] += r->mem[k] - r->mem[r->n + k];
            }
        }
    }
    /* the marker and the insns after it in this execution are not in it */
    add_adj(m->rec, m->idx, -1);
}

/* A preparation (tbstats.h) leaves the whole count as the ROI markers enter
 * the ROI count: what executes between begin and end is subtracted, the
 * begin's TB adjusted for its instructions after the marker (counted at
 * entry, yet inside), the end's for those after it (outside, yet counted
 * with the preparation). A begin inside a preparation is ignored. */
static void prep_begin_cb(unsigned int vcpu, void *ud)
{
    tbs_mark *m = ud;
    (void)vcpu;

    if (in_prep) {
        return;
    }
    in_prep = true;
    for (size_t i = 0; i < n_recs; i++) {
        recs[i]->prep_start = recs[i]->execs;
    }
    add_delta(&m->rec->wadj, m->rec->n, m->idx + 1, -1);
}

static void prep_end_cb(unsigned int vcpu, void *ud)
{
    tbs_mark *m = ud;
    (void)vcpu;

    if (!in_prep) {
        return;
    }
    in_prep = false;
    preps++;
    for (size_t i = 0; i < n_recs; i++) {
        tbs_rec *r = recs[i];
        r->prep_execs += r->execs - r->prep_start;
    }
    add_delta(&m->rec->wadj, m->rec->n, m->idx + 1, +1);
}

uint64_t tbs_preps(void)
{
    return preps;
}

/* Every counter back to zero: the start of a run of a batch. */
static void reset_counts(void)
{
    for (size_t i = 0; i < n_recs; i++) {
        tbs_rec *r = recs[i];
        r->execs = r->roi_start = r->roi_execs = 0;
        r->prep_start = r->prep_execs = 0;
        free(r->adj);
        free(r->wadj);
        r->adj = r->wadj = NULL;
        if (r->mem) {
            memset(r->mem, 0, 2 * r->n * sizeof(uint64_t));
            memset(r->mem_roi, 0, r->n * sizeof(uint64_t));
        }
    }
    begins = ends = preps = 0;
    in_roi = roi_error = in_prep = false;
}

static void report_all(void);

/* A run marker ends the run being counted (each client writes its file for it) and starts
 * the next. The marker's TB was counted at its entry: the instructions from the marker on
 * belong to the next run, those before it to the one that ends. */
static void run_mark_cb(unsigned int vcpu, void *ud)
{
    tbs_mark *m = ud;
    (void)vcpu;

    if (segment >= 0) {
        add_delta(&m->rec->wadj, m->rec->n, m->idx, -1);
        report_all();
    }
    segment++;
    reset_counts();
    add_delta(&m->rec->wadj, m->rec->n, m->idx, +1);
}

long tbs_segment(void)
{
    return segment;
}

uint64_t tbs_roi_begins(void)
{
    return begins;
}

uint64_t tbs_roi_ends(void)
{
    return ends;
}

bool tbs_roi_balanced(void)
{
    return !roi_error && !in_roi && begins == ends && begins >= 1;
}

/* ---- translation ------------------------------------------------------ */

/* Where the search for a record at `vaddr` starts (Fibonacci hashing of the address). */
static size_t addr_slot(uint64_t vaddr)
{
    return (size_t)(((vaddr >> 2) * 0x9e3779b97f4a7c15ull) >> 24) & (cap_addr - 1);
}

static void addr_insert(tbs_rec *r)
{
    size_t h = addr_slot(r->vaddr);

    while (by_addr[h]) {
        h = (h + 1) & (cap_addr - 1);
    }
    by_addr[h] = r;
}

/* Room for one more record with the table at most half full: double it, place them again. */
static void addr_reserve(void)
{
    if (2 * (n_recs + 1) <= cap_addr) {
        return;
    }
    free(by_addr);
    cap_addr = cap_addr ? 2 * cap_addr : 16384;
    by_addr = tbs_xcalloc(cap_addr, sizeof(*by_addr));
    for (size_t i = 0; i < n_recs; i++) {
        addr_insert(recs[i]);
    }
}

/* The record of the same n instructions `enc` at `vaddr`, or NULL. A new translation of them
 * counts into it: every figure a client reports is a sum over instructions (by class,
 * symbol, encoding), so one record for both translations changes none. */
static tbs_rec *find_rec(uint64_t vaddr, uint32_t n, const uint32_t *enc)
{
    if (!cap_addr) {
        return NULL;
    }
    for (size_t h = addr_slot(vaddr); by_addr[h]; h = (h + 1) & (cap_addr - 1)) {
        tbs_rec *r = by_addr[h];
        if (r->vaddr == vaddr && r->n == n && memcmp(r->enc, enc, n * sizeof(*enc)) == 0) {
            return r;
        }
    }
    return NULL;
}

/* A record for the TB `tb` of n instructions `enc` (taken over) at `vaddr`. */
static tbs_rec *new_rec(struct qemu_plugin_tb *tb, uint64_t vaddr, uint32_t n, uint32_t *enc)
{
    tbs_rec *r = tbs_xcalloc(1, sizeof(*r));

    r->vaddr = vaddr;
    r->n = n;
    r->enc = enc;
    r->sym = tbs_xcalloc(n, sizeof(*r->sym));
    if (want_mem) {
        r->mem = tbs_xcalloc(2 * n, sizeof(uint64_t));
        r->mem_roi = tbs_xcalloc(n, sizeof(uint64_t));
    }
    /* QEMU looks the symbol up per call: only for the client that reports functions */
    for (uint32_t i = 0; want_syms && i < n; i++) {
        r->sym[i] = qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, i));
    }
    if (n_recs == cap_recs) {
        size_t cap = cap_recs ? 2 * cap_recs : 16384;
        tbs_rec **nr = realloc(recs, cap * sizeof(*recs));
        if (!nr) {
            fprintf(stderr, "%s: out of memory\n", client_name);
            abort();
        }
        recs = nr;
        cap_recs = cap;
    }
    addr_reserve();
    recs[n_recs++] = r;
    addr_insert(r);
    n_insns += n;
    /* a TB first translated inside an ROI starts at execs = 0, which is
     * also its roi_start (calloc) */
    return r;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    uint32_t n = (uint32_t)qemu_plugin_tb_n_insns(tb);
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    uint32_t *enc = tbs_xcalloc(n, sizeof(*enc));
    tbs_rec *r;
    (void)id;

    for (uint32_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint8_t *b = qemu_plugin_insn_data(insn);

        if (qemu_plugin_insn_size(insn) >= 4) {
            enc[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
        }
    }
    r = find_rec(vaddr, n, enc);
    if (r) {
        free(enc);
    } else {
        r = new_rec(tb, vaddr, n, enc);
    }

    for (uint32_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint32_t w = r->enc[i];
        qemu_plugin_vcpu_udata_cb_t cb = w == TBS_ROI_BEGIN ? roi_begin_cb
                                         : w == TBS_ROI_END ? roi_end_cb
                                         : w == TBS_RUN_MARK ? run_mark_cb
                                         : w == TBS_PREP_BEGIN ? prep_begin_cb
                                         : w == TBS_PREP_END ? prep_end_cb
                                                             : NULL;
        if (cb) {
            tbs_mark *m = tbs_xcalloc(1, sizeof(*m));
            m->rec = r;
            m->idx = i;
            qemu_plugin_register_vcpu_insn_exec_cb(insn, cb,
                                                   QEMU_PLUGIN_CB_NO_REGS, m);
        }
        if (want_mem) {
            /* RW: in 7.2 the R/W filter of inline memory ops is not
             * reliable (observed: an R-only counter counted the stores, a
             * W-only counter every access), so count every access and let
             * the client split them by the instruction's encoding */
            qemu_plugin_register_vcpu_mem_inline(insn, QEMU_PLUGIN_MEM_RW,
                                                 QEMU_PLUGIN_INLINE_ADD_U64,
                                                 &r->mem[i], 1);
        }
    }
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                             &r->execs, 1);
}

static void report_all(void)
{
    for (int i = 0; i < n_clients; i++) {
        clients[i].report();
    }
}

/* One run per process: report at exit. A batch has reported each run at
 * the marker after it; what follows the last marker is the exit. */
static void at_exit(qemu_plugin_id_t id, void *ud)
{
    tbs_client *c = ud;
    (void)id;
    if (segment < 0) {
        c->report();
    }
}

/* Register what `id` needs: its exit report, and the translation callback
 * if it is the client that registered it first. */
static void install(qemu_plugin_id_t id)
{
    for (int i = 0; i < n_clients; i++) {
        if (clients[i].id == id) {
            qemu_plugin_register_atexit_cb(id, at_exit, &clients[i]);
        }
    }
    if (trans_registered && trans_id == id) {
        qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    }
}

/*
 * The memory counters are in every TB and the ROI's share is taken by
 * snapshot at the markers, like the TB counters. Instrumenting only code
 * translated inside the ROI (qemu_plugin_reset at each marker) was cheaper,
 * but QEMU 7.2 aborts in qemu_plugin_vcpu_mem_cb ("code should not be
 * reached") when the reset meets a multi-threaded guest: Open MPI 5's
 * singleton runs threads of its own (measured: 1 run in 2 or 3 aborted).
 */
int tbs_start(qemu_plugin_id_t id, bool mem_counters, bool symbols,
              void (*report)(void))
{
    tbs_client *c;

    if (n_clients == TBS_MAX_CLIENTS) {
        fprintf(stderr, "%s: more than %d clients loaded\n", client_name,
                TBS_MAX_CLIENTS);
        return -1;
    }
    c = &clients[n_clients++];
    c->name = client_name;
    c->out = pending_out;
    c->id = id;
    c->report = report;
    pending_out = NULL;
    want_mem |= mem_counters;
    want_syms |= symbols;
    if (!trans_registered) {
        trans_registered = true;
        trans_id = id;
    }
    install(id);
    return 0;
}

static const tbs_client *client_named(const char *name)
{
    for (int i = 0; i < n_clients; i++) {
        if (strcmp(clients[i].name, name) == 0) {
            return &clients[i];
        }
    }
    abort(); /* only clients that called tbs_start() write files */
}

/* Whether the run being counted executed any of r's instructions. Each of an instruction's
 * counts is its record's execs (or the share of it a marker took) plus the adjustments, and
 * none is non-zero unless the TB was entered since the run began (execs) or a marker in it
 * adjusted them (adj, wadj: the run mark's TB runs on from the reset without an entry). */
static bool rec_ran(const tbs_rec *r)
{
    return r->execs || r->adj || r->wadj;
}

void tbs_foreach(tbs_insn_fn fn, void *userdata)
{
    for (size_t i = 0; i < n_recs; i++) {
        tbs_rec *r = recs[i];
        int64_t adj = 0, wadj = 0;

        if (!rec_ran(r)) {
            continue;
        }

        for (uint32_t k = 0; k < r->n; k++) {
            tbs_insn in;

            if (r->adj) {
                adj += r->adj[k];
            }
            if (r->wadj) {
                wadj += r->wadj[k];
            }
            in.enc = r->enc[k];
            in.sym = r->sym[k];
            in.vaddr = r->vaddr + 4 * (uint64_t)k;
            in.whole = (uint64_t)((int64_t)(r->execs - r->prep_execs) + wadj);
            in.roi = (uint64_t)((int64_t)r->roi_execs + adj);
            in.roi_mem = r->mem_roi ? r->mem_roi[k] : 0;
            fn(&in, userdata);
        }
    }
}

size_t tbs_n_insns(void)
{
    return n_insns;
}

size_t tbs_group(void *base, size_t n, size_t size,
                 int (*cmp)(const void *, const void *),
                 void (*add)(void *into, const void *from))
{
    char *b = base;
    size_t out = 0;

    if (n == 0) {
        return 0;
    }
    qsort(base, n, size, cmp);
    for (size_t i = 1; i < n; i++) {
        if (cmp(b + out * size, b + i * size) == 0) {
            add(b + out * size, b + i * size);
        } else if (++out != i) {
            memcpy(b + out * size, b + i * size, size);
        }
    }
    return out + 1;
}

/* ---- JSON file -------------------------------------------------------- */

/* <out>, or <out>.<run> for each run of a batch. */
static char *out_path(const char *out)
{
    size_t len = strlen(out) + 24;
    char *t = tbs_xcalloc(len, 1);
    if (segment < 0) {
        snprintf(t, len, "%s", out);
    } else {
        snprintf(t, len, "%s.%ld", out, segment);
    }
    return t;
}

/* What the file is written as before it is renamed to `path`. */
static char *tmp_path(const char *path)
{
    size_t len = strlen(path) + 5;
    char *t = tbs_xcalloc(len, 1);
    snprintf(t, len, "%s.tmp", path);
    return t;
}

void tbs_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

FILE *tbs_json_open(const char *client)
{
    char *out = out_path(client_named(client)->out);
    char *t = tmp_path(out);
    FILE *f = fopen(t, "w");

    free(out);
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", client, t,
                strerror(errno));
        free(t);
        return NULL;
    }
    free(t);
    fprintf(f, "{\n  \"client\": ");
    tbs_json_string(f, client);
    fprintf(f,
            ",\n  \"plugin_api\": 1,\n"
            "  \"markers\": {\"begin\": %llu, \"end\": %llu, "
            "\"balanced\": %s, \"prep\": %llu}",
            (unsigned long long)begins, (unsigned long long)ends,
            tbs_roi_balanced() ? "true" : "false",
            (unsigned long long)preps);
    return f;
}

int tbs_json_close(const char *client, FILE *f)
{
    char *out = out_path(client_named(client)->out);
    char *t = tmp_path(out);
    int rc = 0;

    fprintf(f, "\n}\n");
    if (fflush(f) != 0 || ferror(f)) {
        rc = -1;
    }
    if (fclose(f) != 0) {
        rc = -1;
    }
    if (rc == 0 && rename(t, out) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", client, out,
                strerror(errno));
    }
    free(t);
    free(out);
    return rc;
}
