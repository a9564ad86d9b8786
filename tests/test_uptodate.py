"""`./harness sweep` again with nothing changed answers without Snakemake (issue 28), and only
then: every change that can make Snakemake work goes to Snakemake, whose run is then correct
(analysis/commands/watched.py says what is watched).

One sweep of the template kernel, kept outside the repository as a user's own (so a test can
edit its source and its sweep file), on the session's build tree. Every test starts from a state
the fast path answers (`settled`) and leaves one: --shuffle may run them in any order.

Each kind of change that Snakemake must see is swept end to end once (an edited source, sweep
file, table or raw file, a target, a Snakemake lock, a failed run, a dry run): the command goes
to Snakemake, which does the work, and the same command is then answered. Where a test asks
only what the check decides (a link, an override, a variable, a tool, a profile, another
sweep's lock), it asks the check in this process (`answers`), as cli asks it first thing, and
writes the record as a sweep that finished writes it (`recorded`); it puts the record and
what it changed back as they were, which the command then answers again. A Snakemake start
and the command around it cost 4 to 8 CPU seconds; the check costs a tenth of one.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from analysis.commands import cli, keep, uptodate, watched
from analysis.commands.sweep import cmd_sweep, sweep_command
from analysis.core import config, table
from conftest import PY, REPO, path_without

TEMPLATE = REPO / "kernels" / "template"
RAW = Path("raw/qemu/gcc/vla/max/scale-acle.json")
OBJECT = Path("gcc/vla/obj/scale-acle.o")


def sweep_yaml(root: Path, build: Path, vls: list[int]) -> str:
    return f"""\
kernel_table: configs/kernels.yaml
extra_kernel_tables: [my_kernels.yaml]
results_dir: {root / 'results'}
build_dir: {build}
vector_lengths: {vls}
sizes: {{standalone: [4096]}}
linearity_check: false
kernels:
  - kernel: scale
figures:
  - {{name: scale, title: "scale", series: [{{kernel: scale}}]}}
"""


def sweep(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(root / "sweep.yaml"),
                           "--cores", "2", *args], cwd=REPO, capture_output=True, text=True, env=env)


def ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def answered(root: Path, proc: subprocess.CompletedProcess) -> bool:
    """The fast path's answer: its one line and nothing else."""
    line = (f"sweep {root / 'sweep.yaml'}: up to date (nothing changed since the sweep of ", f"; results in {root / 'results'})")
    lines = proc.stdout.splitlines()
    return proc.returncode == 0 and proc.stderr == "" and len(lines) == 1 and \
        lines[0].startswith(line[0]) and lines[0].endswith(line[1])


def ran_snakemake(proc: subprocess.CompletedProcess) -> bool:
    """The normal path: the command kept the log of the Snakemake it ran (sweep.keep_full_log)."""
    return "full log: " in proc.stdout and "up to date" not in proc.stdout


def fell_through(root: Path, proc: subprocess.CompletedProcess) -> None:
    """Snakemake ran and the sweep finished; run again, the same command is answered."""
    ok(proc)
    assert ran_snakemake(proc), proc.stdout[-2000:]
    assert (root / "results" / uptodate.NAME).is_file()


def settled(root: Path, env: dict[str, str] | None = None) -> None:
    """The plain command is answered (a test before this one may have left another record)."""
    proc = sweep(root, env=env)
    if not answered(root, proc):
        ok(proc)
        proc = sweep(root, env=env)
    assert answered(root, proc), proc.stdout[-2000:] + proc.stderr[-2000:]


def command(root: Path, *args: str) -> list[str]:
    """The command line sweep() runs, as cli's argv."""
    return ["sweep", "--config", str(root / "sweep.yaml"), "--cores", "2", *args]


def answers(root: Path, *args: str) -> bool:
    """The up-to-date check's decision on sweep()'s command, made in this process (from the
    repository, where sweep() runs it), as cli makes it before anything else: True when the
    command is answered; False, it goes to Snakemake (started here by nothing). The check
    itself, not uptodate.answer, which takes any exception for "go to Snakemake": here an
    exception fails the test instead of passing for "not answered"."""
    with contextlib.chdir(REPO):
        return uptodate._check(command(root, *args)) is not None


