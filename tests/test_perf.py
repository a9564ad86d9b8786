"""The perf backend: CSV parsing on real and synthetic output, command lines, statistics and
bandwidth arithmetic, the ROI control protocol end to end with host-native builds and
software events, the native SVE build's prctl VL under QEMU, and the skip lines."""
from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.backends import RunError
from analysis.backends import perf as P
from analysis.core import config, table, toolchain
from analysis.stages import build, figures
from conftest import REPO, snakemake

FIX = REPO / "tests" / "fixtures" / "perf"
PERF_HOST = REPO / "tests" / "configs" / "perf_host.yaml"


# --- parsing `perf stat -x ';'` ---------------------------------------------------------

def test_parse_real_output_with_unsupported_rows() -> None:
    rows = P.parse_csv((FIX / "x86_plain.csv").read_text())
    assert [r["event"] for r in rows] == ["task-clock", "page-faults", "cycles", "instructions"]
    assert rows[0] == {"event": "task-clock", "value": 0.72, "unit": "msec", "status": P.OK, "running_pct": 100.0}
    assert rows[1]["value"] == 91.0 and rows[1]["unit"] == ""
    assert rows[2]["status"] == P.UNSUPPORTED and rows[2]["value"] is None  # never a zero


def test_parse_real_repeat_output_skips_the_variance_column() -> None:
    rows = P.parse_csv((FIX / "x86_repeat5.csv").read_text())
    assert [(r["event"], r["value"], r["running_pct"]) for r in rows] == [
        ("task-clock", 0.67, 100.0), ("context-switches", 0.0, 100.0), ("cycles", None, 100.0)]


def test_parse_synthetic_a64fx_output() -> None:
    rows = {r["event"]: r for r in P.parse_csv((FIX / "a64fx_synthetic.csv").read_text())}
    assert rows["SVE_INST_RETIRED"]["value"] == 262150.0
    assert rows["L1D_CACHE_REFILL"]["running_pct"] == 89.43  # multiplexed, kept visible
    assert rows["L2D_CACHE_REFILL"]["status"] == P.NOT_COUNTED
    assert rows["BUS_READ_TOTAL_MEM"]["status"] == P.UNSUPPORTED


def test_unreadable_value_is_an_error() -> None:
    with pytest.raises(RunError, match="unreadable"):
        P.parse_csv("12,5;;cycles;100;100.00;;\n")


def test_perf_command_line() -> None:
    cmd = P.perf_command("/usr/bin/perf", ["task-clock", "r8002"], Path("/w/perf.csv"), (5, 8), 3, Path("/w/k"), ["0512", "000000004096"])
    taskset = shutil.which("taskset") or "taskset"
    assert cmd == ["/usr/bin/perf", "stat", "-x", ";", "-o", "/w/perf.csv", "--control", "fd:5,8", "-D", "-1",
                   "-e", "task-clock,r8002", "--", taskset, "-c", "3", "./k", "0512", "000000004096"]


def test_times_file_must_hold_every_measured_call() -> None:
    assert P.parse_times("warmup 1\ncalls 2\nmeasured 2\n10\n20\n", "cell", 2) == [10, 20]
    # A kernel that calls roi_begin/roi_end once instead of HARNESS_ROI: nothing measured.
    with pytest.raises(RunError, match="HARNESS_ROI"):
        P.parse_times("warmup 2\ncalls 4\nmeasured 0\n", "cell", 4)


@pytest.mark.parametrize("cpuinfo, sve", [
    ("processor\t: 0\nFeatures\t: fp asimd evtstrm sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm fcma dcpop sve\n"
     "CPU implementer\t: 0x46\nCPU part\t: 0x001\n", True),  # A64FX's line
    ("Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n", False),
    ("Features\t: fp asimd sve2\n", False),
    ("flags\t\t: fpu vme de pse tsc msr pae mce sve\n", False),
])
def test_sve_detection_from_cpuinfo(cpuinfo: str, sve: bool) -> None:
    assert P.host_has_sve(cpuinfo) is sve


