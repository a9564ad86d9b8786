"""ci/compare-roi-counts (analysis.core.roi_compare, analysis.core.roi_evidence): each ROI cell
that differs between the x86-64 host's and the arm64 node's sweep is explained by a toolchain
part, or said to be unexplained or counted differently. Synthetic inputs: the verdict of every
branch, the summary and cell file, the code comparison on canned disassembly, the evidence's
refusals on files that are not what the two sweeps counted."""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.core import roi_compare as rc
from analysis.core import roi_evidence as ev
from conftest import REPO

SCRIPT = REPO / "ci" / "compare-roi-counts"
HEADER = "kernel,variant,compiler,vl,size,metric,value\n"
RUN = (("kernel", "pack"), ("variant", "blocks_call"), ("compiler", "gcc"), ("vl", "512"), ("size", "64"))
CELL = (RUN, "roi.mem.sve_contig_load.insns")
LIBC = {"libc of gcc": "host 2.36-8cross1 libc.a:aa, node 2.36-9+deb12u14 libc.a:bb"}
BOTH = {**LIBC, "compiler of gcc": "host gcc 12.2.0-14, node gcc 12.2.0-14+deb12u1"}


def compare(tmp_path: Path, host: str, node: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "node").mkdir(exist_ok=True)
    (tmp_path / "h.csv").write_text(HEADER + host)
    (tmp_path / "node" / "counts.csv").write_text(HEADER + node)
    return subprocess.run([sys.executable, str(SCRIPT), *args, str(tmp_path / "h.csv"), str(tmp_path / "node" / "counts.csv")],
                          capture_output=True, text=True, timeout=60)


# --- the verdict of a differing cell: every branch ---------------------------------------------

def test_explained_when_the_node_binary_counts_here_as_there_and_its_differing_code_is_a_differing_part() -> None:
    e = ev.Evidence({CELL[1]: "4"}, {"__memcpy_sve": "libc"})
    assert rc.verdict(CELL, "2", "4", e, LIBC) == (
        rc.EXPLAINED, "libc of gcc (host 2.36-8cross1 libc.a:aa, node 2.36-9+deb12u14 libc.a:bb): __memcpy_sve")


def test_counting_differs_when_this_host_counts_the_node_binary_otherwise() -> None:
    e = ev.Evidence({CELL[1]: "3"}, {"__memcpy_sve": "libc"})
    assert rc.verdict(CELL, "2", "4", e, LIBC) == (
        rc.COUNTING, "this host's plugins count the node's binary 3, the node counted 4")
    assert rc.verdict(CELL, "2", "4", ev.Evidence({}, {"__memcpy_sve": "libc"}), LIBC)[0] == rc.COUNTING


def test_unexplained_when_a_differing_function_s_part_is_the_same_on_both() -> None:
    e = ev.Evidence({CELL[1]: "4"}, {"__memcpy_sve": "libc", "vector_kernel": "compiler"})
    assert rc.verdict(CELL, "2", "4", e, LIBC) == (
        rc.UNEXPLAINED, "vector_kernel differ(s), but compiler of gcc is the same in both provenance.csv")
    assert rc.verdict(CELL, "2", "4", e, BOTH)[0] == rc.EXPLAINED


@pytest.mark.parametrize("host, node, evidence, differs, why", [
    ("2", "4", ev.Evidence({CELL[1]: "4"}, {}), LIBC,
     "no function of its ROI has different code in the two binaries"),
    ("2", "4", ev.Evidence({}, {}, "no node binary /x/k (the node's sweep step copies build/*/*/bin)"), LIBC,
     "not recounted: no node binary /x/k (the node's sweep step copies build/*/*/bin)"),
    ("2", "4", None, LIBC, "not recounted: no evidence gathered"),
    (None, "4", None, LIBC, "only the node has this run"),
    ("2", None, None, LIBC, "only the host has this run"),
    ("2", "4", ev.Evidence({CELL[1]: "4"}, {"__memcpy_sve": "libc"}), None,
     "no provenance.csv beside both counts.csv to name the toolchain parts"),
])
def test_unexplained_names_what_is_missing(host: str | None, node: str | None, evidence: ev.Evidence | None,
                                           differs: dict[str, str] | None, why: str) -> None:
    assert rc.verdict(CELL, host, node, evidence, differs) == (rc.UNEXPLAINED, why)


def test_equal_cells_are_not_judged_and_the_summary_has_one_line_per_cause() -> None:
    other = (RUN[:3] + (("vl", "128"), RUN[4]), CELL[1])
    equal = (RUN, "roi.total")
    host = {CELL: "2", other: "2", equal: "9"}
    node = {CELL: "4", other: "3", equal: "9"}
    e = {RUN: ev.Evidence({CELL[1]: "4"}, {"__memcpy_sve": "libc"}),
         other[0]: ev.Evidence({CELL[1]: "3"}, {"__memcpy_sve": "libc"})}
    judged = rc.judge(host, node, e, LIBC)
    assert [(c, kind) for c, kind, _ in judged] == [(other, rc.EXPLAINED), (CELL, rc.EXPLAINED)]
    assert rc.summary(judged, 3) == [
        "explained: 2 cells by libc of gcc (host 2.36-8cross1 libc.a:aa, node 2.36-9+deb12u14 libc.a:bb): __memcpy_sve",
        "3 ROI cells, 2 differ: 2 explained, 0 not"]
    judged = rc.judge(host, {**node, other: "5"}, e, LIBC)
    assert rc.summary(judged, 3)[-1] == "3 ROI cells, 2 differ: 1 explained, 1 not"


