"""ci/fresh-machine without debootstrap: its usage, its one-line refusals, and its cleanup (reverse
unmount order, lazy fallback, no deletion while a mount remains) against a fake mount list. The
real check is running it (docs/fresh-machine.md)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "ci" / "fresh-machine"


def run(args: list[str], env: dict[str, str] | None = None, user: str | None = None) -> subprocess.CompletedProcess:
    if not user:
        return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                              timeout=60)
    # A clone may sit in a folder only root can enter (CI's, mktemp's 0700): the other user runs a
    # copy of the script from a folder anyone can read.
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        os.chmod(tmp, 0o755)
        script = Path(tmp) / "ci" / "fresh-machine"
        script.parent.mkdir(mode=0o755)
        shutil.copy2(SCRIPT, script)
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", str(script), *args]
        return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60,
                              cwd=tmp)


def test_help_names_the_usage_and_what_it_checks() -> None:
    proc = run(["--help"])
    assert proc.returncode == 0, proc.stderr
    assert "ci/fresh-machine [--keep] [--ref REV] [--only sweep|test] [--as root|user] [--dir DIR]" in proc.stdout
    assert "debootstrap" in proc.stdout and "./harness test" in proc.stdout


@pytest.mark.parametrize("args, line", [(["--only", "bench"], "fresh-machine: --only needs sweep or test"),
                                        (["--as", "admin"], "fresh-machine: --as needs root or user")])
def test_bad_option_is_one_line(args: list[str], line: str) -> None:
    proc = run(args)
    assert proc.returncode == 1
    assert proc.stderr.strip() == line


def test_not_root_is_refused_in_one_line() -> None:
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: cannot drop to nobody")
        proc = run(["--only", "sweep"], user="65534")  # nobody (its group is nogroup on Debian)
    else:
        proc = run(["--only", "sweep"])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fresh-machine: must run as root"), proc.stderr
    assert proc.stdout == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="the root check comes first")
def test_missing_debootstrap_names_the_install(tmp_path: Path) -> None:
    proc = run(["--dir", str(tmp_path)], env={"DEBOOTSTRAP": "/nonexistent/debootstrap"})
    assert proc.returncode == 1
    assert proc.stderr.strip() == "fresh-machine: debootstrap not found; install it: apt-get install debootstrap"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the root check comes first")
def test_too_little_space_is_refused(tmp_path: Path) -> None:
    proc = run(["--dir", str(tmp_path)], env={"DEBOOTSTRAP": "true", "MIN_FREE_GIB": "100000000"})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "GiB free in" in lines[0] and "needs 100000000 GiB" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []


# The cleanup, in bash: the script sourced (it stops after its functions), with umount, findmnt
# and the process search replaced by fakes over a mount list in a file.
CLEANUP_HARNESS = r"""
set -euo pipefail
source "$SCRIPT"
MOUNTS="$T/mounts"       # the fake mount table, one target per line
CALLS="$T/calls"         # every umount call
findmnt() { cat "$MOUNTS"; }
umount() {
    echo "umount $*" >>"$CALLS"
    local m="${@: -1}"
    if [[ "$1" != -l ]] && grep -qxF "$m" "$T/busy" 2>/dev/null; then return 32; fi
    if grep -qxF "$m" "$T/stuck" 2>/dev/null; then return 32; fi
    grep -vxF "$m" "$MOUNTS" >"$MOUNTS.new" || true; mv "$MOUNTS.new" "$MOUNTS"
}
chroot_pids() { :; }
WORK="$T/work"; ROOTFS="$WORK/root"; mkdir -p "$ROOTFS/proc"
MOUNTED=("$ROOTFS/proc" "$ROOTFS/sys" "$ROOTFS/dev" "$ROOTFS/dev/pts" "$ROOTFS/dev/shm")
printf '%s\n' / /proc "${MOUNTED[@]}" "$ROOTFS/var/extra" >"$MOUNTS"
(exit 3) || cleanup
"""


def cleanup_run(tmp_path: Path, busy: list[str] = (), stuck: list[str] = ()) -> tuple[subprocess.CompletedProcess, list[str], str]:
    root = tmp_path / "work" / "root"
    (tmp_path / "busy").write_text("".join(f"{root}/{m}\n" for m in busy))
    (tmp_path / "stuck").write_text("".join(f"{root}/{m}\n" for m in stuck))
    proc = subprocess.run(["bash", "-c", CLEANUP_HARNESS], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SCRIPT": str(SCRIPT), "T": str(tmp_path)})
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return proc, [c.replace(f"{root}/", "") for c in calls], (tmp_path / "mounts").read_text()


def test_cleanup_unmounts_in_reverse_then_leftovers_and_deletes_the_tree(tmp_path: Path) -> None:
    proc, calls, left = cleanup_run(tmp_path, busy=["dev"])
    assert proc.returncode == 3, proc.stderr  # the command's status survives the cleanup
    assert calls == ["umount dev/shm", "umount dev/pts", "umount dev", "umount -l dev", "umount sys",
                     "umount proc", "umount var/extra"]
    assert "lazily unmounted" in proc.stderr
    assert left.split() == ["/", "/proc"]  # the host's own mounts are never touched
    assert not (tmp_path / "work").exists()


def test_cleanup_keeps_the_tree_while_a_mount_remains(tmp_path: Path) -> None:
    proc, calls, left = cleanup_run(tmp_path, stuck=["dev"])
    assert proc.returncode == 1
    assert "NOT deleting" in proc.stderr
    assert (tmp_path / "work" / "root" / "proc").is_dir()
    assert f"{tmp_path}/work/root/dev" in left.split()