# --- statistics and bandwidth -------------------------------------------------------------

def _proc(task_clock: float | None, times: list[int], status: str = P.OK) -> dict:
    return {"counters": [
        {"event": "task-clock", "value": task_clock, "unit": "msec", "status": status, "running_pct": 100.0},
        {"event": "cycles", "value": None, "unit": "", "status": P.UNSUPPORTED, "running_pct": 100.0},
    ], "times_ns": times, "seconds": 0.1}


META = {"kernel": "reduce", "variant": "acle", "layout": "contiguous", "build": "vla", "cpu_model": "native",
        "compiler": "native", "calls": 2, "traffic": {"read": 2, "write": 1},
        "events": {"task-clock": P.OK, "cycles": P.UNSUPPORTED, "SVE_INST_RETIRED": P.UNKNOWN}}


def test_statistics_per_call_over_processes_and_bandwidth() -> None:
    rec = {"vl": 512, "size": 1000, "op": "max", "dtype": "float",
           "processes": [_proc(2.0, [100, 300]), _proc(4.0, [200, 200]), _proc(6.0, [400, 400])]}
    rows = {r["metric"]: r for r in P.stats_rows(META, rec)}
    tc = rows["task-clock"]
    assert (tc["n"], tc["mean"], tc["min"], tc["max"]) == (3, 2.0, 1.0, 3.0)  # totals / 2 calls
    assert tc["std"] == pytest.approx(1.0)
    t = rows[P.TIME]
    assert (t["mean"], t["min"], t["max"], t["unit"]) == (pytest.approx(800 / 3), 200.0, 400.0, "ns")
    bw = rows[P.BANDWIDTH]  # (2 + 1) x 1000 bytes / per-process mean time
    assert bw["unit"] == "GB/s"
    assert bw["mean"] == pytest.approx((3000 / 200 + 3000 / 200 + 3000 / 400) / 3)
    assert bw["max"] == pytest.approx(15.0) and bw["min"] == pytest.approx(7.5)
    # Unsupported and unknown events are rows without statistics, never zeros.
    assert rows["cycles"]["status"] == P.UNSUPPORTED and rows["cycles"]["n"] == 0 and "mean" not in rows["cycles"]
    assert rows["SVE_INST_RETIRED"]["status"] == P.UNKNOWN


def test_an_event_unsupported_in_one_process_has_no_statistics() -> None:
    rec = {"vl": 512, "size": 8, "op": "max", "dtype": "float",
           "processes": [_proc(2.0, [1, 1]), _proc(None, [1, 1], P.NOT_COUNTED)]}
    rows = {r["metric"]: r for r in P.stats_rows(META, rec)}
    assert rows["task-clock"]["status"] == P.NOT_COUNTED and rows["task-clock"]["n"] == 0


def test_no_traffic_declared_no_bandwidth_row() -> None:
    rec = {"vl": 0, "size": 8, "op": "-", "dtype": "uint8", "processes": [_proc(1.0, [5, 5])]}
    metrics = {r["metric"] for r in P.stats_rows({**META, "traffic": {}}, rec)}
    assert P.BANDWIDTH not in metrics and P.TIME in metrics


