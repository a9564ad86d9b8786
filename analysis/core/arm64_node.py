"""The arm64 node (issue 52): boot the Debian 12 arm64 disk image once and run one command in it.

`./harness setup --with-arm64-node` (setup/arm64-node.sh) builds the node into the harness
cache: Debian's arm64 kernel, a small initramfs whose /init (setup/arm64-node-init.sh) mounts
the node's disk and a 9p share from the host, brings up QEMU's user-mode network and runs the
share's boot.sh chrooted into the disk, and the disk image itself. `run` is the one job of this
module: write boot.sh into a share folder, boot qemu-system-aarch64 once, and return the
command's exit status; its output is the share's output.log, written while it runs (tail -f
works), so a step of hours is watched from the host.

Why a boot per command and not ssh into a running node: nothing to start, wait for or stop
(no systemd, sshd, keys or port), the exit status and output come back through files, and a
hung command ends with its QEMU at the time limit. The disk keeps what a command installed:
`--persist` writes into the image itself (setup's first boot), `--overlay FILE` into a qcow2
file backed by the image (ci/aarch64-node: the image stays as built), and by default writes
are discarded (QEMU's -snapshot).

Standard library only: setup runs it with the system python3, before the harness's venv exists.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "setup" / "arm64-node.sh"
FIX = "./harness setup --with-arm64-node"
QEMU = "qemu-system-aarch64"
QEMU_IMG = "qemu-img"
# panic=-1 with -no-reboot: a dying /init ends QEMU instead of hanging it until the limit.
APPEND = "console=ttyAMA0 rdinit=/init panic=-1 quiet"
# The CPU models a run may ask for. pauth-impdef: QEMU's default QARMA pointer authentication
# made boots 4x slower (../shared/reference/arm64-vm-dynamorio.md). a64fx (VL 128/256/512, as
# the chip) needs GICv3: Debian's kernel panics in has_useable_gicv3_cpuif on the default GICv2.
# vl256: SVE up to 256 bits, as Graviton3; QEMU enables 128 too (every power of two below the
# largest must be: "sve128=off,sve256=on" is refused, measured).
CPUS = {"max": ("virt", "max,pauth-impdef=on"), "a64fx": ("virt,gic-version=3", "a64fx"),
        "vl256": ("virt", "max,pauth-impdef=on,sve256=on")}
USER = "harness"  # the ordinary user setup/arm64-node-firstboot.sh creates
USER_PATH = "/usr/local/bin:/usr/bin:/bin"
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GUEST_SHARE = "/mnt/host"
# Host variables a user's shell in the node gets too (as ci/fresh-machine passes them): proxies
# and pip's settings. A value that is a path is passed only under /etc/ssl/certs, which the node
# has (its CA store holds the host's local certificates): /opt/wheels of the host is not there.
PASSED = ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
          "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")
NODE_PATHS = "/etc/ssl/certs"
READY = "NODE-READY"
DONE = "NODE-DONE"


class NodeError(RuntimeError):
    """The node is missing, or a run did not reach its end: one line naming the cause."""


@dataclass(frozen=True)
class Node:
    dir: Path

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    @property
    def image(self) -> Path:
        return self.dir / "node.img"


@dataclass(frozen=True)
class Run:
    rc: int
    seconds: float
    log: Path  # the command's output (stdout and stderr)


def find_node(directory: Path | None = None) -> Node:
    """The built node (setup/arm64-node.sh --path), or NodeError naming the setup command.
    `directory`: a node that setup is still building (its stamp is not written yet)."""
    if directory is None:
        proc = subprocess.run([str(SETUP), "--path"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise NodeError(proc.stderr.strip() or f"the arm64 node is not built (fix: {FIX})")
        directory = Path(proc.stdout.strip())
    node = Node(directory)
    for f in (node.kernel, node.initrd, node.image):
        if not f.is_file():
            raise NodeError(f"the arm64 node at {directory} has no {f.name} (fix: {FIX})")
    return node


def missing() -> str | None:
    """None when the node is built and QEMU is installed, else the line saying what to run."""
    import shutil
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (fix: {FIX})"
    try:
        find_node()
    except NodeError as e:
        return str(e)
    return None


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's proxy, pip and CA variables that mean the same inside the node (PASSED,
    PIP_*): a path is kept only under NODE_PATHS."""
    out = {}
    for key, value in sorted(environ.items()):
        if key not in PASSED and not key.startswith("PIP_"):
            continue
        if value.startswith("/") and not (value == NODE_PATHS or value.startswith(NODE_PATHS + "/")):
            continue
        out[key] = value
    return out


