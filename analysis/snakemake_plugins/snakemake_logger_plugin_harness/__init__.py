"""Snakemake logger plugin `harness` (`--logger harness`): the maintained rich plugin
(snakemake-logger-plugin-rich) with two more columns in its progress panel, the steps done of
the total and the estimated time left, and a failed job in one line (rule, wildcards, the cause
from its log, the log's path) instead of its whole log; after it, Snakemake's own account of the
failure (RuleException, the command, "Shutting down", WorkflowError) is left out: it says
nothing the line does not, and buried it. Everything else (the panel, plain lines without a
terminal, Snakemake's other messages and errors) is the rich plugin's.

./harness sweep puts this directory on PYTHONPATH; Snakemake finds logger plugins by their
module name (snakemake_logger_plugin_<name>).
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from rich.progress import MofNCompleteColumn, TimeRemainingColumn
from rich.text import Text
from snakemake_logger_plugin_rich import LogHandler as RichLogHandler
from snakemake_logger_plugin_rich.event_handler import EventHandler

from analysis.core.failure import cause

__all__ = ["LogHandler"]


# Below this many free bytes a log that stayed empty is blamed on the disk: the job's own
# error line could not be written either.
FULL_DISK_BYTES = 64 * 1024


# What Snakemake says around a failed job, which the failure line already says: the failed
# shell command comes just before the job's error event, the rest after it.
FAILED_COMMAND = "RuleException:\nCalledProcessError in file"
AFTER_A_FAILED_JOB = ("Error in rule ", "Shutting down, this might take", "Exiting because a job execution failed",
                      "WorkflowError:\nAt least one job did not complete")


def why(paths: list[str]) -> str:
    for path in paths:
        p = Path(path)
        text = p.read_text(errors="replace") if p.is_file() else ""
        if text.strip():
            return cause(text)
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
    failed = False

    def said_already(self, message: str) -> bool:
        message = message.lstrip()
        return message.startswith(FAILED_COMMAND) or (self.failed and message.startswith(AFTER_A_FAILED_JOB))

    def handle_error(self, event_data: Any, **kwargs: Any) -> None:
        if not self.said_already(str(event_data.message or "")):
            super().handle_error(event_data, **kwargs)

    def handle_generic_record(self, record: logging.LogRecord, **kwargs: Any) -> None:
        if not self.said_already(record.getMessage()):
            super().handle_generic_record(record, **kwargs)

    def handle_job_error(self, event_data: Any, **kwargs: Any) -> None:
        self.failed = True
        info = self.jobs_info.get(event_data.jobid, {})
        logs = [str(p) for p in info.get("log") or []]
        wc = ", ".join(f"{k}={v}" for k, v in dict(info.get("wildcards") or {}).items())
        where = f"{info.get('rule', f'job {event_data.jobid}')}" + (f" ({wc})" if wc else "")
        line = f"✗ {where}: {why(logs)}" + (f" (log: {logs[0]})" if logs else "")
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