@pytest.mark.slow
def test_plots_from_the_synthetic_a64fx_table(tmp_path: Path) -> None:
    """Fig. 11 (one panel per VL) and Fig. 12 (VL 512) from a SYNTHETIC A64FX-like table."""
    import matplotlib.pyplot as plt

    sweep = config.load(REPO / "configs" / "default.yaml")
    rows = []
    for vl in (0, 128, 256, 512):
        for kernel, variant, op, dtype in [("pack", "blocks_call", "-", "float"), ("pack", "acle", "-", "float"),
                                           ("reduce", "acle", "max", "float"), ("copy", "glibc_memcpy", "-", "uint8")]:
            if vl == 0 and variant == "acle":
                continue
            for size in (4096, 65536):
                for metric, mean in ((P.TIME, size / (vl or 64)), (P.BANDWIDTH, vl or 64)):
                    rows.append({"kernel": kernel, "variant": variant, "op": op, "dtype": dtype, "layout": "-",
                                 "build": "host" if vl == 0 else "vla", "cpu_model": "native", "backend": "perf",
                                 "compiler": "native", "vl": vl, "size": size, "metric": metric, "status": P.OK,
                                 "unit": "", "n": 30, "mean": mean, "std": 0.1, "min": mean, "max": mean, "running_pct": math.nan})
    df = pd.DataFrame(rows)
    assert sweep.perf is not None
    figs = {f.name: f for f in sweep.perf.figures}
    opened = []
    orig = plt.subplots

    def spy(*a, **kw):  # record the panels each figure gets
        f, axes = orig(*a, **kw)
        opened.append(axes.shape)
        return f, axes

    plt.subplots = spy
    try:
        figures.plot_by_size(df, sweep.table, figs["fig11_pack_unpack_time"], tmp_path / "f11.png", "synthetic")
        figures.plot_by_size(df, sweep.table, figs["fig12_reduce_bandwidth"], tmp_path / "f12.png", "synthetic")
    finally:
        plt.subplots = orig
    assert opened == [(1, 3), (1, 1)]
    assert (tmp_path / "f11.png").stat().st_size > 0 and (tmp_path / "f12.png").stat().st_size > 0
    fig11 = figures.size_lines(df, sweep.table, figs["fig11_pack_unpack_time"], 256)
    assert [(label.split(":")[0], host) for label, host, _ in fig11] == [
        ("pack blocks_call", False), ("pack acle", False), ("host ISA, pack blocks_call", True)]


# --- configuration --------------------------------------------------------------------------

def _sweep_with_perf(tmp_path: Path, perf: dict) -> Path:
    doc = yaml.safe_load(PERF_HOST.read_text())
    doc["perf"] = {**doc["perf"], **perf}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("perf, message", [
    ({"sizes": {"copy": [4096]}}, "perf/sizes: no size for family 'reduce'"),
    ({"flush": {"nosuch": 1}}, "perf/flush: unknown family 'nosuch'"),
    ({"vector_lengths": [100]}, "perf/vector_lengths: VL 100 is not valid"),
    ({"sizes": {"copy": [4096], "reduce": [6]}}, "perf/sizes/reduce: 6 bytes is not a multiple of 4"),
    ({"events": ["cycles;x"]}, "perf/events/0"),
])
def test_bad_perf_config_is_one_line(tmp_path: Path, perf: dict, message: str) -> None:
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        config.load(_sweep_with_perf(tmp_path, perf))


def test_skip_lines_name_the_reason(tmp_path: Path) -> None:
    missing = P.detect(config.load(_sweep_with_perf(tmp_path, {"perf": "no-such-perf"})))
    assert missing is not None and not missing.sve and not missing.host
    assert missing.messages == [
        "perf: skipped: 'no-such-perf' not found (Debian: apt-get install linux-perf; Ubuntu: linux-tools-generic)"]
    off = P.detect(config.load(_sweep_with_perf(tmp_path, {"sve": "off"})))
    assert off is not None and not off.sve
    if off.perf and off.host:
        assert off.messages == ["perf: SVE runs off (perf/sve: off in the sweep)"]
    assert P.detect(config.load(REPO / "configs" / "tiny.yaml")) is None  # no perf section: nothing said


# --- the native SVE build under QEMU: prctl sets the VL, rdvl checks it -----------------------

