"""The emulated AArch64 guest (issue 35): setup/arm64-vm.sh's answers and refusals (against an
empty HARNESS_CACHE, nothing built), the runner's batch script and its hang, and the measured
checks: DynamoRIO's ROI counts in the guest against the QEMU plugins' for one kernel of the
default sweep at the VLs DynamoRIO supports, and for every cell of a sweep in batches
(analysis.backends.armie_guest, which `./harness bench --only armie` runs on the default sweep)."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.backends import Bench, RunError, armie, armie_guest, qemu
from analysis.commands import bench
from analysis.core import arm64_vm, config
from analysis.core.table import COLUMNS, read_counts, write_counts
from analysis.stages import build
from conftest import (DYNAMORIO_BUILD_TOOLS, REPO, armie_plan, armie_refuses_a_sweep_of_no_dynamorio_vl, path_without,
                      snakemake, stand_ins, tiny_with_armie)

SETUP = REPO / "setup" / "arm64-vm.sh"
ABI = "6.1.0-56-arm64"
# One kernel of the default sweep, at a size whose ROI is a few thousand instructions.
KERNEL, VARIANT, SIZE = "copy", "acle_4v", 65536


@pytest.fixture
def cache_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("DYNAMORIO_HOME", "ARM64_VM_NEED_GIB")}
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache")}


def setup(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SETUP), *args], capture_output=True, text=True, env={**env, **extra}, timeout=60)


def test_path_says_not_built_and_names_the_command(cache_env: dict[str, str]) -> None:
    where = Path(cache_env["HARNESS_CACHE"]) / f"arm64-vm-{ABI}"
    assert setup(cache_env, "--where").stdout == f"{where}\n"
    proc = setup(cache_env, "--path")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"setup/arm64-vm.sh: the arm64 guest is not built (it would be {where}; "
                           "fix: ./harness setup --with-arm64-vm)\n")
    proc = setup(cache_env, "--dynamorio")
    assert (proc.returncode, proc.stderr) == (1, "setup/arm64-vm.sh: the arm64 guest has no DynamoRIO (fix: ./harness "
                                                 "setup --with-arm64-vm, which builds it; or DYNAMORIO_HOME=<AArch64 "
                                                 "DynamoRIO install> ./harness setup --with-arm64-vm)\n")
    where.mkdir(parents=True)
    (where / "installed").write_text("x\n")
    assert setup(cache_env, "--path").stdout == f"{where}\n"


def _dr_tree(root: Path, machine: bytes, version: str) -> Path:
    """A DynamoRIO-shaped install tree whose drrun is an ELF header for `machine`."""
    (root / "bin64").mkdir(parents=True)
    (root / "cmake").mkdir()
    (root / "bin64" / "drrun").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(11) + machine + bytes(46))
    (root / "bin64" / "drrun").chmod(0o755)
    (root / "cmake" / "DynamoRIOConfig.cmake").write_text("# stub\n")
    # Unquoted, as DynamoRIO writes it (a quoted-only reader found no version in a real build).
    (root / "cmake" / "DynamoRIOConfigVersion.cmake").write_text(f"set(PACKAGE_VERSION {version})\n")
    return root


@pytest.mark.parametrize("case", ["not a tree", "x86-64", "too old", "unknown option"])
def test_bad_input_exits_2_in_one_line_creating_nothing(cache_env: dict[str, str], tmp_path: Path, case: str) -> None:
    args: tuple[str, ...] = ()
    if case == "not a tree":
        extra, expect = {"DYNAMORIO_HOME": str(tmp_path)}, "is not a DynamoRIO install tree"
    elif case == "x86-64":
        extra, expect = {"DYNAMORIO_HOME": str(_dr_tree(tmp_path / "dr", b"\x3e\x00", "11.91.20672"))}, "is not an AArch64 DynamoRIO"
    elif case == "too old":
        extra, expect = {"DYNAMORIO_HOME": str(_dr_tree(tmp_path / "dr", b"\xb7\x00", "10.0.19672"))}, \
            "is DynamoRIO 10.0.19672; the guest needs 11.0 or newer"
    else:
        extra, expect, args = {}, "unknown option '--bogus'", ("--bogus",)
    proc = setup(cache_env, *args, **extra)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and expect in proc.stderr, proc.stderr
    assert list(Path(cache_env["HARNESS_CACHE"]).iterdir()) == []


def test_a_missing_emulator_is_one_line_naming_the_setup_command(cache_env: dict[str, str], tmp_path: Path) -> None:
    proc = setup(cache_env, PATH=path_without(tmp_path / "bin", "qemu-system-aarch64"))
    assert proc.returncode == 1
    assert proc.stderr == ("setup/arm64-vm.sh: qemu-system-aarch64 not found; fix: ./harness setup --with-arm64-vm "
                           "(installs qemu-system-arm and cpio)\n")
    assert not list((Path(cache_env["HARNESS_CACHE"])).rglob(".done-*"))


def test_a_pinned_package_gone_from_the_mirror_is_one_line_and_no_step_is_marked_done(
        cache_env: dict[str, str], tmp_path: Path) -> None:
    """apt-get download failing (the mirror dropped the pinned kernel) names the pins to update;
    the next call starts at that step again (no stamp), whatever this machine has installed."""
    tools = tmp_path / "tools"
    tools.mkdir()
    stubs = {"apt-get": 'echo "E: Version \'6.1.192-2\' for \'linux-image-6.1.0-56-arm64:arm64\' was not found" >&2; exit 100',
             "dpkg": "echo arm64", "qemu-system-aarch64": "exit 0", "cpio": "exit 0",
             "aarch64-linux-gnu-readelf": "exit 0"}
    for name, body in stubs.items():
        (tools / name).write_text(f"#!/bin/sh\n{body}\n")
        (tools / name).chmod(0o755)
    # DynamoRIO's build tools are checked before the guest's first step (a fresh Debian has no
    # cmake: there the line named it, not the mirror).
    stand_ins(tools, DYNAMORIO_BUILD_TOOLS)
    # The guest is an x86-64 host's: its DynamoRIO check is the cross toolchain's on any host.
    proc = setup(cache_env, PATH=f"{tools}:{os.environ['PATH']}", HARNESS_HOST_ARCH="amd64")
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("setup/arm64-vm.sh: apt-get download failed (log: ") and \
        last.endswith("the mirror moved on: update KERNEL_VERSION and PINNED in setup/arm64-vm.sh"), proc.stderr
    guest = Path(cache_env["HARNESS_CACHE"]) / f"arm64-vm-{ABI}"
    assert "was not found" in (guest / "debs.log").read_text()
    assert sorted(p.name for p in guest.iterdir()) == ["debs.log"]


def test_each_command_of_a_batch_keeps_its_own_status() -> None:
    script = arm64_vm.batch_script(["false", "echo a b"])
    assert script.splitlines()[1:] == ["mkdir -p out", "( false ) >out/0.out 2>out/0.err; echo $? >out/0.rc",
                                       "( echo a b ) >out/1.out 2>out/1.err; echo $? >out/1.rc"]


def test_every_batch_turns_transparent_huge_pages_off_before_its_commands() -> None:
    """With the guest kernel's default (`always`), about one DynamoRIO process in twenty ran 4 to 8
    times slower: QEMU empties its whole software TLB on any flush inside a region where the guest
    mapped a huge page (arm64_vm.NO_HUGE_PAGES)."""
    assert arm64_vm.batch_script(["true"]).splitlines()[0] == \
        "echo never >/sys/kernel/mm/transparent_hugepage/enabled"


@pytest.mark.slow
@pytest.mark.needs_arm64_vm
def test_a_batchs_commands_run_without_transparent_huge_pages() -> None:
    batch = arm64_vm.run_batch(arm64_vm.find_guest(), ["cat /sys/kernel/mm/transparent_hugepage/enabled"], {}, 120,
                               "huge-pages")
    assert batch.outputs[0].stdout.split() == ["always", "madvise", "[never]"]


def test_dynamorio_runs_only_the_vls_it_supports() -> None:
    cmd = arm64_vm.dynamorio_command(256, ["./bin/k", "0256", "000000065536"], ["-noROI"])
    assert cmd == ("echo 32 >/proc/sys/abi/sve_default_vector_length && echo 1 >/proc/sys/vm/legacy_va_layout && "
                   "/opt/dynamorio/bin64/drrun -c "
                   "/opt/dynamorio/harness/libroi_inscount.so -noROI -- ./bin/k 0256 000000065536")
    for vl in (384, 1024, 2048):
        with pytest.raises(ValueError, match="not run: DynamoRIO supports VL 128/256/512 only"):
            arm64_vm.dynamorio_command(vl, ["./k"])


def test_the_guest_has_one_vcpu_with_or_without_icount(tmp_path: Path) -> None:
    """A batch runs its commands one after another: a second vCPU only cost CPU time (a boot took
    4.4 CPU s with two, 2.8 with one), so every guest, DynamoRIO's included, gets one."""
    guest = arm64_vm.Guest(tmp_path, None)
    for icount in (False, True):
        cmd = arm64_vm.qemu_command(guest, tmp_path, icount)
        assert cmd[cmd.index("-smp") + 1] == "1" and cmd.count("-smp") == 1


