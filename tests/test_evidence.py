"""Issue 35 item 5: each row of a verdict table names the data its verdict rests on, as the records
of the runs it read say where they ran (Backend.evidence of each raw file's meta): provenance.csv's
evidence column for the summary's count and cycle checks (QEMU plugins, gem5, ArmIE on an AArch64
host, DynamoRIO in the guest), the perf raw files for perf_summary.md's claims (perf on A64FX,
perf in the guest, perf on another host). A check whose rows were not run names the data its
backend would give (Backend.EVIDENCE). In-process, nothing runs."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.backends.registry import REGISTRY
from analysis.core import config
from analysis.stages import checks, collect, summary
from conftest import REPO

DEFAULT = REPO / "configs" / "default.yaml"
COUNT_COLUMNS = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl", "size",
                 "metric", "value"]
# What perf.host_cpu() says on an A64FX (implementer 'F', part 1) and on this kind of host.
A64FX = "aarch64 implementer 0x46 part 0x001"
XEON = "Intel(R) Xeon(R) CPU @ 2.20GHz"
GUEST = {"kernel": "Linux 6.1.0-56-arm64", "emulator": "QEMU emulator version 7.2.22", "guest_command": "qemu-system-aarch64 ..."}


def _table(sweep: config.Sweep, tmp_path: Path, prov: pd.DataFrame | None = None) -> list[str]:
    """The summary's verdict table of `sweep` with no counts (every check 'not run'), its evidence
    taken from `prov` (none: no runs)."""
    counts = pd.DataFrame(columns=COUNT_COLUMNS)
    if prov is None:
        prov = pd.DataFrame(columns=[*COUNT_COLUMNS[:-2], "roi_symbol", "evidence"])
    # No rows: every count check says 'not run: no data', gem5's 'not run: gem5 not found'.
    rows = [checks.claim(c, counts, prov, sweep, ran=set()) if c.is_gem5 else
            checks.Claim(c, c.paper_value(), "-", "skipped", "no rows", evidence=checks.evidence(c, prov))
            for c in sweep.checks]
    out = tmp_path / "summary.md"
    summary.write_summary(rows, counts, out, sweep)
    text = out.read_text()
    return [ln for ln in text.split("\n\n")[2].splitlines()]


def test_a_check_without_runs_names_the_data_its_backend_would_give(tmp_path: Path) -> None:
    sweep = config.load(DEFAULT)
    table = _table(sweep, tmp_path)
    assert table[0] == "| claim | paper | ours | verdict | evidence |" and len(table) == 2 + len(sweep.checks)
    for check, row in zip(sweep.checks, table[2:]):
        assert row.startswith(f"| Fig. {check.figure}: {check.claim} |")
        want = "gem5" if check.metric.startswith("gem5.") else "QEMU plugins"
        assert row.endswith(f" | {want} |"), row


def test_without_runs_the_evidence_follows_the_sweep_file_not_a_list() -> None:
    """A sweep whose first counting backend is ArmIE rests its count checks on ArmIE; a condition
    read from another backend adds that backend's data to its row."""
    sweep = config.load(DEFAULT)
    ratio = next(c for c in sweep.checks if c.id == "fig2_ratio")
    on_armie = dataclasses.replace(ratio, backend="armie", conditions=())
    mixed = dataclasses.replace(ratio, conditions=(dataclasses.replace(
        ratio.conditions[0], check=dataclasses.replace(ratio.conditions[0].check, backend="gem5")),))
    none = pd.DataFrame(columns=[*COUNT_COLUMNS[:-2], "evidence"])
    assert checks.evidence(on_armie, none) == REGISTRY["armie"].EVIDENCE == "ArmIE"
    assert checks.evidence(mixed, none) == "QEMU plugins, gem5"


def _raw(backend: str, kernel: str, variant: str, **meta: Any) -> dict[str, Any]:
    """A raw file of one run as a job of `backend` writes it (the parts provenance.csv reads)."""
    return {"meta": {"kernel": kernel, "variant": variant, "layout": "-", "build": "vla", "cpu_model": "max",
                     "backend": backend, "compiler": "gcc", "binary": "k", "binary_sha256": "0" * 64,
                     "build_commands": ["cc"], "versions": {"compiler.gcc": "gcc 12", "host": "h"}, **meta},
            "runs": [{"op": "-", "dtype": "uint8", "vl": 256, "size": 4096, "vl_seen": 256, "checksum": "c",
                      "command": ["k"], "seconds": 1.0, "inscount": {"roi": {"total": 1}}}]}


def test_the_provenance_says_where_each_run_was_counted() -> None:
    """provenance.csv's evidence column, from each raw file's meta: the armie backend's runs are
    DynamoRIO's where the job ran in the emulated guest (its meta records the guest), ArmIE's on
    an AArch64 host."""
    got = [collect.provenance_rows(_raw(b, "copy", "acle_4v", **extra))[0]["evidence"]
           for b, extra in [("qemu", {}), ("armie", {}), ("armie", {"guest": GUEST})]]
    assert got == ["QEMU plugins", "ArmIE", "DynamoRIO in the guest"]


