"""The markers say what each test needs (tests/markers.py), and cannot drift: every collected
test carries the markers its fixtures imply, the table knows every fixture the suite defines,
and the check fails on a test that lacks one. `./harness test --fast` runs the tests not marked
slow, without the regression, and says how long it took."""
from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import markers
from analysis.commands import cli
from conftest import COLLECTED, REPO

TESTS = REPO / "tests"


def test_every_test_carries_the_markers_its_fixtures_imply(request: pytest.FixtureRequest) -> None:
    collected = request.config.stash[COLLECTED]
    assert collected
    missing = markers.missing_markers(collected)
    assert not missing, "\n".join(missing)


def test_the_table_lists_every_fixture_of_the_suite_once() -> None:
    """A new fixture must say what it implies; a fixture's name is the table's key, so no two
    files may define fixtures of the same name."""
    defined = markers.defined_fixtures(sorted(TESTS.glob("*.py")))
    names = [name for _, name in defined]
    assert sorted(set(names)) == sorted(names), [d for d in defined if names.count(d[1]) > 1]
    assert set(names) == set(markers.FIXTURE_MARKS), (set(names) ^ set(markers.FIXTURE_MARKS))


def test_every_marker_is_registered_and_every_need_has_a_probe() -> None:
    assert set(markers.PROBES) == {m for m in markers.MARKERS if m.startswith("needs_")}
    used = {m for marks in markers.FIXTURE_MARKS.values() for m in marks}
    assert used <= set(markers.MARKERS), used - set(markers.MARKERS)


def test_a_need_is_a_marker_not_a_skipif_of_its_own() -> None:
    """The parts the needs_* markers stand for are looked for in one place (their probes): a
    test file's own skipif on one has drifted from its marker."""
    parts = re.compile(r"clang-14|chromium|find_gem5|installed\(\)|slurmctld|munged|perf\.detect")
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("mark.skipif"):
                if parts.search(ast.unparse(node)):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, found


@dataclass
class FakeMark:
    name: str


@dataclass
class FakeItem:
    """What markers.missing_markers reads of a pytest item."""
    nodeid: str
    fixturenames: list[str]
    marks: list[str] = field(default_factory=list)

    def iter_markers(self, name: str | None = None) -> list[FakeMark]:
        return [FakeMark(m) for m in self.marks if name in (None, m)]


def test_the_check_fails_on_a_test_without_the_markers_its_fixtures_imply() -> None:
    items = [FakeItem("t.py::unit", ["tmp_path", "work"]),
             FakeItem("t.py::marked", ["work", "binaries"], ["slow"]),
             FakeItem("t.py::unmarked", ["work", "binaries", "plugin_dir"]),
             FakeItem("t.py::half", ["mpi_bin"], ["slow"])]
    assert markers.missing_markers(items) == [
        "t.py::unmarked: uses binaries, so needs the marker(s) slow",
        "t.py::unmarked: uses plugin_dir, so needs the marker(s) slow",
        "t.py::half: uses mpi_bin, so needs the marker(s) needs_mpi"]


def test_a_test_whose_part_is_missing_is_skipped_with_the_probes_line() -> None:
    lines = {"needs_mpi": "no MPI here (run ./harness setup --with-mpi)", "needs_clang": None}
    asked = []

    def missing(marker: str) -> str | None:
        asked.append(marker)
        return lines[marker]

    assert markers.unmet_need(FakeItem("t.py::plain", [], ["slow"]), missing) is None
    assert markers.unmet_need(FakeItem("t.py::clang", [], ["needs_clang"]), missing) is None
    assert markers.unmet_need(FakeItem("t.py::both", [], ["needs_clang", "needs_mpi"]), missing) == lines["needs_mpi"]
    assert set(asked) == {"needs_clang", "needs_mpi"}  # only the parts some test needs are looked for
    # On this machine: every probe answers with nothing missing or one line naming the fix.
    for marker, probe in markers.PROBES.items():
        why = probe()
        assert why is None or (why.strip() and "\n" not in why), (marker, why)


def test_fixtures_are_found_however_they_are_declared(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("import pytest\n\n@pytest.fixture\ndef a(): pass\n\n"
                                        "@pytest.fixture(scope='module')\ndef b(): pass\n\ndef c(): pass\n")
    assert markers.defined_fixtures([tmp_path / "test_x.py"]) == [("test_x.py", "a"), ("test_x.py", "b")]


def test_fast_runs_the_tests_not_marked_slow_without_the_regression(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[list[str]] = []
    regressed: list[list[str]] = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 0)
    monkeypatch.setattr(cli.regress, "main", lambda argv: regressed.append(argv) or 0)
    for argv in (["test", "--fast", "-q"], ["test", "-q", "-k", "hygiene", "--fast"]):
        assert cli.main(argv) == 0
        cmd = calls.pop()
        # pytest's own options follow, so that a -m of the user's replaces --fast's.
        assert cmd[cmd.index("not slow") - 1:] == ["-m", "not slow", *(a for a in argv[1:] if a != "--fast")], cmd
        out = capsys.readouterr().out
        assert re.fullmatch(r'test --fast: [0-9.]+ s \([0-9.]+ s CPU\), pytest -m "not slow" without the regression; '
                            r"\./harness test runs everything\n", out), out
    assert regressed == []
    # Without --fast: every test, then the regression.
    assert cli.main(["test"]) == 0
    assert "not slow" not in calls.pop() and regressed == [["regress", "--config", "configs/regress.yaml"]]


def test_help_names_the_fast_tier_and_prints_only_its_comment() -> None:
    """`./harness help` printed the script's first line of code (`set -euo pipefail`) too."""
    proc = subprocess.run(["bash", str(REPO / "harness"), "help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "./harness test --fast" in proc.stdout and "pytest -m 'not slow'" in proc.stdout, proc.stdout
    assert "set -euo" not in proc.stdout and not [ln for ln in proc.stdout.splitlines() if ln.startswith("#")]
