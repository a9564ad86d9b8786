"""What one SimEng run prints, read (the simeng backend): the patch's `[SimEng:ROI]` lines among
the program's own output, the program's exit, and the line SimEng halts with when it meets an
instruction or a system call it cannot run."""
from __future__ import annotations

import re
from dataclasses import dataclass

# SimEng counts the end marker retired before it records the ROI: retired = QEMU roi.total + 1.
END_MARKER = 1
ROI_TAG = "[SimEng:ROI] "
# The lines SimEng prints when it stops on something it cannot do (besides the program's exit).
HALT = re.compile(r"\[SimEng:ExceptionHandler\] (Encountered .*|Unrecognised syscall.*|Unsupported arguments.*)")
INSTRUCTION = re.compile(r"\[SimEng:ExceptionHandler\]\s+0x[0-9a-f]+:[ 0-9a-f]*\s+(.+)")
EXIT = re.compile(r"\[SimEng:ExceptionHandler\] Received exit_group syscall: terminating with exit code (-?\d+)")
SPEED = re.compile(r"\[SimEng\] Finished (\d+) ticks in (\d+)ms .*?([\d.]+) MIPS\)")
WHOLE_RETIRED = re.compile(r"^\[SimEng\] retired: (\d+)$", re.M)


@dataclass(frozen=True)
class Output:
    """What one SimEng run printed, read: its ROI records, unbalanced-marker lines, the program's
    exit code (None: it did not exit), SimEng's line when it halted on something it cannot do
    (with the instruction), and what it simulated: the whole program's instructions and the
    milliseconds it took (None where it did not say)."""
    rois: tuple[dict[str, int], ...]
    unbalanced: tuple[str, ...]
    exit_code: int | None
    halted: str | None
    whole_retired: int | None
    milliseconds: int | None


def parse_output(stdout: str) -> Output:
    """SimEng's stdout, the program's own output mixed in: a ROI line may follow program output
    that did not end its line, so the tag is looked for anywhere in a line."""
    rois: list[dict[str, int]] = []
    unbalanced: list[str] = []
    for line in stdout.splitlines():
        at = line.find(ROI_TAG)
        if at < 0:
            continue
        words = line[at + len(ROI_TAG):].split()
        fields = dict(w.split("=", 1) for w in words if "=" in w)
        if len(fields) == len(words) and all(re.fullmatch(r"-?\d+", v) for v in fields.values()):
            rois.append({k: int(v) for k, v in fields.items()})
        else:
            unbalanced.append(line[at:].strip())
    exit_code = EXIT.search(stdout)
    halted = HALT.search(stdout)
    instruction = INSTRUCTION.search(stdout, halted.end()) if halted else None
    speed, whole = SPEED.search(stdout), WHOLE_RETIRED.search(stdout)
    why = None
    if halted:
        why = halted.group(1).strip() + (f" at `{instruction.group(1).strip()}`" if instruction else "")
    return Output(tuple(rois), tuple(unbalanced), int(exit_code.group(1)) if exit_code else None, why,
                  int(whole.group(1)) if whole else None, int(speed.group(2)) if speed else None)


def not_run_reason(out: Output, returncode: int, stdout: str, stderr: str) -> str | None:
    """Why a run gives no cycles (None: it gives them): one balanced ROI and an exit 0 with the
    kernel's `ok` line, or else the first thing that went wrong."""
    if out.halted:
        return f"SimEng halted: {out.halted}"
    if returncode != 0:
        what = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        last = next((ln for ln in reversed((stderr + "\n" + stdout).splitlines()) if ln.strip()), "no output")
        return f"SimEng stopped with {what}: {last.strip()[:160]}"
    if out.exit_code is None:
        return "SimEng ended without the program's exit"
    if out.exit_code != 0:
        fail = next((ln for ln in stdout.splitlines() if "FAIL" in ln), "")
        return f"the program exited with {out.exit_code}" + (f": {fail.strip()[:160]}" if fail else "")
    if out.unbalanced:
        return f"unbalanced ROI markers: {out.unbalanced[0]}"
    if len(out.rois) != 1:
        return f"{len(out.rois)} ROI lines, not 1"
    if not any(ln.startswith("ok ") for ln in stdout.splitlines()):
        return "the kernel printed no 'ok' line"
    return None
