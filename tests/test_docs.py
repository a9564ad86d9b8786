"""The README and the documentation site (docs/, mkdocs.yml).

The README grew to 1,700 lines, and what it quoted drifted from the repository: files moved and
commands changed their options while the prose stayed. Here the README stays a front door (at
most 300 lines), the site builds in MkDocs' strict mode (a broken link or a page left out of the
navigation fails), and every repository path and every `./harness` command quoted in the README
and the pages (in backticks, code blocks or links) exists, with options the command accepts.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from analysis.commands import cli, docs
from analysis.core import schema
from conftest import PY, REPO

README = REPO / "README.md"
MAX_README_LINES = 300
MAX_IMAGE_BYTES = 150 * 1024
HARNESS = REPO / "harness"

# What a quoted path can start with: the repository's own top-level folders and files. results/
# and build/ are left out (what a run writes, often a pattern).
TOP = ("analysis", "armie_clients", "ci", "configs", "docs", "gem5_scripts", "kernels", "rules", "setup", "tests",
       r"\.ci")
TOP_FILES = ("Snakefile", "harness", "mkdocs.yml", "requirements.txt", "requirements-slurm.txt", "pytest.ini",
             "README.md")
PATH = re.compile(rf"(?<![\w./~$<>-])((?:{'|'.join(TOP)})/[\w./-]*[\w/]|(?:{'|'.join(re.escape(f) for f in TOP_FILES)})(?![\w.-]))")
# A path with a placeholder in capitals (the profile folder slurm-NAME) or followed by one of a
# pattern's characters (`kernels/<family>/`) names no one file.
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{3,}(?![a-z])")
PATTERN_NEXT = "<*{["
# The example backend of "Add a backend" (docs/extending/backend.md): files a reader would create.
EXAMPLES = {"analysis/backends/mine.py", "kernels/roi/roi_mine.S", "tests/test_mine.py"}
# Pages the site's hooks write at build time (docs/hooks/): linked, never committed.
GENERATED = {Path("docs/reference/configuration.md")}
# cli subcommands that hand their whole argument list to a module's own parser.
DELEGATED = {"explain": "analysis.stages.explain"}

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"\./harness(?:[ \t]+([^\s\[\]|`]+))?([^\n]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def pages() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def quoted(text: str) -> list[str]:
    """The code of a Markdown text: fenced blocks and inline code spans."""
    rest = FENCE.sub("", text)
    return FENCE.findall(text) + [m.group(2) for m in INLINE.finditer(rest)]


def links(text: str) -> list[str]:
    """Local link targets (no web address, no anchor)."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(FENCE.sub("", text))]
    return [t for t in targets if t and not re.match(r"^[a-z]+:", t)]


def bad_paths(text: str, page: Path) -> list[str]:
    """Repository paths quoted in `text` (of `page`) that do not exist, and local links that
    point nowhere."""
    out = []
    for code in quoted(text):
        for m in PATH.finditer(code):
            path = m.group(1)
            after = code[m.end():m.end() + 1]
            if after and after in PATTERN_NEXT or PLACEHOLDER.search(path) or path in EXAMPLES:
                continue
            if not (REPO / path).exists():
                out.append(f"`{path}`")
    for target in links(text):
        path = (page.parent / target).resolve()
        if not path.exists() and path.relative_to(REPO) not in GENERATED:
            out.append(f"link {target}")
    return out


def commands() -> dict[str, str]:
    """The harness's COMMANDS table: name -> what runs it."""
    rows = re.findall(r'^  "([a-z0-9]+)\|[^|]*\|([^|]*)\|', HARNESS.read_text(), re.M)
    assert rows, "no COMMANDS table in harness"
    return dict(rows)


@functools.cache
def accepted_options(command: str) -> frozenset[str]:
    """The long options `./harness COMMAND` accepts: its argparse's help (or the setup script's
    own text), and for `test` pytest's too, since the rest of its line goes to pytest."""
    run = commands()[command]
    if run == "-":
        return frozenset()
    if run == "setup/install.sh":
        return frozenset(OPTION.findall((REPO / run).read_text()))
    module = DELEGATED.get(command, run)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        if module == "cli":
            cli.parse_args([command, "--help"])
        else:
            importlib.import_module(module).main(["--help"])
    found = set(OPTION.findall(out.getvalue()))
    if command == "test":
        found |= set(OPTION.findall(subprocess.run([PY, "-m", "pytest", "--help"], cwd=REPO, capture_output=True,
                                                   text=True).stdout))
    return frozenset(found)


