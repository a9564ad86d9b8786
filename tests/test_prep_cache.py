"""Preparations shared between processes (harness_prep_begin, build.prep_cache_dir): the first
process to compute a run's inputs and expected output writes them to a folder shared by the
binaries whose preparations are the same, the others read them. A cell counts exactly the same
(every client's record, whole-program counts included) and prints the same checksum whether
its process computed the preparation, read it, or had no shared folder at all."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from analysis.backends import RunError, qemu
from analysis.core import config
from analysis.stages import build
from conftest import ALL, kernels_tree_lock, snakemake

MAX_FLOAT = (("op", "max"), ("dtype", "float"), ("nan", 1))
PACK = (("dir", "pack"), ("dtype", "float"), ("blocklen", 1), ("stride", 2))
UNPACK = (("dir", "unpack"), ("dtype", "float"), ("blocklen", 3), ("stride", 5))
ROWS = [("reduce", "acle", MAX_FLOAT), ("reduce", "c_scalar", MAX_FLOAT), ("pack", "acle", PACK),
        ("unpack", "blocks_call", UNPACK), ("copy", "c_vec", ())]
SIZES = [0, 4020, 65520]  # multiples of 12 (a float block of 3), none a multiple of a VL's bytes
# The VLA build computes (the folder is empty) at two VLs, then each VLS build reads.
BUILDS = [("vla", (128, 1152)), ("vls256", (256,)), ("vls2048", (2048,))]
COMPILERS = ["gcc"] + (["clang"] if shutil.which("clang-14") else [])


@pytest.fixture(scope="module")
def built(binaries, all_sweep) -> Path:
    """The rows' binaries for every compiler here and the builds above (gcc's are built already)."""
    bd = all_sweep.build_dir
    targets = [str(build.binary_path(bd, c, b, "qemu", f"{k}-{v}")) for c in COMPILERS for k, v, _ in ROWS
               for b, _ in BUILDS]
    with kernels_tree_lock(bd):
        proc = snakemake(ALL, bd, all_sweep.results_dir, targets)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return bd


def runs(vls: tuple[int, ...], params: tuple) -> list[config.Run]:
    return [config.Run(vl, n, "-", "-", params) for n in SIZES for vl in vls]


@pytest.mark.slow
@pytest.mark.parametrize("compiler", COMPILERS)
def test_a_shared_preparation_counts_as_one_computed(built, all_sweep, plugin_dir, tmp_path, compiler) -> None:
    differ = []
    for kernel, variant, params in ROWS:
        shared = build.prep_cache_dir(tmp_path, all_sweep.table, compiler, kernel, variant)
        for b, vls in BUILDS:
            binary = build.binary_path(built, compiler, b, "qemu", f"{kernel}-{variant}")
            with_cache = qemu.run_batch(binary, "max", runs(vls, params), plugin_dir, prep_cache=shared)
            alone = qemu.run_batch(binary, "max", runs(vls, params), plugin_dir)
            for got, want in zip(with_cache, alone):
                cell = f"{compiler} {kernel}-{variant} {b} vl={got['vl']} size={got['size']}"
                differ += [f"{cell} {c}" for c in (*qemu.CLIENTS, "checksum") if got[c] != want[c]]
        # one file per size with data (the empty size-0 ones too), written once, by the VLA build
        assert len(list(shared.glob("p*"))) >= len(SIZES), (kernel, variant, sorted(shared.iterdir()))
        assert not list(shared.glob(".*")), "a temporary file was left behind"
    assert not differ, "\n".join(differ)


@pytest.mark.slow
def test_a_shared_preparation_is_read_not_computed(built, all_sweep, plugin_dir, tmp_path) -> None:
    """The reading process uses what it finds: an expected output of the right length but the
    wrong content makes the kernel's own check fail (and a file of another length is passed
    over). So the folder's key (build.prep_cache_dir) is what keeps a preparation exact."""
    shared = build.prep_cache_dir(tmp_path, all_sweep.table, "gcc", "reduce", "acle")
    binary = build.binary_path(built, "gcc", "vla", "qemu", "reduce-acle")
    qemu.run_batch(binary, "max", runs((512,), MAX_FLOAT), plugin_dir, prep_cache=shared)
    ref = shared / "p2-65520-65520-0-max-float-1"  # the third preparation (fills, inout copied, reference)
    assert ref.stat().st_size == 65520
    ref.write_bytes(bytes(65520))
    with pytest.raises(RunError, match="FAIL: inout"):
        qemu.run_batch(binary, "max", [config.Run(512, 65520, "-", "-", MAX_FLOAT)], plugin_dir, prep_cache=shared)
    ref.write_bytes(bytes(100))
    (rec,) = qemu.run_batch(binary, "max", [config.Run(512, 65520, "-", "-", MAX_FLOAT)], plugin_dir, prep_cache=shared)
    (want,) = qemu.run_batch(binary, "max", [config.Run(512, 65520, "-", "-", MAX_FLOAT)], plugin_dir)
    assert rec["inscount"] == want["inscount"] and rec["checksum"] == want["checksum"]


