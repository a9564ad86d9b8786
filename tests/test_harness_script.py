"""./harness: one table of commands, which both `help` prints and the script dispatches from (the
list lived in three places, `help` omitted commands and printed a stray `set -euo pipefail`)."""
from __future__ import annotations

import re
import subprocess

from conftest import PY, REPO

HARNESS = REPO / "harness"


def listed(text: str) -> list[str]:
    return re.findall(r"^  (\S+) ", text, re.M)


def test_help_lists_every_command_once_each_with_a_line() -> None:
    proc = subprocess.run([str(HARNESS), "help"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    names = listed(proc.stdout)
    cli = subprocess.run([PY, "-m", "analysis.commands.cli", "--help"], cwd=REPO, capture_output=True, text=True)
    subcommands = re.search(r"\{([a-z,]+)\}", cli.stdout).group(1).split(",")
    assert sorted(names) == sorted({*subcommands, "setup", "bench", "ab", "docs", "help"}), names
    assert "set -" not in proc.stdout
    assert all(len(ln.split(maxsplit=1)) == 2 for ln in proc.stdout.splitlines()[1:]), proc.stdout
    for option in re.findall(r"--with-[a-z0-9]+", proc.stdout):  # setup's options exist
        assert option in (REPO / "setup" / "install.sh").read_text(), option
    assert subprocess.run([str(HARNESS), "--help"], capture_output=True, text=True).stdout == proc.stdout


def test_an_unknown_command_is_named_and_the_list_follows() -> None:
    proc = subprocess.run([str(HARNESS), "sweeep"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[0] == "harness: unknown command 'sweeep'"
    help_text = subprocess.run([str(HARNESS), "help"], capture_output=True, text=True).stdout
    assert listed(proc.stderr) == listed(help_text)
