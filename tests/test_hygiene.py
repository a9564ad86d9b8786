"""The suite leaves nothing behind (tests/hygiene.py, checked by conftest at every session's
end), and the check can fail: a leaked staging directory of the session, a file written into
the repository's results/, a __pycache__ beside the sources are each reported; other
sessions' staging directories and what is allowed are not."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import hygiene
from analysis import backends
from analysis.commands import cli
from conftest import PY, REPO


def git_tree(root: Path) -> Path:
    """A small checkout shaped like the repository: sources, results/golden, the .gitignore."""
    (root / "analysis").mkdir(parents=True)
    (root / "analysis" / "m.py").write_text("x = 1\n")
    (root / "results" / "golden").mkdir(parents=True)
    (root / "results" / "golden" / "g.csv").write_text("a\n")
    shutil.copy(REPO / ".gitignore", root / ".gitignore")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    return root


def test_what_is_left_in_the_tree_is_reported(tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo")
    (root / "results" / "mine").mkdir()
    (root / "results" / "mine" / "old.csv").write_text("from a sweep before the session\n")
    before = hygiene.snapshot(root, pycache_checked=True)
    # The session: a result beside an old one, an old one rewritten, the golden file touched,
    # bytecode beside a source, a forgotten file; and what is allowed (.venv, .snakemake).
    (root / "results" / "mine" / "new.csv").write_text("x\n")
    os.utime(root / "results" / "mine" / "old.csv", ns=(1, 1))
    (root / "results" / "golden" / "g.csv").write_text("b\n")
    (root / "build" / "gcc").mkdir(parents=True)
    (root / "build" / "gcc" / "k.o").write_text("")
    (root / "analysis" / "__pycache__").mkdir()
    (root / "analysis" / "__pycache__" / "m.cpython-311.pyc").write_text("")
    (root / "analysis" / "forgotten.txt").write_text("")
    for allowed in (".venv", ".snakemake"):
        (root / allowed).mkdir()
        (root / allowed / "f").write_text("")
    left = hygiene.leftovers(root, before, "no-such-tag")
    assert left == ["build/gcc/k.o written in the repository",
                    "results/golden/g.csv written in the repository",
                    "results/mine/new.csv written in the repository",
                    "results/mine/old.csv written in the repository",
                    "analysis/__pycache__/ is new in the repository (ignored)",
                    "analysis/forgotten.txt is new in the repository (untracked)"], left
    # Run without a bytecode prefix, Python itself writes __pycache__: not the session's doing.
    unchecked = hygiene.leftovers(root, hygiene.Snapshot(before.untracked, before.outputs, False), "no-such-tag")
    assert "analysis/__pycache__/ is new in the repository (ignored)" not in unchecked and len(unchecked) == 5


def test_nothing_left_is_nothing_reported(tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo")
    before = hygiene.snapshot(root, pycache_checked=True)
    assert hygiene.leftovers(root, before, "no-such-tag") == []


def test_only_the_sessions_own_staging_directories_count(monkeypatch) -> None:
    """A staging directory carries the session's tag while it exists and is gone afterwards; one
    of another session (another tag, or none) in the shared /tmp is never counted."""
    tag = f"test-hygiene-{os.getpid()}"
    monkeypatch.setenv(backends.STAGE_TAG_ENV, tag)
    with backends.staged(Path(sys.executable)) as exe:
        assert hygiene.own_stages(tag) == [exe.parent]
        assert (exe.parent / backends.OWNER_FILE).read_text() == f"{os.getpid()} {backends.started(os.getpid())}\n{tag}\n"
    assert hygiene.own_stages(tag) == []
    other = Path(tempfile.mkdtemp(prefix=backends.STAGE_PREFIX, dir=backends.STAGE_ROOT))
    try:
        (other / backends.OWNER_FILE).write_text("1\nanother-session\n")
        assert other not in hygiene.own_stages(tag) and hygiene.own_stages("another-session") == [other]
        # A tagged owner file is still a stale directory's owner (the pid comes first).
        (other / backends.OWNER_FILE).write_text(f"{2 ** 22 + 1}\n{tag}\n")  # above pid_max: never alive
        assert other in backends.clean_stale_stages() and not other.exists()
    finally:
        shutil.rmtree(other, ignore_errors=True)


LEAKING_TEST = """\
import os, tempfile
from pathlib import Path
from analysis import backends