def test_the_shared_folder_is_one_per_compiler_family_and_code(all_sweep, tmp_path) -> None:
    """Every build and every variant of a family share a folder; another compiler, family or
    driver source gets its own."""
    t = all_sweep.table
    d = build.prep_cache_dir(tmp_path, t, "gcc", "reduce", "acle")
    assert d == build.prep_cache_dir(tmp_path, t, "gcc", "reduce", "c_scalar")
    assert d.parent == tmp_path / build.PREP_CACHE and d.name.startswith("gcc-reduce-")
    assert build.prep_cache_dir(tmp_path, t, "gcc", "pack", "acle").name.startswith("gcc-vector-")
    if "clang" in COMPILERS:
        assert build.prep_cache_dir(tmp_path, t, "clang", "reduce", "acle") != d
    sources = (str(t.families["reduce"].driver), str(build.HARNESS_SOURCE))
    copy = tmp_path / "driver.c"
    copy.write_text(Path(sources[0]).read_text() + "\n/* changed */\n")
    assert (build._prep_key("gcc", sources, (), "") != build._prep_key("gcc", (str(copy), sources[1]), (), ""))


def test_planning_removes_the_folders_of_changed_code_only(all_sweep, tmp_path) -> None:
    """A folder of the same compiler and family made for older code goes (up to hundreds of MiB
    each); other families', other compilers' and the current one stay."""
    d = build.prep_cache_dir(tmp_path, all_sweep.table, "gcc", "reduce", "acle")
    keep = [d, d.parent / "clang-reduce-0123456789abcdef", d.parent / "gcc-vector-0123456789abcdef",
            d.parent / "gcc-reduce-extra-0123456789abcdef"]
    old = d.parent / "gcc-reduce-0123456789abcdef"
    for f in (*keep, old):
        f.mkdir(parents=True)
        (f / "p0-1-1-0").write_bytes(b"x")
    build.prune_prep_caches(d)
    assert [f.exists() for f in keep] == [True] * len(keep) and not old.exists()


SHARE_FUNCTIONS = {"share_file_name", "read_all", "write_all", "load_shared", "store_shared", "prep_decide",
                   "harness_prep_end"}


@pytest.mark.slow
@pytest.mark.parametrize("compiler", COMPILERS)
def test_the_sharing_code_stays_out_of_the_counted_code_s_way(built, compiler) -> None:
    """whole.total counts every instruction outside the preparation markers. Added among the
    harness's own functions, the sharing code moved the functions after it, and with them GCC's
    bounded alignment (.p2align 4,,11 / 3,,7) gained or lost nops that run, and a string added
    among the harness's moved the others, whose addresses glibc's string functions depend on:
    whole.total moved by 3 to 12 per run. So its code, strings and state have sections of their
    own, and the counted harness_prep_end keeps its name and place as harness_prep_end_counted.
    (`./harness regress`, which `./harness test` runs, compares the counts with the golden ones.)"""
    for b, _ in BUILDS:
        with open(build.harness_object(built, compiler, b), "rb") as f:
            elf = ELFFile(f)
            index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".text")
            symbols = elf.get_section_by_name(".symtab")
            in_text = {s.name for s in symbols.iter_symbols()
                       if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] == index}
            assert "harness_prep_begin" in in_text and "harness_prep_end_counted" in in_text, (b, in_text)
            assert not in_text & SHARE_FUNCTIONS, (b, sorted(in_text & SHARE_FUNCTIONS))
            strings = b"".join(s.data() for s in elf.iter_sections() if s.name.startswith(".rodata.str"))
            assert b"prep/" not in strings and b"shared preparation" not in strings, b
