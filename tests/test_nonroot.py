"""An ordinary user (not root, no sudo) after root's `./harness setup`: the installer, run as a
throwaway user in a clone of its own, finds everything present and installs nothing; a package
that is really missing is one line naming it and the command root runs. (The whole README
commands as such a user: `ci/fresh-machine --as user`.)

The user's clone shares this clone's venv packages through links (test_install's tree), so no
pip runs; its PATH may start with a dpkg-query that hides or holds packages."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_install import ROOT, STAMP, _tree_with_venv, _write_exe

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_clang, pytest.mark.needs_chromium]

# The real dpkg-query with $HIDE reported as not installed and $HOLD as held by the admin ("hi").
DPKG_QUERY = r"""#!/bin/bash
/usr/bin/dpkg-query "$@" | awk -v x="$HIDE" -v h="$HOLD" '$2 == x { next } $2 == h { sub(/^ii/, "hi") } { print }'
"""
# What sweep and test install first (./harness: `setup/install.sh --with-clang --with-chromium`).
TEST_SET = ("--with-clang", "--with-chromium")


@dataclass
class User:
    name: str
    home: Path
    clone: Path
    bin: Path

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        """`args` as the user in its clone, with a login's environment (no sudo on its PATH's
        first folder, its own TMPDIR: the installer's lock file is left in its folder)."""
        base = {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "LANG": "C.UTF-8",
                "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "TMPDIR": str(self.home / "tmp")}
        cmd = ["runuser", "-u", self.name, "--", "env", "-i", *(f"{k}={v}" for k, v in {**base, **env}.items()), *args]
        return subprocess.run(cmd, cwd=self.clone, capture_output=True, text=True, timeout=120)


def _closed_parent(path: Path) -> Path | None:
    """The first folder above `path` that other users cannot enter (the user's clone links into
    this clone's venv)."""
    for parent in path.parents:
        if not parent.stat().st_mode & 0o001:
            return parent
    return None


@pytest.fixture(scope="module")
def ordinary_user() -> Iterator[User]:
    """A throwaway user (useradd; removed afterwards) with a home and a clone of its own."""
    for tool in ("useradd", "userdel", "runuser"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not found (Debian's passwd and util-linux provide them)")
    if not STAMP.exists():
        pytest.skip("harness not installed here yet: run ./harness setup first")
    if (closed := _closed_parent(ROOT / ".venv")) is not None:
        pytest.skip(f"{closed} is closed to other users: a clone there cannot lend its .venv to another user")
    top = Path(tempfile.mkdtemp(prefix="harness-nonroot-", dir="/tmp"))
    name = f"hnr{os.getpid()}"
    try:
        top.chmod(0o755)
        user = User(name, top / "home", top / "clone", top / "bin")
        _tree_with_venv(user.clone)
        shutil.copy2(ROOT / "harness", user.clone / "harness")
        user.bin.mkdir()
        _write_exe(user.bin / "dpkg-query", DPKG_QUERY)
        (user.home / "tmp").mkdir(parents=True)
        subprocess.run(["useradd", "--no-create-home", "--home-dir", str(user.home), "--shell", "/bin/bash",
                        "--user-group", name], check=True, capture_output=True, timeout=60)
        for path in (user.home, user.clone):
            subprocess.run(["chown", "-R", "--no-dereference", f"{name}:{name}", str(path)], check=True, timeout=60)
        yield user
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
        shutil.rmtree(top, ignore_errors=True)


def test_after_roots_setup_the_user_finds_everything_and_installs_nothing(ordinary_user: User) -> None:
    """What sweep and test ask for is present (root's setup installed it): --check says so, the
    install path writes the user's own stamp and nothing else, and then is a silent no-op."""
    proc = ordinary_user.run("setup/install.sh", *TEST_SET, "--check")
    assert proc.returncode == 0 and "all present" in proc.stdout, proc.stdout + proc.stderr
    for _ in range(2):
        proc = ordinary_user.run("setup/install.sh", *TEST_SET)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert (ordinary_user.clone / ".venv" / ".installed").stat().st_uid != 0
    proc = ordinary_user.run("./harness", "setup")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_held_package_is_not_asked_for_again(ordinary_user: User) -> None:
    """The admin holds gcc (apt-mark hold): dpkg says "hi", installed all the same."""
    proc = ordinary_user.run("setup/install.sh", *TEST_SET, "--check", HOLD="gcc")
    assert proc.returncode == 0 and "all present" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow  # two apt simulations: 3 s of CPU each
def test_a_missing_package_is_one_line_naming_it_and_roots_command(ordinary_user: User) -> None:
    """Before: "not root and no sudo; run as root: apt-get install -y --no-install-recommends
    clang-14 gcc=4:12.2.0-3 libc6-dev=..." (every package of the host toolchain, pinned). Now only
    what is missing, and the command root runs (simulated first by the user: it removes nothing)."""
    proc = ordinary_user.run("setup/install.sh", *TEST_SET, "--force", HIDE="clang-14")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == ("setup/install.sh: missing apt packages: clang-14; not root and no sudo: "
                           "ask root to run: apt-get install --no-install-recommends clang-14\n")
    proc = ordinary_user.run("setup/install.sh", *TEST_SET, "--check", HIDE="clang-14")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == ("fix: ask root to run: apt-get install --no-install-recommends clang-14; "
                                            "then run setup/install.sh --with-clang --with-chromium")
