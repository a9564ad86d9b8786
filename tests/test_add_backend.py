"""Issue 29: a backend is one module. The toy backend of docs/extending/backend.md, copied from
the page into a folder outside the repository and named by HARNESS_BACKENDS_PATH, runs a tiny
sweep through ./harness sweep: no rule, stage or schema edited."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from analysis.core import backend_path, config, schema, table
from analysis.stages import subtract
from conftest import REPO

PAGE = REPO / "docs" / "extending" / "backend.md"


def toy_module() -> str:
    """The page's Python block: the whole toy backend."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1, "the page shows one backend, whole"
    return blocks[0]


def toy_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my_backends"
    folder.mkdir()
    (folder / "toy.py").write_text(toy_module())
    return folder


def test_a_folder_on_the_path_adds_its_backends_to_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = toy_folder(tmp_path)
    monkeypatch.setenv(backend_path.PATH_ENV, str(folder))
    assert list(backend_path.places())[-1] == "toy" and not backend_path.places()["toy"].builtin
    assert schema.sweep_schema()["properties"]["backends"]["items"]["enum"] == ["qemu", "armie", "toy"]
    # A module whose name a rule or a folder cannot carry, a name taken, a folder that is not one.
    (folder / "Bad-Name.py").write_text("")
    with pytest.raises(backend_path.BackendPathError, match="lower-case letters"):
        backend_path.places()
    (folder / "Bad-Name.py").unlink()
    (folder / "qemu.py").write_text("")
    with pytest.raises(backend_path.BackendPathError, match="backend qemu exists already"):
        backend_path.places()
    monkeypatch.setenv(backend_path.PATH_ENV, str(tmp_path / "missing"))
    with pytest.raises(schema.ConfigError, match="not a folder"):
        schema.sweep_schema()


@pytest.mark.slow
def test_the_toy_backend_of_the_page_runs_a_sweep(tmp_path: Path) -> None:
    folder = toy_folder(tmp_path)
    sweep = tmp_path / "toy.yaml"
    sweep.write_text(f"""\
kernel_table: {REPO / 'configs' / 'kernels.yaml'}
results_dir: {tmp_path / 'results'}
build_dir: {tmp_path / 'build'}
compilers: [gcc]
backends: [toy]
vector_lengths: [128]
sizes: {{copy: [4096]}}
linearity_check: false
kernels: [{{kernel: copy, variants: [c_vec]}}]
""")
    env = {**os.environ, backend_path.PATH_ENV: str(folder)}
    proc = subprocess.run([str(REPO / "harness"), "sweep", "--config", str(sweep), "--cores", "2"], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = table.read_counts(tmp_path / "results" / "counts.csv")
    toy = counts[counts["backend"] == "toy"]
    binary = tmp_path / "build" / "gcc" / "vla" / "bin" / "toy" / "copy-c_vec"
    assert set(toy["metric"]) == {"toy.binary_bytes"} and set(toy["value"]) == {binary.stat().st_size}
    assert sorted(toy["size"]) == [0, 4096] and set(toy["vl"]) == {128} and set(counts["backend"]) == {"toy"}
    # Without the folder the sweep file names a backend the harness does not know.
    env.pop(backend_path.PATH_ENV)
    proc = subprocess.run([str(REPO / "harness"), "sweep", "--config", str(sweep)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "'toy' is not one of ['qemu', 'armie']" in proc.stdout + proc.stderr


def test_a_backend_with_a_section_reads_it_from_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's <name>.schema.yaml with `section:` makes its top-level key of the sweep file,
    defaults filled in, and Sweep.sections hands it over; it is then no value of `backends`."""
    folder = toy_folder(tmp_path)
    (folder / "toy.schema.yaml").write_text(
        "section:\n  type: object\n  additionalProperties: false\n"
        "  properties:\n    greeting: {type: string, default: hello, description: What it says.}\n")
    monkeypatch.setenv(backend_path.PATH_ENV, str(folder))
    assert schema.backend_sections()[-1] == "toy"
    assert "toy" not in schema.sweep_schema()["properties"]["backends"]["items"]["enum"]
    doc = (REPO / "configs" / "tiny.yaml").read_text()
    for text, want in (("toy: {}\n", {"toy": {"greeting": "hello"}}), ("", {})):
        (tmp_path / "s.yaml").write_text(doc.replace("kernel_table: configs/kernels.yaml",
                                                     f"kernel_table: {REPO / 'configs/kernels.yaml'}") + text)
        assert config.load(tmp_path / "s.yaml").sections == want
    (tmp_path / "s.yaml").write_text(doc + "toy: {greeting: 3}\n")
    with pytest.raises(config.ConfigError, match="toy/greeting: 3 is not of type 'string'"):
        config.load(tmp_path / "s.yaml")


def test_rows_without_instruction_counts_are_collected_as_they_are() -> None:
    """Defect found by the toy backend: the subtraction refused a table without roi./whole. rows
    ("no baseline run (size 0)"), so a sweep of a backend that counts no instructions (gem5
    alone, the toy) failed at collect."""
    key = {"kernel": "copy", "variant": "c_vec", "op": "-", "dtype": "u8", "layout": "-", "build": "vla",
           "cpu_model": "max", "backend": "toy", "compiler": "gcc", "vl": 128, "metric": "toy.binary_bytes", "value": 7}
    raw = pd.DataFrame([{**key, "size": 0}, {**key, "size": 4096}])
    assert subtract.subtract(raw).equals(raw)
