"""Each bad input gives one line naming the fix, before any job runs, and touches nothing.
The command line is called in-process (analysis.commands.cli.main: the same parsing, validation and
message); test_bad_input_touches_no_results runs ./harness's Python end to end."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.commands import cli
from conftest import PY, REPO

BASE = yaml.safe_load((REPO / "configs" / "tiny.yaml").read_text())


@pytest.fixture
def harness(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """analysis.commands.cli.main in-process, from the repository as ./harness runs it: (exit code, stdout, stderr)."""
    monkeypatch.chdir(REPO)

    def call(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        rc = cli.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), rc, out.out, out.err)

    return call


def write_config(tmp_path: Path, changes: dict) -> Path:
    cfg = {**BASE, **changes, "results_dir": str(tmp_path / "results"), "build_dir": str(tmp_path / "build")}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def validate(tmp_path: Path, changes: dict, harness) -> subprocess.CompletedProcess:
    return harness("validate", "--config", str(write_config(tmp_path, changes)))


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("changes, needles", [
    ({"kernels": [{"kernel": "nosuch"}]}, ["unknown kernel 'nosuch'", "known: ", "copy, "]),
    ({"kernels": [{"kernel": "copy", "variants": ["fast"]}]}, ["unknown variant 'fast'", "acle_4v"]),
    ({"kernels": [{"kernel": "reduce", "ops": ["avg"]}], "sizes": {"reduce": [4096]}}, ["unknown op 'avg'", "max"]),
    ({"kernels": [{"kernel": "reduce", "ops": ["max"], "dtypes": ["float16"]}], "sizes": {"reduce": [4096]}},
     ["unknown dtype 'float16'"]),
    ({"kernels": [{"kernel": "reduce", "ops": ["band"], "dtypes": ["float"]}], "sizes": {"reduce": [4096]}},
     ["op band is not defined for dtype float"]),
    ({"kernels": [{"kernel": "pack", "dtypes": ["int8"]}]}, ["unknown dtype 'int8'", "float, double"]),
    ({"vector_lengths": [128, 200]}, ["VL 200", "multiples of 128 from 128 to 2048"]),
    ({"vector_lengths": [2176]}, ["VL 2176", "multiples of 128"]),
    ({"vector_lengths": [0]}, ["VL 0"]),
    ({"vls_vector_lengths": [384]}, ["no VLS build at 384 bits", "128, 256, 512, 1024, 2048"]),
    ({"cpu_models": [{"name": "a64fx", "vector_lengths": [1024]}]}, ["a64fx model does not support VL 1024"]),
    ({"cpu_models": [{"name": "max", "vector_lengths": [128]}], "vls_vector_lengths": [512]},
     ["VLS build for 512 bits runs only at 512 bits"]),
    ({"sizes": {"copy": [-1], "vector": [65536]}}, ["size -1", ">= 1"]),
    ({"sizes": {"copy": [65536], "vector": [65538]}}, ["not a multiple of 4"]),
    ({"sizes": {"copy": [65536]}}, ["no size for family 'vector'"]),
    ({"vector_lengths": "128"}, ["vector_lengths", "is not of type 'array'"]),
    ({"colour": "blue"}, ["Additional properties are not allowed", "colour"]),
    # A check on a kernel of the table that the sweep does not run (was a bare StopIteration
    # while Snakemake parsed rules/plot.smk).
    ({"checks": [{**BASE["checks"][0], "numerator": {"kernel": "reduce", "variant": "acle"}}]},
     ["checks/copy_ratio/numerator: kernel reduce is not part of this sweep", "add it under kernels:"]),
    ({"checks": [{**BASE["checks"][1], "series": {"kernel": "pack", "variant": "acle"},
                  "conditions": [{"line": "x", "series": {"kernel": "pack", "variant": "blocks_autovec"}}]}]},
     ["checks/pack_flat/conditions/x/series: pack blocks_autovec is not part of this sweep",
      "add the variant to its kernels: entry"]),
])
def test_bad_config(tmp_path: Path, changes: dict, needles: list[str], harness) -> None:
    one_line_error(validate(tmp_path, changes, harness), *needles)


def test_missing_config_file(tmp_path: Path, harness) -> None:
    one_line_error(harness("validate", "--config", str(tmp_path / "nope.yaml")), "file not found")


def _path_without(tmp_path: Path, *tools: str) -> dict:
    """A PATH where the named tools are missing but everything else is found."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name not in tools and not (shadow / name).exists():
                (shadow / name).symlink_to(Path(d) / name)
    return {**os.environ, "PATH": str(shadow)}