def test_a_counter_a_run_never_saw_is_0_on_that_side_and_in_the_recount() -> None:
    """counts.csv leaves out an opcode a run never executed (the node's __memcpy_sve has no
    tbnz): against the host's count it is 0, and the recount on the node's binary lacks it too."""
    tbnz = (RUN, "roi.op.tbnz")
    host = {tbnz: "16384", (RUN, "roi.total"): "9"}
    node = rc.with_zeros({(RUN, "roi.total"): "9"}, host)
    assert node == {tbnz: "0", (RUN, "roi.total"): "9"}
    assert rc.with_zeros({}, host) == {}  # a run the node lacks stays missing
    e = ev.Evidence({"roi.total": "9"}, {"__memcpy_sve": "libc"})
    assert rc.verdict(tbnz, "16384", "0", e, LIBC)[0] == rc.EXPLAINED


def test_the_roi_functions_of_a_run_are_its_func_metrics() -> None:
    cells = {(RUN, "roi.func.__memcpy_sve"): "1", (RUN, "roi_net.func.?"): "1", (RUN, "roi.total"): "2",
             ((("kernel", "copy"),), "roi.func.main"): "1"}
    assert rc.roi_functions(cells, RUN) == {"__memcpy_sve", "?"}


# --- the script --------------------------------------------------------------------------------

def test_equal_counts_exit_0_and_other_metrics_are_not_compared(tmp_path: Path) -> None:
    same = "copy,c_vec,gcc,128,64,roi.total,10\ncopy,c_vec,gcc,128,64,whole.total,99\n"
    proc = compare(tmp_path, same, same.replace(",99", ",98"))
    assert (proc.returncode, proc.stdout) == (0, "1 ROI cells, 0 differ: 0 explained, 0 not\n")


def test_a_differing_cell_without_its_evidence_exits_1_naming_it(tmp_path: Path) -> None:
    """Without the host's plans and the node's binaries nothing is recounted: the cell is named
    as unexplained, with the reason, in the cell file too."""
    host = "pack,blocks_call,gcc,512,64,roi.total,10\n"
    proc = compare(tmp_path, host, host.replace(",10", ",12"), "--cells", str(tmp_path / "cells.csv"))
    plans = tmp_path / "plans"
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        "toolchain: not compared (no provenance.csv beside both counts.csv)",
        f"every differing cell with its verdict: {tmp_path / 'cells.csv'}",
        f"kernel=pack variant=blocks_call compiler=gcc vl=512 size=64 metric=roi.total: host 10, node 12: "
        f"unexplained: not recounted: no plan of its job in {plans}",
        "1 ROI cells, 1 differ: 0 explained, 1 not"]
    with (tmp_path / "cells.csv").open() as f:
        assert list(csv.DictReader(f)) == [{
            "kernel": "pack", "variant": "blocks_call", "compiler": "gcc", "vl": "512", "size": "64",
            "metric": "roi.total", "host": "10", "node": "12", "node_binary_here": "", "verdict": "unexplained",
            "why": f"not recounted: no plan of its job in {plans}"}]


def test_a_file_that_is_not_a_counts_table_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "h.csv"), str(tmp_path / "h.csv")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("is it a counts.csv?")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_toolchain_parts_that_differ_come_from_each_side_s_provenance(tmp_path: Path) -> None:
    prov = "compiler,compiler_version,libc_version\n"
    (tmp_path / "provenance.csv").write_text(prov + "gcc,gcc 12.2.0,2.36-8cross1 libc.a:aa\n")
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "provenance.csv").write_text(prov + "gcc,gcc 12.2.0,2.36-9+deb12u14 libc.a:bb\n")
    assert rc.toolchain_differs(tmp_path / "h.csv", tmp_path / "node" / "counts.csv") == {
        "libc of gcc": "host 2.36-8cross1 libc.a:aa, node 2.36-9+deb12u14 libc.a:bb"}
    assert rc.toolchain_differs(tmp_path / "h.csv", tmp_path / "elsewhere" / "counts.csv") is None


# --- the same code in another layout -----------------------------------------------------------

# One function at two addresses, with its data elsewhere: branch targets, the adrp page, the low
# 12 bits put on it (also through a register spilled to the stack) and the padding after it move.
def layout(at: int, page: str, lo: int, callee: int, padding: str = "") -> str:
    code = [("adrp", f"x1, {page}"), ("stp", "x1, x0, [sp, #104]"), ("add", f"x2, x1, #{lo:#x}"),
            ("cbz", f"x0, {at + 0x18:x} <kernel+0x18>"), ("ldr", "x0, [sp, #104]"), ("ldr", f"x0, [x0, #{lo + 8}]"),
            ("bl", f"{callee:x} <__memcpy_sve>"), ("ret", ""), *([(padding, "")] if padding else [])]
    return f"\n{at:016x} <kernel>:\n" + "".join(f"  {at + 4 * i:x}:\t{m}\t{o}\n" for i, (m, o) in enumerate(code))


