"""The compiler stamps name the libc each compiler links (issue 52 item 2(c)): the static glibc's
memcpy runs inside every copying row's ROI (the cross 2.36-8cross1 against a native
2.36-9+deb12u14 changed 139 ROI cells), and a stamp of the compiler's version alone relinked
nothing when only the libc was upgraded."""
from __future__ import annotations

import platform
from pathlib import Path

import pytest

from analysis.core import toolchain

NAMES = ("compiler.gcc", "compiler.clang", "compiler.native", "compiler.native.vla")


def texts(monkeypatch: pytest.MonkeyPatch, libc: str) -> dict[str, str]:
    monkeypatch.setattr(toolchain, "_libc_version", lambda cc, package: f"{package} {libc}")
    return {name: toolchain.stamp_text(name, "cc 12.2.0") for name in NAMES}


@pytest.mark.skipif(platform.machine() == "aarch64", reason="the x86-64 host's compilers: cross but the host gcc")
def test_a_compilers_stamp_names_the_libc_it_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compiler's own libc: the cross one for the cross compilers and the guest's native SVE
    build (the cross gcc), the host's for the host gcc's baselines."""
    assert texts(monkeypatch, "2.36-8cross1") == {
        "compiler.gcc": "cc 12.2.0\nlibc6-dev-arm64-cross 2.36-8cross1\n",
        "compiler.clang": "cc 12.2.0\nlibc6-dev-arm64-cross 2.36-8cross1\n",
        "compiler.native": "cc 12.2.0\nlibc6-dev 2.36-8cross1\n",
        "compiler.native.vla": "cc 12.2.0\nlibc6-dev-arm64-cross 2.36-8cross1\n"}


def test_a_libc_upgrade_alone_changes_every_compilers_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = texts(monkeypatch, "2.36-8cross1"), texts(monkeypatch, "2.36-9+deb12u14")
    assert all(before[n] != after[n] for n in NAMES)
    # Other tools' stamps are their version line, as before.
    assert toolchain.stamp_text("qemu", "qemu-aarch64 version 7.2.22") == "qemu-aarch64 version 7.2.22\n"
    assert toolchain.stamp_text("libc.gcc", "2.36-8cross1 libc.a:e8e5") == "2.36-8cross1 libc.a:e8e5\n"


def test_a_stamp_is_rewritten_only_when_its_text_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its mtime marks real upgrades: the same text keeps the file, a new libc rewrites it."""
    path = tmp_path / "compiler.gcc.txt"
    toolchain.write_stamp(path, texts(monkeypatch, "2.36-8cross1")["compiler.gcc"])
    before = path.stat().st_mtime_ns
    toolchain.write_stamp(path, texts(monkeypatch, "2.36-8cross1")["compiler.gcc"])
    assert path.stat().st_mtime_ns == before
    toolchain.write_stamp(path, texts(monkeypatch, "2.36-9+deb12u14")["compiler.gcc"])
    assert path.read_text().endswith("2.36-9+deb12u14\n")
