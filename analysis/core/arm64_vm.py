"""The emulated AArch64 Linux guest (issue 35): boot it once with a batch of commands.

`./harness setup --with-arm64-vm` (setup/arm64-vm.sh) builds the guest into the harness cache:
Debian 12's arm64 kernel, an initramfs whose /init (setup/arm64-vm-init.sh) mounts a 9p
share, runs the share's batch.sh and powers off, and optionally DynamoRIO with the harness's
ROI client. `run_batch` is the one job of this module: copy the batch's files into a fresh
share, boot qemu-system-aarch64 once, and return each command's exit status and output.

One boot per batch, never one per run: the guest reaches its init in about 3 s of a 2-core
host's time, a DynamoRIO run costs about 1 s. A guest that does not finish within the
batch's time limit is killed and named (GuestHang); one that stops before its batch ended
(a kernel panic, a dying init) is named with its last console line (GuestError).
"""
from __future__ import annotations

import argparse
import ctypes
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.core.schema import REPO

SETUP = REPO / "setup" / "arm64-vm.sh"
FIX = "./harness setup --with-arm64-vm"
QEMU = "qemu-system-aarch64"
# panic=-1 with -no-reboot: a dying init ends QEMU instead of hanging it until the limit.
APPEND = "console=ttyAMA0 rdinit=/init panic=-1 quiet"
# pauth-impdef: QEMU's default QARMA pointer authentication made the boot 4x slower (11.8 s
# against 3.0 s to init, ../shared/reference/arm64-vm-dynamorio.md).
CPU = "max,pauth-impdef=on"
# One vCPU: a batch runs its commands one after another, so a second vCPU had no work, yet cost
# CPU time: a boot took 4.4 CPU s with two against 2.8 with one (2026-11-27), and with two, every
# TLB invalidation of the guest kernel (DynamoRIO maps and unmaps its code cache, heaps and
# stacks) is broadcast to the other vCPU's thread. Parallel work is parallel guests, one per core
# (armie_guest). -icount needs one anyway (it is incompatible with multi-threaded TCG).
CPUS = 1
# Where the guest's /init mounts the two shares.
GUEST_BATCH = "/mnt/batch"
GUEST_DYNAMORIO = "/opt/dynamorio"
# The ROI client inside the DynamoRIO tree (setup/arm64-vm.sh builds it there).
CLIENT = "harness/libroi_inscount.so"
# DynamoRIO keeps SVE state for these VLs only: it crashes at start-up at 384, 640, 1024
# and 2048 bits (measured; its SVE support stops at 512 bits and at powers of two).
DYNAMORIO_VLS = (128, 256, 512)
NOT_RUN_VL = "not run: DynamoRIO supports VL 128/256/512 only"
# DynamoRIO's runs map memory bottom-up (Linux's legacy layout), as qemu-user does, not top-down
# as Linux does by default: where a kernel's code depends on the order of its buffers (clang's
# run-time overlap check in reduce c_autovec runs three instructions more when `in` lies above
# `inout`), the guest then takes the path the QEMU plugins counted (docs/guide/arm64-vm.md).
LAYOUT = "echo 1 >/proc/sys/vm/legacy_va_layout"
# Transparent huge pages off in every batch. QEMU's software TLB keeps one large-page region
# per MMU index and empties that whole TLB whenever a page inside the region is flushed
# (accel/tcg/cputlb.c, tlb_flush_page_locked); the region only grows until a full flush. Once
# the guest kernel had given a process a 2 MiB page, each later TLB invalidation there (DynamoRIO's
# mprotect and munmap of its code cache) emptied QEMU's TLB, and every process ran 4 to 8 times
# slower for a while: about one DynamoRIO process in twenty, in runs of several
# (docs/guide/arm64-vm.md, measured 2026-11-28).
NO_HUGE_PAGES = "echo never >/sys/kernel/mm/transparent_hugepage/enabled"
READY = "ARM64VM-READY"
DONE = "ARM64VM-DONE"


class GuestError(RuntimeError):
    """The guest is missing, or a batch did not run to its end: one line naming the cause."""


class GuestHang(GuestError):
    """A batch exceeded its time limit; the guest was killed."""


@dataclass(frozen=True)
class Guest:
    dir: Path
    dynamorio: Path | None  # the DynamoRIO tree the guest mounts, when setup built or was given one

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    def describe(self) -> dict[str, str]:
        """guest.txt (setup/arm64-vm.sh): the kernel, every package and DynamoRIO's version."""
        out: dict[str, str] = {}
        for line in (self.dir / "guest.txt").read_text().splitlines():
            key, _, value = line.partition("=")
            out[key] = f"{out[key]}; {value}" if key in out else value
        return out


