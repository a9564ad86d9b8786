"""Tests of the ArmIE backend's command builder and parsers.

ArmIE runs only on AArch64 hosts, so these tests use SYNTHETIC fixtures (tests/fixtures/armie/,
each file says so in its name and first line) written from shared/reference/armie.md. They
check that the parsers give the shapes of our QEMU clients' JSON (docs/contracts.md section 3)
and refuse ambiguous or corrupt output instead of guessing.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.backends import armie  # noqa: E402

FIX = REPO / "tests" / "fixtures" / "armie"


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_fixtures_are_marked_synthetic():
    files = sorted(FIX.iterdir())
    assert files
    for f in files:
        assert "SYNTHETIC" in f.name
        assert f.read_text().splitlines()[0].startswith("# SYNTHETIC fixture, not produced by ArmIE")


# --- build_command / armie_available ---------------------------------------

def test_build_command_shape():
    cmd = armie.build_command("/opt/arm/armie/bin/armie", 512, "libinscount_emulated.so",
                              "./stream", ["1024", "--op", "copy"])
    assert cmd == ["/opt/arm/armie/bin/armie", "-msve-vector-bits=512", "-i", "libinscount_emulated.so",
                   "--", "./stream", "1024", "--op", "copy"]


@pytest.mark.parametrize("vl", [128, 256, 384, 2048])
def test_build_command_accepts_sve_lengths(vl: int):
    assert f"-msve-vector-bits={vl}" in armie.build_command("armie", vl, "c.so", "./a", [])


@pytest.mark.parametrize("vl", [0, 64, 100, 200, 2176, 4096, -128, True, 256.0, "256"])
def test_build_command_rejects_bad_lengths(vl):
    with pytest.raises(ValueError, match="multiple of 128"):
        armie.build_command("armie", vl, "c.so", "./a", [])


def test_build_command_rejects_empty_names():
    with pytest.raises(ValueError, match="client"):
        armie.build_command("armie", 256, "", "./a", [])
    with pytest.raises(ValueError, match="binary"):
        armie.build_command("armie", 256, "c.so", "", [])


def test_armie_available_needs_aarch64(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(armie.shutil, "which", lambda name: "/opt/arm/bin/armie" if name == "armie" else None)
    monkeypatch.setattr(armie.platform, "machine", lambda: "x86_64")
    assert armie.armie_available() is None
    monkeypatch.setattr(armie.platform, "machine", lambda: "aarch64")
    assert armie.armie_available() == "/opt/arm/bin/armie"
    monkeypatch.setattr(armie.shutil, "which", lambda name: None)
    assert armie.armie_available() is None


def test_armie_not_available_on_this_x86_host():
    import platform
    if platform.machine() in ("aarch64", "arm64"):
        pytest.skip("AArch64 host")
    assert armie.armie_available() is None


# --- parse_inscount ----------------------------------------------------------

@pytest.mark.parametrize("name,total,sve", [
    ("SYNTHETIC-inscount-vl256.txt", 146163, 193),
    ("SYNTHETIC-inscount-vl512.txt", 146051, 97),
])
def test_parse_inscount(name: str, total: int, sve: int):
    assert armie.parse_inscount(read(name)) == {"total": total, "sve": sve, "classes": None}


def test_parse_inscount_same_keys_as_qemu_roi():
    roi = armie.parse_inscount(read("SYNTHETIC-inscount-vl256.txt"))
    assert set(roi) == {"total", "sve", "classes"}


def test_parse_inscount_missing_line():
    with pytest.raises(ValueError, match="no '<N> instructions executed"):
        armie.parse_inscount(read("SYNTHETIC-inscount-missing.txt"))


def test_parse_inscount_twice():
    with pytest.raises(ValueError, match="2 count lines"):
        armie.parse_inscount(read("SYNTHETIC-inscount-two-ranks.txt"))


def test_parse_inscount_ignores_comment_lines():
    text = "# 5 instructions executed of which 1 were emulated instructions\n" \
           "7 instructions executed of which 2 were emulated instructions\n"
    assert armie.parse_inscount(text)["total"] == 7


def test_parse_inscount_rejects_emulated_above_total():
    with pytest.raises(ValueError, match="corrupt"):
        armie.parse_inscount("3 instructions executed of which 9 were emulated instructions\n")


def test_parse_inscount_empty():
    with pytest.raises(ValueError):
        armie.parse_inscount("")


# --- parse_opcodes -----------------------------------------------------------

def test_parse_opcodes():
    got = armie.parse_opcodes(read("SYNTHETIC-undecoded.stream.4242.log"))
    assert got == [
        {"encoding": "0xa540a000", "count": 64},
        {"encoding": "0xe540e000", "count": 64},
        {"encoding": "0xe5e14000", "count": 16},
        {"encoding": "0x04a0e3e1", "count": 4},
        {"encoding": "0x85804000", "count": 1},
    ]
    # same form as our opcodes JSON: the encoding parses back as a 32-bit word
    assert all(int(e["encoding"], 16) < 2**32 and len(e["encoding"]) == 10 for e in got)


def test_parse_opcodes_normalises_and_sorts():
    text = "        1 : 0xE5E14000\n\n      900 : 0x04A0E3E1\n"
    assert armie.parse_opcodes(text) == [
        {"encoding": "0x04a0e3e1", "count": 900},
        {"encoding": "0xe5e14000", "count": 1},
    ]


def test_parse_opcodes_empty_file_is_empty_list():
    assert armie.parse_opcodes("# SYNTHETIC\n\n") == []


def test_parse_opcodes_malformed():
    with pytest.raises(ValueError, match="line 3"):
        armie.parse_opcodes(read("SYNTHETIC-undecoded-malformed.log"))


@pytest.mark.parametrize("line", ["64 0xa540a000", "x : 0xa540a000", "64 : a540a000",
                                  "64 : 0xa540a000 ld1w", "-1 : 0xa540a000", "64 : 0x1a540a000"])
def test_parse_opcodes_rejects(line: str):
    with pytest.raises(ValueError, match="line 1"):
        armie.parse_opcodes(line + "\n")


def test_parse_opcodes_duplicate_encoding():
    with pytest.raises(ValueError, match="already listed on line 1"):
        armie.parse_opcodes("5 : 0xa540a000\n3 : 0xa540a000\n")


# --- split_runs: the stand-in's batch mode (armie_clients/dynamorio/roi_inscount.c) --------------

def test_split_runs_gives_each_run_its_single_run_output():
    """One drrun ran three cells: each run's text is the line the client prints for that run alone,
    which parse_inscount reads; lines of no run (DynamoRIO's, the program's) are left out."""
    runs = armie.split_runs(read("SYNTHETIC-dynamorio-batch.err"), 3)
    assert runs == ["9 instructions executed of which 0 were emulated instructions\n",
                    "81929 instructions executed of which 65537 were emulated instructions\n",
                    "163849 instructions executed of which 131073 were emulated instructions\n"]
    assert [armie.parse_inscount(r) for r in runs] == [
        {"total": 9, "sve": 0, "classes": None}, {"total": 81929, "sve": 65537, "classes": None},
        {"total": 163849, "sve": 131073, "classes": None}]


def test_split_runs_of_a_failed_batch_names_the_run_without_a_count():
    runs = armie.split_runs(read("SYNTHETIC-dynamorio-batch-failed.err"), 3)
    assert runs == ["9 instructions executed of which 0 were emulated instructions\n",
                    "roi_inscount: the process ended before its run mark (begins 1, ends 0): no count\n", ""]
    with pytest.raises(ValueError, match=r"^ArmIE inscount: no count line; the client said: roi_inscount: the process "
                                         r"ended before its run mark \(begins 1, ends 0\): no count$"):
        armie.parse_inscount(runs[1])
    with pytest.raises(ValueError, match="no '<N> instructions executed"):
        armie.parse_inscount(runs[2])


@pytest.mark.parametrize("text,why", [
    ("run 0: 1 instructions executed of which 0 were emulated instructions\n"
     "run 0: 2 instructions executed of which 0 were emulated instructions\n", "line 2: run 0 already counted on line 1"),
    ("run 2: 1 instructions executed of which 0 were emulated instructions\n", "line 1: run 2 in a batch of 2 runs"),
    ("1 instructions executed of which 0 were emulated instructions\n",
     "line 1 has no run number in a batch of 2 runs: the client counted the batch as one run"),
])
def test_split_runs_refuses_what_it_cannot_assign(text: str, why: str):
    with pytest.raises(ValueError, match=why):
        armie.split_runs(text, 2)
