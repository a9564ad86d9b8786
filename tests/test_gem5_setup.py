"""gem5 in one command: setup/gem5.sh's bad inputs (exit 2, one line, nothing created under
the cache), a failed build naming its log, a second call doing nothing, and the order in
which every sweep finds gem5 (GEM5, gem5.binary, the built cache). Every case runs against
its own HARNESS_CACHE; build tools are stubs, so none of this builds gem5."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from analysis.backends import gem5
from analysis.core import config
from conftest import REPO, path_without

GEM5_SH = REPO / "setup" / "gem5.sh"
VERSION = "v24.0.0.1"
COMMIT = "b1a44b89c7bae73fae2dc547bc1f871452075b85"
PATCH = REPO / "setup" / "patches" / f"gem5-{VERSION}-sve-switch.patch"
# What the stamp of a build of the patched source names.
BUILD_ID = f"{COMMIT}+patch-{hashlib.sha256(PATCH.read_bytes()).hexdigest()[:16]}"


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An empty cache and stub build tools (scons fails like a broken SConstruct would)."""
    tools = tmp_path / "tools"
    for name in ("g++", "m4", "python3-config"):
        _exe(tools / name, "#!/bin/sh\nexit 0\n")
    _exe(tools / "scons", "#!/bin/sh\necho \"scons: *** SConstruct: deliberate failure\" >&2\nexit 2\n")
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("GEM5", "GEM5_SRC", "GEM5_VERSION", "GEM5_NEED_GIB")}
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache"), "PATH": f"{tools}:{os.environ['PATH']}"}


def run(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(GEM5_SH), *args], capture_output=True, text=True, env={**env, **extra}, timeout=60)


def unpatched_lines(patch: Path) -> dict[str, list[str]]:
    """Each file the patch changes, as the lines its hunks expect before the change."""
    files: dict[str, list[str]] = {}
    name = ""
    for line in patch.read_text().splitlines():
        if line.startswith("--- a/"):
            name = line[len("--- a/"):]
            files[name] = []
        elif name and line.startswith((" ", "-")) and not line.startswith("---"):
            files[name].append(line[1:])
    return files


def plain_source(root: Path, version: str = VERSION[1:]) -> Path:
    """A gem5-shaped tree (not a git checkout) that says the pinned version and takes the patch."""
    (root / "src" / "base").mkdir(parents=True)
    (root / "SConstruct").write_text("Exit(1)\n")
    (root / "src" / "base" / "version.cc").write_text(f'const char *gem5Version = "{version}";\n')
    for name, lines in unpatched_lines(PATCH).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("\n".join(lines) + "\n")
    return root


def test_where_is_under_the_cache_and_path_says_not_built_until_it_is(env: dict[str, str]) -> None:
    """--path answers "is it built": before a build it printed the future path with rc 0, and a
    caller that trusted it ran a binary that did not exist."""
    proc = run(env, "--where")
    assert proc.returncode == 0
    binary = Path(f"{env['HARNESS_CACHE']}/gem5-{VERSION}/src/build/ARMNR/gem5.fast")
    assert proc.stdout == f"{binary}\n"
    proc = run(env, "--path")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"setup/gem5.sh: gem5 {VERSION} is not built (it would be {binary}; "
                           "fix: ./harness setup --with-gem5)\n")
    _exe(binary, "#!/bin/sh\n")  # a build that stopped before its stamp is not built either
    assert run(env, "--path").returncode == 1
    # A build of the unpatched source (every build before the patch) loses the SVE predicates
    # at a CPU switch: --path does not answer for it.
    stamp = binary.parents[3] / "installed"
    stamp.write_text(f"version={VERSION}\ncommit={COMMIT}\n")
    proc = run(env, "--path")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"setup/gem5.sh: gem5 {VERSION} at {binary} was built without the harness's current "
                           "patch (fix: ./harness setup --with-gem5; it rebuilds what the patch changes)\n")
    stamp.write_text(f"version={VERSION}\ncommit={BUILD_ID}\n")
    proc = run(env, "--path")
    assert (proc.returncode, proc.stdout) == (0, f"{binary}\n")


@pytest.mark.parametrize("case", ["unknown version", "not enough disk", "source at another commit", "not gem5",
                                  "patch of another commit", "patch missing"])
