"""Parse stage: raw per-run client outputs -> tidy rows (one value per metric).

Metric names are dotted paths: `<scope>.<counter>`, scope `roi` (between the markers) or
`whole` (the whole program), counters `total`, `sve`, `class.<class>`, `func.<symbol>`,
`op.<mnemonic>`, `mem.<class>.insns|bytes` (`bytes_derived` for SVE classes),
`mem.qemu_observed.loads|stores|other`.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterator

from analysis.decode import decode, mnemonic

KEY = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl", "size", "metric"]


def _counts(scope: str, part: dict[str, Any]) -> Iterator[tuple[str, int]]:
    yield f"{scope}.total", part["total"]
    if part.get("sve") is not None:
        yield f"{scope}.sve", part["sve"]
    for cls, n in (part.get("classes") or {}).items():
        yield f"{scope}.class.{cls}", n


def run_metrics(run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    if "gem5" in run:
        # The table holds integers: IPC in thousandths.
        for metric, value in run["gem5"].items():
            yield (f"gem5.{metric}", round(value)) if metric != "ipc" else ("gem5.ipc_milli", round(1000 * value))
        return
    ins = run["inscount"]
    yield from _counts("whole", ins["whole"])
    yield from _counts("roi", ins["roi"])
    for f in ins.get("roi_functions") or []:
        yield f"roi.func.{f['symbol']}", f["total"]
    if "opcodes" in run and run["opcodes"].get("roi") is not None:
        by_mnemonic: Counter[str] = Counter()
        for e in run["opcodes"]["roi"]:
            by_mnemonic[mnemonics[int(e["encoding"], 16)]] += e["count"]
        for m, n in sorted(by_mnemonic.items()):
            yield f"roi.op.{m}", n
    if "memory" in run and run["memory"].get("roi") is not None:
        mem = run["memory"]["roi"]
        for cls, v in mem["classes"].items():
            yield f"roi.mem.{cls}.insns", v["insns"]
            # QEMU 7.2 never shows SVE accesses to plugins: those bytes come from the
            # encoding at the run's VL (all lanes active), and the metric name says so.
            yield f"roi.mem.{cls}.{'bytes_derived' if cls.startswith('sve_') else 'bytes'}", v["bytes"]
        for k, n in (mem.get("qemu_observed") or {}).items():
            yield f"roi.mem.qemu_observed.{k}", n


def build_kind(build: str) -> str:
    return "vls" if build.startswith("vls") else "vla"


def job_rows(doc: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[dict[str, Any]]:
    meta = doc["meta"]
    for run in doc["runs"]:
        base = {
            "kernel": meta["kernel"], "variant": meta["variant"], "op": run["op"], "dtype": run["dtype"],
            "layout": meta["layout"], "build": build_kind(meta["build"]), "cpu_model": meta["cpu_model"],
            "backend": meta["backend"], "compiler": meta["compiler"], "vl": run["vl"], "size": run["size"],
        }
        for metric, value in run_metrics(run, mnemonics):
            yield {**base, "metric": metric, "value": int(value)}


def all_encodings(docs: list[dict[str, Any]]) -> set[int]:
    return {
        int(e["encoding"], 16)
        for d in docs for r in d["runs"]
        for e in ((r.get("opcodes") or {}).get("roi") or [])
    }


def decode_mnemonics(docs: list[dict[str, Any]]) -> dict[int, str]:
    return {w: mnemonic(t) for w, t in decode(sorted(all_encodings(docs))).items()}


def roi_symbol(run: dict[str, Any], ignore: tuple[str, ...] = ("roi_begin", "roi_end", "main")) -> str:
    """The function that executed most instructions inside the ROI (e.g. which memcpy ifunc)."""
    funcs = [f for f in (run.get("inscount") or {}).get("roi_functions") or [] if f["symbol"] not in ignore]
    return funcs[0]["symbol"] if funcs else "?"