def bad_commands(text: str) -> list[str]:
    """`./harness COMMAND --option` quoted in `text` where the command or the option is unknown.
    A command's options end where Snakemake's begin (` -- `) and at a comment or the next shell
    command on the line."""
    known = commands()
    out = []
    for code in quoted(text):
        for m in COMMAND.finditer(code):
            name, rest = m.group(1), m.group(2)
            if name is None or not re.fullmatch(r"[a-z][a-z0-9-]*", name):
                continue  # `./harness` alone, or a placeholder such as COMMAND
            if name not in known:
                out.append(f"./harness {name}: no such command")
                continue
            rest = re.split(r"\s--(?:\s|$)|\s#|\|\||&&|;|\./harness", rest)[0]
            out += [f"./harness {name} {opt}: no such option" for opt in OPTION.findall(rest)
                    if opt not in accepted_options(name)]
    return out


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, len(text.splitlines())
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", text)
    assert len(images) == 1, images  # one figure, with its alt text
    image = REPO / images[0]
    assert image.suffix == ".png" and image.stat().st_size < MAX_IMAGE_BYTES, image
    for heading in ("## Two commands", "## What they produce", "## Other commands", "## Your own kernel",
                    "## Where to go next"):
        assert heading in text, heading


def test_every_quoted_path_exists() -> None:
    missing = [f"{page.relative_to(REPO)}: {bad}" for page in pages() for bad in bad_paths(page.read_text(), page)]
    assert not missing, "quoted paths that do not exist:\n" + "\n".join(missing)


def test_every_quoted_harness_command_and_option_exists() -> None:
    wrong = [f"{page.relative_to(REPO)}: {bad}" for page in pages() for bad in bad_commands(page.read_text())]
    assert not wrong, "\n".join(wrong)


def test_the_checks_find_a_planted_path_link_command_and_option() -> None:
    page = REPO / "docs" / "guide" / "page.md"
    text = ("Run `./harness sweeep --config configs/default.yaml` or `./harness sweep --colour`, then "
            "`./harness test --fast -k x -- --anything` and `./harness count copy c_vec --vl 128 --sise 1`; "
            "see `kernels/copy/driver.c`, `kernels/copy/nowhere.c`, `configs/profiles/slurm-NAME/`, "
            "`kernels/<family>/driver.c` and [a page](../gone.md), [the reference](../reference/configuration.md).\n"
            "```sh\n./harness regress --accept-toolchain-tolerance   # fine\n./harness bless --golden x\n```\n")
    assert bad_paths(text, page) == ["`kernels/copy/nowhere.c`", "link ../gone.md"]
    assert sorted(bad_commands(text)) == ["./harness bless --golden: no such option",
                                          "./harness count --sise: no such option",
                                          "./harness sweeep: no such command",
                                          "./harness sweep --colour: no such option"]


def test_every_command_s_options_can_be_read() -> None:
    """Each command's options come from its own parser: a command the table adds is read too."""
    for name in commands():
        options = accepted_options(name)
        assert name == "help" or options, name
    assert {"--config", "--cores", "--set", "--slurm"} <= accepted_options("sweep")
    assert "--with-clang" in accepted_options("setup") and "--fast" in accepted_options("test")


@pytest.mark.slow
def test_the_site_builds_in_strict_mode_with_the_generated_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run(docs.build_command(site), cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reference = (site / "reference" / "configuration" / "index.html").read_text()
    for key in schema.load_schema("sweep.schema.yaml")["properties"]:
        assert f"<code>{key}</code>" in reference, key
    assert not (REPO / "docs" / "reference").exists()  # generated, never written into the tree


@pytest.mark.slow
def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "docs", tree / "docs")
    shutil.copy(REPO / "mkdocs.yml", tree)
    with open(tree / "docs" / "index.md", "a") as f:
        f.write("\nSee [a page that is not there](guide/nowhere.md).\n")
    proc = subprocess.run([PY, "-m", "mkdocs", "build", "--strict", "--config-file", str(tree / "mkdocs.yml"),
                           "--site-dir", str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "guide/nowhere.md" in proc.stdout + proc.stderr


def cut_texts(node: object, where: str = "") -> list[str]:
    """Keys of a schema that YAML made out of the rest of a text: in a flow mapping
    (`{type: string, description: Where tables, raw counts and figures go.}`) an unquoted comma
    ends the description, and the rest becomes a key with no value, which JSON Schema ignores."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None and key not in ("default", "const"):
                out.append(f"{where}: {key!r}")
            out += cut_texts(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += cut_texts(value, f"{where}[{i}]")
    return out


def test_no_schema_text_is_cut_at_a_comma() -> None:
    """The configuration reference prints each description as the schema has it: a description
    cut at its first comma showed as "Where tables" for results_dir."""
    cut = [f"{name}{bad}" for name in sorted(p.name for p in schema.SCHEMA_DIR.glob("*.yaml"))
           for bad in cut_texts(schema.load_schema(name))]
    assert not cut, "texts cut at a comma (quote them):\n" + "\n".join(cut)
    assert cut_texts(yaml.safe_load("a: {type: string, description: one, two.}")) == ["/a: 'two.'"]