def test_the_roi_client_counts_inline_and_calls_out_only_at_markers() -> None:
    """The ROI client adds each segment's counts with inline instructions; its one clean call is
    at the markers. A clean call per executed segment (its first version) saved and restored
    every register, SVE state included, and made most of a DynamoRIO process's cost."""
    src = (REPO / "armie_clients" / "dynamorio" / "roi_inscount.c").read_text()
    assert src.count("dr_insert_clean_call(") == 1
    assert "dr_insert_clean_call(drcontext, bb, instr, (void *)mark," in src
    assert "drreg_static" in (REPO / "armie_clients" / "dynamorio" / "CMakeLists.txt").read_text()


@pytest.mark.slow
@pytest.mark.needs_arm64_vm
def test_a_hanging_batch_is_killed_at_its_limit_and_named() -> None:
    guest = arm64_vm.find_guest()
    with pytest.raises(arm64_vm.GuestHang, match=r"hang-test: the arm64 guest did not finish in its time limit of 40 s"):
        arm64_vm.run_batch(guest, ["sleep 600"], {}, 40, "hang-test")


def _run(kernel: str, variant: str, vl: int, size: int) -> config.Run:
    """The default sweep's first op/dtype of the kernel at `vl` and `size`."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    row = sweep.table.row(kernel, variant)
    op, dtype = config.selection(sweep.table, {"kernel": kernel, "variants": [variant]}).op_dtypes[0]
    return config.Run(vl, size, op, dtype, config.run_params(sweep.table, row, op, dtype), sve=True)


def _dr_cells() -> list[tuple[str, str, str, config.Run]]:
    """The cells measured in one boot: (compiler, kernel, variant, run). The clang reduce cell's
    code compares its two buffers' addresses (a run-time overlap check: three instructions more
    when `in` lies above `inout`), so its count holds only when the guest lays memory out as
    qemu-user does; under Linux's default top-down layout DynamoRIO counted 426,016 against
    QEMU's 426,013."""
    return [("gcc", KERNEL, VARIANT, _run(KERNEL, VARIANT, vl, SIZE)) for vl in arm64_vm.DYNAMORIO_VLS] + [
        ("clang", "reduce", "c_autovec", _run("reduce", "c_autovec", 512, 4 << 20))]