def _native(out: Path, kernel: tuple[str, str], family: str | None = None) -> Path:
    """A perf binary as the native SVE build makes it (driver and kernel sources; the family's
    flags and generated header), but cross-compiled (static) so that QEMU runs it: the closest
    this machine gets to A64FX."""
    gen = out / "gen"
    gen.mkdir()
    table = config.load(REPO / "configs" / "default.yaml").table
    (gen / "reduce_matrix.h").write_text(build.reduce_matrix_header(table))
    flags = build.family_flags(table, family) if family else []
    objs = []
    for src in (*kernel, "kernels/harness/harness.c", "kernels/roi/roi_perf.c"):
        obj = out / (Path(src).stem + ".o")
        cmd = ["aarch64-linux-gnu-gcc", *toolchain.NATIVE_CFLAGS["vla"], *flags, f"-I{build.INCLUDE}", f"-I{gen}",
               "-c", str(REPO / src), "-o", str(obj)]
        subprocess.run(cmd, check=True, capture_output=True)
        objs.append(str(obj))
    exe = out / "k"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-o", str(exe), *objs], check=True, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def sve_native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _native(tmp_path_factory.mktemp("svenative"), ("kernels/copy/driver.c", "kernels/copy/acle_4v.c"))


def _qemu(exe: Path, cpu: str, vl: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # QEMU starts at its default VL (512 for max); only the program's prctl changes it.
    return subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in (env or {}).items()], "qemu-aarch64", "-cpu", cpu,
                           str(exe), str(vl), "4096"], capture_output=True, text=True, cwd=exe.parent)


@pytest.mark.slow
@pytest.mark.parametrize("vl", [128, 256, 2048])
def test_native_build_sets_the_vl_with_prctl(sve_native: Path, vl: int) -> None:
    proc = _qemu(sve_native, "max", vl)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok vl={vl} size=4096 ")


@pytest.mark.slow
def test_native_build_reports_the_vl_granted(sve_native: Path) -> None:
    """A64FX offers 128/256/512: asking 384 is rounded down to 256, and the run fails with both."""
    proc = _qemu(sve_native, "a64fx", 384)
    assert proc.returncode == 3
    assert "asked 384 bits, running at 256 bits" in proc.stderr


@pytest.mark.slow
def test_native_build_repeats_the_call(sve_native: Path, tmp_path: Path) -> None:
    times = tmp_path / "t.txt"
    proc = _qemu(sve_native, "a64fx", 512, {"SVE_HARNESS_CALLS": "3", "SVE_HARNESS_WARMUP": "2",
                                            "SVE_HARNESS_FLUSH_BYTES": "65536", "SVE_HARNESS_TIMES": str(times)})
    assert proc.returncode == 0, proc.stderr
    lines = times.read_text().split()
    assert lines[:6] == ["warmup", "2", "calls", "3", "measured", "3"]
    assert len(lines) == 9 and all(int(x) > 0 for x in lines[6:])


