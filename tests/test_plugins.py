"""Tests of the QEMU 7.2 instruction-counting plugins in armie_clients/.

Builds the plugins (with analysis/stages/build.py's command) and the host driver of
their shared decoder into a temporary directory, cross-compiles small SVE
test programs, and checks:
  1. the class table against binutils objdump (representative instructions
     of every class, random SVE words, random A64 words), the memory
     client's byte derivation for representative instructions, and that the
     two clients agree on every random word (class vs memory class);
  2. ROI counts of an ACLE svld1/svst1 copy at several VLs against the
     closed form read from objdump of the loop, determinism, class sums,
     missing and unbalanced markers, sequential ROIs;
  3. plugin arguments (unknown key, missing out=/vl=) and JSON validity;
  4. memory client bytes for scalar and SVE copies, qemu_observed;
  5. the counting core's records through a stand-in for QEMU (tests/tbstats_driver.c);
  (the overhead of the plugins is measured by ./harness bench, not here).
Needs: gcc, aarch64-linux-gnu-gcc/-as/-objdump, qemu-aarch64 7.2, pytest.
"""
import json
import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from disasm import branch_target, disasm_functions, expected_class, is_branch, objdump_words

from analysis.stages.build import PLUGIN_CORE, plugin_cmd
from conftest import decode_driver_cmd, tbstats_driver_cmd

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "armie_clients"
CLIENTS = ["inscount", "opcodes", "memory"]
CROSS = "aarch64-linux-gnu-"
QEMU = "qemu-aarch64"
OBJDUMP = CROSS + "objdump"

CLASSES = [
    "sve_gather", "sve_scatter", "sve_first_fault", "sve_contig_load",
    "sve_contig_store", "sve_pred", "sve_reduce", "sve_movprfx", "sve_other",
    "simd_ldst", "simd", "scalar_ldst", "branch", "scalar_other",
]
MEMCLASSES = [
    "scalar_load", "scalar_store", "simd_load", "simd_store",
    "sve_contig_load", "sve_contig_store", "sve_gather", "sve_scatter",
    "sve_first_fault", "prefetch",
]

needs_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in
            ["gcc", CROSS + "gcc", CROSS + "as", OBJDUMP, QEMU]),
    reason="needs gcc, the aarch64-linux-gnu toolchain and qemu-aarch64 (run ./harness setup)")
pytestmark = needs_tools


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# --------------------------------------------------------------------------
# builds

@pytest.fixture(scope="session")
def plugin_build(tmp_path_factory):
    """The plugins, built with the shipped command (analysis/stages/build.py), and
    the host driver of their shared decoder."""
    d = tmp_path_factory.mktemp("plugins")
    for c in [PLUGIN_CORE, *CLIENTS]:
        r = run(plugin_cmd(c, d / f"lib{c}.so"))
        assert r.returncode == 0, r.stderr
        assert "warning" not in r.stderr, r.stderr
    r = run(decode_driver_cmd(d / "decode_driver"))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    return d


def test_source_headers_state_the_shipped_build():
    """Each plugin source's header names the sources and -std of plugin_cmd, the command the
    workflow and these tests build with (the headers once said tbstats.c went into every client)."""
    std = {f for f in plugin_cmd(PLUGIN_CORE, "x.so") if f.startswith("-std=")}
    for src in sorted(SRC.glob("*.c")):
        header = src.read_text().split("*/")[0]
        assert set(re.findall(r"-std=\w+", header)) <= std, src.name
        if src.stem in (PLUGIN_CORE, *CLIENTS):
            shipped = {Path(a).name for a in plugin_cmd(src.stem, f"lib{src.stem}.so") if a.endswith(".c")}
            named = set(re.findall(r"[\w<>]+\.c\b", header.split("Buil", 1)[-1].split(").")[0]))
            assert named == shipped, (src.name, named, shipped)


def decode(plugin_build, words, vl=512):
    """The shared decoder's answer per word: (class, sve, accesses) where
    accesses is "memclass:bytes ..." or "-" (tests/decode_driver.c)."""
    r = run([str(plugin_build / "decode_driver"), str(vl)],
            input="\n".join(f"{w:08x}" for w in words))
    assert r.returncode == 0, r.stderr
    res = []
    for line in r.stdout.splitlines():
        w, cls, sve, *acc = line.split()
        res.append((cls, sve == "1", " ".join(acc)))
    assert len(res) == len(words)
    return res


ROI_S = """\
    .text
    .global roi_begin
    .type roi_begin, %function
roi_begin:
    hint #0x40
    ret
    .size roi_begin, .-roi_begin
    .global roi_end
    .type roi_end, %function
roi_end:
    hint #0x41
    ret
    .size roi_end, .-roi_end
    .global run_mark
    .type run_mark, %function
run_mark:
    hint #0x42
    ret
    .size run_mark, .-run_mark
    .global prep_begin
    .type prep_begin, %function
prep_begin:
    hint #0x43
    ret
    .size prep_begin, .-prep_begin
    .global prep_end
    .type prep_end, %function
prep_end:
    hint #0x44
    ret
    .size prep_end, .-prep_end
"""