@pytest.fixture(scope="module")
def dr_binaries(work: Path) -> dict[tuple[str, str, str], Path]:
    """The cells' kernels built for both markers (ArmIE's and the QEMU plugins'), by (compiler,
    binary, marker), and the plugins under "plugins": only these targets, not the whole table
    (`binaries` builds every kernel)."""
    bd = work / "arm64-vm-build"
    bins = {(cc, f"{k}-{v}", b): build.binary_path(bd, cc, "vla", b, f"{k}-{v}")
            for cc, k, v, _ in _dr_cells() for b in ("armie", "qemu")}
    targets = [str(p) for p in bins.values()] + [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    proc = snakemake(REPO / "configs" / "default.yaml", bd, work / "arm64-vm-results", targets)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {**bins, ("", "plugins", ""): build.plugin_path(bd, "inscount").parent}


@pytest.fixture(scope="module")
def dr_measured(dr_binaries: dict[tuple[str, str, str], Path]) -> dict[str, Any]:
    """One guest boot running each cell's ArmIE-marker binary under DynamoRIO with the ROI
    client, and the QEMU plugins' records of its QEMU-marker binary (same code and addresses:
    kernels/roi/roi_slot.inc) for the same runs."""
    cells = _dr_cells()
    files: dict[str, Path] = {}
    commands: list[str] = []
    records: list[dict[str, Any]] = []
    for i, (cc, k, v, run) in enumerate(cells):
        files[f"bin/{i}"] = dr_binaries[(cc, f"{k}-{v}", "armie")]
        commands.append(arm64_vm.dynamorio_command(run.vl, [f"./bin/{i}", *run.argv()]))
        records.append(qemu.run_once(dr_binaries[(cc, f"{k}-{v}", "qemu")], "max", run,
                                     dr_binaries[("", "plugins", "")], None, 300))
    batch = arm64_vm.run_batch(arm64_vm.find_guest(), commands, files, 900, "dynamorio-vs-qemu")
    return {"cells": cells, "batch": batch, "qemu": records}


@pytest.mark.slow
@pytest.mark.needs_arm64_vm
def test_dynamorio_roi_counts_equal_the_qemu_plugins(dr_measured: dict[str, Any]) -> None:
    """Issue 35 item 3: the ROI total and SVE count of DynamoRIO's client in the guest (ArmIE's
    output line, read by the armie backend's parser) equal the QEMU plugins' for one kernel at
    VL 128, 256 and 512, and for clang's reduce c_autovec, whose count depends on where its
    buffers lie (it failed with Linux's top-down layout); the kernel's checksum is the same."""
    batch = dr_measured["batch"]
    assert batch.provenance["kernel"].startswith(ABI) and batch.provenance["emulator"].startswith("QEMU emulator version")
    assert "-cpu max,pauth-impdef=on" in batch.provenance["guest_command"]
    for (cc, k, v, run), out, rec in zip(dr_measured["cells"], batch.outputs, dr_measured["qemu"]):
        cell = f"{cc} {k}-{v} VL {run.vl}"
        assert out.rc == 0, f"{cell}: {out.stderr[-500:]}"
        ok = next(ln for ln in out.stdout.splitlines() if ln.startswith("ok "))
        assert f"vl={run.vl} " in ok and f"checksum={rec['checksum']}" in ok, cell
        dr = armie.parse_inscount(out.stdout + out.stderr)
        want = rec["inscount"]["roi"]
        assert (dr["total"], dr["sve"]) == (want["total"], want["sve"]), cell


def test_every_cell_at_another_vl_is_counted_as_not_run() -> None:
    """The default sweep's cells at VL 128/256/512 go to DynamoRIO (the twin built with ArmIE's
    markers), every other cell is counted under its VL as not run, none dropped."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    todo, not_run = armie_guest.cells(sweep, armie.NAME)
    runs = [(j, r) for j in sweep.jobs() for r in j.runs]
    assert len(todo) + sum(not_run.values()) == len(runs)
    assert {c.run.vl for c in todo} == {128, 256, 512} and {c.binary.backend for c in todo} == {armie.NAME}
    assert set(not_run) == set(sweep.vector_lengths) - {128, 256, 512}
    # The VLS builds for 1024 and 2048 run at their own VL only: none of their cells is DynamoRIO's.
    assert not [c for c in todo if c.binary.build in ("vls1024", "vls2048")]
    lines = armie_guest.Result("QEMU plugins", not_run=not_run).lines()
    assert lines[-1] == (f"  VL {', '.join(map(str, sorted(not_run)))}: {sum(not_run.values())} cells "
                         "not run: DynamoRIO supports VL 128/256/512 only")


def _default_process(compiler: str, name: str, build: str, vl: int) -> list[armie_guest.Cell]:
    sweep = config.load(REPO / "configs" / "default.yaml")
    groups = armie_guest.processes(armie_guest.cells(sweep, armie.NAME)[0])
    return next(g for g in groups if (g[0].binary.compiler, g[0].binary.name, g[0].binary.build, g[0].run.vl)
                == (compiler, name, build, vl))


def test_a_binarys_cells_at_one_vl_are_one_drrun_of_the_drivers_batch_mode() -> None:
    """DynamoRIO's start-up and code cache are paid once per binary and VL (not per cell, 11 CPU s
    each): every cell in exactly one process, each process one binary at one VL (DynamoRIO does
    not follow a VL change, its issue #6625), its runs in size order."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    todo, _ = armie_guest.cells(sweep, armie.NAME)
    groups = armie_guest.processes(todo)
    assert len(groups) == len({(c.binary, c.run.vl) for c in todo}) < len(todo)
    assert sorted(id(c) for g in groups for c in g) == sorted(id(c) for c in todo)
    assert all(len({(c.binary, c.run.vl) for c in g}) == 1 for g in groups)
    group = _default_process("gcc", "copy-acle_4v", "vla", 256)
    assert [c.run.size for c in group] == [0, 1048576, 2097152]
    assert armie_guest.command(group) == (
        "echo 32 >/proc/sys/abi/sve_default_vector_length && echo 1 >/proc/sys/vm/legacy_va_layout && "
        "/opt/dynamorio/bin64/drrun -c /opt/dynamorio/harness/libroi_inscount.so -shared_libs -- "
        "./bin/gcc/vla/copy-acle_4v --batch 0256 000000000000 -- 0256 000001048576 -- 0256 000002097152")


def _fixture_output(name: str, rc: int | None) -> arm64_vm.Output:
    fix = REPO / "tests" / "fixtures" / "armie"
    return arm64_vm.Output("drrun ...", rc, (fix / f"{name}.out").read_text(), (fix / f"{name}.err").read_text())


def test_a_batchs_output_is_read_cell_by_cell() -> None:
    """The client's lines of one drrun (SYNTHETIC fixture of its format) give each cell its own
    count, read as a single run's output; a failed run is named by the kernel's FAIL line and the
    runs after it as not run."""
    group = _default_process("gcc", "copy-acle_4v", "vla", 128)
    outs = armie_guest.split_output(group, _fixture_output("SYNTHETIC-dynamorio-batch", 0))
    assert [armie_guest.read_output(c, o) for c, o in zip(group, outs)] == [(9, 0), (81929, 65537), (163849, 131073)]
    outs = armie_guest.split_output(group, _fixture_output("SYNTHETIC-dynamorio-batch-failed", 1))
    assert armie_guest.read_output(group[0], outs[0]) == (9, 0)
    whys = []
    for cell, out in zip(group[1:], outs[1:]):
        with pytest.raises(RunError) as e:
            armie_guest.read_output(cell, out)
        whys.append(str(e.value))
    assert whys == ["exit 1: FAIL: copy: output differs from the reference at byte 17",
                    "exit None: not run: run 1 of its batch failed"]


def test_batches_balance_the_instructions_and_keep_the_order() -> None:
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    todo, _ = armie_guest.cells(sweep, armie.NAME)
    weight = {id(c): (1000 if i == 3 else 1) for i, c in enumerate(todo)}
    parts = armie_guest.batches(todo, lambda c: weight[id(c)], 2)
    assert sorted(len(p) for p in parts) == [1, len(todo) - 1] and [todo[3]] in parts
    assert sorted(id(c) for p in parts for c in p) == sorted(id(c) for c in todo)
    assert all([todo.index(c) for c in p] == sorted(todo.index(c) for c in p) for p in parts)


def test_bench_names_the_setup_command_where_the_guest_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arm64_vm, "missing", lambda: "the arm64 guest is not built (fix: ./harness setup --with-arm64-vm)")
    b = Bench("configs/default.yaml", REPO, lambda t, h: (0.0, 0.0), lambda *a, **k: {}, lambda v, t: "", {},
              read_counts, lambda *a: (0.0, 0.0), lambda *a: {})
    assert armie.bench(b) == (None, ["DynamoRIO in the guest (ArmIE's stand-in): skipped (the arm64 guest is not "
                                     "built (fix: ./harness setup --with-arm64-vm))"])


