"""Parse stage: raw per-run client outputs -> tidy rows (one value per metric).

Metric names are dotted paths: `<scope>.<counter>`, scope `roi` (between the markers) or
`whole` (the whole program), counters `total`, `sve`, `class.<class>`, `func.<symbol>`,
`op.<mnemonic>`, `mem.<class>.insns|bytes` (`bytes_derived` for SVE classes),
`mem.qemu_observed.loads|stores|other`.
"""
from __future__ import annotations

from typing import Any, Iterator

from analysis.backends.registry import REGISTRY
from analysis.core.config import parse_build
from analysis.core.decode import decode, mnemonic


def run_metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    """A raw record's metrics, as its backend reads them."""
    return REGISTRY[meta["backend"]].metrics(meta, run, mnemonics)


def job_rows(doc: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[dict[str, Any]]:
    meta = doc["meta"]
    for run in doc["runs"]:
        base = {
            "kernel": meta["kernel"], "variant": meta["variant"], "op": run["op"], "dtype": run["dtype"],
            "layout": meta["layout"], "build": parse_build(meta["build"]).column, "cpu_model": meta["cpu_model"],
            "backend": meta["backend"], "compiler": meta["compiler"], "vl": run["vl"], "size": run["size"],
        }
        for metric, value in run_metrics(meta, run, mnemonics):
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
