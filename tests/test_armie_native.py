"""The armie backend's stand-in natively (issue 52 item 4): `armie: {via: native}` runs DynamoRIO
with the harness's ROI client on an AArch64 host, installed by `./harness setup --with-dynamorio`
(setup/dynamorio-native.sh). What runs on any host is here: the sweep file's value, the
preflight's one-line refusals (an x86-64 host, no install, a VL the CPU lacks), the command a
process runs, a job's records from SYNTHETIC client output, and the installer's choices by
HARNESS_HOST_ARCH. The run itself is ci/aarch64-node's armie step, in the emulated A64FX node."""
from __future__ import annotations

import io
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.backends import RunError, armie, armie_native, qemu
from analysis.core import config
from analysis.core.toolchain import ToolchainError
from conftest import (REPO, armie_plan, armie_refuses_a_sweep_of_no_dynamorio_vl, path_without, stand_ins,
                      tiny_with_armie)

FIXTURES = REPO / "tests" / "fixtures" / "armie"
NATIVE_SETUP = REPO / "setup" / "dynamorio-native.sh"
INSTALL = REPO / "setup" / "install.sh"
ON_AARCH64 = platform.machine() == "aarch64"


def _via_native(tmp_path: Path, vls: str = "[128, 384, 512]") -> Path:
    """The tiny sweep with armie beside qemu, counted natively, at a VL DynamoRIO does not run too."""
    return tiny_with_armie(tmp_path, "armie: {via: native}", vls)


def test_the_sweep_file_may_ask_for_dynamorio_natively(tmp_path: Path) -> None:
    sweep = config.load(_via_native(tmp_path))
    assert armie.via(sweep) == armie.VIA_NATIVE
    # Its jobs are the guest's: QEMU's runs at VL 128 and 512 only (VL 384's are not run).
    assert {r.vl for j in armie.jobs(sweep, None) for r in j.runs} == {128, 512}
    assert armie.not_run(sweep) == {384: 12} and armie.time_factor(sweep) == 6.0


def test_on_an_x86_64_host_via_native_is_one_line_naming_via_guest(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    with pytest.raises(ToolchainError) as e:
        armie.preflight(config.load(_via_native(tmp_path)))
    assert str(e.value) == ("backend armie with via: native runs DynamoRIO on this host, which is x86_64: DynamoRIO for "
                            "AArch64 runs natively on an AArch64 host only; here use armie: {via: guest} (DynamoRIO in "
                            "the emulated guest: ./harness setup --with-arm64-vm)")


def test_validate_refuses_it_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    """`./harness validate` on this machine: on x86-64 the line naming via: guest; on an AArch64
    host without the install, the line naming the setup command. Exit 2, nothing else printed."""
    env = {k: v for k, v in os.environ.items() if k not in ("DYNAMORIO_HOME", "HARNESS_HOST_ARCH")}
    (tmp_path / "cache").mkdir()
    env["HARNESS_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "analysis.commands.cli", "validate",
                           "--config", str(_via_native(tmp_path))], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=120)
    line = ("error: backend armie with via: native counts with DynamoRIO on this host: setup/dynamorio-native.sh: "
            "DynamoRIO with the ROI client is not installed on this host (it would be "
            f"{tmp_path}/cache/dynamorio-native; fix: ./harness setup --with-dynamorio, or "
            "DYNAMORIO_HOME=<AArch64 DynamoRIO release tree> ./harness setup --with-dynamorio)\n") if ON_AARCH64 else (
            f"error: backend armie with via: native runs DynamoRIO on this host, which is {platform.machine()}: "
            "DynamoRIO for AArch64 runs natively on an AArch64 host only; here use armie: {via: guest} (DynamoRIO in "
            "the emulated guest: ./harness setup --with-arm64-vm)\n")
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line)


def _installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grants: dict[int, int] | None = None) -> None:
    """This machine as an AArch64 host with DynamoRIO and the client installed (nothing runs)."""
    install = tmp_path / "dynamorio-native"
    install.mkdir(exist_ok=True)
    (install / "version").write_text("11.91.0 commit 05e316505beb69586142243af1647449945772b7\n")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(platform, "release", lambda: "6.1.0-56-arm64")
    monkeypatch.setattr(armie_native, "find", lambda: armie_native.Install(install))
    monkeypatch.setattr(armie_native.perf_vls, "granted_vls", lambda vls: {v: (grants or {}).get(v, v) for v in vls})