def test_missing_cross_compiler(tmp_path: Path, harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_without(tmp_path, "aarch64-linux-gnu-gcc")["PATH"])
    proc = validate(tmp_path, {}, harness)
    one_line_error(proc, "aarch64-linux-gnu-gcc not found", "./harness setup")


def test_missing_qemu(tmp_path: Path, harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_without(tmp_path, "qemu-aarch64")["PATH"])
    proc = validate(tmp_path, {}, harness)
    one_line_error(proc, "qemu-aarch64 not found", "qemu-user")


def test_unsupported_qemu_version(tmp_path: Path, harness, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _path_without(tmp_path, "qemu-aarch64")
    fake = Path(env["PATH"]) / "qemu-aarch64"
    fake.write_text("#!/bin/sh\necho 'qemu-aarch64 version 8.2.2 (Debian 1:8.2.2)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", env["PATH"])
    one_line_error(validate(tmp_path, {}, harness), "version 8.2", "QEMU 7.2")


def test_bad_input_touches_no_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    sentinel = results / "counts.csv"
    sentinel.write_text("previous table\n")
    before = sentinel.stat().st_mtime_ns
    proc = subprocess.run([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(write_config(tmp_path, {"vector_lengths": [100]}))],
                          cwd=REPO, capture_output=True, text=True)
    one_line_error(proc, "VL 100")
    assert sentinel.read_text() == "previous table\n"
    assert sentinel.stat().st_mtime_ns == before
    assert sorted(p.name for p in results.iterdir()) == ["counts.csv"]
    assert not (tmp_path / "build").exists()


def test_vls_binary_at_another_vl_is_refused_before_running(tmp_path: Path, harness) -> None:
    proc = harness("count", "copy", "acle_4v", "--vl", "384", "--build", "vls512",
                   "--set", f"build_dir={tmp_path / 'build'}", "--set", f"results_dir={tmp_path / 'results'}")
    one_line_error(proc, "vls512 is built for 512 bits and cannot run at 384 bits")
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("args, needle", [
    (["--vl", "1000"], "VL 1000"),
    (["--vl", "512", "--size", "-4"], "--size -4"),
    (["--vl", "1024", "--cpu", "a64fx"], "a64fx model does not support VL 1024"),
    (["--vl", "512", "--build", "vls384"], "--build vls384"),
])
def test_single_cell_bad_input(tmp_path: Path, args: list[str], needle: str, harness) -> None:
    proc = harness("count", "copy", "acle_4v", *args, "--set", f"build_dir={tmp_path / 'build'}")
    one_line_error(proc, needle)


@pytest.mark.parametrize("args, needles", [
    (["validate", "--config", "configs"], ["configs is a directory", "name a sweep file"]),
    (["validate", "--config", "configs/tiny.yaml", "--set", "results_dir"], ["--set results_dir", "KEY=VALUE"]),
    (["validate", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/afile"], ["is a file, not a directory"]),
    (["validate", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/afile/sub"], ["is a file, not a directory"]),
    (["validate", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/out{{x}}"], ["results_dir", "'{'", "'}'"]),
    (["validate", "--config", "configs/tiny.yaml", "--set", "build_dir={tmp}/a,b"], ["build_dir", "','"]),
    (["sweep", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/r\nx"], ["results_dir", "'\\n'"]),
    (["explain", "copy", "acle_4v", "--vl", "128", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/none"],
     ["counts.csv does not exist", "./harness sweep --config configs/tiny.yaml first"]),
    (["explain", "nosuch", "acle", "--vl", "128", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/none"],
     ["unknown kernel 'nosuch'"]),
    (["explain", "reduce", "acle", "--vl", "128", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/none"],
     ["reduce acle is not part of the sweep configs/tiny.yaml"]),
    (["explain", "copy", "acle_4v", "--vl", "100", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/none"],
     ["VL 100", "multiples of 128"]),
    (["explain", "copy", "acle_4v", "--vl", "256", "--config", "configs/tiny.yaml", "--set", "results_dir={tmp}/none"],
     ["--vl 256", "runs VLs 128, 512"]),
    (["count", "copy", "acle_4v", "--vl", "128", "--size", str(10**20), "--set", "build_dir={tmp}/build"],
     ["--size 100000000000000000000", "999999999999"]),
])
def test_bad_input_of_the_commands(tmp_path: Path, args: list[str], needles: list[str], harness) -> None:
    (tmp_path / "afile").write_text("not a directory\n")
    proc = harness(*(a.format(tmp=tmp_path) for a in args))
    one_line_error(proc, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_size_the_binaries_refuse_fails_validate(tmp_path: Path, harness) -> None:
    one_line_error(validate(tmp_path, {"sizes": {"copy": [10**20], "vector": [65536]}}, harness),
                   "size 100000000000000000000", "at most 999999999999")
    one_line_error(validate(tmp_path, {"sizes": {"copy": [600_000_000_000], "vector": [65536]}}, harness), "twice the size")


# --- issue 27: bad input that was a traceback or a wrong run -----------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("changes, needles", [
    # A float where an integer belongs: 128.0 passed the schema and failed inside a count job.
    ({"vector_lengths": [128.0]}, ["vector_lengths/0: 128.0 is not a whole number", "write 128"]),
    ({"vls_vector_lengths": [512.0]}, ["vls_vector_lengths/0: 512.0 is not a whole number"]),
    ({"checks": [{**BASE["checks"][0], "vl": 128.0}]}, ["checks/0/vl: 128.0 is not a whole number"]),
    ({"checks": [{**BASE["checks"][0], "figure": 2.0}]}, ["checks/0/figure: 2.0 is not a whole number"]),
    # nan compares false with every limit (.nan disabled the time limit); inf overflowed.
    ({"time_limit": {"base_seconds": NAN}}, ["time_limit/base_seconds: nan is not a finite number"]),
    ({"time_limit": {"base_seconds": INF}}, ["time_limit/base_seconds: inf is not a finite number"]),
    ({"time_limit": {"seconds_per_mib": -INF}}, ["time_limit/seconds_per_mib: -inf is not a finite number"]),
    ({"kernels": [{"kernel": "copy", "time_limit": INF}, {"kernel": "pack"}]},
     ["kernels/0/time_limit: inf is not a finite number"]),
    ({"checks": [{**BASE["checks"][0], "tolerance": NAN}]}, ["checks/0/tolerance: nan is not a finite number"]),
    ({"checks": [{**BASE["checks"][0], "target": INF}]}, ["checks/0/target: inf is not a finite number"]),
])
def test_float_for_an_integer_and_nan_or_inf_for_a_number_are_refused(tmp_path: Path, changes: dict,
                                                                       needles: list[str], harness) -> None:
    one_line_error(validate(tmp_path, changes, harness), *needles)


def test_nan_in_the_kernel_table_is_refused(tmp_path: Path, harness) -> None:
    """The same rule in every schema: the kernel table's numbers too."""
    table = yaml.safe_load((REPO / "configs" / "kernels.yaml").read_text())
    table["families"]["copy"]["traffic"]["read"] = NAN
    (tmp_path / "kernels.yaml").write_text(yaml.safe_dump(table))
    src = {r["source"] for r in table["kernels"]}
    for s in src:  # the table names its sources relative to itself when it is not the repository's
        (tmp_path / s).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / s).symlink_to(REPO / s)
    for fam in table["families"].values():
        if "driver" in fam and not (tmp_path / fam["driver"]).exists():
            (tmp_path / fam["driver"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / fam["driver"]).symlink_to(REPO / fam["driver"])
    one_line_error(validate(tmp_path, {"kernel_table": str(tmp_path / "kernels.yaml")}, harness),
                   "families/copy/traffic/read: nan is not a finite number")


@pytest.mark.parametrize("key", ["results_dir", "build_dir"])
def test_empty_results_or_build_dir_is_refused(tmp_path: Path, key: str, harness) -> None:
    """`--set results_dir=` resolved to the repository root, which got logs/ and raw/."""
    before = sorted(p.name for p in REPO.iterdir())
    one_line_error(harness("validate", "--config", "configs/tiny.yaml", "--set", f"{key}="), f"{key} is empty",
                   f"--set {key}=DIR")
    one_line_error(harness("sweep", "--config", "configs/tiny.yaml", "--set", f"{key}="), f"{key} is empty")
    assert sorted(p.name for p in REPO.iterdir()) == before


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A directory nobody may write: mode 555 for a user; for root (whom modes do not bind) a
    read-only tmpfs, or a skip where mounting is not allowed."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)], capture_output=True).returncode:
        pytest.skip("root cannot mount a read-only tmpfs here")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


@pytest.mark.parametrize("command", [
    ["validate", "--config", "configs/tiny.yaml"],
    ["sweep", "--config", "configs/tiny.yaml"],
    ["count", "copy", "acle_4v", "--vl", "128", "--size", "4096", "--config", "configs/tiny.yaml"],
])
@pytest.mark.parametrize("sub", ["", "results"])
def test_read_only_results_folder_is_named_before_any_job(tmp_path: Path, read_only_dir: Path, command: list[str],
                                                          sub: str, harness) -> None:
    results = read_only_dir / sub if sub else read_only_dir
    proc = harness(*command, "--set", f"results_dir={results}", "--set", f"build_dir={tmp_path / 'build'}")
    one_line_error(proc, f"results_dir {results}", f"{read_only_dir} is read-only", "--set results_dir=DIR")
    assert not (tmp_path / "build").exists()


def test_dangling_symlink_results_folder_is_named_before_any_job(tmp_path: Path, harness) -> None:
    link = tmp_path / "results"
    link.symlink_to(tmp_path / "gone")
    for command in (["validate"], ["sweep"], ["count", "copy", "acle_4v", "--vl", "128", "--size", "4096"]):
        proc = harness(*command, "--config", "configs/tiny.yaml", "--set", f"results_dir={link}",
                       "--set", f"build_dir={tmp_path / 'build'}")
        one_line_error(proc, f"results_dir {link}", "symbolic link", str(tmp_path / "gone"), "does not exist")
        # The results inside it too (results_dir=link/sub).
        proc = harness(*command, "--config", "configs/tiny.yaml", "--set", f"results_dir={link / 'sub'}",
                       "--set", f"build_dir={tmp_path / 'build'}")
        one_line_error(proc, "symbolic link", "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_size_above_this_machines_memory_is_refused(tmp_path: Path, harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """999999999999 bytes, the binaries' largest size: the run's time limit (60 s per MiB) overflowed
    poll() (OverflowError) and its 2 TB of buffers cannot be allocated. Refused in one line where
    a run's buffers exceed the machine's memory, by validate and by count."""
    one_line_error(validate(tmp_path, {"sizes": {"copy": [999999999999], "vector": [65536]},
                                       "linearity_check": False}, harness),
                   "sizes/copy: size 999999999999 is too large for this machine", "GiB of memory", "smaller size")
    one_line_error(harness("count", "copy", "acle_4v", "--vl", "128", "--size", "999999999999",
                           "--set", f"build_dir={tmp_path / 'build'}", "--set", f"results_dir={tmp_path / 'results'}"),
                   "--size 999999999999 is too large for this machine")
    assert not (tmp_path / "build").exists()
    # The bound is the machine's memory and the family's buffers (copy: read + written = 2 x size).
    from analysis.core import kernels
    monkeypatch.setattr(kernels, "memory_bytes", lambda: 1 << 30)
    assert validate(tmp_path, {"sizes": {"copy": [1 << 28], "vector": [65536]}}, harness).returncode == 0
    one_line_error(validate(tmp_path, {"sizes": {"copy": [1 << 29], "vector": [65536]}}, harness),
                   "size 536870912 is too large", "2.0 GiB", "1.0 GiB", "twice the size")


def test_a_time_limit_beyond_poll_range_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A limit of months (a huge size's 60 s per MiB) raised OverflowError in poll()."""
    from analysis.backends import run_limited
    proc = run_limited(["true"], 1e12, "cell")
    assert proc.returncode == 0


@pytest.fixture
def full_disk(tmp_path: Path):
    """A folder on a full filesystem: a 64 KiB tmpfs (root) filled to the last byte, or a skip
    where mounting is not allowed."""
    d = tmp_path / "full"
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
                                           capture_output=True).returncode:
        pytest.skip("no tmpfs can be mounted here (needs root)")
    try:
        with open(d / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 4096)
            except OSError:
                pass
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_full_disk_write_names_the_path_and_leaves_no_temp_file(full_disk: Path) -> None:
    """Tables, raw counts, stamps and reports are written through files.write_atomic: on a full disk
    one line names the path and "no space left", and the temporary file is gone."""
    import pandas as pd

    from analysis.backends import write_raw
    from analysis.core import files, table

    df = pd.DataFrame({"a": range(20000)})
    with pytest.raises(files.WriteError, match=r"cannot write .*/full/t.csv: no space left on its device") as e:
        table.write_csv(df, full_disk / "t.csv")
    assert len(str(e.value).splitlines()) == 1 and not str(e.value).startswith("[Errno")
    with pytest.raises(OSError, match="no space left"):  # an OSError: the stages' handlers report it
        write_raw(full_disk / "raw" / "j.json", {"m": "x" * 100000}, [])
    assert sorted(p.name for p in full_disk.rglob("*")) == ["filler", "raw"]


def test_write_failure_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same without a tmpfs: the writer raises ENOSPC midway (it left .t.csv.tmp<pid>)."""
    import errno

    import pandas as pd

    from analysis.core import files, table

    def enospc(self, path, **kw) -> None:
        Path(path).write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", enospc)
    with pytest.raises(files.WriteError, match=r"cannot write .*t.csv: no space left"):
        table.write_csv(pd.DataFrame({"a": [1]}), tmp_path / "t.csv")
    assert list(tmp_path.iterdir()) == []


def test_empty_log_on_a_full_disk_says_no_space(full_disk: Path, tmp_path: Path) -> None:
    """A failed job's log on a full disk stays empty: the progress display said "(empty log)"."""
    import sys

    sys.path.insert(0, str(REPO / "analysis" / "snakemake_plugins"))
    from snakemake_logger_plugin_harness import why

    (full_disk / "job.log").touch()
    line = why([str(full_disk / "job.log")])
    assert line.startswith("no space left on the device of") and str(full_disk) in line, line
    (tmp_path / "job.log").touch()
    assert why([str(tmp_path / "job.log")]) == "(empty log)"


def test_kernel_exiting_0_without_its_ok_line_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was reported as "exit status 0", as if 0 were the failure."""
    from analysis.backends import RunError, qemu
    from analysis.core import config

    binary = tmp_path / "copy-acle_4v"
    binary.write_bytes(b"")
    monkeypatch.setattr(qemu, "run_cells", lambda cmd, *a, **k: subprocess.CompletedProcess(
        cmd, 0, "batch of 1 runs\nsize=4096 done (no ok)\n", ""))
    with pytest.raises(RunError) as e:
        qemu.run_batch(binary, "max", [config.Run(128, 4096, "-", "uint8", ())], tmp_path)
    msg = str(e.value)
    assert "exit status 0" not in msg
    assert "printed no `ok` line" in msg and "'size=4096 done (no ok)'" in msg, msg


def test_explain_markdown_into_a_missing_folder_creates_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--markdown PATH whose folder does not exist was a FileNotFoundError traceback."""
    from analysis.stages import explain

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(explain.table, "read_counts", lambda path: None)
    monkeypatch.setattr(explain.table, "read_provenance", lambda path: None)
    monkeypatch.setattr(explain, "cell_from_args", lambda ns, counts, sweep: None)
    monkeypatch.setattr(explain, "explain", lambda cell, sweep, counts, prov: "# the cell\n")
    out = tmp_path / "new" / "folder" / "cell.md"
    assert explain.main(["copy", "acle_4v", "--vl", "128", "--sweep", "configs/tiny.yaml", "--markdown", str(out)]) == 0
    assert out.read_text() == "# the cell\n"


def _venv_at(root: Path) -> Path:
    """A venv at root/.venv that shares this one's packages (site-packages linked), with the
    snakemake console script pip writes for that path: for a path with a space it is a /bin/sh
    polyglot whose exec line holds the path."""
    import shutil
    import sysconfig

    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(REPO / ".venv" / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(os.path.realpath(REPO / ".venv" / "bin" / "python"))
    site = Path(sysconfig.get_paths()["purelib"])
    (venv / site.relative_to(Path(sys.prefix))).parent.mkdir(parents=True)
    (venv / site.relative_to(Path(sys.prefix))).symlink_to(site)
    from pip._vendor.distlib.scripts import ScriptMaker

    maker = ScriptMaker(None, str(venv / "bin"))
    maker.executable, maker.variants = str(venv / "bin" / "python"), {""}
    maker.make("snakemake = snakemake.cli:main")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_a_clone_folder_named_like_a_command_runs_nothing(tmp_path: Path) -> None:
    """A clone under `x$(touch PWNED)y`: pip's launcher .venv/bin/snakemake is a /bin/sh script
    with that path in it, and starting Snakemake through it ran `touch PWNED`. The harness starts
    Snakemake as `python -m snakemake`."""
    import shutil

    root = tmp_path / "x$(touch PWNED)y" / "repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", ".venv", "build", "results", ".snakemake",
                                                              "__pycache__", ".pytest_cache"))
    python = _venv_at(root)
    assert "$(touch PWNED)" in (python.parent / "snakemake").read_text()
    proc = subprocess.run([str(python), "-m", "analysis.commands.cli", "sweep", "--config", "configs/tiny.yaml",
                           "--set", f"results_dir={tmp_path / 'results'}", "--set", f"build_dir={tmp_path / 'build'}",
                           "--", "-n"], cwd=root, capture_output=True, text=True)
    pwned = list(tmp_path.rglob("PWNED")) + [p for p in (REPO / "PWNED", Path.cwd() / "PWNED") if p.exists()]
    assert not pwned, pwned
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "dry-run" in proc.stdout + proc.stderr


def test_snakemake_started_as_a_module_is_found_running(tmp_path: Path) -> None:
    """guard.snakemake_running (stale-lock check, unlock) finds `python -m snakemake` in the tree,
    how the harness now starts it, as it found the console script."""
    import time

    from analysis.commands import guard

    fake = tmp_path / "mods" / "snakemake"
    fake.mkdir(parents=True)
    (fake / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    proc = subprocess.Popen([PY, "-m", "snakemake", "--cores", "1"], cwd=tree,
                            env={**os.environ, "PYTHONPATH": str(tmp_path / "mods")})
    try:
        for _ in range(50):
            if guard.snakemake_running(tree):
                break
            time.sleep(0.1)
        assert guard.snakemake_running(tree) == [proc.pid]
        assert guard.snakemake_running(tmp_path) == []
    finally:
        proc.kill()
        proc.wait()
    assert guard.is_snakemake([b"/x/.venv/bin/snakemake", b"--cores"])
    assert guard.is_snakemake([b"/usr/bin/python3", b"/x/.venv/bin/snakemake"])
    assert not guard.is_snakemake([b"/usr/bin/python3", b"-m", b"pytest"])
