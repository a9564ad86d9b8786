"""setup/simeng.sh (issue 54 item 1): SimEng 0.9.6 with Capstone 5.0.1, both patched, built from
pinned commits outside the repository. Its refusals (a source without the pinned commit, a patch
made against another commit, an unknown option) are one line each and create nothing; --where and
--path answer without building. The build itself (about 150 s of CPU) runs only where the pinned
sources are given (SIMENG_SRC, CAPSTONE_SRC: git repositories holding the pinned commits), and its
SimEng must run tests/fixtures/simeng/sve_neon.c as QEMU does: what the patch adds or fixes, one
instruction at a time (an unpatched 0.9.6 gets cmhs and umaxp wrong, then stops at the first ld4b)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

SETUP = REPO / "setup" / "simeng.sh"
SIMENG_PIN = "f2c1feccf4012b79e7ec9d32b3bb42034947f053"
CAPSTONE_PIN = "097c04d9413c59a58b00d4d1c8d5dc0ac158ffaa"
PROGRAM = REPO / "tests" / "fixtures" / "simeng" / "sve_neon.c"
VARS = ("SIMENG_SRC", "CAPSTONE_SRC", "SIMENG_GIT", "CAPSTONE_GIT", "SIMENG_PATCH", "CAPSTONE_PATCH",
        "SIMENG_NEED_GIB")


def setup_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "cache").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in VARS}
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache"), **extra}


def run(env: dict[str, str], *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(SETUP), *args], capture_output=True, text=True, env=env, timeout=timeout)


def cache_files(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["HARNESS_CACHE"]).rglob("*"))


def binary_in(env: dict[str, str]) -> str:
    return f"{env['HARNESS_CACHE']}/simeng-0.9.6/build/src/tools/simeng/simeng"


def test_where_names_the_binary_and_path_says_it_is_not_built(tmp_path: Path) -> None:
    env = setup_env(tmp_path)
    where = run(env, "--where")
    assert (where.returncode, where.stdout, where.stderr) == (0, binary_in(env) + "\n", "")
    path = run(env, "--path")
    assert (path.returncode, path.stdout) == (1, "")
    assert path.stderr == f"setup/simeng.sh: SimEng 0.9.6 is not built (it would be {binary_in(env)}; " \
                          "fix: setup/simeng.sh)\n"
    assert cache_files(env) == []


def test_an_unknown_option_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run(setup_env(tmp_path), "--fast")
    assert (proc.returncode, proc.stderr) == (2, "setup/simeng.sh: unknown option '--fast'; "
                                                 "usage: setup/simeng.sh [--path | --where | --check]\n")


def test_a_source_that_is_not_a_git_repository_is_refused_creating_nothing(tmp_path: Path) -> None:
    env = setup_env(tmp_path, SIMENG_SRC=str(tmp_path))
    proc = run(env)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"setup/simeng.sh: refusing SIMENG_SRC: {tmp_path} is not a git repository; clone "
                           "https://github.com/UoB-HPC/SimEng.git (or mirror it) and point to the clone\n")
    assert cache_files(env) == []


def test_a_repository_without_the_pinned_commit_is_refused_creating_nothing(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "capstone"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = setup_env(tmp_path, CAPSTONE_SRC=str(repo))
    proc = run(env)
    assert proc.returncode == 2
    assert proc.stderr == (f"setup/simeng.sh: refusing CAPSTONE_SRC: {repo} does not hold commit {CAPSTONE_PIN} "
                           f"(5.0.1); fetch it there (git -C {repo} fetch "
                           f"https://github.com/capstone-engine/capstone.git {CAPSTONE_PIN})\n")
    assert cache_files(env) == []


def test_a_patch_made_against_another_commit_is_refused_creating_nothing(tmp_path: Path) -> None:
    """SimEng's pin moved without its patch (or the patch was remade elsewhere): refused before any
    source is looked at."""
    patch = tmp_path / "other.patch"
    other = "0" * 40
    patch.write_text(f"made elsewhere\n\nBase-commit: {other}\n\ndiff --git a/x b/x\n")
    env = setup_env(tmp_path, SIMENG_PATCH=str(patch))
    proc = run(env)
    assert proc.returncode == 2
    assert proc.stderr == (f"setup/simeng.sh: refusing {patch}: it was made against SimEng commit {other}, not "
                           f"0.9.6 ({SIMENG_PIN}); remake it with git diff in a checkout of {SIMENG_PIN}\n")
    assert cache_files(env) == []


def test_the_repository_patches_are_made_against_the_pins() -> None:
    for name, pin in (("simeng-0.9.6-harness.patch", SIMENG_PIN), ("capstone-5.0.1-opcode.patch", CAPSTONE_PIN)):
        text = (REPO / "setup" / "patches" / name).read_text()
        assert f"\nBase-commit: {pin}\n" in text, name


def _sources() -> tuple[str, str]:
    srcs = os.environ.get("SIMENG_SRC", ""), os.environ.get("CAPSTONE_SRC", "")
    if not all(srcs):
        pytest.skip("the SimEng build needs its pinned sources: set SIMENG_SRC and CAPSTONE_SRC to git "
                    "repositories holding them (see setup/simeng.sh)")
    for tool in ("cmake", "g++", "aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (./harness setup installs it)")
    return srcs


@pytest.mark.slow
def test_the_patched_simeng_runs_what_the_patch_adds_as_qemu_does(tmp_path: Path) -> None:
    simeng_src, capstone_src = _sources()
    env = setup_env(tmp_path, SIMENG_SRC=simeng_src, CAPSTONE_SRC=capstone_src)
    built = run(env, timeout=850)
    assert built.returncode == 0, built.stderr
    again = run(env)
    assert (again.returncode, again.stderr) == (0, f"setup/simeng.sh: SimEng 0.9.6 is built: {binary_in(env)}\n")
    simeng = run(env, "--path").stdout.strip()
    program = tmp_path / "sve_neon"
    subprocess.run(["aarch64-linux-gnu-gcc", "-O1", "-static", "-nostdlib", "-fno-stack-protector",
                    "-march=armv8-a+sve", "-o", str(program), str(PROGRAM)], check=True, timeout=60)
    qemu = subprocess.run(["qemu-aarch64", "-cpu", "max,sve-default-vector-length=64", str(program)],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    config = Path(env["HARNESS_CACHE"]) / "simeng-0.9.6" / "src" / "simeng" / "configs" / "a64fx.yaml"
    sim = subprocess.run([simeng, str(config), str(program)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert sim.returncode == 0, sim.stdout[-2000:]
    # SimEng's own lines start with [SimEng; the program's are the rest (and blank lines around them).
    lines = [line for line in sim.stdout.splitlines() if line and not line.startswith("[SimEng")]
    assert lines == qemu.splitlines()
    assert "rdvl=0000000000000040" in lines  # VL 512, the A64FX configuration's


def test_the_installer_option_adds_simengs_build_tools_and_its_check_names_it(tmp_path: Path) -> None:
    """`./harness setup --with-simeng` installs cmake and g++ and runs setup/simeng.sh; its --check
    names a SimEng not built, with the option that builds it."""
    install = REPO / "setup" / "install.sh"
    packages = subprocess.run(["bash", str(install), "--print-packages", "--with-simeng"], capture_output=True,
                              text=True, timeout=60)
    assert packages.returncode == 0 and packages.stdout.split()[-2:] == ["cmake", "g++"]
    env = setup_env(tmp_path)
    check = subprocess.run(["bash", str(install), "--check", "--with-simeng"], capture_output=True, text=True,
                           env=env, timeout=120)
    assert check.returncode == 1
    assert f"  - SimEng is not built at {binary_in(env)} (fix: setup/install.sh --with-simeng)" in check.stdout.splitlines()
    assert cache_files(env) == []