COPY_C = r"""
#include <arm_sve.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void roi_begin(void);
void roi_end(void);
void run_mark(void);
void prep_begin(void);
void prep_end(void);

static uint8_t src[1 << 16] __attribute__((aligned(64)));
static uint8_t dst[1 << 16] __attribute__((aligned(64)));

__attribute__((noinline)) void copy_sve(uint8_t *d, const uint8_t *s,
                                        uint64_t n)
{
    for (uint64_t i = 0; i < n; i += svcntb()) {
        svbool_t pg = svwhilelt_b8_u64(i, n);
        svst1_u8(pg, d + i, svld1_u8(pg, s + i));
    }
}

__attribute__((noinline)) void copy_scalar(uint64_t *d, const uint64_t *s,
                                           uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        d[i] = s[i];
}

__attribute__((noinline)) uint64_t sum_scalar(const uint64_t *s, uint64_t n)
{
    uint64_t t = 0;
    for (uint64_t i = 0; i < n; i++)
        t += s[i];
    return t;
}

__attribute__((noinline)) void fill_scalar(uint64_t *d, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        d[i] = i;
}

__attribute__((noinline)) void run_sve(uint64_t n)
{
    roi_begin();
    copy_sve(dst, src, n);
    roi_end();
    __asm__ volatile(""); /* no tail call: keep the epilogue out of the ROI */
}

__attribute__((noinline)) void run_scalar(uint64_t n)
{
    roi_begin();
    copy_scalar((uint64_t *)dst, (const uint64_t *)src, n / 8);
    roi_end();
    __asm__ volatile(""); /* no tail call: keep the epilogue out of the ROI */
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    uint64_t n = strtoull(argv[2], 0, 10);
    long reps = argc > 3 ? atol(argv[3]) : 1;
    for (unsigned i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 7 + 3);
    if (!strcmp(mode, "sve"))
        run_sve(n);
    else if (!strcmp(mode, "scalar"))
        run_scalar(n);
    else if (!strcmp(mode, "sumfill")) {
        /* n/8 loads, n/32 stores; then make dst == src for the check */
        roi_begin();
        uint64_t t = sum_scalar((const uint64_t *)src, n / 8);
        fill_scalar((uint64_t *)dst, n / 32);
        roi_end();
        __asm__ volatile("" : : "r"(t));
        memcpy(dst, src, n);
    } else if (!strcmp(mode, "twice")) {
        run_sve(n);
        run_sve(n);
    } else if (!strcmp(mode, "runs")) {
        /* three runs of a batch (n, 2n and n bytes), each between two run marks and each
         * through the same code, as the harness's batch loop */
        const uint64_t sizes[3] = {n, 2 * n, n};
        volatile int runs = 3; /* not unrolled: every run through the same instructions */
        for (int k = 0;; k++) {
            run_mark();
            if (k == runs)
                break;
            run_sve(sizes[k]);
        }
    } else if (!strcmp(mode, "prep")) {
        /* two runs through the same code, the second with a fill of n/8 words between the
         * preparation markers (as the harness's run that computes a preparation) */
        volatile int runs = 2;
        for (int k = 0;; k++) {
            run_mark();
            if (k == runs)
                break;
            prep_begin();
            if (k == 1)
                fill_scalar((uint64_t *)dst, n / 8);
            prep_end();
            run_sve(n);
        }
    } else if (!strcmp(mode, "nomarkers"))
        copy_sve(dst, src, n);
    else if (!strcmp(mode, "twobegin")) {
        roi_begin();
        run_sve(n);
    } else if (!strcmp(mode, "bench")) {
        roi_begin();
        for (long r = 0; r < reps; r++) {
            copy_sve(dst, src, n);
            copy_scalar((uint64_t *)dst, (const uint64_t *)src, n / 8);
        }
        roi_end();
    } else
        return 2;
    if (memcmp(dst, src, n)) {
        fprintf(stderr, "FAIL: copy\n");
        return 1;
    }
    printf("ok vl=%d\n", (int)svcntb() * 8);
    return 0;
}
"""


@pytest.fixture(scope="session")
def prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("prog")
    (d / "roi.S").write_text(ROI_S)
    (d / "copy.c").write_text(COPY_C)
    exe = d / "copy"
    r = run([CROSS + "gcc", "-O2", "-march=armv8-a+sve", "-static",
             "-fno-tree-vectorize", "-fno-tree-loop-distribute-patterns",
             "-o", str(exe), str(d / "copy.c"), str(d / "roi.S")])
    assert r.returncode == 0, r.stderr
    return exe


def qemu(exe, args, plugins, vl=512, check=True):
    """Run exe under qemu-aarch64 with plugins [(lib, {key: val})]."""
    cmd = [QEMU, "-cpu", f"max,sve-default-vector-length={vl // 8}"]
    for lib, kv in plugins:
        cmd += ["-plugin", ",".join([str(lib)] + [f"{k}={v}" for k, v in kv.items()])]
    r = run(cmd + [str(exe)] + [str(a) for a in args])
    if check:
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"ok vl={vl}"), r.stdout
    return r


def run_clients(plugin_build, exe, args, tmp, vl=512, clients=("inscount",), tag=""):
    plugins, outs = [], {}
    for c in clients:
        out = tmp / f"{c}{tag}-{vl}.json"
        kv = {"out": out}
        if c == "memory":
            kv["vl"] = vl
        if c == "opcodes":
            kv["whole"] = "on"
        plugins.append((plugin_build / f"lib{c}.so", kv))
        outs[c] = out
    qemu(exe, args, plugins, vl=vl)
    res = {}
    for c, out in outs.items():
        assert out.exists(), f"{c} wrote no {out}"
        assert not Path(str(out) + ".tmp").exists()
        res[c] = json.loads(out.read_text())
        assert res[c]["client"] == c
        assert res[c]["plugin_api"] == 1
    return res


# --------------------------------------------------------------------------
# objdump oracle for the class table

def classify(plugin_build, words):
    return [(cls, sve) for cls, sve, _ in decode(plugin_build, words)]