def boot_script(command: str, user: str | None, env: Mapping[str, str]) -> str:
    """boot.sh, run as root chrooted into the node's disk: `command` (a shell command line, as
    ssh takes one) in a login-like clean environment, as `user` in its home folder, or as root
    in /root; its output into the share's output.log, its status is boot.sh's."""
    home = f"/home/{user}" if user else "/root"
    base = {"HOME": home, "USER": user or "root", "LOGNAME": user or "root", "SHELL": "/bin/bash",
            "PATH": USER_PATH if user else ROOT_PATH, "LANG": "C.UTF-8", "TERM": "dumb"}
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in {**base, **env}.items())
    inner = shlex.quote(f"cd {home} && {command}")
    as_user = f"runuser -u {user} -- " if user else ""
    return ("#!/bin/sh\n"
            f"# {READY}: written by analysis/core/arm64_node.py; run by the node's /init\n"
            f"{as_user}/usr/bin/env -i {pairs} /bin/bash -c {inner} "
            f">{GUEST_SHARE}/output.log 2>&1 </dev/null\n")


def drive_args(node: Node, persist: bool, overlay: Path | None) -> list[str]:
    """The disk: the image itself (persist), a qcow2 overlay backed by it, or the image with
    every write discarded (-snapshot)."""
    if persist and overlay is not None:
        raise NodeError("--persist and --overlay exclude each other: give one")
    if overlay is not None:
        return ["-drive", f"file={overlay},format=qcow2,if=none,id=d0", "-device", "virtio-blk-device,drive=d0"]
    drive = ["-drive", f"file={node.image},format=raw,if=none,id=d0", "-device", "virtio-blk-device,drive=d0"]
    return drive if persist else drive + ["-snapshot"]


def qemu_command(node: Node, share: Path, cpu: str = "max", smp: int = 2, memory: str = "4G",
                 icount: bool = False, persist: bool = False, overlay: Path | None = None) -> list[str]:
    """The node's command line: user-mode network on a virtio-net card, the disk on virtio-blk,
    the share on virtio-9p (all virtio-mmio: the virt board's own transport, no PCI ROMs).
    icount: exact instruction counts for perf (-icount shift=0, one host thread)."""
    if cpu not in CPUS:
        raise NodeError(f"unknown CPU '{cpu}'; give one of {', '.join(CPUS)}")
    if smp < 1:
        raise NodeError(f"--smp {smp}: give 1 or more vCPUs")
    machine, model = CPUS[cpu]
    cmd = [QEMU, "-M", machine, "-cpu", model, "-smp", str(smp), "-m", memory, "-nographic", "-no-reboot",
           "-kernel", str(node.kernel), "-initrd", str(node.initrd), "-append", APPEND,
           *drive_args(node, persist, overlay),
           "-netdev", "user,id=n0", "-device", "virtio-net-device,netdev=n0",
           "-fsdev", f"local,id=host,path={share},security_model=none",
           "-device", "virtio-9p-device,fsdev=host,mount_tag=host"]
    if icount:
        cmd += ["-icount", "shift=0"]
    return cmd