@dataclass(frozen=True)
class Output:
    command: str
    rc: int | None  # None: the batch ended before this command did
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Batch:
    outputs: list[Output]
    console: str
    seconds: float
    provenance: dict[str, Any]


def _setup_answer(option: str) -> tuple[Path | None, str]:
    proc = subprocess.run([str(SETUP), option], capture_output=True, text=True)
    return (Path(proc.stdout.strip()) if proc.returncode == 0 else None), proc.stderr.strip()


def find_guest(directory: Path | None = None) -> Guest:
    """The built guest (setup/arm64-vm.sh --path), or GuestError naming the setup command.
    `directory`: a guest being checked by setup before its stamp is written."""
    if directory is None:
        found, why = _setup_answer("--path")
        if found is None:
            raise GuestError(why or f"the arm64 guest is not built (fix: {FIX})")
        directory = found
    dynamorio = directory / "dynamorio"
    ready = (directory / ".done-dynamorio").is_file() and (dynamorio / CLIENT).is_file()
    return Guest(directory, dynamorio if ready else None)


def missing() -> str | None:
    """None when the guest and its DynamoRIO are built, else the line saying what to run."""
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (fix: {FIX})"
    try:
        guest = find_guest()
    except GuestError as e:
        return str(e)
    if guest.dynamorio is None:
        return _setup_answer("--dynamorio")[1]
    return None


def qemu_command(guest: Guest, share: Path, icount: bool = False) -> list[str]:
    """The guest's command line. icount: precise instruction counting (-icount shift=0) for
    the PMU's instructions event."""
    # -nic none: no network in the guest (and no NIC option ROM, which needs ipxe-qemu).
    cmd = [QEMU, "-M", "virt", "-cpu", CPU, "-m", "2G", "-nographic", "-no-reboot", "-nic", "none",
           "-smp", str(CPUS),
           "-kernel", str(guest.kernel), "-initrd", str(guest.initrd), "-append", APPEND,
           "-fsdev", f"local,id=batch,path={share},security_model=none",
           "-device", "virtio-9p-device,fsdev=batch,mount_tag=batch"]
    if guest.dynamorio is not None:
        cmd += ["-fsdev", f"local,id=dynamorio,path={guest.dynamorio},security_model=none,readonly=on",
                "-device", "virtio-9p-device,fsdev=dynamorio,mount_tag=dynamorio"]
    if icount:
        cmd += ["-icount", "shift=0"]
    return cmd


def batch_script(commands: Sequence[str]) -> str:
    """batch.sh: transparent huge pages off (NO_HUGE_PAGES), then each command in its own
    subshell, its output and status in out/<i>.*, so a command that fails does not stop the
    ones after it."""
    lines = [NO_HUGE_PAGES, "mkdir -p out"]
    for i, command in enumerate(commands):
        lines.append(f"( {command} ) >out/{i}.out 2>out/{i}.err; echo $? >out/{i}.rc")
    return "\n".join(lines) + "\n"


