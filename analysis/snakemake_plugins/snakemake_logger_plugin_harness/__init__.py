"""Snakemake logger plugin `harness` (`--logger harness`): the maintained rich plugin
(snakemake-logger-plugin-rich) with two more columns in its progress panel, the steps done of
the total and the estimated time left. Everything else (what is shown, failures with their log,
plain lines without a terminal) is the rich plugin's.

./harness sweep puts this directory on PYTHONPATH; Snakemake finds logger plugins by their
module name (snakemake_logger_plugin_<name>).
"""
from __future__ import annotations

from rich.progress import MofNCompleteColumn, TimeRemainingColumn
from snakemake_logger_plugin_rich import LogHandler as RichLogHandler

__all__ = ["LogHandler"]


class LogHandler(RichLogHandler):
    def __post_init__(self) -> None:
        super().__post_init__()
        # The rich plugin's columns end with percent done and elapsed time.
        *head, percent, elapsed = self.progress.columns
        self.progress.columns = (*head, MofNCompleteColumn(), percent, elapsed, TimeRemainingColumn())
