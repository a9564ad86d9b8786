"""Snakemake logger plugin `harness` (`--logger harness`): the maintained rich plugin
(snakemake-logger-plugin-rich) with two more columns in its progress panel, the steps done of
the total and the estimated time left, and a failed job in one line (rule, wildcards, the last
line of its log, the log's path) instead of its whole log. Everything else (the panel, plain
lines without a terminal, Snakemake's own error messages) is the rich plugin's.

./harness sweep puts this directory on PYTHONPATH; Snakemake finds logger plugins by their
module name (snakemake_logger_plugin_<name>).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rich.progress import MofNCompleteColumn, TimeRemainingColumn
from rich.text import Text
from snakemake_logger_plugin_rich import LogHandler as RichLogHandler
from snakemake_logger_plugin_rich.event_handler import EventHandler

__all__ = ["LogHandler"]


# Below this many free bytes a log that stayed empty is blamed on the disk: the job's own
# error line could not be written either.
FULL_DISK_BYTES = 64 * 1024


def last_line(paths: list[str]) -> str:
    for path in paths:
        p = Path(path)
        lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()] if p.is_file() else []
        if lines:
            return lines[-1].strip()
    for path in paths:
        full = no_space(Path(path).parent)
        if full:
            return full
    return "(empty log)"


def no_space(folder: Path) -> str | None:
    """Why a job's log is empty when the disk holding it is full (the job's message was lost)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if free >= FULL_DISK_BYTES:
        return None
    return (f"no space left on the device of {folder} ({free // 1024} KiB free; the job's log stayed empty): "
            "free some space or choose another results_dir, then run again")


class OneLineFailures(EventHandler):
    def handle_job_error(self, event_data: Any, **kwargs: Any) -> None:
        info = self.jobs_info.get(event_data.jobid, {})
        logs = [str(p) for p in info.get("log") or []]
        wc = ", ".join(f"{k}={v}" for k, v in dict(info.get("wildcards") or {}).items())
        where = f"{info.get('rule', f'job {event_data.jobid}')}" + (f" ({wc})" if wc else "")
        line = f"✗ {where}: {last_line(logs)}" + (f" (log: {logs[0]})" if logs else "")
        self.console.print(Text(line, style="bold red"), soft_wrap=True)


class LogHandler(RichLogHandler):
    def __post_init__(self) -> None:
        super().__post_init__()
        # The rich plugin's columns end with percent done and elapsed time.
        *head, percent, elapsed = self.progress.columns
        self.progress.columns = (*head, MofNCompleteColumn(), percent, elapsed, TimeRemainingColumn())
        self.event_handler = OneLineFailures(
            console=self.console, progress=self.progress, live_display=self.live_display,
            dryrun=self.settings.dryrun, printshellcmds=self.settings.printshellcmds,
            show_failed_logs=self.settings.show_failed_logs, verbose=self.settings.verbose,
        )
