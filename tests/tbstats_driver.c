/*
 * tbstats_driver.c - host test driver for the clients' counting core
 * (armie_clients/tbstats.c, libtbstats.so): it stands in for QEMU 7.2 (the few
 * plugin API functions the core calls) and for a client, translates and
 * "executes" a fixed script of translation blocks, and prints at each run
 * mark what the core holds and what a client's report sees:
 *   run <n>: insns <recorded> visited <visited> whole <whole> roi <roi>
 * The script is a batch of two runs, the second after a change of vector
 * length: QEMU translates the same code again then (the VL is in its TB
 * flags), so the second run executes new translations of the first's TBs.
 * Build (tests/conftest.py tbstats_driver_cmd): gcc -std=gnu11 -O2
 *   -Iarmie_clients -rdynamic -o tbstats_driver tests/tbstats_driver.c
 *   -L<plugins> -ltbstats -Wl,-rpath,<plugins>
 * (-rdynamic: libtbstats.so finds the qemu_plugin_* functions here, as it
 * finds them in qemu-aarch64).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tbstats.h"

#define NOP 0xd503201fu
#define YIELD 0xd503203fu
#define MAX_INSNS 8

/* The plugin API's opaque types, as this driver makes them. */
struct qemu_plugin_insn {
    uint32_t word;
    qemu_plugin_vcpu_udata_cb_t cb; /* a marker's exec callback */
    void *udata;
};

struct qemu_plugin_tb {
    uint64_t vaddr;
    size_t n;
    struct qemu_plugin_insn insn[MAX_INSNS];
    uint64_t *execs; /* the inline counter the core gave */
};

static qemu_plugin_vcpu_tb_trans_cb_t trans_cb;

/* ---- the QEMU 7.2 plugin API, as far as the core uses it ---------------- */

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb)
{
    (void)id;
    trans_cb = cb;
}

void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata)
{
    (void)id, (void)cb, (void)userdata; /* a batch reports at its run marks */
}

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb)
{
    return tb->n;
}

uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb)
{
    return tb->vaddr;
}

struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx)
{
    return (struct qemu_plugin_insn *)&tb->insn[idx];
}

const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn)
{
    return &insn->word; /* little-endian host, as the guest's byte order */
}

size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn)
{
    (void)insn;
    return 4;
}

uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn)
{
    (void)insn;
    return 0;
}

const char *qemu_plugin_insn_symbol(const struct qemu_plugin_insn *insn)
{
    (void)insn;
    return NULL;
}

void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm)
{
    (void)op, (void)imm;
    tb->execs = ptr;
}

void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata)
{
    (void)flags;
    insn->cb = cb;
    insn->udata = userdata;
}

void qemu_plugin_register_vcpu_mem_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_mem_rw rw,
                                          enum qemu_plugin_op op, void *ptr, uint64_t imm)
{
    (void)insn, (void)rw, (void)op, (void)ptr, (void)imm; /* no memory counters here */
}

void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb)
{
    (void)id, (void)cb;
}

bool qemu_plugin_bool_parse(const char *name, const char *val, bool *ret)
{
    (void)name, (void)val, (void)ret;
    return false;
}

/* ---- the client: what a report sees ------------------------------------ */

struct seen {
    size_t visited;
    uint64_t whole, roi;
};

static void add(const tbs_insn *in, void *ud)
{
    struct seen *s = ud;
    s->visited++;
    s->whole += in->whole;
    s->roi += in->roi;
}

static void report(void)
{
    struct seen s = {0, 0, 0};

    tbs_foreach(add, &s);
    printf("run %ld: insns %zu visited %zu whole %llu roi %llu%s\n", tbs_segment(), tbs_n_insns(), s.visited,
           (unsigned long long)s.whole, (unsigned long long)s.roi, tbs_roi_balanced() ? "" : " unbalanced");
}

/* ---- the script ---------------------------------------------------------- */

/* A translation of n words at vaddr (what QEMU does the first time it meets the code, and
 * again for another VL). */
static struct qemu_plugin_tb *translate(uint64_t vaddr, size_t n, const uint32_t *words)
{
    struct qemu_plugin_tb *tb = calloc(1, sizeof(*tb));

    tb->vaddr = vaddr;
    tb->n = n;
    for (size_t i = 0; i < n; i++) {
        tb->insn[i].word = words[i];
    }
    trans_cb(1, tb);
    return tb;
}

/* One execution of a TB: its inline counter at entry, then its markers' callbacks in order. */
static void exec(struct qemu_plugin_tb *tb)
{
    *tb->execs += 1;
    for (size_t i = 0; i < tb->n; i++) {
        if (tb->insn[i].cb) {
            tb->insn[i].cb(0, tb->insn[i].udata);
        }
    }
}

/* A run's ROI: the blocks around and in the kernel, translated (again, from the second run on:
 * a new VL), then executed: begin, the kernel's block `reps` times, end. */
static void roi_run(int reps)
{
    static const uint32_t begin[] = {TBS_ROI_BEGIN, NOP};
    static const uint32_t kernel[] = {NOP, NOP, NOP, NOP};
    static const uint32_t end[] = {TBS_ROI_END, NOP};
    struct qemu_plugin_tb *b = translate(0x2000, 2, begin);
    struct qemu_plugin_tb *c = translate(0x3000, 4, kernel);
    struct qemu_plugin_tb *d = translate(0x4000, 2, end);

    exec(b);
    for (int k = 0; k < reps; k++) {
        exec(c);
    }
    exec(d);
}

int main(void)
{
    static const uint32_t mark[] = {TBS_RUN_MARK, NOP, NOP};
    static const uint32_t other[] = {YIELD, YIELD, YIELD, YIELD};
    static const uint32_t once[] = {NOP, NOP};
    struct qemu_plugin_tb *a;

    if (tbs_start(1, false, false, report) != 0) {
        return 1;
    }
    a = translate(0x1000, 3, mark);
    exec(a); /* run 0 begins */
    roi_run(3);
    exec(translate(0x5000, 2, once));
    exec(a); /* run 0 ends (whole 3 + 2 + 12 + 2 + 2, ROI 1 + 12), run 1 begins at a new VL */
    roi_run(5);
    /* other code at an address seen before (a library loaded where another was) */
    exec(translate(0x3000, 4, other));
    exec(a); /* run 1 ends: whole 3 + 2 + 20 + 2 + 4, ROI 1 + 20 */
    return 0;
}