# one line per class member: assembly, expected class (also checks the
# objdump-based oracle above)
REPRESENTATIVES = """\
ld1w {z0.s}, p0/z, [x0, z1.s, uxtw #2]        | sve_gather
ld1d {z0.d}, p0/z, [x0, z1.d, lsl #3]         | sve_gather
ld1b {z0.d}, p0/z, [z1.d, #1]                 | sve_gather
ld1sh {z0.s}, p0/z, [x0, z1.s, sxtw]          | sve_gather
ld1b {z0.s}, p0/z, [x0, z1.s, uxtw]           | sve_gather
ldnt1w {z0.s}, p0/z, [z1.s, x0]               | sve_gather
ldnt1d {z0.d}, p0/z, [z1.d, x0]               | sve_gather
prfb pldl1keep, p0, [x0, z1.s, uxtw]          | sve_gather
prfd pldl1keep, p0, [z1.d, #8]                | sve_gather
prfw pldl1keep, p0, [x0, z1.d, lsl #2]        | sve_gather
st1w {z0.s}, p0, [x0, z1.s, uxtw #2]          | sve_scatter
st1d {z0.d}, p0, [x0, z1.d]                   | sve_scatter
st1b {z0.s}, p0, [z1.s, #3]                   | sve_scatter
st1h {z0.d}, p0, [x0, z1.d, sxtw #1]          | sve_scatter
stnt1w {z0.s}, p0, [z1.s, x0]                 | sve_scatter
stnt1d {z0.d}, p0, [z1.d, x0]                 | sve_scatter
ldff1b {z0.b}, p0/z, [x0, x1]                 | sve_first_fault
ldff1d {z0.d}, p0/z, [x0, z1.d, lsl #3]       | sve_first_fault
ldff1w {z0.s}, p0/z, [z1.s, #4]               | sve_first_fault
ldff1sh {z0.s}, p0/z, [x0, z1.s, sxtw #1]     | sve_first_fault
ldnf1w {z0.s}, p0/z, [x0, #1, mul vl]         | sve_first_fault
ld1b {z0.b}, p0/z, [x0, x1]                   | sve_contig_load
ld1w {z0.s}, p0/z, [x0, #1, mul vl]           | sve_contig_load
ld1sb {z0.h}, p0/z, [x0, x1]                  | sve_contig_load
ld2w {z0.s, z1.s}, p0/z, [x0, x1, lsl #2]     | sve_contig_load
ld4d {z0.d-z3.d}, p0/z, [x0, #4, mul vl]      | sve_contig_load
ldnt1b {z0.b}, p0/z, [x0, x1]                 | sve_contig_load
ld1rw {z0.s}, p0/z, [x0, #4]                  | sve_contig_load
ld1rqb {z0.b}, p0/z, [x0, #16]                | sve_contig_load
ld1rod {z0.d}, p0/z, [x0, x1, lsl #3]         | sve_contig_load
ldr z0, [x0, #1, mul vl]                      | sve_contig_load
ldr p0, [x0]                                  | sve_contig_load
prfb pldl1keep, p0, [x0, x1]                  | sve_contig_load
prfh pldl1keep, p0, [x0, #1, mul vl]          | sve_contig_load
st1b {z0.b}, p0, [x0, x1]                     | sve_contig_store
st1d {z0.d}, p0, [x0, #1, mul vl]             | sve_contig_store
st1h {z0.s}, p0, [x0, x1, lsl #1]             | sve_contig_store
st3w {z0.s-z2.s}, p0, [x0, x1, lsl #2]        | sve_contig_store
stnt1d {z0.d}, p0, [x0, x1, lsl #3]           | sve_contig_store
str z0, [x0]                                  | sve_contig_store
str p0, [x0, #1, mul vl]                      | sve_contig_store
whilelo p0.b, x0, x1                          | sve_pred
whilelt p0.s, w0, w1                          | sve_pred
whilerw p0.b, x0, x1                          | sve_pred
ptrue p0.b                                    | sve_pred
ptrues p0.s, vl4                              | sve_pred
pfalse p0.b                                   | sve_pred
pfirst p0.b, p1, p0.b                         | sve_pred
pnext p0.s, p1, p0.s                          | sve_pred
brka p0.b, p1/z, p2.b                         | sve_pred
brkpb p0.b, p1/z, p2.b, p3.b                  | sve_pred
brkn p0.b, p1/z, p2.b, p0.b                   | sve_pred
and p0.b, p1/z, p2.b, p3.b                    | sve_pred
orrs p0.b, p1/z, p2.b, p3.b                   | sve_pred
eor p0.b, p1/z, p2.b, p3.b                    | sve_pred
bic p0.b, p1/z, p2.b, p3.b                    | sve_pred
nand p0.b, p1/z, p2.b, p3.b                   | sve_pred
nor p0.b, p1/z, p2.b, p3.b                    | sve_pred
orn p0.b, p1/z, p2.b, p3.b                    | sve_pred
sel p0.b, p1, p2.b, p3.b                      | sve_pred
mov p0.b, p1.b                                | sve_pred
not p0.b, p1/z, p2.b                          | sve_pred
zip1 p0.s, p1.s, p2.s                         | sve_pred
punpklo p0.h, p1.b                            | sve_pred
rev p0.d, p1.d                                | sve_pred
cmpeq p0.b, p1/z, z0.b, z1.b                  | sve_pred
cmphi p0.s, p1/z, z0.s, #7                    | sve_pred
cmplt p0.d, p1/z, z0.d, #-3                   | sve_pred
cmpge p0.h, p1/z, z0.h, z1.d                  | sve_pred
fcmgt p0.s, p1/z, z0.s, z1.s                  | sve_pred
fcmeq p0.d, p1/z, z0.d, #0.0                  | sve_pred
fcmuo p0.h, p1/z, z0.h, z1.h                  | sve_pred
facge p0.s, p1/z, z0.s, z1.s                  | sve_pred
match p0.b, p1/z, z0.b, z1.b                  | sve_pred
rdffr p0.b                                    | sve_pred
rdffrs p0.b, p1/z                             | sve_pred
setffr                                        | sve_pred
wrffr p0.b                                    | sve_pred
ptest p0, p1.b                                | sve_pred
saddv d0, p0, z0.b                            | sve_reduce
uaddv d0, p0, z0.s                            | sve_reduce
smaxv b0, p0, z0.b                            | sve_reduce
uminv s0, p0, z0.s                            | sve_reduce
andv h0, p0, z0.h                             | sve_reduce
orv d0, p0, z0.d                              | sve_reduce
eorv b0, p0, z0.b                             | sve_reduce
faddv s0, p0, z0.s                            | sve_reduce
fadda d0, p0, d0, z1.d                        | sve_reduce
fmaxv h0, p0, z0.h                            | sve_reduce
fminnmv d0, p0, z0.d                          | sve_reduce
movprfx z0, z1                                | sve_movprfx
movprfx z0.s, p0/m, z1.s                      | sve_movprfx
movprfx z0.d, p0/z, z1.d                      | sve_movprfx
add z0.s, z1.s, z2.s                          | sve_other
fmla z0.d, p0/m, z1.d, z2.d                   | sve_other
sel z0.b, p0, z1.b, z2.b                      | sve_other
cntp x0, p0, p1.b                             | sve_other
incp x0, p0.s                                 | sve_other
incb x0                                       | sve_other
cntb x0                                       | sve_other
addvl sp, sp, #-1                             | sve_other
rdvl x0, #1                                   | sve_other
index z0.s, #0, #1                            | sve_other
dup z0.b, w0                                  | sve_other
mov z0.d, #0                                  | sve_other
lasta w0, p0, z0.s                            | sve_other
clastb x0, p0, x0, z0.d                       | sve_other
compact z0.s, p0, z1.s                        | sve_other
ctermeq x0, x1                                | sve_other
uzp1 z0.s, z1.s, z2.s                         | sve_other
tbl z0.b, {z1.b}, z2.b                        | sve_other
fcvt z0.s, p0/m, z1.d                         | sve_other
cpy z0.b, p0/m, w0                            | sve_other
histcnt z0.s, p0/z, z1.s, z2.s                | sve_other
addp z0.s, p0/m, z0.s, z1.s                   | sve_other
ldr q0, [x0]                                  | simd_ldst
str d0, [x0, #8]                              | simd_ldst
ldp q0, q1, [x0]                              | simd_ldst
ld1 {v0.16b}, [x0]                            | simd_ldst
st4 {v0.4s-v3.4s}, [x0], #64                  | simd_ldst
ld1r {v0.4s}, [x0]                            | simd_ldst
ld1 {v0.s}[1], [x0]                           | simd_ldst
ldr s0, .                                     | simd_ldst
add v0.4s, v1.4s, v2.4s                       | simd
fadd d0, d1, d2                               | simd
fmov x0, d0                                   | simd
scvtf s0, w0                                  | simd
fcmp s0, #0.0                                 | simd
dup v0.4s, w0                                 | simd
umov w0, v0.s[1]                              | simd
aese v0.16b, v1.16b                           | simd
ldr x0, [x1]                                  | scalar_ldst
strb w0, [x1, #1]                             | scalar_ldst
ldp x0, x1, [sp], #16                         | scalar_ldst
ldxr x0, [x1]                                 | scalar_ldst
stlxr w2, x0, [x1]                            | scalar_ldst
ldar w0, [x1]                                 | scalar_ldst
ldadd x0, x1, [x2]                            | scalar_ldst
cas x0, x1, [x2]                              | scalar_ldst
swp w0, w1, [x2]                              | scalar_ldst
prfm pldl1keep, [x0]                          | scalar_ldst
ldr x0, .                                     | scalar_ldst
ldrsw x0, [x1, x2, lsl #2]                    | scalar_ldst
b .                                           | branch
bl .                                          | branch
br x0                                         | branch
blr x0                                        | branch
ret                                           | branch
b.ne .                                        | branch
cbz x0, .                                     | branch
tbnz w0, #3, .                                | branch
add x0, x1, x2                                | scalar_other
mov x0, #1                                    | scalar_other
svc #0                                        | scalar_other
hint #0x40                                    | scalar_other
nop                                           | scalar_other
mrs x0, tpidr_el0                             | scalar_other
dmb ish                                       | scalar_other
csel x0, x1, x2, eq                           | scalar_other
madd x0, x1, x2, x3                           | scalar_other
brk #0                                        | scalar_other
"""