@pytest.mark.parametrize("backends", ["[]", "[qemu]"])
def test_bench_without_the_reference_counts_is_one_line_naming_the_fix(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, backends: str) -> None:
    """`bench --only armie --counted TREE` on a sweep listing no other counting backend (it raised
    StopIteration), or on a tree without that backend's counts: one line naming what is missing
    and the command that fixes it, exit 2 as bench's other bad input, nothing built or written."""
    monkeypatch.setattr(arm64_vm, "missing", lambda: None)  # the refusal comes before any guest is needed
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text((REPO / "configs" / "tiny.yaml").read_text().replace("backends: [qemu]", f"backends: {backends}"))
    tree = tmp_path / "tree"
    (tree / "results").mkdir(parents=True)
    write_counts(pd.DataFrame(columns=COLUMNS), tree / "results" / "counts.csv")
    before = sorted(tmp_path.rglob("*"))
    rc = bench.main(["--only", armie.NAME, "--counted", str(tree), "--config", str(cfg), "--out", str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    fix = f"./harness sweep --config {cfg} --set results_dir={tree}/results --set build_dir={tree}/build"
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ") and err.rstrip().endswith(
        f"then {fix}" if backends == "[]" else f"({fix})")
    assert ("it lists none (backends: [])" if backends == "[]" else "have no qemu counts") in err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.slow
@pytest.mark.needs_arm64_vm
def test_dynamorio_counts_every_cell_of_a_sweep_as_the_qemu_plugins(tiny_sweep: tuple[Path, Any], work: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35 item 3 on the tiny sweep's ACLE copy (the default sweep's every cell is bench's):
    every cell at VL 128 and 512, the VLA and the VLS-512 builds, sizes 0, n and 2n, counted by
    DynamoRIO in two guest boots side by side; ROI total and SVE count equal QEMU's in
    counts.csv, cell by cell, each binary's cells at one VL in one DynamoRIO process (the
    driver's batch mode). One binary's cells: one cell a process cost about 11 CPU s in the
    guest, and the whole tiny sweep took 46 minutes of the suite at load 8 (measured 2026-11-26)."""
    # A results folder of its own: Snakemake's main process writes the sweep's plans into its
    # results folder, and plans pointing at this test's build tree broke tests reading the tiny
    # sweep's (test_roi_compare, CI 2026-11-28).
    results = work / "armie-guest-results"
    results.mkdir(exist_ok=True)
    for name in ("counts.csv", "counts.csv.sha256"):
        shutil.copy(tiny_sweep[0] / name, results / name)
    sweep = config.load(REPO / "configs" / "tiny.yaml", {"results_dir": str(results), "build_dir": str(work / "build")})
    jobs = [j for j in sweep.jobs() if j.binary.name == "copy-acle_4v"]
    assert {j.binary.build for j in jobs} == {"vla", "vls512"}
    monkeypatch.setattr(sweep, "jobs", lambda: jobs)

    def binaries(wanted: list[config.Binary]) -> dict[config.Binary, Path]:
        paths = {b: build.binary_path(sweep.build_dir, b.compiler, b.build, b.backend, b.name) for b in wanted}
        proc = snakemake(REPO / "configs" / "tiny.yaml", sweep.build_dir, results, [str(p) for p in paths.values()])
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return paths

    result = armie_guest.compare(sweep, read_counts(results / "counts.csv"), armie.NAME, binaries, boots=2)
    runs = sum(len(j.runs) for j in sweep.jobs())
    assert (result.compared, result.not_run) == (runs, {})
    assert (result.differ, result.failed) == ([], [])
    assert result.equal == runs and len(result.batch_seconds) == 2
    assert result.lines()[0].startswith(f"DynamoRIO in the guest (ArmIE's stand-in) vs QEMU plugins, ROI total and SVE "
                                        f"count per cell: {runs} of {runs} cells equal; 2 boots, ")
    assert result.provenance["kernel"].startswith(ABI)


# --- the armie backend in a sweep through the guest: `armie: {via: guest}` (issue 52 item 4) -----

def _via_guest(tmp_path: Path, section: str = "armie: {via: guest}", vls: str = "[128, 384, 512]") -> Path:
    """The tiny sweep with armie beside qemu, counted through the guest, at a VL DynamoRIO does not run too."""
    return tiny_with_armie(tmp_path, section, vls)


def test_the_sweep_file_says_where_armie_counts_come_from(tmp_path: Path) -> None:
    """armie's section: `via: guest` counts through DynamoRIO in the guest; without it, ArmIE on
    PATH as before; a value it does not know is one line naming the ones it does."""
    assert armie.via(config.load(_via_guest(tmp_path))) == armie.VIA_GUEST
    assert armie.via(config.load(_via_guest(tmp_path, section=""))) == armie.VIA_ARMIE
    for bad, why in (("armie: {via: emulated}", "armie/via: 'emulated' is not one of ['armie', 'guest', 'native']"),
                     ("armie: {through: guest}", "armie: Additional properties are not allowed ('through' was unexpected)")):
        cfg = _via_guest(tmp_path, section=bad)
        with pytest.raises(config.ConfigError) as e:
            config.load(cfg)
        assert str(e.value) == f"{cfg}: {why} (schema sweep.schema.yaml)"


def _built_guest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine as if the guest and its DynamoRIO were built (nothing boots)."""
    (tmp_path / "guest").mkdir()
    (tmp_path / "guest" / "guest.txt").write_text("kernel=6.1.0-56-arm64 6.1.192-2\ndynamorio=11.91.0 commit 05e3165\n")
    monkeypatch.setattr(arm64_vm, "missing", lambda: None)
    monkeypatch.setattr(arm64_vm, "find_guest", lambda: arm64_vm.Guest(tmp_path / "guest", tmp_path / "guest"))
    monkeypatch.setattr(arm64_vm, "qemu_version", lambda: "QEMU emulator version 7.2.22")


def test_via_guest_plans_the_vls_dynamorio_runs_and_says_which_it_does_not(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every armie job is QEMU's job of the same binary and CPU model with its runs at VL 128 and
    512 (4 kernels x 3 sizes at VL 384 are the VLA build's and not run, the VLS-512 build's all
    run): the cells DynamoRIO does not run are one line of the preflight, not failures and not
    dropped unsaid; a run may take 6 times QEMU's limit (DynamoRIO under system-mode TCG)."""
    from analysis.backends import registry
    _built_guest(monkeypatch, tmp_path)
    sweep = config.load(_via_guest(tmp_path))
    ready = armie.preflight(sweep)
    assert ready is not None and ready.notes == [
        "armie (DynamoRIO in the guest): VL 384: 12 cells not run: DynamoRIO supports VL 128/256/512 only"]
    assert ready.versions == {"armie": "DynamoRIO 11.91.0 commit 05e3165 with the harness's ROI client in the arm64 "
                                       "guest (kernel 6.1.0-56-arm64 6.1.192-2; QEMU emulator version 7.2.22)"}
    mine = armie.jobs(sweep, ready)
    qemus = {(j.binary.name, j.binary.compiler, j.binary.build, j.cpu_model): j for j in qemu.jobs(sweep, None)}
    assert sorted((j.binary.name, j.binary.compiler, j.binary.build, j.cpu_model) for j in mine) == sorted(qemus)
    for job in mine:
        want = [r for r in qemus[(job.binary.name, job.binary.compiler, job.binary.build, job.cpu_model)].runs
                if r.vl != 384]
        assert list(job.runs) == want and job.binary.backend == armie.NAME
    assert sum(len(j.runs) for j in mine) == 36 and armie.not_run(sweep) == {384: 12}
    # What the collect stage checks raw files against plans the same runs, whatever this machine has.
    assert [j for j in registry.all_jobs(sweep) if j.binary.backend == armie.NAME] == mine
    assert armie.time_factor(sweep) == armie_guest.TIME_FACTOR == 6.0
    assert armie.settings(sweep, mine[0], ready) == {"via": "guest"}
    armie_refuses_a_sweep_of_no_dynamorio_vl(tmp_path, "guest")


def test_via_guest_without_the_guest_is_one_line_naming_the_setup_command(tmp_path: Path) -> None:
    """`./harness validate` (the sweep's preflight) with `via: guest` and no guest built: one line
    naming the setup command, exit 2; without `via: guest` and without armie on PATH, the line
    it always said."""
    env = {k: v for k, v in os.environ.items() if k != "DYNAMORIO_HOME"}
    (tmp_path / "cache").mkdir()
    env["HARNESS_CACHE"] = str(tmp_path / "cache")
    for section, line in (
            # The first part the guest lacks: on a fresh machine its QEMU (qemu-system-aarch64), else the guest.
            ("armie: {via: guest}", "error: backend armie with via: guest counts with DynamoRIO in the arm64 guest: " + (
                "setup/arm64-vm.sh: the arm64 guest is not built (it would be "
                f"{tmp_path}/cache/arm64-vm-{ABI}; fix: ./harness setup --with-arm64-vm)\n"
                if shutil.which(arm64_vm.QEMU) else
                f"{arm64_vm.QEMU} is not installed (fix: ./harness setup --with-arm64-vm)\n")),
            ("", "error: backend armie needs an AArch64 host with armie on PATH (module load armie); remove it from "
                 "backends here\n")):
        proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "analysis.commands.cli", "validate",
                               "--config", str(_via_guest(tmp_path, section=section))],
                              cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line)


def _plan(runs: list[config.Run], binary: Path) -> Any:
    return armie_plan(runs, binary, "guest", "max")


def test_a_job_in_the_guest_is_one_boot_one_drrun_per_vl_and_records_the_table_reads(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """armie.run_job via the guest (SYNTHETIC client output, nothing boots): one boot for the
    job's runs, one drrun process of the driver's batch mode per VL, at the path bench's batches
    use; each run's record passes the collect stage's check and gives roi.total and roi.sve (no
    whole-program counts: the client counts the ROI only); its provenance says DynamoRIO in the
    guest, never ArmIE; a failed run fails the job naming its cell and the kernel's FAIL line."""
    from analysis.stages import collect, parse
    _built_guest(monkeypatch, tmp_path)
    binary = tmp_path / "copy-acle_4v"
    binary.write_bytes(b"\x7fELF")
    sizes = (0, 1048576, 2097152)
    runs = [config.Run(vl, s, "-", "uint8", ()) for vl in (512, 128) for s in sizes]
    booted: list[tuple[list[str], dict[str, Path], float]] = []

    def run_batch(guest: arm64_vm.Guest, commands: list[str], files: dict[str, Path], limit: float, name: str
                  ) -> arm64_vm.Batch:
        booted.append((list(commands), dict(files), limit))
        out = _fixture_output(fixture, 0 if fixture.endswith("batch") else 1)
        outs = [arm64_vm.Output(c, out.rc, out.stdout.replace("vl=128", f"vl={vl}"), out.stderr)
                for c, vl in zip(commands, (512, 128))]
        return arm64_vm.Batch(outs, "", 42.5, {"kernel": "6.1.0-56-arm64", "emulator": "QEMU 7.2.22"})

    monkeypatch.setattr(arm64_vm, "run_batch", run_batch)
    fixture = "SYNTHETIC-dynamorio-batch"
    plan = _plan(runs, binary)
    log = io.StringIO()
    meta, records = armie.run_job(plan, log)
    path = "bin/gcc/vla/copy-acle_4v"
    assert booted == [([armie_guest.drrun(path, runs[:3]), armie_guest.drrun(path, runs[3:])], {path: binary},
                       armie_guest.BOOT_SECONDS + 60.0)]
    assert booted[0][0][1].startswith("echo 16 >/proc/sys/abi/sve_default_vector_length && ")
    assert meta == {"guest": {"kernel": "6.1.0-56-arm64", "emulator": "QEMU 7.2.22", "seconds": 42.5}}
    doc = {"meta": {**plan.meta, **meta}, "runs": records}
    counts = [(9, 0), (81929, 65537), (163849, 131073)] * 2
    assert [(r["vl"], r["size"], r["vl_seen"]) for r in records] == [(r.vl, r.size, r.vl) for r in runs]
    for rec, (total, sve) in zip(records, counts):
        armie.check_record(rec, "runs[0]")
        assert {m: v for m, v in armie.metrics(doc["meta"], rec, {})} == {"roi.total": total, "roi.sve": sve}
    assert {r["metric"] for r in parse.job_rows(doc, {})} == {"roi.total", "roi.sve"}
    assert {row["evidence"] for row in collect.provenance_rows(doc)} == {"DynamoRIO in the guest"}
    assert log.getvalue().splitlines()[0] == "[1/6] copy-acle_4v cpu=max vl=512 size=0 roi=9 42.5s"
    # The record of a count client that counts the whole program too still needs those counts.
    from analysis.backends import RecordError
    with pytest.raises(RecordError, match="inscount.whole is None"):
        qemu.check_record(records[0], "runs[0]")
    fixture = "SYNTHETIC-dynamorio-batch-failed"
    with pytest.raises(RunError) as e:
        armie.run_job(plan, io.StringIO())
    assert str(e.value) == ("copy-acle_4v cpu=max vl=512 size=1048576: exit 1: FAIL: copy: output differs from the "
                            "reference at byte 17 (in the arm64 guest: " + armie_guest.drrun(path, [runs[1]]) + ")")


def _counts_and_provenance(evidence: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """qemu's and armie's rows of four cells: equal at VL 128, the SVE count differing at 512, no
    armie row at 256, VL 384 QEMU's only."""
    key = {"kernel": "copy", "variant": "acle_4v", "op": "-", "dtype": "uint8", "layout": "contiguous", "build": "vla",
           "cpu_model": "max", "compiler": "gcc", "size": 65536}
    rows, prov = [], []
    for vl, q, a in ((128, (5146, 2056), (5146, 2056)), (256, (2600, 1030), None), (384, (1900, 700), None),
                     (512, (1306, 520), (1306, 521))):
        for backend, got in (("qemu", q), ("armie", a)):
            if got is None:
                continue
            rows += [{**key, "backend": backend, "vl": vl, "metric": m, "value": v}
                     for m, v in (("roi.total", got[0]), ("roi.sve", got[1]), ("roi_net.total", got[0] - 23))]
            prov.append({**key, "backend": backend, "vl": vl,
                         "evidence": "QEMU plugins" if backend == "qemu" else evidence})
    return pd.DataFrame(rows), pd.DataFrame(prov)


def test_the_summary_compares_armies_rows_with_qemus_cell_by_cell() -> None:
    """results/summary.md's armie section (armie.report), the comparison bench prints
    (armie_guest.Result): counted by DynamoRIO in the guest, each cell at VL 128/256/512
    compared, one that differs with both counts, one without a row, VL 384 not run; counted by
    ArmIE itself, every VL compared and named so."""
    counts, prov = _counts_and_provenance("DynamoRIO in the guest")
    assert armie.report(counts, prov) == [
        "", "## armie's counts (DynamoRIO in the guest) against the QEMU plugins'", "",
        "DynamoRIO in the guest vs QEMU plugins, ROI total and SVE count per cell: 1 of 3 cells equal.", "",
        "- differs: copy-acle_4v gcc vla max VL 512 size 65536: 1306 total, 521 SVE; QEMU plugins 1306 total, 520 SVE",
        "- no count: copy-acle_4v gcc vla max VL 256 size 65536: no armie row",
        "- VL 384: 1 cells not run: DynamoRIO supports VL 128/256/512 only"]
    counts, prov = _counts_and_provenance("ArmIE")
    assert armie.report(counts, prov)[1:4:2] == [
        "## armie's counts (ArmIE) against the QEMU plugins'",
        "ArmIE vs QEMU plugins, ROI total and SVE count per cell: 1 of 4 cells equal."]
    equal = counts[~((counts["backend"] == "armie") & (counts["vl"] == 512))]
    assert armie.report(equal[equal["vl"] == 128], prov) == [
        "", "## armie's counts (ArmIE) against the QEMU plugins'", "",
        "ArmIE vs QEMU plugins, ROI total and SVE count per cell: 1 of 1 cells equal."]
    assert armie.report(counts, prov[prov["backend"] == "qemu"]) == []


@pytest.mark.slow
@pytest.mark.needs_arm64_vm
@pytest.mark.timeout(1500)
def test_a_sweep_via_the_guest_gives_armie_rows_equal_to_qemus(work: Path, tmp_path: Path) -> None:
    """Issue 52 item 4 on an x86-64 host: `./harness sweep` of copy acle_4v and c_vec at VL 128,
    384 and 512 with `backends: [qemu, armie]` and `armie: {via: guest}`: counts.csv has armie
    rows of every cell of QEMU's at VL 128 and 512 (the same keys, ROI total and SVE count equal,
    cell by cell), none at VL 384, which the sweep and summary.md report as not run; the
    provenance, the verdict resting on armie's rows and the report say DynamoRIO in the guest,
    never ArmIE. Each job is one guest boot (measured 2026-11-28 at load 6: the sweep took 37 s
    of wall time, a boot with its job's two drrun processes 18 to 22 s)."""
    cfg = tmp_path / "copy-via-guest.yaml"
    cfg.write_text("""kernel_table: configs/kernels.yaml
compilers: [gcc]
backends: [qemu, armie]
armie: {via: guest}
cpu_models: [{name: max}]
vector_lengths: [128, 384, 512]
vls_vector_lengths: []
sizes: {copy: [65536]}
linearity_check: false
kernels: [{kernel: copy, variants: [c_vec, acle_4v]}]
figures: []
checks:
  - {id: copy_ratio, figure: 2, claim: "memcpy executes 400% of ACLE's instructions", kind: ratio, backend: armie,
     numerator: {kernel: copy, variant: c_vec}, denominator: {kernel: copy, variant: acle_4v}, target: 4.0,
     tolerance: 0.1}
""".replace("configs/kernels.yaml", str(REPO / "configs" / "kernels.yaml")))
    results = tmp_path / "results"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "analysis.commands.cli", "sweep", "--config",
                           str(cfg), "--cores", "2", "--set", f"results_dir={results}", "--set",
                           f"build_dir={work / 'via-guest-build'}"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    not_run = "VL 384: 4 cells not run: DynamoRIO supports VL 128/256/512 only"
    assert f"armie (DynamoRIO in the guest): {not_run}" in proc.stdout + proc.stderr
    counts = read_counts(results / "counts.csv")
    got, want = (armie_guest.reference_counts(counts, b) for b in (armie.NAME, "qemu"))
    vl = armie_guest.KEY.index("vl")
    assert sorted(got) == sorted(k for k in want if k[vl] != 384) and len(got) == 8
    assert {k: (v["roi.total"], v["roi.sve"]) for k, v in got.items()} == {
        k: (want[k]["roi.total"], want[k]["roi.sve"]) for k in got}
    prov = pd.read_csv(results / "provenance.csv")
    assert set(prov[prov["backend"] == armie.NAME]["evidence"]) == {"DynamoRIO in the guest"}
    summary = (results / "summary.md").read_text()
    assert "| Fig. 2: memcpy executes 400% of ACLE's instructions | 4 | " in summary
    assert summary.split("\n")[[ln.startswith("| Fig. 2:") for ln in summary.split("\n")].index(True)].endswith(
        " | DynamoRIO in the guest |")
    assert ("## armie's counts (DynamoRIO in the guest) against the QEMU plugins'\n\nDynamoRIO in the guest vs QEMU "
            f"plugins, ROI total and SVE count per cell: 8 of 8 cells equal.\n\n- {not_run}\n") in summary
    page = (results / "report.html").read_text()
    assert "8 of 8 cells equal" in page and "DynamoRIO in the guest" in page
    assert "ArmIE" not in summary.replace("QEMU plugins vs ArmIE", "")  # the paper's toolchain line only
