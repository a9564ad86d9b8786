"""The evidence that explains a ROI count of one sweep differing on two machines (the x86-64
host and the arm64 node, ci/compare-roi-counts): what this host's QEMU plugins count on the
other machine's binary, and which of the ROI's functions have different code in the two binaries
and which toolchain part each comes from.

When the host's plugins give the node's binary the node's count, counting is the same on both
machines and only the binary differs; the functions whose code differs then name the cause.

Code is compared as objdump disassembles it without the addresses of its layout (normalize):
the two builds differ in layout, so their bytes differ almost everywhere (each PC-relative
operand moves with the code and data before it). Alignment padding after a function is left out.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from analysis.backends import Plan, RunError
from analysis.core import config, files
from analysis.core.toolchain import COMPILERS, OBJDUMP, ToolchainError
from analysis.stages import build, count, parse, subtract

NM = OBJDUMP.replace("objdump", "nm")
# A run of counts.csv: its columns but metric and value (schema_version: the table's, not the run's).
Run = tuple[tuple[str, str], ...]
NOT_RUN = ("metric", "value", "schema_version")


@dataclass(frozen=True)
class Evidence:
    """What explains one run's differing cells. `recount`: metric -> value this host's plugins
    count on the node's binary; `functions`: each ROI function whose code differs -> its
    toolchain part ("libc" or "compiler"); `missing`: why there is none ("" when there is)."""
    recount: dict[str, str]
    functions: dict[str, str]
    missing: str = ""


def run_of(row: dict[str, str]) -> Run:
    return tuple((k, v) for k, v in row.items() if k not in NOT_RUN)


# --- the same code, whatever the layout -----------------------------------------------------

_FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSN = re.compile(r"^\s*[0-9a-f]+:\t(\S+)\t?(.*)$")
_TARGET = re.compile(r"\b[0-9a-f]+ <([^>]+)>")
_BASE = re.compile(r"\[(x\d+|sp)(?:, #(-?(?:0x)?[0-9a-f]+))?\]")
_ADD = re.compile(r"^(x\d+), (x\d+), #(0x[0-9a-f]+|\d+)$")
PADDING = ("nop", "udf", ".inst")
_SLOT = re.compile(r"^(x\d+)(?:, (x\d+))?, \[(sp|x29), #(\d+)\]$")  # str/ldr/stp/ldp at a stack slot
_MOV = re.compile(r"^(x\d+), (x\d+)$")


def _spill(mnem: str, ops: str, paged: set[str], slots: set[tuple[str, int]]) -> None:
    """Follow a register that held an adrp page through a stack slot (stored, then loaded back)."""
    m = _SLOT.match(ops)
    if not m or mnem not in ("str", "stp", "ldr", "ldp"):
        return
    for i, reg in enumerate(r for r in m.group(1, 2) if r):
        slot = (m.group(3), int(m.group(4)) + 8 * i)
        if mnem.startswith("st") and reg in paged:
            slots.add(slot)
        elif mnem.startswith("ld") and slot in slots:
            paged.add(reg)


def normalize(insns: list[tuple[str, str]]) -> tuple[str, ...]:
    """A function's instructions (mnemonic, operands) without the addresses of its layout: a
    branch's or literal's target as objdump names it (`<symbol+offset>`), an adrp's page and the
    low 12 bits put on it (an add's, a load's or store's offset from a register that held a
    page anywhere before in the function, or was loaded from a stack slot such a register was
    stored to) as `page` and `lo12`. Not following the control flow, it also hides an offset
    from such a register reused for other data: the same code stays the same."""
    paged: set[str] = set()
    slots: set[tuple[str, int]] = set()
    out = []
    for mnem, ops in insns:
        ops = _TARGET.sub(r"<\1>", ops.split("//")[0].strip())
        if mnem == "adrp":
            paged.add(ops.split(",")[0])
            ops = ops.split(",")[0] + ", page"
        elif mnem == "mov" and (m := _MOV.match(ops)) and m.group(2) in paged:
            paged.add(m.group(1))
        elif mnem == "add" and (m := _ADD.match(ops)) and m.group(2) in paged:
            ops = f"{m.group(1)}, {m.group(2)}, lo12"
        else:
            _spill(mnem, ops, paged, slots)
            ops = _BASE.sub(lambda b: f"[{b.group(1)}, lo12]" if b.group(1) in paged and b.group(2) else b.group(0), ops)
        out.append(f"{mnem} {ops}".strip())
    while out and out[-1].split()[0] in PADDING:
        out.pop()
    return tuple(out)


def function_bodies(objdump_text: str) -> dict[str, list[tuple[str, ...]]]:
    """Each function's normalized code, by name (a name several static functions share: each one)."""
    bodies: dict[str, list[tuple[str, ...]]] = {}
    name, insns = None, []
    for line in objdump_text.splitlines() + [""]:
        head = _FUNC.match(line)
        if head:
            name, insns = head.group(1), []
        elif (m := _INSN.match(line)) and name is not None:
            insns.append((m.group(1), m.group(2)))
        elif not line.strip() and name is not None:
            bodies.setdefault(name, []).append(normalize(insns))
            name = None
    return {k: sorted(v) for k, v in bodies.items()}