# memory client, VL 512 (64-byte vectors): instruction -> "class:bytes ..."
MEM_EXPECTED = """\
ld1b {z0.b}, p0/z, [x0, x1]                   | sve_contig_load:64
ld1w {z0.s}, p0/z, [x0, #1, mul vl]           | sve_contig_load:64
ld1sb {z0.h}, p0/z, [x0, x1]                  | sve_contig_load:32
ld1h {z0.d}, p0/z, [x0, x1, lsl #1]           | sve_contig_load:16
ld2w {z0.s, z1.s}, p0/z, [x0, x1, lsl #2]     | sve_contig_load:128
ld4d {z0.d-z3.d}, p0/z, [x0, #4, mul vl]      | sve_contig_load:256
ldnt1b {z0.b}, p0/z, [x0, x1]                 | sve_contig_load:64
ld1rw {z0.s}, p0/z, [x0, #4]                  | sve_contig_load:4
ld1rsb {z0.d}, p0/z, [x0]                     | sve_contig_load:1
ld1rqb {z0.b}, p0/z, [x0, #16]                | sve_contig_load:16
ld1rod {z0.d}, p0/z, [x0, x1, lsl #3]         | sve_contig_load:32
ldr z0, [x0, #1, mul vl]                      | sve_contig_load:64
ldr p0, [x0]                                  | sve_contig_load:8
ld1w {z0.s}, p0/z, [x0, z1.s, uxtw #2]        | sve_gather:64
ld1d {z0.d}, p0/z, [x0, z1.d, lsl #3]         | sve_gather:64
ld1b {z0.d}, p0/z, [z1.d, #1]                 | sve_gather:8
ld1sh {z0.s}, p0/z, [x0, z1.s, sxtw]          | sve_gather:32
ldnt1w {z0.s}, p0/z, [z1.s, x0]               | sve_gather:64
ldnt1h {z0.d}, p0/z, [z1.d, x0]               | sve_gather:16
ldff1b {z0.b}, p0/z, [x0, x1]                 | sve_first_fault:64
ldff1d {z0.d}, p0/z, [x0, z1.d, lsl #3]       | sve_first_fault:64
ldnf1sw {z0.d}, p0/z, [x0, #1, mul vl]        | sve_first_fault:32
prfb pldl1keep, p0, [x0, x1]                  | prefetch:0
prfw pldl1keep, p0, [x0, z1.d, lsl #2]        | prefetch:0
prfd pldl1keep, p0, [z1.d, #8]                | prefetch:0
prfh pldl1keep, p0, [x0, #1, mul vl]          | prefetch:0
prfb pldl1keep, p0, [x0, z1.s, uxtw]          | prefetch:0
st1b {z0.b}, p0, [x0, x1]                     | sve_contig_store:64
st1h {z0.s}, p0, [x0, x1, lsl #1]             | sve_contig_store:32
st1w {z0.d}, p0, [x0, #1, mul vl]             | sve_contig_store:32
st3w {z0.s-z2.s}, p0, [x0, x1, lsl #2]        | sve_contig_store:192
st2d {z0.d, z1.d}, p0, [x0, #2, mul vl]       | sve_contig_store:128
stnt1d {z0.d}, p0, [x0, x1, lsl #3]           | sve_contig_store:64
str z0, [x0]                                  | sve_contig_store:64
str p0, [x0, #1, mul vl]                      | sve_contig_store:8
st1b {z0.s}, p0, [z1.s, #3]                   | sve_scatter:16
st1w {z0.s}, p0, [x0, z1.s, uxtw #2]          | sve_scatter:64
st1d {z0.d}, p0, [x0, z1.d]                   | sve_scatter:64
st1h {z0.d}, p0, [x0, z1.d, sxtw #1]          | sve_scatter:16
stnt1w {z0.s}, p0, [z1.s, x0]                 | sve_scatter:64
ldr q0, [x0]                                  | simd_load:16
str d0, [x0, #8]                              | simd_store:8
ldp q0, q1, [x0]                              | simd_load:32
stp s0, s1, [x0, #-8]!                        | simd_store:8
ld1 {v0.16b}, [x0]                            | simd_load:16
ld1 {v0.8b, v1.8b}, [x0], #16                 | simd_load:16
st4 {v0.4s-v3.4s}, [x0], #64                  | simd_store:64
ld1r {v0.4s}, [x0]                            | simd_load:4
ld1 {v0.s}[1], [x0]                           | simd_load:4
st2 {v0.d, v1.d}[1], [x0]                     | simd_store:16
ldr s0, .                                     | simd_load:4
ldur q1, [x0, #-3]                            | simd_load:16
ldr x0, [x1]                                  | scalar_load:8
strb w0, [x1, #1]                             | scalar_store:1
ldrsh x0, [x1], #2                            | scalar_load:2
ldp x0, x1, [sp], #16                         | scalar_load:16
stp w0, w1, [sp, #8]                          | scalar_store:8
ldpsw x0, x1, [x2]                            | scalar_load:8
ldxr x0, [x1]                                 | scalar_load:8
stlxr w2, x0, [x1]                            | scalar_store:8
ldaxp x0, x1, [x2]                            | scalar_load:16
ldar w0, [x1]                                 | scalar_load:4
ldadd x0, x1, [x2]                            | scalar_load:8 scalar_store:8
cas x0, x1, [x2]                              | scalar_load:8 scalar_store:8
casp x0, x1, x2, x3, [x4]                     | scalar_load:16 scalar_store:16
swph w0, w1, [x2]                             | scalar_load:2 scalar_store:2
ldapr w0, [x1]                                | scalar_load:4
stlur w0, [x1, #-4]                           | scalar_store:4
prfm pldl1keep, [x0]                          | prefetch:0
prfum pldl1keep, [x0, #-1]                    | prefetch:0
ldr x0, .                                     | scalar_load:8
ldrsw x0, [x1, x2, lsl #2]                    | scalar_load:4
add x0, x1, x2                                | -
add z0.s, z1.s, z2.s                          | -
add v0.4s, v1.4s, v2.4s                       | -
"""


