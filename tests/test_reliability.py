"""Never accept a wrong result, never hang, never run a path as a command (issue 11).

The tiny sweep runs once from a clone whose path holds a space and a `$`, into a results
directory whose name is a shell command substitution; its raw files then go through fault
injection at the collect hand-over, and a second sweep is killed with SIGKILL and resumed.
The golden files of the regression set go through the same at the regress hand-over.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest

from analysis import backends
from analysis.backends import gem5
from analysis.commands import regress
from analysis.core import config
from analysis.stages import collect
from conftest import PY, REPO

# Names that exist only with the fix are looked up where they are used, so that every test
# of this file runs (and fails, each on its own defect) on the code before it.
STAGE_ROOT, STAGE_PREFIX, OWNER_FILE = backends.STAGE_ROOT, backends.STAGE_PREFIX, "owner.pid"

IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "results", ".snakemake", "__pycache__", ".pytest_cache")
EVIL_RESULTS = "out$(touch pwned)"


def cli(root: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "analysis.commands.cli", *args], cwd=root, capture_output=True, text=True, **kw)


def one_line(proc: subprocess.CompletedProcess, *needles: str, rc: int = 2) -> str:
    assert proc.returncode == rc, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository at a path with a space and a `$`, the tiny sweep run in it
    into a results directory named like a shell command."""
    root = tmp_path_factory.mktemp("paths") / "my clone $HOME x" / "repo"
    shutil.copytree(REPO, root, ignore=IGNORE)
    proc = cli(root, "sweep", "--config", "configs/tiny.yaml", "--cores", "2", "--set", f"results_dir={EVIL_RESULTS}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


# ---- 2. paths are never run as commands, and any path works ----

@pytest.fixture(scope="module")
def reference(tiny_sweep: tuple[Path, subprocess.CompletedProcess]) -> Path:
    """The tiny sweep from the repository itself, at plain paths (the session's run)."""
    return tiny_sweep[0] / "counts.csv"


@pytest.mark.slow
def test_clone_path_with_space_and_dollar_and_results_dir_with_a_command(clone: Path, reference: Path) -> None:
    assert not list(clone.parent.parent.rglob("pwned")), "a path was run as a shell command"
    assert not (REPO / "pwned").exists()
    out = clone / EVIL_RESULTS
    for name in ("provenance.csv", "summary.md", "figures/tiny_copy.png"):
        assert (out / name).stat().st_size > 0
    # The same table, byte for byte, as the same sweep at plain paths.
    assert (out / "counts.csv").read_bytes() == reference.read_bytes()


# ---- 1. integrity at the collect hand-over: fault injection on raw files ----



def _rechecksum(doc: dict) -> dict:
    """A valid checksum for the edited content, so that only the plan check can catch the edit
    (before the fix, raw files carried none)."""
    if hasattr(backends, "content_sha256"):
        doc["sha256"] = backends.content_sha256(doc["meta"], doc["runs"])
    return doc


def _drop_vl(doc: dict) -> dict:
    doc["runs"] = [r for r in doc["runs"] if r["vl"] != 512]
    return doc


def _raise_roi_total(doc: dict) -> dict:
    doc["runs"][1]["inscount"]["roi"]["total"] += 1000
    return doc


def _unbalance(doc: dict) -> dict:
    doc["runs"][0]["inscount"]["markers"]["balanced"] = False
    return doc


def _string_count(doc: dict) -> dict:
    doc["runs"][0]["inscount"]["whole"]["total"] = str(doc["runs"][0]["inscount"]["whole"]["total"])
    return doc


def _opcode_count(doc: dict) -> dict:
    doc["runs"][1]["opcodes"]["roi"][0]["count"] += 1
    return doc


def _duplicate_run(doc: dict) -> dict:
    doc["runs"][-1] = copy.deepcopy(doc["runs"][0])
    return doc


def _other_job(doc: dict) -> dict:
    doc["meta"]["variant"] = "acle_4v" if doc["meta"]["variant"] != "acle_4v" else "c_vec"
    return doc


EDITS: list[tuple[str, Callable[[dict], dict], bool, str]] = [
    # (what, edit, re-write a valid checksum afterwards, expected message)
    ("the runs of one VL removed", _drop_vl, True, "planned runs missing (vl=512 size=0"),
    ("the runs of one VL removed, checksum left", _drop_vl, False, "does not match its checksum"),
    ("roi.total raised by 1000", _raise_roi_total, True, "the classes sum to"),
    ("roi.total raised by 1000, checksum left", _raise_roi_total, False, "does not match its checksum"),
    ("markers unbalanced", _unbalance, True, "markers unbalanced"),
    ("a count written as a string", _string_count, True, "not a count"),
    ("an opcode count raised", _opcode_count, True, "opcode histogram sums to"),
    ("one run repeated in place of another", _duplicate_run, True, "planned runs missing"),
    ("another job's meta", _other_job, True, "holds the job"),
]


def _collect(raw: list[Path], tmp: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    rc = collect.main(["--sweep", str(REPO / "configs" / "tiny.yaml"), "--set", f"results_dir={tmp}",
                       "--counts", str(tmp / "counts.csv"), "--provenance", str(tmp / "provenance.csv"), *map(str, raw)])
    return rc, capsys.readouterr().err


def _copy_raw(reference: Path, tmp: Path) -> list[Path]:
    """The tiny sweep's raw files, copied where a test may break them."""
    src = reference.parent / "raw"
    shutil.copytree(src, tmp / "raw")
    return sorted((tmp / "raw").rglob("*.json"))


@pytest.mark.slow
def test_collect_accepts_the_untouched_raw_files(reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raw = _copy_raw(reference, tmp_path)
    rc, err = _collect(raw, tmp_path, capsys)
    assert rc == 0, err
    assert (tmp_path / "counts.csv").read_bytes() == reference.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("what, edit, rechecksum, needle", EDITS, ids=[e[0] for e in EDITS])
def test_collect_refuses_an_edited_raw_file(reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture, what: str,
                                            edit: Callable[[dict], dict], rechecksum: bool, needle: str) -> None:
    raw = _copy_raw(reference, tmp_path)
    target = next(p for p in raw if p.parts[-3:] == ("vla", "max", "copy-c_vec.json"))
    doc = edit(json.loads(target.read_text()))
    target.write_text(json.dumps(_rechecksum(doc) if rechecksum else doc))
    rc, err = _collect(raw, tmp_path, capsys)
    assert rc == 1, what
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: raw file "), err
    assert str(target) in lines[0] and needle in lines[0] and "re-run the sweep" in lines[0], lines[0]
    assert not (tmp_path / "counts.csv").exists()


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["mid-file", "at a line boundary", "empty", "no checksum"])
def test_collect_refuses_a_truncated_raw_file(reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture, cut: str) -> None:
    raw = _copy_raw(reference, tmp_path)
    target = raw[3]
    text = target.read_text()
    if cut == "mid-file":
        target.write_text(text[: len(text) // 2])
    elif cut == "at a line boundary":
        target.write_text(json.dumps(json.loads(text), indent=1).split("\n", 40)[0] + "\n")
    elif cut == "empty":
        target.write_text("")
    else:
        doc = json.loads(text)
        del doc["sha256"]
        target.write_text(json.dumps(doc))
    rc, err = _collect(raw, tmp_path, capsys)
    assert rc == 1
    line = one_line_text(err)
    assert str(target) in line and "re-run the sweep" in line, line
    assert ("not complete JSON" in line) if cut != "no checksum" else ("carries no checksum" in line)


def one_line_text(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---- 3. SIGKILL mid-way, the stale lock, resume to a byte-identical table ----

def _owned_stages() -> set[Path]:
    """This session's staging directories: /tmp is shared, and another session's jobs (a bench,
    a sweep beside the suite) come and go there; the session's tag (conftest) tells them apart.
    Before, one of theirs showing up mid-test failed the time-limit test under load."""
    import hygiene

    return set(hygiene.own_stages(os.environ[backends.STAGE_TAG_ENV]))


@pytest.mark.exclusive
@pytest.mark.slow
def test_sigkill_mid_sweep_then_the_same_command_takes_over_the_lock_and_resumes(reference: Path, work: Path) -> None:
    """Before the fix every command after a SIGKILL was refused until `./harness unlock`,
    although the README said the command resumes."""
    results = work / "killed"
    raw = results / "raw"
    sweep = ["sweep", "--config", "configs/tiny.yaml", "--cores", "2", "--set", f"results_dir={results}",
             "--set", f"build_dir={work / 'build'}"]
    before = _owned_stages()
    proc = subprocess.Popen([PY, "-m", "analysis.commands.cli", *sweep], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (raw.exists() and any(raw.rglob("*.json"))) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # Everything at once, Snakemake's process group first (the command alone would have its
    # Snakemake stop cleanly: tests/test_keep.py).
    from analysis.commands import guard

    for pid in guard.snakemake_running():
        os.killpg(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (results / "counts.csv").exists(), "the sweep finished before it was killed"
    assert list((REPO / ".snakemake" / "locks").glob("*.lock")), "the killed run left no Snakemake lock to take over"
    left = _owned_stages() - before

    resumed = cli(REPO, *sweep)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    took = [ln for ln in resumed.stderr.splitlines() if ln.startswith("took over")]
    assert len(took) == 2, resumed.stderr[-3000:]  # the Snakemake lock and the results folder's, one line each
    assert "Snakemake lock" in took[0] and str(results) in took[1]
    assert not list((REPO / ".snakemake" / "locks").glob("*.lock"))
    assert (results / "counts.csv").read_bytes() == reference.read_bytes()
    # Staging directories of the killed jobs (SIGKILL runs no clean-up) went at the next start.
    assert not (left & _owned_stages()), _owners(left & _owned_stages())


def _owners(stages: set[Path]) -> str:
    """Who owns each staging directory, and whether it runs: what a failure must say (one CI run
    found a killed job's directory still there after the resumed sweep; its owner was not known)."""
    lines = []
    for d in sorted(stages):
        try:
            pid = int((d / OWNER_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError) as e:
            lines.append(f"{d}: no owner: {e}")
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            lines.append(f"{d}: owner {pid} is gone")
            continue
        lines.append(f"{d}: owner {pid} runs: {cmdline[:300]}")
    return "staging directories left:\n" + "\n".join(lines)


def _locks_naming(folder: Path) -> list[Path]:
    """The lock files in the clone that name a file in `folder` (a sweep's results folder)."""
    found = []
    for lock in (REPO / ".snakemake" / "locks").glob("*.lock"):
        try:
            if str(folder) in lock.read_text():
                found.append(lock)
        except FileNotFoundError:
            continue
    return found


@pytest.mark.exclusive
@pytest.mark.slow
def test_a_snakemake_that_ends_leaves_the_lock_of_another_that_runs(tiny_sweep: tuple[Path, subprocess.CompletedProcess],
                                                                     all_sweep: config.Sweep, work: Path) -> None:
    """Two sweeps into two results folders of one clone. Before the fix the one that ended
    removed .snakemake/locks whole (Snakemake's own unlock), the running one's lock files with
    it; one taking its lock at that moment failed with FileNotFoundError (the test suite's
    workers met it now and then)."""
    from analysis.commands import guard

    build_dir = all_sweep.build_dir  # the tiny sweep's, built: neither run builds

    def cmd(results: Path) -> list[str]:
        return guard.snakemake_cmd("configs/tiny.yaml", {"results_dir": str(results), "build_dir": str(build_dir)}, 2,
                                   ["--quiet", "all"])

    running, ending = work / "locks-running", work / "locks-ending"
    proc = subprocess.Popen(cmd(running), cwd=REPO, process_group=0, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not _locks_naming(running) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGSTOP)  # holding its lock, for as long as the other one runs
        held = _locks_naming(running)
        assert held, "the first sweep ended before it could be stopped holding its lock"
        other = subprocess.run(cmd(ending), cwd=REPO, capture_output=True, text=True)
        assert other.returncode == 0, other.stdout[-3000:] + other.stderr[-3000:]
        assert (ending / "counts.csv").exists()
        assert _locks_naming(running) == held, "the sweep that ended removed the running one's lock"
        assert not _locks_naming(ending)
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert not list((REPO / ".snakemake" / "locks").glob("*.lock"))
    assert (running / "counts.csv").read_bytes() == (ending / "counts.csv").read_bytes()


# ---- 1. regress: the golden files' integrity (fault injection) ----

@pytest.fixture
def golden_copy(tmp_path: Path, work: Path) -> Path:
    """configs/regress.yaml with its golden files copied beside it (nothing is run: every case
    below must fail before the sweep; the session's build tree keeps the code before the fix,
    which ran the sweep, from rebuilding for each case)."""
    text = (REPO / "configs" / "regress.yaml").read_text()
    (tmp_path / "regress.yaml").write_text(text.replace("golden_dir: results/golden", f"golden_dir: {tmp_path / 'golden'}")
                                           .replace("results_dir: results/regress", f"results_dir: {tmp_path / 'out'}")
                                           .replace("build_dir: build", f"build_dir: {work / 'build'}"))
    shutil.copytree(REPO / "results" / "golden", tmp_path / "golden")
    return tmp_path


def _csv(root: Path) -> Path:
    return root / "golden" / "regress.csv"


def _fp(root: Path) -> Path:
    return root / "golden" / "regress.fingerprint.json"


def _set_fp(root: Path, change: Callable[[dict], object]) -> None:
    """Change the fingerprint in place (`change` mutates it; what it returns is ignored)."""
    fp = json.loads(_fp(root).read_text())
    change(fp)
    _fp(root).write_text(json.dumps(fp))


def _move_acle_value(root: Path) -> None:
    lines = _csv(root).read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ",acle_4v," in ln and ",roi_net.total," in ln)
    cells = lines[i].split(",")
    cells[-2] = str(int(cells[-2]) * 6 // 5)
    lines[i] = ",".join(cells)
    _csv(root).write_text("\n".join(lines) + "\n")


GOLDEN_FAULTS: list[tuple[str, Callable[[Path], None], str]] = [
    ("fingerprint {}", lambda r: _fp(r).write_text("{}"), "is corrupt"),
    ("fingerprint {'qemu': 1}", lambda r: _fp(r).write_text('{"qemu": 1}'), "is corrupt"),
    ("fingerprint {} and an ACLE value moved 20%", lambda r: (_fp(r).write_text("{}"), _move_acle_value(r)), "is corrupt"),
    ("fingerprint qemu of the wrong type", lambda r: _set_fp(r, lambda fp: fp.update(qemu=7.2)), "qemu: 7.2 is not of type"),
    ("fingerprint without its row count", lambda r: _set_fp(r, lambda fp: fp.pop("rows")), "'rows' is a required"),
    ("fingerprint truncated", lambda r: _fp(r).write_text(_fp(r).read_text()[:100]), "is corrupt"),
    ("fingerprint missing", lambda r: _fp(r).unlink(), "no fingerprint"),
    ("an ACLE value moved 20%", _move_acle_value, "does not match the checksum"),
    ("golden truncated at a line boundary", lambda r: _csv(r).write_text(
        "".join(_csv(r).read_text().splitlines(keepends=True)[:401])), "has 400 rows, its fingerprint records 1440"),
    ("golden truncated mid-line", lambda r: _csv(r).write_text(_csv(r).read_text()[:30000]), "golden file"),
    ("golden emptied", lambda r: _csv(r).write_text(""), "is corrupt"),
    ("golden missing", lambda r: _csv(r).unlink(), "no golden file"),
]


@pytest.mark.parametrize("what, fault, needle", GOLDEN_FAULTS, ids=[g[0] for g in GOLDEN_FAULTS])
def test_regress_refuses_corrupt_golden_files_before_any_work(golden_copy: Path, capsys: pytest.CaptureFixture,
                                                              what: str, fault: Callable[[Path], None], needle: str) -> None:
    fault(golden_copy)
    rc = regress.main(["regress", "--config", str(golden_copy / "regress.yaml")])
    out = capsys.readouterr()
    assert rc == 2, what + out.out + out.err
    line = one_line_text(out.err)
    assert line.startswith("error: ") and needle in line and ("re-bless" in line or "bless" in line), line
    assert "applying tolerance" not in out.out
    assert not (golden_copy / "out").exists()


def test_committed_golden_fingerprint_is_valid() -> None:
    reg = regress.load(REPO / "configs" / "regress.yaml")
    golden, fp = regress.read_golden(reg)
    assert fp["rows"] == len(golden) == 1440
    # the same cells for both compilers of the default sweep
    assert golden.groupby("compiler").size().to_dict() == {"clang": 720, "gcc": 720}


# ---- 3. time limits, staging directories ----

def test_run_limited_kills_the_whole_process_group_and_names_the_cell(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    cmd = ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"]
    t0 = time.monotonic()
    with pytest.raises(backends.RunError, match=r"copy-acle_4v cpu=max vl=128 size=65536: stopped after its time limit of 1 s"):
        backends.run_limited(cmd, 1, "copy-acle_4v cpu=max vl=128 size=65536")
    assert time.monotonic() - t0 < 60
    child = Path("/proc") / pidfile.read_text().strip()
    time.sleep(0.2)
    # The grandchild went with its group (gone, or a zombie waiting for init to reap it).
    assert not child.exists() or (child / "stat").read_text().split(") ")[1].startswith("Z")


def test_time_limit_default_grows_with_size_and_is_overridden_per_kernel(tmp_path: Path) -> None:
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    assert sweep.time_limit("copy", "c_vec", 0) == 120
    assert sweep.time_limit("copy", "c_vec", 1 << 20) == 180
    assert sweep.time_limit("copy", "c_vec", 1 << 20, gem5.time_factor(sweep)) == 3600
    text = (REPO / "configs" / "tiny.yaml").read_text().replace("variants: [c_vec, acle_4v]", "variants: [c_vec, acle_4v]\n    time_limit: 7")
    text += "time_limit: {base_seconds: 10, seconds_per_mib: 1}\n"
    (tmp_path / "t.yaml").write_text(text.replace("kernel_table: configs/kernels.yaml", f"kernel_table: {REPO / 'configs/kernels.yaml'}"))
    sweep = config.load(tmp_path / "t.yaml")
    assert sweep.time_limit("copy", "c_vec", 1 << 30) == 7
    assert sweep.time_limit("pack", "acle", 1 << 20) == 11


def test_stale_staging_directories_are_removed_and_live_ones_kept() -> None:
    """`reused`: its owner's pid is a live process's that started later (pid_max is 32,768 here and
    a test suite wraps it within minutes); before, it was kept, so a killed sweep's staging
    directory outlived the sweep that resumed it (one CI run in five of session 22)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    me = f"{os.getpid()} {backends.started(os.getpid())}"
    made = {}
    for name, owner in (("dead", str(dead.pid)), ("live", me), ("live-pid-only", str(os.getpid())),
                        ("reused", f"{os.getpid()} {backends.started(os.getpid()) - 1}"), ("unowned", None)):
        d = Path(STAGE_ROOT) / f"{STAGE_PREFIX}test-{name}-{os.getpid()}"
        d.mkdir()
        if owner:
            (d / OWNER_FILE).write_text(owner + "\n")
        made[name] = d
    try:
        removed = backends.clean_stale_stages()
        assert made["dead"] in removed and not made["dead"].exists()
        assert made["reused"] in removed and not made["reused"].exists()
        assert made["live"].exists() and made["live-pid-only"].exists() and made["unowned"].exists()
    finally:
        for d in made.values():
            shutil.rmtree(d, ignore_errors=True)


HANG = """\
#include <string.h>
#include "harness.h"

/* Loops forever inside the ROI for any size but 0 (the baseline run finishes). */
HARNESS_KERNEL void hang_kernel(char *y, size_t n)
{
    if (n)
        for (;;)
            __asm__ volatile("nop");
    memset(y, 0, n);
}

int main(int argc, char **argv)
{
    static const char *const keys[] = {NULL};
    harness_init(argc, argv, keys);
    size_t n = harness_size();
    char *y = harness_alloc(n, 64);
    roi_begin();
    hang_kernel(y, n);
    roi_end();
    harness_ok(harness_fnv1a(y, n));
}
"""


def hang_tree(root: Path, limit: float, build_dir: Path) -> Path:
    """The hanging kernel's sweep in `root`, building into `build_dir` (the session's build tree:
    the plugins and the harness's objects are built once for every hanging sweep, not once each)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hang.c").write_text(HANG)
    (root / "hang.yaml").write_text("families: {}\nkernels:\n  - {kernel: hang, variant: forever, family: standalone, "
                                    "source: hang.c, label: hangs, role: ours}\n")
    (root / "sweep.yaml").write_text(f"""\
kernel_table: configs/kernels.yaml
extra_kernel_tables: [hang.yaml]
results_dir: {root / 'results'}
build_dir: {build_dir}
vector_lengths: [128]
sizes: {{standalone: [64]}}
linearity_check: false
kernels:
  - {{kernel: hang, time_limit: {limit}}}
""")
    return root / "sweep.yaml"


@pytest.mark.slow
def test_a_kernel_that_loops_forever_is_killed_at_its_time_limit_and_earlier_tables_kept(tmp_path: Path, work: Path) -> None:
    sweep = hang_tree(tmp_path, 3, work / "build")
    results = tmp_path / "results"
    (results / "figures").mkdir(parents=True)
    for old in ("counts.csv", "summary.md", "figures/old.png"):  # a previous run's outputs
        (results / old).write_text("previous\n")
    before = _owned_stages()
    proc = cli(REPO, "sweep", "--config", str(sweep), "--cores", "2", timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "hang-forever cpu=max vl=128 size=64: stopped after its time limit of 3 s" in out, out[-3000:]
    # Nothing out of date is left looking current, and the earlier outputs are kept whole.
    assert not (results / "counts.csv").exists() and not (results / "summary.md").exists()
    assert not (results / "figures").exists()
    kept = next((results / "kept").iterdir())
    assert (kept / "summary.md").read_text() == "previous\n" and (kept / "figures" / "old.png").exists()
    assert (results / "set-aside").exists()  # counts.csv has no checksum: not the harness's, set aside
    assert f"are kept in {kept}" in out
    assert not (_owned_stages() - before)  # the killed run's staging directory is gone


def start_hanging_sweep(root: Path, limit: float, build_dir: Path) -> tuple[subprocess.Popen, set[Path]]:
    """The hanging kernel's sweep (hang_tree) in a session of its own, once its second run has
    started: the process and the staging directories of its running job."""
    sweep = hang_tree(root, limit, build_dir)
    log = root / "results" / "logs" / "count" / "qemu" / "gcc" / "vla" / "max" / "hang-forever.log"
    before = _owned_stages()
    proc = subprocess.Popen([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(sweep), "--cores", "2"], cwd=REPO,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (log.exists() and "[1/2]" in log.read_text()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    running = _owned_stages() - before
    assert running, "the hanging run never started"
    return proc, running


@pytest.mark.exclusive
@pytest.mark.slow
def test_ctrl_c_ends_with_one_line_and_leaves_no_lock_or_staging(tmp_path: Path, work: Path) -> None:
    proc, running = start_hanging_sweep(tmp_path, 600, work / "build")
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    assert err.strip().splitlines()[-1].startswith("interrupted: ./harness sweep stopped")
    assert not (running & _owned_stages())
    from analysis.commands import guard

    assert guard.check_lock() is None  # no stale lock left in the tree to take over


# ---- 4. bad input: one line naming the fix, before any work ----

@pytest.mark.slow
def test_cores_below_one_is_refused(tmp_path: Path) -> None:
    for n in ("0", "-1"):
        # Before the fix --cores 0 waited forever at "Select jobs to execute...".
        one_line(cli(REPO, "sweep", "--config", "configs/tiny.yaml", "--cores", n,
                     "--set", f"results_dir={tmp_path / 'r'}", timeout=120), f"--cores {n}", ">= 1")
        one_line(cli(REPO, "regress", "--cores", n, timeout=120), f"--cores {n}")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_sweep_start_removes_a_killed_jobs_staging_even_with_no_count_left(tmp_path: Path) -> None:
    """A job killed after it wrote its raw file but before it removed its staging directory
    (SIGKILL runs no clean-up) leaves nothing to count on the next run: only count jobs removed
    stale staging, so the directory outlived the sweep that resumed (seen in a CI-style run of
    test_sigkill_mid_sweep_then_the_same_command_takes_over_the_lock_and_resumes)."""
    results = tmp_path / "results"
    sweep = ["sweep", "--config", "configs/tiny.yaml", "--cores", "2", "--set", f"results_dir={results}",
             "--set", f"build_dir={tmp_path / 'build'}"]
    first = cli(REPO, *sweep)
    assert first.returncode == 0, first.stderr[-3000:]
    (results / "counts.csv").unlink()  # collect runs again, no count job does
    gone = subprocess.Popen(["true"])  # a pid that has ended
    gone.wait()
    stage = Path(tempfile.mkdtemp(prefix=backends.STAGE_PREFIX, dir=backends.STAGE_ROOT))
    (stage / backends.OWNER_FILE).write_text(f"{gone.pid} 1\n{os.environ[backends.STAGE_TAG_ENV]}\n")
    try:
        again = cli(REPO, *sweep)
        assert again.returncode == 0, again.stderr[-3000:]
        assert (results / "counts.csv").exists()
        assert not stage.exists(), "the killed job's staging directory outlived the sweep"
    finally:
        shutil.rmtree(stage, ignore_errors=True)