def code(binary: Path) -> dict[str, list[tuple[str, ...]]]:
    """The normalized code of every function of a static AArch64 binary."""
    dis = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    return function_bodies(dis)


@functools.cache  # asked only when a run has evidence to classify
def libc_names() -> frozenset[str]:
    """The names the static libc defines (a function of a binary that is one of them came from
    libc.a; any other from the compiler's objects and its runtime). Both compilers link the
    same libc.a (analysis.core.toolchain), and the node's is another build of the same glibc."""
    libc_a = subprocess.run([*COMPILERS["gcc"].cc, "-print-file-name=libc.a"], capture_output=True,
                            text=True).stdout.strip()
    if not Path(libc_a).is_file():
        raise ToolchainError(f"no libc.a to name the libc's functions ({COMPILERS['gcc'].cc[0]} finds none); "
                             "fix: ./harness setup")
    nm = subprocess.run([NM, "--defined-only", libc_a], capture_output=True, text=True, check=True).stdout
    return frozenset(p[2] for p in (line.split() for line in nm.splitlines()) if len(p) == 3)


def differing_functions(host: dict[str, list[tuple[str, ...]]], node: dict[str, list[tuple[str, ...]]],
                        names: set[str], libc: frozenset[str] | set[str]) -> dict[str, str]:
    """Of `names` (the ROI's functions), those whose code differs (or that one binary lacks),
    each with its toolchain part. `?` (no symbol: the static binary's ifunc PLT stub) has no
    code to compare."""
    return {f: "libc" if f in libc else "compiler"
            for f in sorted(names - {"?"}) if host.get(f) != node.get(f)}


# --- the node's binary counted here ----------------------------------------------------------

def plan_runs(plan: Plan) -> list[dict[str, str]]:
    """The counts.csv columns of each run of a job's plan (analysis.stages.collect's provenance rows)."""
    m = plan.meta
    job = {"kernel": m["kernel"], "variant": m["variant"], "layout": m["layout"],
           "build": config.parse_build(m["build"]).column, "cpu_model": plan.cpu_model, "backend": plan.backend,
           "compiler": m["compiler"]}
    return [{**job, "op": r.op, "dtype": r.dtype, "vl": str(r.vl), "size": str(r.size)} for r in plan.runs]


def find_plan(plans: list[tuple[Path, Plan]], run: Run) -> tuple[Path, Plan] | None:
    """The job (plan file, plan) that counted `run`."""
    for path, plan in plans:
        for r in plan_runs(plan):
            if all(r.get(k, v) == v for k, v in run):
                return path, plan
    return None


def load_plans(results: Path) -> list[tuple[Path, Plan]]:
    return [(p, Plan.from_json(p.read_text())) for p in sorted((results / "plans").rglob("*.json"))]


