"""Count backend: run kernel binaries under qemu-aarch64 with the counting plugins.

`run_once` runs one cell with the three clients and returns its record; the job loop is
`analysis.backends.count_job`. Runs are reproducible: an empty environment (`env -i`), a
copy of the binary staged at a path of fixed length (`analysis.backends.staged`), and
fixed-width arguments, so that whole-program counts do not depend on the caller's shell,
paths or TMPDIR.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import Any, Iterator, TextIO

from analysis.backends import (STAGE_PREFIX, STAGE_ROOT, STAGED_NAME, Plan, Ready, RunError, cell_name, client_metrics,
                               count_job, parse_ok_line, run_limited, staged)
from analysis.core.config import Job, Run, Sweep
from analysis.core.toolchain import ToolchainError, first_line

NAME = "qemu"
STAGE = "count"
MARKER = "roi_qemu.S"
EXCLUSIVE = False
TABLE = "counts.csv"  # where its rows go (analysis.stages.collect)

QEMU = "qemu-aarch64"
SUPPORTED_QEMU = "7.2"  # the plugin API (version 1) and its struct layouts are those of 7.2
CLIENTS = ("inscount", "opcodes", "memory")


def check_qemu() -> str:
    if shutil.which(QEMU) is None:
        raise ToolchainError(f"{QEMU} not found: run ./harness setup (Debian package qemu-user)")
    line = first_line([QEMU, "--version"])
    m = re.search(r"version (\d+\.\d+)", line)
    if not m:
        raise ToolchainError(f"cannot read the version of {QEMU}: {line!r}")
    if m.group(1) != SUPPORTED_QEMU:
        raise ToolchainError(
            f"{QEMU} is version {m.group(1)}; the counting plugins are written for QEMU {SUPPORTED_QEMU} "
            f"(plugin API 1): install Debian 12's qemu-user"
        )
    return line


def check_tools() -> dict[str, str]:
    """QEMU 7.2 and the host gcc that builds the plugins: their version lines."""
    versions = {"qemu": check_qemu()}
    if shutil.which("gcc") is None:
        raise ToolchainError("host gcc not found (it builds the QEMU plugins): run ./harness setup")
    versions["host_gcc"] = first_line(["gcc", "--version"])
    return versions


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    return Ready(check_tools()) if NAME in sweep.backends else None


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    return sweep.count_jobs(NAME)


def time_factor(sweep: Sweep) -> float:
    return 1.0


def plugin_dir(build_dir: Path) -> Path:
    return build_dir / "plugins"


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    return {"plugin_dir": str(plugin_dir(sweep.build_dir))}


def inputs(build_dir: Path) -> list[str]:
    return [str(plugin_dir(build_dir) / f"lib{c}.so") for c in CLIENTS]


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    binary, plugins = Path(plan.binary), Path(plan.settings["plugin_dir"])
    return {}, count_job(plan, lambda run, limit: run_once(binary, plan.cpu_model, run, plugins, plan.env, limit), log)


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    return client_metrics(run, mnemonics)


# --- one run ----------------------------------------------------------------------------------


def qemu_command(binary: Path, cpu_model: str, run: Run, plugin_dir: Path, out_dir: Path,
                 env: dict[str, str] | None = None) -> list[str]:
    """`env`: the only variables the guest sees (the MPI rows' OMPI_MCA_ess_singleton_isolated=1)."""
    # A row without SVE (`sve: false`): the CPU has none, so rdvl and every SVE instruction trap.
    cpu = f"{cpu_model},sve-default-vector-length={run.vl // 8}" if run.sve else f"{cpu_model},sve=off"
    cmd = ["env", "-i", *(f"{k}={v}" for k, v in sorted((env or {}).items())), QEMU, "-cpu", cpu]
    for client in CLIENTS:
        extra = f",vl={run.vl}" if client == "memory" else ""
        cmd += ["-plugin", f"{(plugin_dir / f'lib{client}.so').resolve()},out={out_dir / (client + '.json')}{extra}"]
    return cmd + [f"./{binary.name}", *run.argv()]


def replay_command(binary: Path, cpu_model: str, run: Run, plugin_dir: Path, env: dict[str, str] | None = None) -> str:
    """A shell line that reruns the cell exactly as counted, writing the clients' JSON to ./out."""
    d = f"{STAGE_ROOT}/{STAGE_PREFIX}XXXXXXXX"
    qemu = qemu_command(Path("$d") / STAGED_NAME, cpu_model, run, plugin_dir, Path("$d"), env)
    # Every word quoted (paths may hold spaces or shell characters) except the $d it refers to.
    words = ['"$d"'.join(shlex.quote(part) if part else "" for part in w.split("$d")) for w in qemu]
    return (f'd=$(mktemp -d {d}) && cp {shlex.quote(str(binary.resolve()))} "$d/{STAGED_NAME}" && cd "$d" && '
            + " ".join(words) + ' && mkdir -p "$OLDPWD/out" && cp "$d"/*.json "$OLDPWD/out/"')


def run_once(binary: Path, cpu_model: str, run: Run, plugin_dir: Path, env: dict[str, str] | None = None,
             timeout: float | None = None) -> dict[str, Any]:
    """Run one cell and return its record: argv, stdout, VL seen and every client's output.
    A dynamically linked (MPI) binary is staged the same way: its libraries come from the
    multiarch paths, not from beside the binary. `timeout`: seconds before QEMU is killed."""
    cell = cell_name(binary, cpu_model, run)
    with staged(binary) as exe:
        out_dir = exe.parent
        cmd = qemu_command(exe, cpu_model, run, plugin_dir, out_dir, env)
        t0 = time.monotonic()
        proc = run_limited(cmd, timeout, cell, cwd=out_dir)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise RunError(f"{cell}: {msg} (exit {proc.returncode}; command: {' '.join(cmd)})")
        fields = parse_ok_line(proc.stdout, cell)
        clients: dict[str, Any] = {}
        for client in CLIENTS:
            path = out_dir / f"{client}.json"
            if not path.exists():
                raise RunError(f"{cell}: plugin {client} wrote no output ({proc.stderr.strip()[-200:]})")
            data = json.loads(path.read_text())
            m = data.get("markers", {})
            if not m.get("balanced"):
                raise RunError(
                    f"{cell}: ROI markers missing or unbalanced (begin={m.get('begin')}, end={m.get('end')}); "
                    "the kernel must call roi_begin() and roi_end() around its work; no count is reported for it"
                )
            clients[client] = data
    return {
        "vl": run.vl,
        "vl_seen": int(fields["vl"]),
        "size": run.size,
        "op": run.op,
        "dtype": run.dtype,
        "argv": [f"./{STAGED_NAME}", *run.argv()],
        "command": cmd,
        # Runnable as it is: the same staging (a copy at a path of the same length).
        "command_line": replay_command(binary, cpu_model, run, plugin_dir, env),
        "checksum": fields.get("checksum"),
        "seconds": round(seconds, 3),
        **clients,
    }