def assemble(lines, tmp, name):
    """Assemble one instruction per line; returns the 32-bit words."""
    s = tmp / f"{name}.S"
    s.write_text("".join(f"    {l}\n" for l in lines))
    o = tmp / f"{name}.o"
    r = run([CROSS + "as", "-march=armv8.6-a+sve2+f64mm+rcpc+crypto",
             "-o", str(o), str(s)])
    assert r.returncode == 0, r.stderr
    b = tmp / f"{name}.bin"
    r = run([CROSS + "objcopy", "-O", "binary", "-j", ".text", str(o), str(b)])
    assert r.returncode == 0, r.stderr
    data = b.read_bytes()
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
    assert len(words) == len(lines)
    return words


def parse_table(text):
    rows = []
    for line in text.splitlines():
        asm, want = (x.strip() for x in line.split("|"))
        rows.append((asm, want))
    return rows


@pytest.mark.slow
def test_representatives(plugin_build, tmp_path):
    rows = parse_table(REPRESENTATIVES)
    assert {w for _, w in rows} == set(CLASSES), "every class represented"
    words = assemble([a for a, _ in rows], tmp_path, "reps")
    dis = objdump_words(words, tmp_path)
    got = classify(plugin_build, words)
    bad = []
    for (asm, want), w, (_, mnem, ops), (cls, _) in zip(rows, words, dis, got):
        oracle = expected_class(w, mnem, ops)
        if not (cls == want == oracle):
            bad.append(f"{asm}: {w:08x} table={cls} expected={want} oracle={oracle}")
    assert not bad, "\n".join(bad)


def check_words(plugin_build, words, tmp_path):
    dis = objdump_words(words, tmp_path)
    got = classify(plugin_build, words)
    bad, checked = [], 0
    for w, (_, mnem, ops), (cls, sve) in zip(words, dis, got):
        assert sve == ((w & 0x1e000000) == 0x04000000)
        assert cls.startswith("sve_") == sve, f"{w:08x} {cls}"
        if mnem is None:
            continue
        checked += 1
        exp = expected_class(w, mnem, ops)
        if cls != exp:
            bad.append(f"{w:08x} {mnem} {ops}: table={cls} objdump={exp}")
    return checked, bad


@pytest.mark.slow
def test_random_sve_words(plugin_build, tmp_path):
    """Random SVE encodings, stratified over the decode fields
    (bits 31:29, 24:21, 15:10 exhaustively, the others random)."""
    rng = random.Random(1234)
    words = []
    for top in range(8):
        for mid in range(16):
            for op3 in range(64):
                for _ in range(4):
                    w = rng.getrandbits(32)
                    w = (w & ~0xFFE0FC00) | top << 29 | 0x2 << 25 | mid << 21 | op3 << 10
                    words.append(w)
    words += [(rng.getrandbits(32) & ~0x1E000000) | 0x04000000 for _ in range(100000)]
    checked, bad = check_words(plugin_build, words, tmp_path)
    assert checked > 60000
    assert not bad, f"{len(bad)} of {checked} disagree:\n" + "\n".join(bad[:40])