def recount(plan: Plan, binary: Path, raw: Path, columns: list[str]) -> dict[Run, dict[str, str]]:
    """Count `binary` as `plan` counted its own, with this host's plugins: every run's metrics
    as counts.csv has them (raw, net, linearity), by run (of `columns`). The raw file goes to `raw`, the job's log beside it."""
    # Without the shared preparations: they are the host binary's (counts are the same without).
    settings = {k: v for k, v in plan.settings.items() if k != "prep_cache"}
    with raw.with_suffix(".log").open("w") as log, contextlib.redirect_stderr(log):  # the job's lines
        count.run(replace(plan, binary=str(binary), settings=settings), raw)
    doc = json.loads(raw.read_text())
    rows = pd.DataFrame(list(parse.job_rows(doc, parse.decode_mnemonics([doc]))))
    out: dict[Run, dict[str, str]] = {}
    for row in subtract.subtract(rows).to_dict("records"):
        run = tuple((c, str(row[c])) for c in columns if c in row)
        out.setdefault(run, {})[row["metric"]] = str(int(row["value"]))
    return out


def provenance(counts: Path) -> list[dict[str, str]]:
    """The provenance.csv rows beside `counts` ([] without it)."""
    path = counts.with_name("provenance.csv")
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def counted_sha256(prov: list[dict[str, str]], run: Run) -> str | None:
    """The SHA-256 of the binary that counted `run`, as its provenance row records it."""
    for row in prov:
        if all(row.get(k, v) == v for k, v in run):
            return row.get("binary_sha256")
    return None


@dataclass(frozen=True)
class Job:
    """One job's evidence: its runs recounted on the node's binary, both binaries' code."""
    counts: dict[Run, dict[str, str]]
    host_code: dict[str, list[tuple[str, ...]]]
    node_code: dict[str, list[tuple[str, ...]]]
    missing: str = ""


def job_evidence(plan: Plan, raw: Path, node_build: Path, run: Run,
                 host_prov: list[dict[str, str]], node_prov: list[dict[str, str]]) -> Job:
    """The node's binary of `plan`'s job (under `node_build`, as the host's is under its build
    folder), checked to be the one each side's provenance says counted `run`, recounted here."""
    host_bin = Path(plan.binary)
    node_bin = build.binary_path(node_build, plan.meta["compiler"], plan.meta["build"], plan.backend, host_bin.name)
    if not node_bin.is_file():
        return Job({}, {}, {}, f"no node binary {node_bin} (the node's sweep step copies build/*/*/bin)")
    for side, binary, prov in (("node", node_bin, node_prov), ("host", host_bin, host_prov)):
        want = counted_sha256(prov, run)
        if not binary.is_file() or files.sha256(binary) != want:
            return Job({}, {}, {}, f"{binary} is not the binary the {side} counted (provenance.csv: sha256 {want})")
    try:
        counts = recount(plan, node_bin, raw, [k for k, _ in run])
    except RunError as e:
        return Job({}, {}, {}, f"the node's binary did not run here: {e}")
    return Job(counts, code(host_bin), code(node_bin))


def gather(runs: dict[Run, set[str]], host_counts: Path, node_counts: Path) -> dict[Run, Evidence]:
    """Evidence for each run, given its ROI functions: the job that counted it on the host (its
    plan beside `host_counts`), the node's binary of that job (in build/ beside `node_counts`)
    recounted here (raw files to recount/ beside it), its code against the host binary's."""
    plans_dir = host_counts.parent / "plans"
    plans = load_plans(host_counts.parent)
    host_prov, node_prov = provenance(host_counts), provenance(node_counts)
    jobs: dict[Path, Job] = {}
    out: dict[Run, Evidence] = {}
    for run, names in runs.items():
        found = find_plan(plans, run)
        if found is None:
            out[run] = Evidence({}, {}, f"no plan of its job in {plans_dir}")
            continue
        path, plan = found
        if path not in jobs:
            raw = node_counts.parent / "recount" / path.relative_to(plans_dir)
            raw.parent.mkdir(parents=True, exist_ok=True)
            jobs[path] = job_evidence(plan, raw, node_counts.parent / "build", run, host_prov, node_prov)
        job = jobs[path]
        if job.missing:
            out[run] = Evidence({}, {}, job.missing)
            continue
        out[run] = Evidence(job.counts.get(run, {}), differing_functions(job.host_code, job.node_code, names, libc_names()))
    return out
