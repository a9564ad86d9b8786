"""What the counting clients record (docs/contracts.md 2), whichever backend ran them (QEMU's
plugins, ArmIE's clients in the same shape): its metrics for the tidy table and its checks at the
collect hand-over.
"""
from __future__ import annotations

from typing import Any, Iterator

from analysis.backends import RecordError


def _counts(scope: str, part: dict[str, Any]) -> Iterator[tuple[str, int]]:
    yield f"{scope}.total", part["total"]
    if part.get("sve") is not None:
        yield f"{scope}.sve", part["sve"]
    for cls, n in (part.get("classes") or {}).items():
        yield f"{scope}.class.{cls}", n


def client_metrics(run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    """The metrics of a record in the counting clients' shape (inscount, opcodes, memory;
    docs/contracts.md 2), whichever backend ran them."""
    ins = run["inscount"]
    if ins["whole"] is not None:  # None: a client that counts the ROI only (DynamoRIO's in the guest)
        yield from _counts("whole", ins["whole"])
    yield from _counts("roi", ins["roi"])
    for f in ins.get("roi_functions") or []:
        yield f"roi.func.{f['symbol']}", f["total"]
    if "opcodes" in run and run["opcodes"].get("roi") is not None:
        by_mnemonic: dict[str, int] = {}
        for e in run["opcodes"]["roi"]:
            m = mnemonics[int(e["encoding"], 16)]
            by_mnemonic[m] = by_mnemonic.get(m, 0) + e["count"]
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


def _count(value: Any, where: str) -> int:
    # bool is an int in Python but never a count.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RecordError(f"{where} is {value!r}, not a count")
    return value


def _check_counts(part: Any, where: str) -> None:
    if not isinstance(part, dict):
        raise RecordError(f"{where} is {part!r}, not a count record (markers missing or unbalanced?)")
    total = _count(part.get("total"), f"{where}.total")
    classes = part.get("classes")
    if classes is None:  # ArmIE reports no classes
        return
    if not isinstance(classes, dict) or not classes:
        raise RecordError(f"{where}.classes is {classes!r}, not a table of class counts")
    counts = {c: _count(n, f"{where}.classes.{c}") for c, n in classes.items()}
    if sum(counts.values()) != total:
        raise RecordError(f"{where}: the classes sum to {sum(counts.values())}, not to the total {total}")
    if part.get("sve") is not None:
        sve = _count(part["sve"], f"{where}.sve")
        in_sve = sum(n for c, n in counts.items() if c.startswith("sve_"))
        if in_sve != sve:
            raise RecordError(f"{where}: the SVE classes sum to {in_sve}, not to the SVE count {sve}")


def check_client_record(run: dict[str, Any], where: str, whole: bool = True) -> None:
    """A record in the counting clients' shape (inscount, opcodes, memory; docs/contracts.md 2),
    whichever backend ran them: every count an integer, the instruction classes summing to the
    total, the SVE classes to the SVE count, the opcodes to the ROI total, balanced markers.
    whole=False: its client counts the ROI only, so its whole-program counts may be None."""
    if "inscount" not in run:
        raise RecordError(f"{where} has no inscount counts")
    for client in ("inscount", "opcodes", "memory"):
        data = run.get(client)
        if data is None:
            continue
        markers = data.get("markers") if isinstance(data, dict) else None
        if markers is not None and markers.get("balanced") is not True:
            raise RecordError(f"{where}.{client}: ROI markers unbalanced ({markers})")
    ins = run["inscount"]
    if whole or ins.get("whole") is not None:
        _check_counts(ins.get("whole"), f"{where}.inscount.whole")
    _check_counts(ins.get("roi"), f"{where}.inscount.roi")
    ops = (run.get("opcodes") or {}).get("roi")
    if ops is not None:
        n = 0
        for e in ops:
            if not isinstance(e, dict) or not isinstance(e.get("encoding"), str):
                raise RecordError(f"{where}.opcodes.roi holds {e!r}, not an encoding and its count")
            n += _count(e.get("count"), f"{where}.opcodes.roi[{e['encoding']}]")
        if n != ins["roi"]["total"]:
            raise RecordError(f"{where}: the opcode histogram sums to {n}, not to the ROI total {ins['roi']['total']}")