@pytest.mark.slow
def test_random_a64_words(plugin_build, tmp_path):
    rng = random.Random(99)
    words = [rng.getrandbits(32) for _ in range(100000)]
    checked, bad = check_words(plugin_build, words, tmp_path)
    assert checked > 30000
    assert not bad, f"{len(bad)} of {checked} disagree:\n" + "\n".join(bad[:40])


# What the memory client may make of each inscount class: SVE prefetches
# share the class of their load form; an atomic is one load and one store.
AGREE = {
    "sve_gather": {"sve_gather", "prefetch"},
    "sve_scatter": {"sve_scatter"},
    "sve_first_fault": {"sve_first_fault"},
    "sve_contig_load": {"sve_contig_load", "prefetch"},
    "sve_contig_store": {"sve_contig_store"},
    "simd_ldst": {"simd_load", "simd_store"},
    "scalar_ldst": {"scalar_load", "scalar_store", "prefetch"},
}


def disagreements(rows):
    """Words where inscount's class and the memory client's accesses disagree."""
    bad = []
    for w, (cls, _, acc) in rows:
        kinds = [] if acc == "-" else [a.split(":")[0] for a in acc.split()]
        ok = (not kinds if cls not in AGREE else
              1 <= len(kinds) <= (2 if cls == "scalar_ldst" else 1)
              and set(kinds) <= AGREE[cls])
        if not ok:
            bad.append(f"{w:08x} {cls} {acc}")
    return bad


@pytest.mark.slow
def test_clients_agree_on_random_words(plugin_build):
    """Both clients decode through one table: on 300,000 seeded random words
    (a third of them in the SVE load/store spaces) inscount's class and the
    memory client's accesses agree, at the smallest and largest VL."""
    rng = random.Random(2024)
    words = [rng.getrandbits(32) for _ in range(200000)]
    words += [(rng.getrandbits(32) & ~0x7e000000) | 0x84000000 | rng.getrandbits(2) << 29
              for _ in range(100000)]
    for vl in (128, 2048):
        rows = list(zip(words, decode(plugin_build, words, vl)))
        assert sum(cls.startswith("sve_") and acc != "-" for _, (cls, _, acc) in rows) > 50000
        bad = disagreements(rows)
        assert not bad, f"{len(bad)} of {len(words)} disagree:\n" + "\n".join(bad[:40])


@pytest.mark.slow
def test_memory_bytes_derivation(plugin_build, tmp_path):
    rows = parse_table(MEM_EXPECTED)
    words = assemble([a for a, _ in rows], tmp_path, "mem")
    bad = []
    for (asm, want), (_, _, got) in zip(rows, decode(plugin_build, words)):
        if got != want:
            bad.append(f"{asm}: got {got} expected {want}")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_memory_bytes_scale_with_vl(plugin_build, tmp_path):
    rows = parse_table(MEM_EXPECTED)
    words = assemble([a for a, _ in rows], tmp_path, "mem")
    outs = {}
    for vl in (128, 512, 2048):
        outs[vl] = [acc for _, _, acc in decode(plugin_build, words, vl)]
    for i, (asm, want) in enumerate(rows):
        for vl in (128, 2048):
            for a, b in zip(outs[512][i].split(), outs[vl][i].split()):
                if a == "-":
                    assert b == "-"
                    continue
                c512, b512 = a.split(":")
                cvl, bvl = b.split(":")
                assert c512 == cvl
                fixed = (not c512.startswith("sve") or "ld1r" in asm
                         or c512 == "prefetch")
                exp = int(b512) if fixed else int(b512) * vl // 512
                assert int(bvl) == exp, f"{asm} at {vl}: {bvl} != {exp}"


# --------------------------------------------------------------------------
# ROI counts against the closed form read from objdump

def closed_form(exe):
    """ROI instruction count of run_sve(n) as fixed + per_iter * iterations."""
    f = disasm_functions(exe, {"run_sve", "copy_sve", "roi_begin"})
    # roi_begin: the instructions after the marker up to its ret
    rb = f["roi_begin"]
    idx = next(i for i, (_, m, o) in enumerate(rb) if m == "hint" and "0x40" in o)
    after_begin = next(i for i, (_, m, _) in enumerate(rb) if m == "ret") - idx
    # run_sve: straight line from after `bl roi_begin` to `bl roi_end`
    rs = f["run_sve"]
    i0 = next(i for i, (_, m, o) in enumerate(rs) if m == "bl" and "<roi_begin>" in o)
    i1 = next(i for i, (_, m, o) in enumerate(rs) if m in ("b", "bl") and "<roi_end>" in o)
    between = rs[i0 + 1:i1 + 1]
    for _, m, o in between[:-1]:
        assert not is_branch(m) or "<copy_sve>" in o, f"branch in run_sve: {m} {o}"
    # copy_sve: prologue, one loop closed by a backward branch, epilogue
    cs = f["copy_sve"]
    back = [(i, a, m, o) for i, (a, m, o) in enumerate(cs)
            if is_branch(m) and m not in ("ret", "bl") and
            branch_target(o) is not None and branch_target(o) < a]
    assert len(back) == 1, f"expected one loop in copy_sve: {back}"
    ib, ab, _, ob = back[0]
    target = branch_target(ob)
    il = next(i for i, (a, _, _) in enumerate(cs) if a == target)
    iret = next(i for i in range(ib, len(cs)) if cs[i][1] == "ret")
    for i in list(range(0, il)) + list(range(ib + 1, iret)):
        a, m, o = cs[i]
        if is_branch(m):  # only a forward exit skipping the loop (n == 0)
            assert (branch_target(o) or 0) > ab, f"{m} {o}"
    per_iter = ib - il + 1
    kernel_fixed = il + (iret - ib)
    fixed = after_begin + len(between) + kernel_fixed
    return fixed, per_iter, kernel_fixed


VLS = [128, 384, 512, 2048]