@pytest.mark.slow
def test_a_repeated_call_copies_its_reset_back_instead_of_computing_it(tmp_path: Path) -> None:
    """reduce's reset refills its inputs before every call: the fill made before the first call is
    copied back (harness.c), not computed again each call (in the emulated guest that made ten
    times the kernel's instructions a call at 16 MiB). Seen in the shared folder of preparations:
    the fill, the copy of inout into expect and the scalar reference reducing into it, not one
    fill more per call; and the reference, made in the buffer of the copy before it, is computed,
    not taken for a repeat of the copy (it was, and the check failed)."""
    exe = _native(tmp_path, ("kernels/reduce/driver.c", "kernels/reduce/reference.c", "kernels/reduce/acle.c"), "reduce")
    (tmp_path / "prep").mkdir()
    proc = subprocess.run(["env", "-i", "SVE_HARNESS_CALLS=3", "SVE_HARNESS_WARMUP=1", "qemu-aarch64", "-cpu", "max",
                           str(exe), "256", "4096", "op=max", "dtype=float", "nan=1"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("ok vl=256 size=4096 "), proc.stderr
    assert sorted(f.name.split("-")[0] for f in (tmp_path / "prep").iterdir()) == ["p0", "p1", "p2"]


# --- end to end on this machine: host-native builds, software events --------------------------

def _host_status() -> P.PerfStatus:
    status = P.detect(config.load(PERF_HOST))
    assert status is not None
    if not status.host:
        pytest.skip("; ".join(status.messages))
    return status


@pytest.fixture(scope="module")
def host_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _host_status()
    work = tmp_path_factory.mktemp("perfhost")
    proc = snakemake(PERF_HOST, work / "build", work / "results", ["perf_all"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work


@pytest.mark.slow
@pytest.mark.needs_perf
def test_host_baselines_end_to_end(host_run: Path) -> None:
    status = _host_status()
    res = host_run / "results"
    df = table.read_stats(res / "perf.csv")
    host = df[df["build"] == "host"]
    # Only the kernels the table marks host_native; no SVE rows on a host without SVE.
    assert sorted(set(host["kernel"] + "-" + host["variant"])) == ["copy-c_scalar", "copy-glibc_memcpy", "reduce-c_scalar"]
    assert status.sve or set(df["build"]) == {"host"}
    assert set(host["vl"]) == {0} and set(host["size"]) == {4096, 65536}
    tc = host[host["metric"] == "task-clock"]
    assert (tc["status"] == P.OK).all() and (tc["n"] == 3).all() and (tc["mean"] >= 0).all()
    times = host[host["metric"] == P.TIME]
    assert len(times) == 6 and (times["n"] == 3).all() and (times["min"] > 0).all()
    assert (times["min"] <= times["mean"]).all() and (times["mean"] <= times["max"]).all()
    bw = host[host["metric"] == P.BANDWIDTH].set_index(["kernel", "size"])
    t = times.set_index(["kernel", "size"])
    # The per-process means differ, so bandwidth's min comes from time's max: exact arithmetic.
    assert bw.loc[("reduce", 65536), "min"] == pytest.approx(3 * 65536 / t.loc[("reduce", 65536), "max"])
    if platform.machine() == "x86_64":
        assert set(host[host["metric"] == "SVE_INST_RETIRED"]["status"]) == {P.UNKNOWN}
    assert (res / "figures" / "perf_time.png").stat().st_size > 0
    assert (res / "figures" / "perf_bandwidth.png").stat().st_size > 0
    summary = (res / "perf_summary.md").read_text()
    assert "processes x 4 calls (+1 warm-up)" in summary
    raw = json.loads((res / "raw" / "perf" / "native" / "host" / "native" / "reduce-c_scalar.json").read_text())
    assert raw["meta"]["flush_bytes"] == 1048576 and raw["meta"]["traffic"] == {"read": 2, "write": 1}


@pytest.mark.slow
@pytest.mark.needs_perf
def test_counters_are_scoped_to_the_roi(host_run: Path) -> None:
    """task-clock with --control counts the copy only; without it, the whole process (allocation,
    fill, verification of 4 MiB) counts several times more."""
    status = _host_status()
    exe = build.binary_path(host_run / "build", "native", "host", "perf", "copy-c_scalar")
    run = config.Run(0, 1 << 22, "-", "uint8", ())
    s = P.Settings(status.perf or "perf", ("task-clock",), calls=1, warmup=0, flush_bytes=0, core=0)
    roi_ms = P.run_process(exe, run, s)["counters"][0]["value"]
    whole = subprocess.run([status.perf or "perf", "stat", "-x", ";", "-e", "task-clock", "--", str(exe), *run.argv()],
                           capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    whole_ms = P.parse_csv(whole.stderr)[0]["value"]
    assert 0 < roi_ms < 0.5 * whole_ms, (roi_ms, whole_ms)


@pytest.mark.slow
@pytest.mark.needs_perf
def test_slurm_profile_gives_measurements_a_whole_node(tmp_path: Path) -> None:
    """The A64FX executor profile (laid over the generic one) parses with the pinned plugin and
    sizes the measure jobs (dry run: nothing is submitted)."""
    from analysis.commands import slurm

    profile = slurm.write_profile(slurm.load_profile("a64fx", "acct", "part"), tmp_path / "profile")
    proc = subprocess.run(
        [os.sys.executable, "-m", "snakemake", "-n", "-p", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(REPO), "--profile", str(profile),
         "--config", f"sweep={REPO / 'configs' / 'a64fx.yaml'}", f"results_dir={tmp_path / 'r'}", f"build_dir={tmp_path / 'b'}"],
        capture_output=True, text=True, env=slurm.executor_env())  # the plugin is on the path with --slurm only
    if "perf: skipped" in proc.stderr and "measure_perf" not in proc.stdout:
        # The sweep's own line names why and the fix (perf missing, or not allowed to count).
        why = next(ln for ln in proc.stderr.splitlines() if "perf: skipped" in ln)
        pytest.skip(f"no measure jobs: {why.strip()}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocks = [b for b in proc.stdout.split("\n\n") if "rule measure_perf:" in b]
    assert blocks and all("cpus_per_task=48" in b and "slurm_extra=--exclusive" in b for b in blocks)


def test_a64fx_config_is_the_default_perf_part_only(tmp_path: Path) -> None:
    default, a64fx = config.load(REPO / "configs" / "default.yaml"), config.load(REPO / "configs" / "a64fx.yaml")
    assert a64fx.jobs() == [] and a64fx.backends == [] and a64fx.gem5 is None
    assert a64fx.perf == default.perf and P.perf_jobs(a64fx, True, True) == P.perf_jobs(default, True, True)
    chained = tmp_path / "c.yaml"
    chained.write_text(f"extends: {REPO / 'configs' / 'a64fx.yaml'}\n")
    with pytest.raises(config.ConfigError, match="extends .*a64fx.yaml, which extends another file"):
        config.load(chained)


# --- the harness itself on an emulated AArch64 node (issue 52) -----------------------------

@pytest.mark.parametrize("compatible, machine", [
    (b"linux,dummy-virt\0", P.EMULATED_MACHINE),  # QEMU's virt board (read in the arm64 node)
    (b"arm,juno-r2\0arm,juno\0arm,vexpress\0", None),
    (b"", None),
])
def test_an_emulated_node_is_told_by_its_device_tree(compatible: bytes, machine: str | None) -> None:
    assert P.emulated_machine(compatible) == machine


def test_native_runs_on_an_emulated_node_are_labelled_and_count_instructions_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On QEMU's virt machine an A64FX CPU model reads as an A64FX (implementer 0x46 part 0x001):
    its runs must not be "perf on A64FX" timing, and only instructions is a measurement there."""
    monkeypatch.setattr(P, "emulated_machine", lambda: P.EMULATED_MACHINE)
    monkeypatch.setattr(P, "host_cpu", lambda: P.A64FX_CPU)
    events = ["task-clock", "cycles", "instructions", "SVE_INST_RETIRED"]
    monkeypatch.setattr(P, "probe_events", lambda perf, evs: {e: P.UNKNOWN if e.isupper() else P.OK for e in evs})
    layouts = []
    monkeypatch.setattr(P, "run_process", lambda binary, run, s: layouts.append(s.fixed_layout) or {
        "vl_seen": run.vl, "checksum": "0", "command": [], "seconds": 0.1, "times_ns": [5, 5],
        "counters": [{"event": e, "value": 7.0, "unit": "", "status": P.OK, "running_pct": 100.0} for e in s.events]})
    run = config.Run(256, 4096, "-", "uint8", ())
    versions = {"perf": "perf version 6.1.192", "compiler.native": "aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0"}
    plan = P.Plan("perf", str(tmp_path / "copy-acle_4v"), "native", (run,), (60.0,), {},
                  {"kernel": "copy", "variant": "acle_4v", "build": "vla", "versions": versions},
                  {"perf": "perf", "events": events, "calls": 2, "warmup": 1, "flush_bytes": 0, "core": 0,
                   "processes": 1, "traffic": {"read": 1, "write": 1}, "guest": False})
    extra, records = P.run_job(plan, open(os.devnull, "w"))
    assert extra["events"] == {"task-clock": P.UNSUPPORTED, "cycles": P.UNSUPPORTED, "instructions": P.OK,
                               "SVE_INST_RETIRED": P.UNKNOWN}
    assert extra["cpu"] == ("emulated AArch64 node (aarch64 implementer 0x46 part 0x001; QEMU virt machine (device "
                            "tree: linux,dummy-virt)): emulated AArch64: instruction counts only, no A64FX timing")
    assert extra["caveat"] == P.perf_guest.LABEL and layouts == [True]  # setarch -R: one layout a process
    assert extra["guest"]["node"] is True and extra["guest"]["counter"] == versions["perf"]
    assert extra["guest"]["compiler"] == versions["compiler.native"]
    assert P.evidence({**plan.meta, **extra}) == "perf on an emulated AArch64 node"
    counters = records[0]["processes"][0]["counters"]
    assert [(c["event"], c["status"]) for c in counters] == [("instructions", P.OK), ("task-clock", P.UNSUPPORTED),
                                                             ("cycles", P.UNSUPPORTED)]
    rows = P.stats_rows({**plan.meta, **extra, "layout": "-", "cpu_model": "native", "compiler": "native"},
                        records[0])
    assert [(r["metric"], r["status"]) for r in rows] == [
        ("task-clock", P.UNSUPPORTED), ("cycles", P.UNSUPPORTED), ("instructions", P.OK),
        ("SVE_INST_RETIRED", P.UNKNOWN), (P.TIME, P.OK), (P.BANDWIDTH, P.OK)]


@pytest.mark.needs_perf
def test_an_emulated_node_s_sve_runs_are_compared_with_the_sweep_s_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight says the SVE runs are on an emulated node, and the workflow then hands the
    perf table the sweep's counts.csv (rules/measure.smk), as for runs in the guest."""
    for module in (P, P.perf_cells):
        monkeypatch.setattr(module, "host_has_sve", lambda cpuinfo=None: True)
        monkeypatch.setattr(module, "emulated_machine", lambda compatible=None: P.EMULATED_MACHINE)
    monkeypatch.setattr(P.perf_vls, "granted_vls", lambda vls: {vl: vl for vl in vls})
    ready = P.preflight(config.load(PERF_HOST))
    assert ready is not None
    if not ready.found["perf"]:
        pytest.skip("; ".join(ready.notes))
    assert ready.found["sve"] and ready.found["node"] and not ready.found["guest"]
    assert any("this AArch64 node is emulated" in n for n in ready.notes)
    rule = (REPO / "rules" / "measure.smk").read_text()
    assert 'r.found.get("guest") or r.found.get("node")' in rule


def test_a_vl_the_cpu_lacks_refuses_the_sweep_in_one_line_naming_the_vl_granted() -> None:
    """prctl grants the largest offered VL not above the one asked (read on the node's -cpu a64fx:
    384 -> 256, 1024 -> 512): the preflight says so before anything is built or run."""
    grants = {128: 128, 256: 256, 384: 256, 512: 512, 1024: 512}
    P.perf_vls.check_offered([128, 256, 512], grants)
    with pytest.raises(P.perf_vls.ToolchainError) as e:
        P.perf_vls.check_offered([128, 384, 512, 1024], grants)
    assert str(e.value) == ("perf: this CPU does not offer VL 384 (prctl grants 256), VL 1024 (prctl grants 512); of "
                            "the VLs asked it offers 128, 512: set perf: vector_lengths in the sweep file to VLs it offers")


@pytest.mark.skipif(not P.host_has_sve(), reason="needs an SVE host (the arm64 node: ci/aarch64-node)")
def test_the_grants_are_read_from_the_kernel() -> None:
    grants = P.perf_vls.granted_vls([128, 2048])
    assert grants[128] == 128 and 128 <= grants[2048] <= 2048