LAYOUT_A = layout(0x401000, "49f000 <tunable_list+0x520>", 0x748, 0x420b80, padding="nop")
LAYOUT_B = layout(0x402000, "4a0000 <other+0x8>", 0x760, 0x421b80)


def test_the_same_code_in_another_layout_is_the_same_and_a_changed_instruction_is_not() -> None:
    a, b = ev.function_bodies(LAYOUT_A), ev.function_bodies(LAYOUT_B)
    assert a == b and len(a["kernel"][0]) == 8
    changed = ev.function_bodies(LAYOUT_B.replace("cbz\tx0", "cbnz\tx0"))
    assert changed != a
    # An offset from a register that never held a page is the code's own: it is compared.
    assert ev.function_bodies(LAYOUT_A.replace("ldr\tx0, [sp, #104]", "ldr\tx0, [sp, #96]")) != a


def test_differing_functions_are_those_of_the_roi_with_other_code_each_with_its_part() -> None:
    host = {"__memcpy_sve": [("tbnz w6",)], "vector_kernel": [("ret",)], "main": [("ret",)]}
    node = {"__memcpy_sve": [("whilelo p1.b",)], "vector_kernel": [("ret",)], "main": [("nop",)], "extra": [()]}
    assert ev.differing_functions(host, node, {"__memcpy_sve", "vector_kernel", "extra", "?"}, {"__memcpy_sve"}) == {
        "__memcpy_sve": "libc", "extra": "compiler"}


# --- the evidence refuses binaries that are not the ones counted -------------------------------

class FakePlan:
    backend, cpu_model = "qemu", "max"
    settings: dict = {}

    def __init__(self, binary: Path) -> None:
        self.binary = str(binary)
        self.meta = {"kernel": "pack", "variant": "blocks_call", "layout": "v", "build": "vla", "compiler": "gcc"}
        self.runs = ()


def test_a_node_binary_that_is_missing_or_not_the_one_counted_is_no_evidence(tmp_path: Path) -> None:
    host_bin = tmp_path / "host" / "k"
    host_bin.parent.mkdir()
    host_bin.write_bytes(b"host")
    node_build = tmp_path / "node" / "build"
    plan = FakePlan(host_bin)
    job = ev.job_evidence(plan, tmp_path / "raw.json", node_build, RUN, [], [])
    assert job.missing == f"no node binary {node_build}/gcc/vla/bin/qemu/k (the node's sweep step copies build/*/*/bin)"
    (node_build / "gcc" / "vla" / "bin" / "qemu").mkdir(parents=True)
    (node_build / "gcc" / "vla" / "bin" / "qemu" / "k").write_bytes(b"node")
    prov = [{**dict(RUN), "binary_sha256": "ab"}]
    job = ev.job_evidence(plan, tmp_path / "raw.json", node_build, RUN, prov, prov)
    assert job.missing == (f"{node_build}/gcc/vla/bin/qemu/k is not the binary the node counted "
                           "(provenance.csv: sha256 ab)")


# --- the recount, for real ---------------------------------------------------------------------

@pytest.mark.slow
def test_the_node_binary_is_recounted_here_as_its_sweep_counted_it(tiny_sweep: tuple[Path, subprocess.CompletedProcess],
                                                                   tmp_path: Path) -> None:
    """The tiny sweep as the host's and as a "node" whose binaries are the same but whose counts
    say one more in one cell: the recount through the host's plan gives that cell the sweep's
    own count, so the cell is counted differently, not explained."""
    results, _ = tiny_sweep
    node = tmp_path / "node"
    node.mkdir()
    (node / "provenance.csv").write_bytes((results / "provenance.csv").read_bytes())
    with (results / "counts.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    hit = next(r for r in rows if r["variant"] == "blocks_call" and r["vl"] == "512" and r["metric"] == "roi.total"
               and r["size"] != "0")
    sweep_count = hit["value"]
    hit["value"] = str(int(sweep_count) + 1)
    with (node / "counts.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    binary = Path(next(r for r in csv.DictReader((results / "provenance.csv").open()) if r["variant"] == "blocks_call"
                       and r["build"] == hit["build"])["binary"])
    copy = node / "build" / binary.relative_to(binary.parents[4])
    copy.parent.mkdir(parents=True)
    shutil.copy2(binary, copy)  # executable, as the sweep step's cp -r keeps it
    proc = subprocess.run([sys.executable, str(SCRIPT), str(results / "counts.csv"), str(node / "counts.csv")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-2].endswith(
        f"metric=roi.total: host {sweep_count}, node {hit['value']}: counting differs: "
        f"this host's plugins count the node's binary {sweep_count}, the node counted {hit['value']}")
    assert (node / "recount").is_dir()