def test_on_an_aarch64_host_it_names_its_dynamorio_and_the_cells_it_does_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(tmp_path, monkeypatch)
    ready = armie.preflight(config.load(_via_native(tmp_path)))
    assert ready is not None and ready.versions == {
        "armie": "DynamoRIO 11.91.0 commit 05e316505beb69586142243af1647449945772b7 with the harness's ROI client, "
                 "natively (aarch64, kernel 6.1.0-56-arm64)"}
    assert ready.notes == ["armie (DynamoRIO natively): VL 384: 12 cells not run: DynamoRIO supports VL 128/256/512 only"]
    armie_refuses_a_sweep_of_no_dynamorio_vl(tmp_path, "native")


def test_a_vl_the_cpu_does_not_offer_is_one_line_naming_what_prctl_grants(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Natively a run's VL is the CPU's: on a Graviton3-like node (SVE up to 256 bits) VL 512 is
    refused before anything runs, naming the VL granted and the guest, whose CPU offers every VL."""
    _installed(tmp_path, monkeypatch, grants={512: 256})
    with pytest.raises(ToolchainError) as e:
        armie.preflight(config.load(_via_native(tmp_path)))
    assert str(e.value) == ("backend armie with via: native: this CPU does not offer VL 512 (prctl grants 256): remove it "
                            "from vector_lengths, or count it with armie: {via: guest} (the emulated guest's CPU offers "
                            "every VL)")


def test_a_process_sets_its_vl_and_qemus_layout_before_drrun_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    install = armie_native.Install(Path("/c/dynamorio-native"))
    runs = [config.Run(256, s, "-", "uint8", ()) for s in (0, 1048576)]
    setarch = armie_native.shutil.which("setarch") or "setarch"
    assert armie_native.command(install, 256, ["./k", *qemu.batch_argv(runs)], {"OMPI_X": "1"}) == [
        "env", "-i", "OMPI_X=1", sys.executable, str(REPO / "analysis" / "backends" / "sve_vl_exec.py"), "256",
        setarch, "aarch64", "-L", "-R", "/c/dynamorio-native/dynamorio/bin64/drrun",
        "-c", "/c/dynamorio-native/libroi_inscount.so", "-shared_libs", "--",
        "./k", "--batch", "0256", "000000000000", "--", "0256", "000001048576"]
    with pytest.raises(ValueError, match="VL 384: not run: DynamoRIO supports VL 128/256/512 only"):
        armie_native.command(install, 384, ["./k"])


@pytest.mark.skipif(ON_AARCH64, reason="on an AArch64 host prctl may grant the VL (the node's armie step runs it)")
def test_the_vl_setter_refuses_in_one_line_where_prctl_cannot_set_it() -> None:
    exe = [sys.executable, str(REPO / "analysis" / "backends" / "sve_vl_exec.py")]
    proc = subprocess.run([*exe, "256", "true"], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stderr) == (1, "FAIL: prctl(PR_SVE_SET_VL, 32 bytes): Invalid argument (no SVE here?)\n")
    proc = subprocess.run([*exe, "100", "true"], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stderr) == (
        2, "usage error: sve_vl_exec.py VL COMMAND [ARG...] (VL in bits, a multiple of 128)\n")


def test_a_native_job_is_one_drrun_per_vl_and_records_what_the_table_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """armie.run_job via native (SYNTHETIC client output from a stand-in process, nothing of
    DynamoRIO runs): one process of the driver's batch mode per VL on the staged binary; each
    run's record passes the collect stage's check and gives roi.total and roi.sve; the raw
    file's meta names this host's DynamoRIO, so the evidence is DynamoRIO natively; a failed run
    fails the job naming its cell, the kernel's FAIL line and the command that reruns it."""
    from analysis.stages import collect, parse
    _installed(tmp_path, monkeypatch)
    real = armie_native.command
    started = tmp_path / "started"  # a line per process run: its VL and argv

    def command(install: armie_native.Install, vl: int, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        real(install, vl, argv, env)  # its checks
        out, err = (FIXTURES / f"{fixture}.out", FIXTURES / f"{fixture}.err")
        rc = 0 if fixture.endswith("batch") else 1
        return ["sh", "-c", f"echo {vl} {' '.join(argv)} >>{started}; sed s/vl=128/vl={vl}/ {out}; cat {err} >&2; exit {rc}"]

    monkeypatch.setattr(armie_native, "command", command)
    binary = tmp_path / "copy-acle_4v"
    binary.write_bytes(b"\x7fELF")
    sizes = (0, 1048576, 2097152)
    runs = [config.Run(vl, s, "-", "uint8", ()) for vl in (512, 128) for s in sizes]
    plan = armie_plan(runs, binary, "native", "a64fx")
    fixture = "SYNTHETIC-dynamorio-batch"
    meta, records = armie.run_job(plan, io.StringIO())
    assert started.read_text().splitlines() == [" ".join(["512", "./k", *qemu.batch_argv(runs[:3])]),
                                                " ".join(["128", "./k", *qemu.batch_argv(runs[3:])])]
    assert records[1]["command_line"].startswith("sh -c ") and str(binary) in records[1]["command_line"]
    assert meta["dynamorio_native"]["dynamorio"].startswith("11.91.0") and meta["dynamorio_native"]["machine"] == "aarch64"
    doc = {"meta": {**plan.meta, **meta}, "runs": records}
    counts = [(9, 0), (81929, 65537), (163849, 131073)] * 2
    for rec, (total, sve) in zip(records, counts):
        armie.check_record(rec, "runs[0]")
        assert {m: v for m, v in armie.metrics(doc["meta"], rec, {})} == {"roi.total": total, "roi.sve": sve}
    assert [(r["vl"], r["size"], r["vl_seen"]) for r in records] == [(r.vl, r.size, r.vl) for r in runs]
    assert {r["metric"] for r in parse.job_rows(doc, {})} == {"roi.total", "roi.sve"}
    assert {row["evidence"] for row in collect.provenance_rows(doc)} == {"DynamoRIO natively"}
    fixture = "SYNTHETIC-dynamorio-batch-failed"
    with pytest.raises(RunError) as e:
        armie.run_job(plan, io.StringIO())
    assert str(e.value).startswith("copy-acle_4v cpu=a64fx vl=512 size=1048576: exit 1: FAIL: copy: output differs "
                                   "from the reference at byte 17 (sh -c ")


# --- the installer: native on arm64, the guest's on x86-64 ----------------------------------------

def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def native_cache(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("DYNAMORIO_HOME", "HARNESS_HOST_ARCH", "DYNAMORIO_SRC")}
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache")}


def test_with_dynamorio_installs_cmake_and_the_build_tools_on_arm64_and_skips_on_amd64() -> None:
    arm = _run(["bash", str(INSTALL), "--print-packages", "--with-dynamorio"], {**os.environ, "HARNESS_HOST_ARCH": "arm64"})
    assert arm.stdout.split()[-4:] == ["cmake", "g++", "patch", "bzip2"] and arm.stderr == ""
    amd = _run(["bash", str(INSTALL), "--print-packages", "--with-dynamorio"], {**os.environ, "HARNESS_HOST_ARCH": "amd64"})
    assert "cmake" not in amd.stdout.split()
    assert amd.stderr == ("setup/install.sh: skipping --with-dynamorio: DynamoRIO for AArch64 runs natively on an arm64 "
                          "host only, and this host is amd64; here the emulated guest runs it (--with-arm64-vm; "
                          "armie: {via: guest})\n")


def test_the_native_install_says_where_it_goes_and_refuses_an_x86_64_host(native_cache: dict[str, str]) -> None:
    where = Path(native_cache["HARNESS_CACHE"]) / "dynamorio-native"
    assert _run([str(NATIVE_SETUP), "--where"], native_cache).stdout == f"{where}\n"
    proc = _run([str(NATIVE_SETUP), "--path"], native_cache)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"setup/dynamorio-native.sh: DynamoRIO with the ROI client is not installed on this host (it "
                           f"would be {where}; fix: ./harness setup --with-dynamorio, or DYNAMORIO_HOME=<AArch64 "
                           "DynamoRIO release tree> ./harness setup --with-dynamorio)\n")
    proc = _run([str(NATIVE_SETUP)], {**native_cache, "HARNESS_HOST_ARCH": "amd64"})
    assert (proc.returncode, proc.stderr) == (2, "setup/dynamorio-native.sh: this host is amd64, and DynamoRIO for "
                                                 "AArch64 runs on an arm64 host only; here the emulated guest runs it: "
                                                 "./harness setup --with-arm64-vm and armie: {via: guest}\n")
    assert list(Path(native_cache["HARNESS_CACHE"]).iterdir()) == []


def test_a_dynamorio_home_for_another_cpu_is_refused_before_anything_is_created(native_cache: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    home = tmp_path / "dr-x86"
    (home / "bin64").mkdir(parents=True)
    (home / "cmake").mkdir()
    (home / "bin64" / "drrun").write_bytes(b"\x7fELF" + bytes(14) + b"\x3e\x00")  # e_machine EM_X86_64
    (home / "bin64" / "drrun").chmod(0o755)
    (home / "cmake" / "DynamoRIOConfig.cmake").write_text("")
    proc = _run([str(NATIVE_SETUP)], {**native_cache, "HARNESS_HOST_ARCH": "arm64", "DYNAMORIO_HOME": str(home)})
    assert (proc.returncode, proc.stderr) == (2, f"setup/dynamorio-native.sh: DYNAMORIO_HOME={home} is not an AArch64 "
                                                 "DynamoRIO (bin64/drrun is not an AArch64 ELF)\n")
    assert list(Path(native_cache["HARNESS_CACHE"]).iterdir()) == []


def test_on_arm64_dynamorio_s_source_build_is_native(native_cache: dict[str, str], tmp_path: Path) -> None:
    """setup/dynamorio.sh by HARNESS_HOST_ARCH: on arm64 it asks for the host's g++ (not the
    cross one) and configures without the cross toolchain file; on amd64 with it (a stand-in
    cmake records its arguments and fails, so nothing is built)."""
    path = path_without(tmp_path / "nogxx", "g++")
    stand_ins(tmp_path / "nogxx", ("cmake", "gcc", "make", "perl", "patch", "bzip2", "dpkg-deb", "git", "python3"))
    proc = _run([str(REPO / "setup" / "dynamorio.sh")], {**native_cache, "HARNESS_HOST_ARCH": "arm64", "PATH": path})
    assert (proc.returncode, proc.stderr) == (1, "setup/dynamorio.sh: g++ not found; fix: apt-get install g++ (or "
                                                 "./harness setup --with-dynamorio, which installs it)\n")
    pin = "05e316505beb69586142243af1647449945772b7"
    d = Path(native_cache["HARNESS_CACHE"]) / f"dynamorio-{pin[:12]}"
    for step, out in (("deps", "zlib"), ("source", "src")):  # fetched and unpacked: the next step configures
        (d / out).mkdir(parents=True)
        (d / f".done-{step}").write_text(f"{pin}\n")
    bindir = tmp_path / "bin"
    stand_ins(bindir, ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "g++", "patch", "bzip2", "dpkg-deb"))
    (bindir / "cmake").write_text(f'#!/bin/sh\necho "$@" >>{tmp_path}/cmake.args\nexit 1\n')
    (bindir / "cmake").chmod(0o755)
    for arch in ("arm64", "amd64"):
        proc = _run([str(REPO / "setup" / "dynamorio.sh")],
                    {**native_cache, "HARNESS_HOST_ARCH": arch, "PATH": f"{bindir}:{os.environ['PATH']}"})
        assert proc.returncode == 1 and "DynamoRIO's configure failed" in proc.stderr
    native, cross = (tmp_path / "cmake.args").read_text().splitlines()
    assert "CMAKE_TOOLCHAIN_FILE" not in native and native.startswith(f"-S {d}/src -B {d}/build -DDEBUG=OFF")
    assert f"-DCMAKE_TOOLCHAIN_FILE={d}/src/make/toolchain-aarch64.cmake" in cross


def test_the_summary_compares_its_rows_with_qemus_at_the_vls_dynamorio_runs() -> None:
    """results/summary.md's armie section on rows counted natively: as the guest's, VL 384 not run."""
    from test_arm64_vm import _counts_and_provenance
    counts, prov = _counts_and_provenance("DynamoRIO natively")
    assert armie.report(counts, prov)[1:] == [
        "## armie's counts (DynamoRIO natively) against the QEMU plugins'", "",
        "DynamoRIO natively vs QEMU plugins, ROI total and SVE count per cell: 1 of 3 cells equal.", "",
        "- differs: copy-acle_4v gcc vla max VL 512 size 65536: 1306 total, 521 SVE; QEMU plugins 1306 total, 520 SVE",
        "- no count: copy-acle_4v gcc vla max VL 256 size 65536: no armie row",
        "- VL 384: 1 cells not run: DynamoRIO supports VL 128/256/512 only"]