def qemu_version() -> str:
    return subprocess.run([QEMU, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def run_batch(guest: Guest, commands: Sequence[str], files: Mapping[str, Path], time_limit: float,
              name: str = "batch", icount: bool = False) -> Batch:
    """Boot the guest once and run `commands` (busybox sh, working directory: the share, where
    `files` are copied under their keys, e.g. {"bin/copy-acle": path}). Raises GuestHang
    after `time_limit` seconds (the whole batch, boot included) and GuestError when the guest
    stops before its batch ended."""
    with tempfile.TemporaryDirectory(prefix="arm64-vm-") as tmp:
        share = Path(tmp)
        for dest, src in files.items():
            target = share / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        (share / "batch.sh").write_text(batch_script(commands))
        cmd = qemu_command(guest, share, icount)
        t0 = time.monotonic()
        with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=_die_with_parent) as proc:
            try:
                console, _ = proc.communicate(timeout=time_limit)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                console, _ = proc.communicate()
                last = _last_line(console.decode(errors="replace"))
                raise GuestHang(f"{name}: the arm64 guest did not finish in its time limit of {time_limit:g} s "
                                f"(killed); last console line: {last!r}") from None
        seconds = time.monotonic() - t0
        text = console.decode(errors="replace")
        if DONE not in text:
            raise GuestError(f"{name}: the arm64 guest stopped before its batch ended (QEMU exit "
                             f"{proc.returncode}); last console line: {_last_line(text)!r}")
        outputs = [_output(share / "out", i, c) for i, c in enumerate(commands)]
        provenance = {"kernel": guest.describe().get("kernel", "?"), "emulator": qemu_version(),
                      "guest_command": shlex.join(cmd), "dynamorio": guest.describe().get("dynamorio")}
        return Batch(outputs, text, round(seconds, 3), provenance)


def _die_with_parent() -> None:
    """In QEMU's process: SIGKILL when the job that started it dies, even by SIGKILL, so no
    guest outlives its job (as analysis.backends does for the user-mode runs)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


PR_SET_PDEATHSIG = 1


def _output(out: Path, i: int, command: str) -> Output:
    rc_file = out / f"{i}.rc"
    rc = int(rc_file.read_text().strip()) if rc_file.is_file() else None
    return Output(command, rc, _read(out / f"{i}.out"), _read(out / f"{i}.err"))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def dynamorio_command(vl: int, argv: Sequence[str], client_args: Sequence[str] = ()) -> str:
    """The guest command that runs `argv` under DynamoRIO with the ROI client at `vl` bits.

    The VL is set before drrun starts (the kernel's default for new processes): DynamoRIO
    reads it once at start-up and does not follow a program's own PR_SVE_SET_VL
    (DynamoRIO issue #6625). The memory layout is qemu-user's order (LAYOUT). ValueError for a
    VL it cannot run."""
    if vl not in DYNAMORIO_VLS:
        raise ValueError(f"VL {vl}: {NOT_RUN_VL}")
    drrun = [f"{GUEST_DYNAMORIO}/bin64/drrun", "-c", f"{GUEST_DYNAMORIO}/{CLIENT}",
             *client_args, "--", *argv]
    return f"echo {vl // 8} >/proc/sys/abi/sve_default_vector_length && {LAYOUT} && {shlex.join(drrun)}"


def check(directory: Path) -> str:
    """Boot the guest once and check what the runs need: the kernel, SVE, perf and DynamoRIO."""
    guest = find_guest(directory)
    commands = ["uname -r", "cat /proc/sys/abi/sve_default_vector_length", "perf --version"]
    if guest.dynamorio is not None:
        commands.append(f"{GUEST_DYNAMORIO}/bin64/drrun -- /bin/true && echo drrun ok")
    batch = run_batch(guest, commands, {}, 180, "boot check")
    failed = [o for o in batch.outputs if o.rc != 0]
    if failed:
        raise GuestError(f"boot check: '{failed[0].command}' failed in the guest (exit {failed[0].rc}): "
                         f"{_last_line(failed[0].stderr + failed[0].stdout)!r}")
    kernel = batch.outputs[0].stdout.strip()
    extra = ", DynamoRIO runs" if guest.dynamorio is not None else ", no DynamoRIO"
    return f"boot ok: kernel {kernel}, {batch.outputs[2].stdout.strip()}{extra}, {batch.seconds:.1f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.core.arm64_vm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_check = sub.add_parser("check", help="boot the guest once and check it")
    p_check.add_argument("--dir", type=Path, default=None, help="the guest's directory (default: the built one)")
    p_run = sub.add_parser("run", help="run shell commands in one boot and print their output")
    p_run.add_argument("--time-limit", type=float, default=300)
    p_run.add_argument("--file", action="append", default=[], metavar="DEST=SRC",
                       help="copy SRC into the share as DEST (relative to the working directory)")
    p_run.add_argument("commands", nargs="+")
    ns = parser.parse_args(argv)
    try:
        if ns.cmd == "check":
            print(check(ns.dir if ns.dir else find_guest().dir))
            return 0
        files = {d: Path(s) for d, _, s in (f.partition("=") for f in ns.file)}
        batch = run_batch(find_guest(), ns.commands, files, ns.time_limit)
    except GuestError as e:
        print(e, file=sys.stderr)
        return 1
    for o in batch.outputs:
        print(f"$ {o.command}  (exit {o.rc})")
        sys.stdout.write(o.stdout + o.stderr)
    print(f"# {batch.seconds:.1f} s; {batch.provenance['kernel']}; {batch.provenance['emulator']}")
    return 0 if all(o.rc == 0 for o in batch.outputs) else 1


if __name__ == "__main__":
    sys.exit(main())
