"""Issue 35 item 5: each row of the summary's verdict table names the data its verdict rests on,
taken from the check's backend in the typed sweep (the sweep file's `backend`, else the sweep's
first counting backend) and from its conditions', as each backend names its data
(Backend.EVIDENCE): QEMU's plugins, gem5, ArmIE. In-process, nothing runs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from analysis.backends.registry import REGISTRY
from analysis.core import config
from analysis.stages import checks, summary
from conftest import REPO

DEFAULT = REPO / "configs" / "default.yaml"


def _table(sweep: config.Sweep, tmp_path: Path) -> list[str]:
    counts = pd.DataFrame(columns=["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend",
                                   "compiler", "vl", "size", "metric", "value"])
    prov = pd.DataFrame(columns=["kernel", "variant", "size", "roi_symbol"])
    # No rows: every count check says 'not run: no data', gem5's 'not run: gem5 not found'.
    rows = [checks.claim(c, counts, prov, sweep, ran=set()) if c.is_gem5 else
            checks.Claim(c, c.paper_value(), "-", "skipped", "no rows") for c in sweep.checks]
    out = tmp_path / "summary.md"
    summary.write_summary(rows, counts, out, sweep)
    text = out.read_text()
    return [ln for ln in text.split("\n\n")[2].splitlines()]


def test_every_verdict_names_the_backend_of_its_check(tmp_path: Path) -> None:
    sweep = config.load(DEFAULT)
    table = _table(sweep, tmp_path)
    assert table[0] == "| claim | paper | ours | verdict | evidence |" and len(table) == 2 + len(sweep.checks)
    for check, row in zip(sweep.checks, table[2:]):
        assert row.startswith(f"| Fig. {check.figure}: {check.claim} |")
        want = "gem5" if check.metric.startswith("gem5.") else "QEMU plugins"
        assert row.endswith(f" | {want} |"), row


def test_the_evidence_follows_the_sweep_file_not_a_list(tmp_path: Path) -> None:
    """A sweep whose first counting backend is ArmIE rests its count checks on ArmIE; a condition
    read from another backend adds that backend's data to its row."""
    sweep = config.load(DEFAULT)
    ratio = next(c for c in sweep.checks if c.id == "fig2_ratio")
    on_armie = dataclasses.replace(ratio, backend="armie", conditions=())
    mixed = dataclasses.replace(ratio, conditions=(dataclasses.replace(
        ratio.conditions[0], check=dataclasses.replace(ratio.conditions[0].check, backend="gem5")),))
    assert summary.evidence(on_armie) == REGISTRY["armie"].EVIDENCE == "ArmIE"
    assert summary.evidence(mixed) == "QEMU plugins, gem5"
    sweep.checks = [on_armie, mixed]
    table = _table(sweep, tmp_path)
    assert table[2].endswith(" | ArmIE |") and table[3].endswith(" | QEMU plugins, gem5 |")