def test_bad_input_exits_2_in_one_line_creating_nothing(env: dict[str, str], tmp_path: Path, case: str) -> None:
    extra: dict[str, str] = {}
    if case == "unknown version":
        extra, expect = {"GEM5_VERSION": "v23.1.0.0"}, f"unknown gem5 version 'v23.1.0.0'; this harness pins {VERSION}"
    elif case == "not enough disk":
        extra, expect = {"GEM5_NEED_GIB": "1000000"}, "the gem5 build needs 1000000 GiB; free space or set HARNESS_CACHE"
    elif case == "source at another commit":
        src = plain_source(tmp_path / "src")
        git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", "init", "-q", str(src)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "other"], check=True)
        have = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        extra, expect = {"GEM5_SRC": str(src)}, f"is at commit {have}, not {VERSION} ({COMMIT}); check out {VERSION}"
    elif case == "not gem5":
        src = plain_source(tmp_path / "src", version="23.1.0.0")
        extra, expect = {"GEM5_SRC": str(src)}, f"is not gem5 {VERSION}"
    elif case == "patch of another commit":
        other = tmp_path / "other.patch"
        other.write_text(PATCH.read_text().replace(f"Base-commit: {COMMIT}", "Base-commit: " + "0" * 40))
        extra, expect = {"GEM5_PATCH": str(other)}, f"it was made against gem5 commit {'0' * 40}, not {VERSION}"
    else:
        extra, expect = {"GEM5_PATCH": str(tmp_path / "gone.patch")}, "gone.patch is missing; restore it from git"
    # Without gem5's build tools (a machine that never ran --with-gem5): bad input needs none.
    bare = path_without(tmp_path / "bare", "scons", "g++", "m4", "python3-config")
    proc = run(env, PATH=bare, **extra)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("setup/gem5.sh: ") and expect in lines[0], proc.stderr
    assert list(Path(env["HARNESS_CACHE"]).iterdir()) == []


def test_failed_build_names_its_log_in_one_line(env: dict[str, str], tmp_path: Path) -> None:
    src = plain_source(tmp_path / "src")
    proc = run(env, GEM5_SRC=str(src))
    log = Path(env["HARNESS_CACHE"]) / f"gem5-{VERSION}" / "build.log"
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == f"setup/gem5.sh: the gem5 build failed; see {log}"
    assert "deliberate failure" in log.read_text()
    assert not (log.parent / "installed").exists()


def test_the_source_is_patched_once_and_a_source_that_refuses_the_patch_is_not_built(
        env: dict[str, str], tmp_path: Path) -> None:
    """The patch (SVE predicates across a CPU switch) goes into the cache's copy, once: a resumed
    build finds it applied; the given source is left as it was; a tree it does not apply to is
    refused before scons, in one line."""
    src = plain_source(tmp_path / "src")
    before = {p: p.read_text() for p in src.rglob("*") if p.is_file()}
    cached = Path(env["HARNESS_CACHE"]) / f"gem5-{VERSION}" / "src"
    proc = run(env, GEM5_SRC=str(src))
    assert "setup/gem5.sh: patched the source: " + PATCH.name in proc.stderr.splitlines()
    isa = (cached / "src/arch/arm/isa.cc").read_text()
    assert "for (auto &id: vecPredRegClass) {" in isa
    assert {p: p.read_text() for p in src.rglob("*") if p.is_file()} == before
    proc = run(env, GEM5_SRC=str(src))  # the cache's source is kept: a resumed build
    assert f"setup/gem5.sh: the source is patched already ({PATCH.name})" in proc.stderr.splitlines()
    assert (cached / "src/arch/arm/isa.cc").read_text() == isa
    # A new version of the patch (here: one more line) replaces the one applied, not refused.
    newer = tmp_path / "newer.patch"
    newer.write_text(PATCH.read_text().replace("+    ArmISA::VecPredRegContainer pc;\n",
                                               "+    ArmISA::VecPredRegContainer pc;\n+    // newer\n")
                     .replace("@@ -208,6 +208,14 @@", "@@ -208,6 +208,15 @@"))
    proc = run(env, GEM5_SRC=str(src), GEM5_PATCH=str(newer))
    assert proc.stderr.splitlines()[:2] == ["setup/gem5.sh: took the earlier patch out of the source",
                                            "setup/gem5.sh: patched the source: newer.patch"], proc.stderr
    assert (cached / "src/arch/arm/isa.cc").read_text().count("// newer") == 1
    proc = run(env, GEM5_SRC=str(src))  # and back
    assert "setup/gem5.sh: patched the source: " + PATCH.name in proc.stderr.splitlines()
    assert (cached / "src/arch/arm/isa.cc").read_text() == isa
    # A tree the patch does not fit: scons (the stub records its start) never runs.
    (cached / "src/arch/arm/isa.cc").write_text("// another gem5\n")
    marker = tmp_path / "scons-ran"
    _exe(Path(env["PATH"].split(":")[0]) / "scons", f"#!/bin/sh\ntouch {marker}\nexit 2\n")
    proc = run(env, GEM5_SRC=str(src))
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"setup/gem5.sh: refusing {PATCH}: it does not apply to {cached} ")
    assert not marker.exists()