def test_the_provenance_names_the_static_libc_beside_the_compiler() -> None:
    """The glibc build is a named toolchain part: the node's 2.36-9 against the host's cross
    2.36-8 was the whole difference of 139 ROI cells of the tiny sweep."""
    doc = _raw("qemu", "pack", "blocks_call")
    doc["meta"]["versions"]["libc.gcc"] = "2.36-8cross1 libc.a:e8"
    row = collect.provenance_rows(doc)[0]
    assert (row["compiler_version"], row["libc_version"]) == ("gcc 12", "2.36-8cross1 libc.a:e8")


def test_a_verdict_names_the_data_of_the_rows_it_read(tmp_path: Path) -> None:
    """The Fig. 2 ratio counted by the armie backend in the guest names DynamoRIO in the guest
    (the sweep file says armie: its config alone named ArmIE); a condition read from QEMU's rows
    adds QEMU's plugins; the rows of other kernels or backends do not count."""
    sweep = config.load(DEFAULT)
    ratio = next(c for c in sweep.checks if c.id == "fig2_ratio")
    sweep.checks = [dataclasses.replace(ratio, backend="armie", conditions=()), ratio]
    prov = pd.DataFrame([collect.provenance_rows(d)[0] for d in [
        _raw("armie", "copy", "acle_4v", guest=GUEST), _raw("armie", "copy", "c_autovec", guest=GUEST),
        _raw("qemu", "copy", "acle_4v"), _raw("qemu", "copy", "c_autovec"), _raw("qemu", "copy", "c_scalar"),
        _raw("armie", "pack", "acle")]])
    table = _table(sweep, tmp_path, prov)
    assert [row.rsplit(" | ", 1)[1] for row in table[2:]] == ["DynamoRIO in the guest |", "QEMU plugins |"]
    assert checks.evidence(ratio, prov) == "QEMU plugins"  # its conditions read QEMU's rows too


def _perf_meta(build: str, kernel: str, variant: str, cpu: str, guest: bool) -> dict[str, Any]:
    return {"backend": "perf", "kernel": kernel, "variant": variant, "build": build, "cpu": cpu,
            **({"guest": GUEST} if guest else {})}


def _perf_table(sweep: config.Sweep) -> pd.DataFrame:
    """perf.csv with a time, a bandwidth and an instruction row of every kernel the perf checks
    read, at their VLs and the families' largest sizes."""
    assert sweep.perf is not None
    rows = []
    for chk in sweep.perf.checks:
        for sel in (chk.numerator, chk.denominator):
            size = max(sweep.perf.sizes[sweep.table.selector_family(sel).name])
            for vl in (256, 512):
                for metric in ("time_per_call", "bandwidth", "instructions"):
                    rows.append({"kernel": sel.kernel, "variant": sel.variant, "op": sel.op or "-",
                                 "dtype": sel.dtype or "float", "layout": "-", "build": "vla", "cpu_model": "native",
                                 "backend": "perf", "compiler": "native", "vl": vl, "size": size, "metric": metric,
                                 "status": "ok", "unit": "", "n": 30, "mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0,
                                 "running_pct": math.nan})
    return pd.DataFrame(rows).drop_duplicates(["kernel", "variant", "op", "dtype", "vl", "size", "metric"])


def test_the_perf_claims_name_where_their_sve_runs_ran() -> None:
    """perf_summary.md's claims: perf on A64FX where the raw files of the SVE runs say A64FX, perf
    in the guest where they record the guest (then the timing claims are not measured), never the
    host baselines' machine."""
    sweep = config.load(DEFAULT)
    assert sweep.perf is not None
    df = _perf_table(sweep)
    sel = {s for c in sweep.perf.checks for s in (c.numerator, c.denominator)}
    host = [_perf_meta("host", s.kernel, s.variant or "", XEON, False) for s in sel]
    on_a64fx = [_perf_meta("vla", s.kernel, s.variant or "", A64FX, False) for s in sel] + host
    in_guest = [_perf_meta("vla", s.kernel, s.variant or "", "emulated", True) for s in sel] + host
    rows = checks.perf_claims(df, sweep.perf, sweep.table, None, on_a64fx)
    assert len(rows) == 6 and all(r.endswith(" | pass | perf on A64FX |") or r.endswith(" | FAIL | perf on A64FX |")
                                  for r in rows), rows
    rows = checks.perf_claims(df, sweep.perf, sweep.table, "emulated AArch64", in_guest)
    assert rows[0] == (f"| 11 | {sweep.perf.checks[0].claim} | - | not measured: emulated AArch64 | 2.0 | - | "
                       "perf in the guest |")
    assert all(r.endswith(" | perf in the guest |") for r in rows) and len(rows) == 4
    assert checks.stats_evidence(host, *sel) == "-"
    assert checks.stats_evidence([_perf_meta("vla", "pack", "acle", XEON, False)], *sel) == f"perf on {XEON}"
    text = summary.stats_summary(df, [], [], rows)
    assert "| Fig. | claim | VL | ours | paper | verdict | evidence |" in text.splitlines()