def test_leaks_a_staging_directory():
    d = Path(tempfile.mkdtemp(prefix=backends.STAGE_PREFIX, dir=backends.STAGE_ROOT))
    (d / backends.OWNER_FILE).write_text(f"{os.getpid()}\\n{os.environ[backends.STAGE_TAG_ENV]}\\n")
    (Path(os.environ["LEAKED"])).write_text(str(d))
"""


def test_a_session_that_leaks_fails(tmp_path: Path) -> None:
    """The conftest's check, end to end: a session whose one test passes but leaves a staging
    directory exits non-zero, naming the directory."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""\
        import importlib.util, sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        spec = importlib.util.spec_from_file_location("suite_conftest", {str(REPO / 'tests' / 'conftest.py')!r})
        suite = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = suite  # as importlib's recipe says: dataclasses look their module up there
        spec.loader.exec_module(suite)
        leaves_nothing_behind = suite.leaves_nothing_behind
        """))
    (tmp_path / "test_leak.py").write_text(LEAKING_TEST)
    leaked = tmp_path / "leaked"
    env = {**os.environ, "LEAKED": str(leaked), "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    proc = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    stage = Path(leaked.read_text())
    try:
        assert proc.returncode == 1, proc.stdout[-3000:]
        assert "1 passed, 1 error" in proc.stdout and f"staging directory {stage}" in proc.stdout, proc.stdout[-3000:]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def test_the_test_command_keeps_pytests_cache_out_of_the_tree(monkeypatch) -> None:
    """`./harness test` gives pytest a cache directory under .venv: .pytest_cache is written
    after the session's own check, beside the sources unless told otherwise."""
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 1)
    assert cli.main(["test", "-q"]) == 1
    (cmd,) = calls
    assert cmd[cmd.index("-o") + 1] == f"cache_dir={REPO / '.venv' / 'pytest-cache'}", cmd


def test_a_venv_that_is_a_symlink_is_ignored_too() -> None:
    """A worktree links .venv to another tree's venv: `git add -A` committed the link, and the
    merge replaced main's venv by a link to itself. Asked as a file, not a folder."""
    out = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "-v", ".venv"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


HANGING_TEST = """\
import subprocess
from analysis.core import arm64_vm

def test_hangs_on_a_child(tmp_path):
    # As a guest batch waits for QEMU: inside `with Popen`, whose __exit__ waits for the child.
    with subprocess.Popen(["sleep", "600"], preexec_fn=arm64_vm._die_with_parent) as child:
        open({pidfile!r}, "w").write(str(child.pid))
        child.communicate()
"""


@pytest.mark.slow
def test_a_hanging_test_is_ended_and_named_and_its_child_dies(tmp_path: Path) -> None:
    """CI once ran out of its 90 minutes with no test named. pytest.ini's timeout ends a hung
    test (here after 3 s instead of the suite's 900) and names it; the thread method ends even
    a test blocked in Popen's __exit__, and the child dies with the test's process."""
    pidfile = tmp_path / "child.pid"
    (tmp_path / "test_hang.py").write_text(HANGING_TEST.format(pidfile=str(pidfile)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    proc = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pytest.ini"),
                           "--rootdir", str(tmp_path), "-o", "timeout=3", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Timeout" in out and "test_hangs_on_a_child" in out, out[-3000:]
    child = int(pidfile.read_text())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists(), f"the hung test's child {child} outlived it"


def test_the_suite_bounds_every_test(request: pytest.FixtureRequest) -> None:
    assert (request.config.getini("timeout"), request.config.getini("timeout_method")) == ("900", "thread")