def recorded(root: Path, *args: str) -> None:
    """What a sweep of that command that finished writes last (sweep.cmd_sweep: the record of
    its command, sweep_command, which uptodate.parse reads the same, tested below), in this
    process and its environment."""
    cmd = uptodate.parse(command(root, *args))
    assert cmd is not None
    with contextlib.chdir(REPO):
        uptodate.record(cmd, config.load(cmd.config, cmd.overrides()))


def listing(*roots: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under `roots`: size, mtime, inode."""
    out = {}
    for root in roots:
        for p in root.rglob("*"):
            st = p.lstat()
            out[str(p)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def snakemake_logs() -> set[Path]:
    return set((REPO / ".snakemake" / "log").glob("*.snakemake.log"))


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory, work: Path) -> Path:
    root = tmp_path_factory.mktemp("uptodate")
    shutil.copy(TEMPLATE / "my_kernel.c", root)
    shutil.copy(TEMPLATE / "my_kernels.yaml", root)
    (root / "sweep.yaml").write_text(sweep_yaml(root, work / "build", [128]))
    ok(sweep(root))
    assert (root / "results" / uptodate.NAME).is_file()
    return root


@pytest.mark.exclusive  # no other test's Snakemake may write a log meanwhile
@pytest.mark.slow
def test_a_rerun_with_nothing_changed_starts_no_snakemake_and_writes_nothing(own: Path, work: Path) -> None:
    """Before: every re-run started Snakemake (1.1-1.2 s before it reads the workflow) and
    rewrote the report and the record of the good set."""
    settled(own)
    before, logs = listing(own / "results", work / "build"), snakemake_logs()
    proc = sweep(own)
    assert answered(own, proc), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert listing(own / "results", work / "build") == before
    assert snakemake_logs() == logs


@contextlib.contextmanager
def record_put_back(own: Path) -> Iterator[Path]:
    """The clone's up-to-date record, written back as it was after the block, whatever the
    block did to it: the tests that ask the check in-process leave the sweep as they found it."""
    record = own / "results" / uptodate.NAME
    kept = record.read_bytes()
    try:
        yield record
    finally:
        record.write_bytes(kept)


@pytest.mark.slow
def test_the_answer_imports_neither_pandas_nor_snakemake(own: Path) -> None:
    """cli's own imports (pandas, the report) cost more than the whole answer: it comes first."""
    settled(own)
    proc = subprocess.run([PY, "-X", "importtime", "-m", "analysis.commands.cli", "sweep", "--config",
                           str(own / "sweep.yaml")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    modules = {ln.split("|")[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    assert "analysis.commands.uptodate" in modules
    assert not {m.split(".")[0] for m in modules} & {"pandas", "numpy", "matplotlib", "snakemake", "jsonschema"}


@pytest.mark.slow
def test_an_edited_kernel_source_is_rebuilt(own: Path, work: Path) -> None:
    settled(own)
    src, obj = own / "my_kernel.c", work / "build" / OBJECT
    built = obj.stat().st_mtime_ns
    src.write_text(src.read_text() + "/* edited */\n")
    fell_through(own, sweep(own))
    assert obj.stat().st_mtime_ns != built
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_source_edited_behind_its_old_mtime_still_goes_to_snakemake(own: Path) -> None:
    """The content is watched, not only the times (Snakemake itself, by mtime, then finds
    nothing to do: its answer, not this check's)."""
    settled(own)
    src = own / "my_kernel.c"
    st, text = src.stat(), src.read_text()
    # One letter of a comment: the same size, inode and times, other bytes.
    src.write_text(text.replace("Template for", "template for", 1))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert src.read_text() != text and src.stat().st_size == st.st_size
    try:
        assert not answers(own)
    finally:
        src.write_text(text)
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert answered(own, sweep(own))  # the source as it was: the same record answers


@pytest.mark.slow
def test_an_edited_figure_title_is_drawn_again(own: Path) -> None:
    """A change of the sweep file that moves no count (a figure's title, a check's cause, a
    threshold) is drawn again: the figures and summary.md are written anew. Before, the plot rule
    took only the counts as input, so the fast path went to Snakemake, which found nothing to do
    and left the old summary (a verdict cause edited in configs/default.yaml stayed stale)."""
    settled(own)
    text = (own / "sweep.yaml").read_text()
    old, new = ('title: "scale"', 'title: "scale, again"') if 'title: "scale"' in text else ('title: "scale, again"', 'title: "scale"')
    summary = own / "results" / "summary.md"
    before = summary.stat().st_mtime_ns
    time.sleep(0.05)
    (own / "sweep.yaml").write_text(text.replace(old, new))
    ok(sweep(own))
    assert summary.stat().st_mtime_ns > before


@pytest.mark.slow
def test_an_edited_sweep_file_is_swept(own: Path, work: Path) -> None:
    settled(own)
    vls = [128] if yaml.safe_load((own / "sweep.yaml").read_text())["vector_lengths"] == [128, 256] else [128, 256]
    (own / "sweep.yaml").write_text(sweep_yaml(own, work / "build", vls))
    fell_through(own, sweep(own))
    counts = table.read_counts(own / "results" / "counts.csv")
    assert sorted(set(counts["vl"])) == vls
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_kernel_table_link_pointed_elsewhere_goes_to_snakemake(own: Path) -> None:
    """The files a sweep names are watched as it names them: a link moved to another file is a
    change, though the file it pointed to is not."""
    settled(own)
    named, record = own / "my_kernels.yaml", own / "results" / uptodate.NAME
    kept = record.read_bytes()
    (own / "v2.yaml").write_text(named.read_text().replace('label: "', 'label: "v2: ', 1))
    named.rename(own / "v1.yaml")  # the same file (content, times, inode), now behind a link
    named.symlink_to("v1.yaml")
    try:
        recorded(own)  # a sweep that finished with the link so
        assert answers(own)
        named.unlink()
        named.symlink_to("v2.yaml")
        assert not answers(own)
    finally:
        named.unlink()
        (own / "v1.yaml").rename(named)
        record.write_bytes(kept)
    assert answered(own, sweep(own))

@pytest.mark.slow
def test_a_deleted_table_is_made_again(own: Path) -> None:
    settled(own)
    counts = own / "results" / "counts.csv"
    data = counts.read_bytes()
    counts.unlink()
    fell_through(own, sweep(own))
    assert counts.read_bytes() == data
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_touched_raw_file_goes_to_snakemake(own: Path) -> None:
    settled(own)
    raw = own / "results" / RAW
    later = raw.stat().st_mtime_ns + 10**9
    os.utime(raw, ns=(later, later))
    fell_through(own, sweep(own))
    assert (own / "results" / "counts.csv").stat().st_mtime_ns > later  # collected again from it
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_failed_run_leaves_no_record(own: Path) -> None:
    """A raw file edited behind the harness's back stops the sweep at collect; the record went
    before Snakemake started, and the run after the repair goes to Snakemake."""
    settled(own)
    raw = own / "results" / RAW
    data = raw.read_bytes()
    raw.write_bytes(data.replace(b'"total": ', b'"total": 9', 1))
    try:
        failed = sweep(own)
        assert failed.returncode != 0 and "up to date" not in failed.stdout, failed.stdout[-2000:]
        assert not (own / "results" / uptodate.NAME).exists()
    finally:
        raw.write_bytes(data)
    fell_through(own, sweep(own))
    assert answered(own, sweep(own))


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    pytest.param(("--set", "results_dir={results}"), id="an override (the same folder, said again)"),
    pytest.param(("--", "counts_all"), id="a target"),
])
def test_another_command_goes_to_snakemake(own: Path, args: tuple[str, ...]) -> None:
    """The check's decision: the record holds its command (a sweep of it is below)."""
    settled(own)
    args = tuple(a.format(results=own / "results") for a in args)
    with record_put_back(own):
        assert not answers(own, *args)
        recorded(own, *args)
        assert answers(own, *args)
        assert not answers(own)  # the record is that command's now, not the plain one's
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_target_goes_to_snakemake_and_is_answered_after(own: Path) -> None:
    """End to end: the command with a target runs Snakemake, its sweep records that command."""
    settled(own)
    fell_through(own, sweep(own, "--", "counts_all"))
    assert answered(own, sweep(own, "--", "counts_all"))
    fell_through(own, sweep(own))  # the record is that command's now, not the plain one's


@pytest.mark.slow
def test_a_changed_environment_goes_to_snakemake(own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GEM5 (where gem5 is found), as every variable the workflow reads. The check's decision."""
    settled(own)
    with record_put_back(own):
        with monkeypatch.context() as m:
            m.setenv("GEM5", "none")
            assert not answers(own)
            recorded(own)
            assert answers(own)
        assert not answers(own)  # without it again
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_replaced_tool_goes_to_snakemake(own: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same PATH, but qemu-aarch64 on it is another file (an upgrade replaces it). The
    check's decision."""
    settled(own)
    with record_put_back(own):
        with monkeypatch.context() as m:
            m.setenv("PATH", path_without(tmp_path / "bin"))
            recorded(own)
            assert answers(own)
            link = tmp_path / "bin" / "qemu-aarch64"
            real = link.resolve()
            link.unlink()
            shutil.copy2(real, link)  # the same bytes and mtime; another file
            assert not answers(own)
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_folder_another_command_holds_is_refused_as_before(own: Path) -> None:
    """Not answered while another command writes the folder: the normal path names it, and
    the record stays (the refused run touched nothing)."""
    settled(own)
    holder = subprocess.Popen([PY, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from analysis.commands import keep; from pathlib import Path;"
                               "lock = keep.ResultsLock(Path(sys.argv[2])); lock.acquire('the holder'); print('held', flush=True);"
                               "time.sleep(120)", str(REPO), str(own / "results")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = sweep(own)
        assert proc.returncode == 2 and "another command is writing" in proc.stderr and "the holder" in proc.stderr, \
            proc.stdout + proc.stderr
    finally:
        holder.kill()
        holder.wait()
    assert answered(own, sweep(own))


@pytest.mark.exclusive
@pytest.mark.slow
def test_a_snakemake_lock_in_the_tree_goes_to_snakemake(own: Path) -> None:
    """Another Snakemake may be writing the shared build folder; a stale lock is taken over by
    the normal path, with its line."""
    settled(own)
    locks = REPO / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.output.lock").write_text(f"{own / 'results' / 'counts.csv'}\n")
    proc = sweep(own)
    fell_through(own, proc)
    assert "took over the Snakemake lock" in proc.stderr
    assert answered(own, sweep(own))


@pytest.mark.exclusive
@pytest.mark.slow
def test_a_lock_of_another_sweeps_folders_is_none_of_its_business(own: Path, work: Path, tmp_path: Path) -> None:
    """Before: any lock in the tree (another sweep running into its own folders) made every
    up-to-date sweep of the clone go to Snakemake. One naming the shared build folder still does."""
    settled(own)
    locks = REPO / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    try:
        (locks / "0.output.lock").write_text(f"{tmp_path / 'results' / 'counts.csv'}\nkernels/x.c\n")
        assert answered(own, sweep(own))
        (locks / "1.input.lock").write_text(f"{own / 'other'}\n{own.parent / 'build' / 'gcc' / 'x.o'}\n")
        assert answered(own, sweep(own))
        (locks / "1.input.lock").write_text(f"{work / 'build' / 'gcc' / 'vla' / 'bin' / 'x'}\n")
        assert not answers(own)  # the decision; test_a_snakemake_lock_in_the_tree_goes_to_snakemake runs it
    finally:
        shutil.rmtree(locks, ignore_errors=True)
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_snakemake_profile_goes_to_snakemake(own: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile can set any option, and its content is not watched: never answered with one,
    and a sweep with one writes no record. The check's decision and the record's."""
    settled(own)
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "config.yaml").write_text("printshellcmds: true\n")
    with record_put_back(own) as record:
        with monkeypatch.context() as m:
            m.setenv("SNAKEMAKE_PROFILE", str(tmp_path / "profile"))
            assert not answers(own)
            record.unlink()  # as the sweep's keep.take does
            recorded(own)
            assert not record.exists()
            assert not answers(own)
    assert answered(own, sweep(own))


@pytest.mark.slow
def test_a_dry_run_neither_answers_nor_writes_a_record(own: Path) -> None:
    settled(own)
    record = own / "results" / uptodate.NAME
    kept = record.read_bytes()
    proc = sweep(own, "--", "--dry-run")
    ok(proc)
    assert "Nothing to be done" in proc.stdout + proc.stderr and "up to date (" not in proc.stdout
    assert record.read_bytes() == kept
    record.unlink()
    ok(sweep(own, "--", "-n"))
    assert not record.exists()
    record.write_bytes(kept)
    assert answered(own, sweep(own))  # the dry runs wrote nothing the record watches


def test_a_dry_run_keeps_no_log_of_another_snakemake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A dry run writes no Snakemake log (Snakemake logs to a file only when it runs jobs), so a
    log new in .snakemake/log is another Snakemake's of the clone, here one that wrote its log
    while the dry run ran. The dry run copied it to its own results/logs/snakemake.log: a command
    that writes nothing wrote into its results folder, and the up-to-date record no longer
    answered (test_a_dry_run_neither_answers_nor_writes_a_record failed whenever the other xdist
    worker's Snakemake finished meanwhile)."""
    logs = tmp_path / "log"
    logs.mkdir()
    monkeypatch.setattr("analysis.commands.sweep.SNAKEMAKE_LOGS", logs)

    def another_snakemake_logs_meanwhile(cmd: list[str], **kwargs: object) -> int:
        assert "--dry-run" in cmd
        (logs / "2026-11-26T141014.123456.snakemake.log").write_text("another sweep's Snakemake\n")
        return 0

    monkeypatch.setattr("analysis.commands.guard.run", another_snakemake_logs_meanwhile)
    results = tmp_path / "results"
    ns = cli.parse_args(["sweep", "--config", str(REPO / "configs" / "tiny.yaml"), "--set", f"results_dir={results}",
                         "--set", f"build_dir={tmp_path / 'build'}", "--", "--dry-run"])
    assert cmd_sweep(ns) == 0
    assert "full log" not in capsys.readouterr().out
    assert not results.exists()


def test_a_command_that_takes_the_folder_removes_the_record_first(tmp_path: Path) -> None:
    """keep.take, before anything else (sweep and regress): a run stopped at any point after it
    leaves no record, so nothing says the folder is up to date."""
    (tmp_path / uptodate.NAME).write_text("{}\n")
    lock, _kept, _lines = keep.take(tmp_path, "test")
    try:
        assert not (tmp_path / uptodate.NAME).exists()
    finally:
        lock.release()
    assert uptodate.LOCK == keep.LOCK


@pytest.mark.parametrize("argv", [
    ["sweep"], ["sweep", "--config", "c.yaml"], ["sweep", "--config=c.yaml", "--cores=3"],
    ["sweep", "--set", "a=b", "--set=c=d", "--", "t1", "t2"], ["sweep", "t1", "t2"], ["sweep", "--cores", "2", "--"],
    ["sweep", "--", "t1", "--dry-run"], ["sweep", "--", "-n"], ["sweep", "t1", "--config", "x"],
    ["sweep", "--verbose"], ["sweep", "--conf", "c.yaml"], ["sweep", "--config"], ["sweep", "--config", "-x"],
    ["sweep", "--cores", "0"], ["sweep", "--cores", "two"], ["sweep", "--slurm"], ["sweep", "--set", "novalue"],
    ["sweep", "--", "--", "t"], ["sweep", "--config=", "--"], ["validate"], [],
])
def test_the_command_line_is_read_as_cli_reads_it(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """What the check reads of a command line, it reads as argparse does; the rest it leaves."""
    got = uptodate.parse(argv)
    try:
        ns = cli.parse_args(argv)
    except SystemExit:
        assert got is None
        return
    if got is not None:
        assert ns.cmd == "sweep" and ns.slurm is None and not ns.verbose
        assert got == sweep_command(ns)
        assert getattr(ns, "cores", 1) >= 1



def test_the_lock_and_the_record_are_left_out_wherever_the_results_folder_lies(tmp_path: Path) -> None:
    """The lock is rewritten by every command that takes it and the record is written after its
    digests: inside the build folder too (results_dir under build_dir), neither may count."""
    results = tmp_path / "build" / "results"
    (results / "sub").mkdir(parents=True)
    for name in (keep.LOCK, uptodate.NAME, f".{uptodate.NAME}.tmp123", "x", "sub/.lock"):
        (results / name).write_text("")
    for top in (tmp_path / "build", results):
        walked = {str(top / rel) for rel, _kind, _ident in watched._walk(top, str(results))}
        assert walked >= {str(results / "x"), str(results / "sub" / ".lock")}, walked
        assert not walked & {str(results / n) for n in (keep.LOCK, uptodate.NAME, f".{uptodate.NAME}.tmp123")}, walked