def make_overlay(node: Node, overlay: Path) -> None:
    """A qcow2 file over the image (kept when it exists: a later step sees what earlier ones did)."""
    if overlay.exists():
        return
    proc = subprocess.run([QEMU_IMG, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(node.image), str(overlay)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise NodeError(f"qemu-img create {overlay} failed: {proc.stderr.strip()[:200]} (fix: {FIX}, installs qemu-utils)")


def run(node: Node, command: str, out: Path, time_limit: float, user: str | None = USER,
        env: Mapping[str, str] | None = None, **qemu: object) -> Run:
    """Boot the node once and run `command`. `out`: the share folder (boot.sh, output.log, the
    console's console.txt). NodeError when the node stops before the command ended or exceeds
    `time_limit` seconds (boot included; QEMU is stopped)."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("rc", "output.log", "console.log"):
        (out / stale).unlink(missing_ok=True)
    (out / "boot.sh").write_text(boot_script(command, user, passed_env(os.environ) | dict(env or {})))
    (out / "epoch").write_text(f"{int(time.time())}\n")
    overlay = qemu.get("overlay")
    if isinstance(overlay, Path):
        make_overlay(node, overlay)
    cmd = qemu_command(node, out, **qemu)  # type: ignore[arg-type]
    t0 = time.monotonic()
    _held.starting = True
    try:
        with open(out / "console.txt", "wb") as console, \
                subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                 start_new_session=True) as proc:
            try:
                _held.take()
                proc.wait(timeout=time_limit)
            except subprocess.TimeoutExpired:
                _stop(proc)
                raise NodeError(f"the node did not finish in its time limit of {time_limit:g} s (stopped); "
                                f"last console line: {_last_line(out / 'console.txt')!r}") from None
            except BaseException:
                _stop(proc)
                raise
    finally:  # QEMU did not start: a signal held meanwhile still ends the runner
        _held.take()
    seconds = time.monotonic() - t0
    rc_file = out / "rc"
    text = (out / "console.txt").read_text(errors="replace")
    if DONE not in text or not rc_file.is_file():
        raise NodeError(f"the node stopped before its command ended (QEMU exit {proc.returncode}); "
                        f"last console line: {_last_line(out / 'console.txt')!r}")
    return Run(int(rc_file.read_text().strip()), round(seconds, 1), out / "output.log")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """QEMU quits on SIGTERM; SIGKILL only when it did not within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _last_line(path: Path) -> str:
    text = path.read_text(errors="replace") if path.is_file() else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


# What setup's check asks of a new node, as the user: each line must print and pass.
CHECK = " && ".join([
    "python3 --version",
    "id -un",
    "sudo -n true && echo sudo ok",
    "getent hosts deb.debian.org >/dev/null && echo dns ok",
    "python3 -c 'import urllib.request as u; u.urlopen(\"https://pypi.org/simple/pip/\", timeout=60); print(\"https ok\")'",
    "dpkg-query -W -f='package=${Package} ${Version}\\n'",
])


def check(node: Node, out: Path) -> str:
    """Boot the node once and check what a new user needs: the user, Python, sudo, DNS and
    HTTPS (the copied CA certificates). The packages' versions go to output.log (node.txt)."""
    result = run(node, CHECK, out, 600)
    text = result.log.read_text(errors="replace")
    if result.rc != 0:
        raise NodeError(f"check: failed in the node (exit {result.rc}): {_last_line(result.log)!r}")
    packages = sum(1 for ln in text.splitlines() if ln.startswith("package="))
    return f"check ok: {text.splitlines()[0]}, user {USER}, sudo, DNS, HTTPS, {packages} packages, {result.seconds:.0f} s"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m analysis.core.arm64_node", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, text in (("run", "boot the node and run a shell command line in it"),
                       ("check", "boot the node once and check it (setup does this)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--dir", type=Path, default=None, help="the node's directory (default: the built one)")
        p.add_argument("--out", type=Path, default=None,
                       help="the share folder: boot.sh, output.log (the command's output), console.txt, rc "
                            "(default: a new folder under /tmp, named on stderr)")
    run_p = sub.choices["run"]
    run_p.add_argument("--root", action="store_true", help=f"as root (default: the ordinary user {USER})")
    run_p.add_argument("--time-limit", type=float, default=3600, help="seconds, boot included (default 3600)")
    run_p.add_argument("--cpu", choices=sorted(CPUS), default="max", help="the emulated CPU (default max)")
    run_p.add_argument("--smp", type=int, default=2, help="vCPUs (default 2)")
    run_p.add_argument("--memory", default="4G", help="guest memory (default 4G)")
    run_p.add_argument("--icount", action="store_true", help="-icount shift=0: exact perf instruction counts")
    disk = run_p.add_mutually_exclusive_group()
    disk.add_argument("--persist", action="store_true", help="write into the image itself")
    disk.add_argument("--overlay", type=Path, default=None, help="write into this qcow2 file over the image")
    run_p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="also set this variable")
    run_p.add_argument("command", nargs="+", help="the command line (its words joined by spaces, as ssh does)")
    ns = parser.parse_args(argv)
    for pair in getattr(ns, "env", []):
        if "=" not in pair or not pair.partition("=")[0]:
            parser.error(f"--env {pair!r}: give KEY=VALUE")
    return ns


class _HeldSignal:
    """A stop signal that arrives while QEMU's process is being started is held until run()
    holds the process: raised in between (after the fork, before the `try`), it ended the runner
    and left QEMU, in a session of its own, running."""

    def __init__(self) -> None:
        self.starting = False
        self.signum: int | None = None

    def take(self) -> None:
        """QEMU is held: raise the signal that arrived meanwhile, if one did."""
        self.starting = False
        if self.signum is not None:
            signum, self.signum = self.signum, None
            raise SystemExit(128 + signum)


_held = _HeldSignal()


def _exit_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM or SIGHUP ends the runner as Ctrl-C does, through run()'s clean-up, which stops
    QEMU: QEMU runs in a session of its own, and a runner killed outright left it running."""
    if _held.starting:
        _held.signum = signum
        return
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    out = ns.out
    if out is None:
        import tempfile
        out = Path(tempfile.mkdtemp(prefix="arm64-node-"))
    try:
        node = find_node(ns.dir)
        if ns.cmd == "check":
            print(check(node, out))
            return 0
        result = run(node, " ".join(ns.command), out, ns.time_limit, None if ns.root else USER,
                     dict(p.partition("=")[::2] for p in ns.env), cpu=ns.cpu, smp=ns.smp, memory=ns.memory,
                     icount=ns.icount, persist=ns.persist, overlay=ns.overlay)
    except NodeError as e:
        print(f"arm64 node: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(result.log.read_text(errors="replace") if result.log.is_file() else "")
    print(f"arm64 node: exit {result.rc}, {result.seconds:.1f} s, output {result.log}", file=sys.stderr)
    return result.rc


if __name__ == "__main__":
    sys.exit(main())