@pytest.mark.slow
@pytest.mark.parametrize("vl", VLS)
def test_roi_closed_form(plugin_build, prog, tmp_path, vl):
    n = 65536
    fixed, per_iter, kernel_fixed = closed_form(prog)
    iters = math.ceil(n / (vl // 8))
    want = fixed + per_iter * iters
    a = run_clients(plugin_build, prog, ["sve", n], tmp_path, vl, ("inscount", "opcodes"))
    b = run_clients(plugin_build, prog, ["sve", n], tmp_path, vl, ("inscount",), tag="b")
    ins = a["inscount"]
    assert ins["markers"] == {"begin": 1, "end": 1, "balanced": True, "prep": 0}
    roi = ins["roi"]
    assert roi["total"] == want, (roi["total"], fixed, per_iter, iters)
    assert b["inscount"] == ins, "two runs differ"
    for part in ("whole", "roi"):
        c = ins[part]
        assert list(c["classes"]) == CLASSES
        assert sum(c["classes"].values()) == c["total"]
        assert sum(v for k, v in c["classes"].items() if k.startswith("sve_")) == c["sve"]
    # the loop: ld1b, st1b, a whilelo per iteration
    assert roi["classes"]["sve_contig_load"] == iters
    assert roi["classes"]["sve_contig_store"] == iters
    assert roi["classes"]["sve_pred"] >= iters
    assert ins["whole"]["total"] > roi["total"]
    funcs = {f["symbol"]: f for f in ins["roi_functions"]}
    assert sum(f["total"] for f in ins["roi_functions"]) == roi["total"]
    assert sum(f["sve"] for f in ins["roi_functions"]) == roi["sve"]
    assert funcs["copy_sve"]["total"] == kernel_fixed + per_iter * iters
    assert ins["roi_functions"][0]["symbol"] == "copy_sve"
    totals = [f["total"] for f in ins["roi_functions"]]
    assert totals == sorted(totals, reverse=True)
    # opcodes: same total, one entry per distinct encoding
    ops = a["opcodes"]
    assert sum(e["count"] for e in ops["roi"]) == roi["total"]
    assert sum(e["count"] for e in ops["whole"]) == ins["whole"]["total"]
    assert all(re.fullmatch(r"0x[0-9a-f]{8}", e["encoding"]) for e in ops["roi"])
    counts = [e["count"] for e in ops["roi"]]
    assert counts == sorted(counts, reverse=True)


@pytest.mark.slow
def test_two_sequential_rois_sum(plugin_build, prog, tmp_path):
    one = run_clients(plugin_build, prog, ["sve", 65536], tmp_path)["inscount"]
    two = run_clients(plugin_build, prog, ["twice", 65536], tmp_path, tag="2")["inscount"]
    assert two["markers"] == {"begin": 2, "end": 2, "balanced": True, "prep": 0}
    assert two["roi"]["total"] == 2 * one["roi"]["total"]
    assert two["roi"]["classes"] == {k: 2 * v for k, v in one["roi"]["classes"].items()}


@pytest.mark.slow
def test_run_marks_split_the_counts_per_run(plugin_build, prog, tmp_path):
    """hint #0x42 (a batch's run mark): each client writes <out>.<run> for what the run
    executed between its marks, counters from zero; no <out> for the process."""
    n = 16384
    fixed, per_iter, _ = closed_form(prog)
    one = run_clients(plugin_build, prog, ["sve", n], tmp_path, clients=CLIENTS)
    plugins, outs = [], {}
    for c in CLIENTS:
        out = tmp_path / f"{c}-runs.json"
        kv = {"out": out, "vl": "512:1024:512"} if c == "memory" else {"out": out}
        if c == "opcodes":
            kv["whole"] = "on"
        plugins.append((plugin_build / f"lib{c}.so", kv))
        outs[c] = out
    qemu(prog, ["runs", n], plugins)
    runs = []
    for c, out in outs.items():
        assert not out.exists(), f"{c} wrote {out} as well as the runs' files"
        assert not Path(f"{out}.3").exists(), f"{c} wrote a file for what follows the last mark"
    for k in range(3):
        runs.append({c: json.loads(Path(f"{out}.{k}").read_text()) for c, out in outs.items()})
    for k, size in enumerate((n, 2 * n, n)):
        ins = runs[k]["inscount"]
        assert ins["markers"] == {"begin": 1, "end": 1, "balanced": True, "prep": 0}
        assert ins["roi"]["total"] == fixed + per_iter * math.ceil(size / 64), (k, ins["roi"])
        assert sum(e["count"] for e in runs[k]["opcodes"]["whole"]) == ins["whole"]["total"]
        # a run's share: far less than the process of one run, which counts start-up and exit
        assert ins["roi"]["total"] < ins["whole"]["total"] < one["inscount"]["whole"]["total"]
    # the same work counts the same wherever it stands in the batch
    assert runs[0]["inscount"] == runs[2]["inscount"]
    assert runs[0]["opcodes"] == runs[2]["opcodes"]
    assert runs[0]["inscount"]["roi"] == one["inscount"]["roi"]
    # memory: each run at its own vl= entry (SVE bytes derived at 1024 bits double the 512's
    # for twice the vectors of 2n bytes at 512 ... here: run 1 copies 2n bytes at vl 1024)
    mem = [r["memory"] for r in runs]
    assert [m["vl"] for m in mem] == [512, 1024, 512]
    load = [m["roi"]["classes"]["sve_contig_load"] for m in mem]
    assert load[1]["insns"] == 2 * load[0]["insns"]
    assert load[1]["bytes"] == 4 * load[0]["bytes"]


@pytest.mark.slow
def test_prep_markers_leave_the_whole_count(plugin_build, prog, tmp_path):
    """hint #0x43/#0x44 (a run's preparation): what executes between them is left out of the
    whole count, so a run that computes its preparation counts as one that copies it."""
    n = 16384
    plugins, outs = [], {}
    for c in ("inscount", "opcodes"):
        out = tmp_path / f"{c}-prep.json"
        plugins.append((plugin_build / f"lib{c}.so", {"out": out, "whole": "on"} if c == "opcodes" else {"out": out}))
        outs[c] = out
    qemu(prog, ["prep", n], plugins)
    runs = [{c: json.loads(Path(f"{out}.{k}").read_text()) for c, out in outs.items()} for k in range(2)]
    for r in runs:
        assert r["inscount"]["markers"] == {"begin": 1, "end": 1, "balanced": True, "prep": 1}
    # the second run executed n/8 fill iterations (at least 3 instructions each) more
    assert runs[1]["inscount"] == runs[0]["inscount"]
    assert runs[1]["opcodes"] == runs[0]["opcodes"]


@pytest.mark.slow
def test_retranslations_share_their_record(plugin_build, tmp_path):
    """QEMU translates the same code again for every VL, and a batch changes the VL at every
    run: the core keeps one record for the same words at the same address (other words there
    get their own), and a report visits only what the run executed. The counts are those of
    the script (tests/tbstats_driver.c); before, the second run held and visited 25
    instructions, the first run's translations too."""
    exe = tmp_path / "tbstats_driver"
    r = run(tbstats_driver_cmd(exe, plugin_build))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    r = run([str(exe)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "run 0: insns 13 visited 13 whole 21 roi 13",
        "run 1: insns 17 visited 15 whole 31 roi 21",
    ]


@pytest.mark.slow
def test_run_marks_need_a_vl_per_run(plugin_build, prog, tmp_path):
    r = qemu(prog, ["runs", 4096], [(plugin_build / "libmemory.so", {"out": tmp_path / "m.json", "vl": "512:512"})],
             check=False)
    assert r.returncode != 0
    assert "memory: run 2 of the batch has no vl= (2 given)" in r.stderr


@pytest.mark.slow
def test_small_roi(plugin_build, prog, tmp_path):
    """n = 0: only the fixed part, the loop never runs."""
    fixed, _, _ = closed_form(prog)
    res = run_clients(plugin_build, prog, ["sve", 0], tmp_path, tag="0")["inscount"]
    # n == 0 skips the loop and may take a shorter exit: at most fixed
    assert 0 < res["roi"]["total"] <= fixed


@pytest.mark.slow
def test_missing_markers(plugin_build, prog, tmp_path):
    res = run_clients(plugin_build, prog, ["nomarkers", 65536], tmp_path,
                      clients=CLIENTS)
    for c in CLIENTS:
        assert res[c]["markers"] == {"begin": 0, "end": 0, "balanced": False, "prep": 0}
        assert res[c]["roi"] is None
    assert res["inscount"]["roi_functions"] is None
    assert res["inscount"]["whole"]["total"] > 0


@pytest.mark.slow
def test_unbalanced_markers(plugin_build, prog, tmp_path):
    res = run_clients(plugin_build, prog, ["twobegin", 65536], tmp_path,
                      clients=CLIENTS)
    for c in CLIENTS:
        assert res[c]["markers"] == {"begin": 2, "end": 1, "balanced": False, "prep": 0}
        assert res[c]["roi"] is None


# --------------------------------------------------------------------------
# arguments

@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_unknown_key_rejected(plugin_build, prog, tmp_path, client):
    lib = plugin_build / f"lib{client}.so"
    kv = {"out": tmp_path / "x.json", "bogus": 1}
    if client == "memory":
        kv["vl"] = 512
    r = qemu(prog, ["sve", 16], [(lib, kv)], check=False)
    assert r.returncode != 0
    assert f"{client}: unknown argument 'bogus=1'" in r.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_missing_out_rejected(plugin_build, prog, client):
    kv = {"vl": 512} if client == "memory" else {}
    r = qemu(prog, ["sve", 16], [(plugin_build / f"lib{client}.so", kv)], check=False)
    assert r.returncode != 0
    assert f"{client}: missing required argument out=<path>" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("vl", ["", "100", "4096", "abc"])
def test_memory_vl_required_and_checked(plugin_build, prog, tmp_path, vl):
    kv = {"out": tmp_path / "m.json"}
    if vl:
        kv["vl"] = vl
    r = qemu(prog, ["sve", 16], [(plugin_build / "libmemory.so", kv)], check=False)
    assert r.returncode != 0
    assert "memory: " in r.stderr and "vl" in r.stderr


# --------------------------------------------------------------------------
# memory client on real runs

@pytest.mark.slow
def test_memory_scalar_copy(plugin_build, prog, tmp_path):
    res = run_clients(plugin_build, prog, ["scalar", 65536], tmp_path, 512,
                      ("memory",))["memory"]
    assert res["sve_bytes"] == "derived" and res["vl"] == 512
    cl = res["roi"]["classes"]
    assert list(cl) == MEMCLASSES
    assert cl["scalar_load"]["bytes"] == 65536
    assert cl["scalar_store"]["bytes"] == 65536
    for k in MEMCLASSES:
        if k not in ("scalar_load", "scalar_store"):
            assert cl[k] == {"insns": 0, "bytes": 0}, k
    obs = res["roi"]["qemu_observed"]
    # every scalar access is seen by QEMU: one access per 8-byte ldr/str
    assert obs == {"loads": 8192, "stores": 8192, "other": 0}
    assert cl["scalar_load"]["insns"] == cl["scalar_store"]["insns"] == 8192


@pytest.mark.slow
def test_memory_loads_and_stores_apart(plugin_build, prog, tmp_path):
    """Unequal loads (8192) and stores (2048): the split is not symmetric."""
    res = run_clients(plugin_build, prog, ["sumfill", 65536], tmp_path, 512,
                      ("memory",))["memory"]
    cl = res["roi"]["classes"]
    assert cl["scalar_load"] == {"insns": 8192, "bytes": 65536}
    assert cl["scalar_store"] == {"insns": 2048, "bytes": 16384}
    assert res["roi"]["qemu_observed"] == {"loads": 8192, "stores": 2048, "other": 0}


@pytest.mark.slow
@pytest.mark.parametrize("vl", VLS)
def test_memory_sve_copy(plugin_build, prog, tmp_path, vl):
    res = run_clients(plugin_build, prog, ["sve", 65536], tmp_path, vl,
                      ("memory",))["memory"]
    vlb = vl // 8
    iters = math.ceil(65536 / vlb)
    cl = res["roi"]["classes"]
    assert cl["sve_contig_load"] == {"insns": iters, "bytes": iters * vlb}
    assert cl["sve_contig_store"] == {"insns": iters, "bytes": iters * vlb}
    assert cl["sve_contig_load"]["bytes"] >= 65536
    assert cl["sve_contig_load"]["bytes"] - 65536 < vlb
    # QEMU 7.2 sees no SVE access; nothing else in this ROI touches memory
    assert res["roi"]["qemu_observed"] == {"loads": 0, "stores": 0, "other": 0}