def test_second_call_does_nothing_when_the_stamp_matches(env: dict[str, str]) -> None:
    binary = Path(run(env, "--where").stdout.strip())
    _exe(binary, "#!/bin/sh\nexit 0\n")
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    stamp = binary.parents[3] / "installed"
    stamp.write_text(f"version={VERSION}\ncommit={BUILD_ID}\nsha256={sha}\n")
    before = sorted(p.relative_to(binary.parents[3]) for p in binary.parents[3].rglob("*"))
    # No build tool is reachable: a second call must not need one.
    proc = run(env, PATH="/usr/bin:/bin", GEM5_SRC="/nonexistent")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"setup/gem5.sh: gem5 {VERSION} is built: {binary}\n"
    assert sorted(p.relative_to(binary.parents[3]) for p in binary.parents[3].rglob("*")) == before
    # A binary that no longer matches its stamp is rebuilt (here: the stub scons fails).
    binary.write_text("#!/bin/sh\nexit 1\n")
    assert run(env, GEM5_SRC="/nonexistent").returncode != 0


def test_sweeps_find_gem5_in_order_env_config_cache(env: dict[str, str], tmp_path: Path, monkeypatch) -> None:
    for k in ("GEM5", "HARNESS_CACHE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HARNESS_CACHE", env["HARNESS_CACHE"])
    sweep = config.load(REPO / "configs" / "default.yaml")
    assert sweep.gem5 is not None and sweep.gem5.binary is None
    cached = Path(run(env, "--where").stdout.strip())
    assert gem5.cached_gem5() is None and gem5.cached_gem5_place() == cached
    assert gem5.find_gem5(sweep) is None
    assert f"gem5 is not built at {cached}" in gem5.skipped_message(sweep)
    assert "./harness setup --with-gem5" in gem5.skipped_message(sweep)
    _exe(cached, "#!/bin/sh\n")
    # Built before the patch: the cycle sweep is skipped, saying why and what rebuilds it.
    (cached.parents[3] / "installed").write_text(f"version={VERSION}\ncommit={COMMIT}\n")
    assert gem5.find_gem5(sweep) is None
    assert gem5.skipped_message(sweep) == (
        f"gem5: cycle sweep skipped (gem5 at {cached} was built without the harness's current patch, "
        "setup/patches/); to run it, ./harness setup --with-gem5 rebuilds what the patch changes (about a minute "
        "on 2 cores)")
    (cached.parents[3] / "installed").write_text(f"version={VERSION}\ncommit={BUILD_ID}\n")
    assert gem5.find_gem5(sweep) == cached
    configured = _exe(tmp_path / "configured" / "gem5.fast", "#!/bin/sh\n")
    sweep.gem5 = dataclasses.replace(sweep.gem5, binary=str(configured))
    assert gem5.find_gem5(sweep) == configured
    from_env = _exe(tmp_path / "env" / "gem5.fast", "#!/bin/sh\n")
    monkeypatch.setenv("GEM5", str(from_env))
    assert gem5.find_gem5(sweep) == from_env
    # A named binary that is missing is reported, not silently replaced by the cached one.
    monkeypatch.setenv("GEM5", str(tmp_path / "missing"))
    assert gem5.find_gem5(sweep) is None
    assert "missing is not an executable file" in gem5.skipped_message(sweep)
    monkeypatch.setenv("GEM5", "none")
    assert gem5.find_gem5(sweep) is None
    assert gem5.skipped_message(sweep) == "gem5: cycle sweep skipped (GEM5=none)"


def test_check_with_gem5_names_the_missing_build(env: dict[str, str]) -> None:
    """`setup --check --with-gem5` lists an unbuilt gem5 among what is missing (it used to be
    appended after the list was printed, so the check passed without gem5)."""
    proc = subprocess.run([str(REPO / "setup" / "install.sh"), "--check", "--with-gem5"], capture_output=True,
                          text=True, env=env, timeout=120)
    cached = run(env, "--where").stdout.strip()
    assert proc.returncode == 1
    assert f"  - gem5 not built at {cached} (fix: setup/install.sh --with-gem5)" in proc.stdout.splitlines()
