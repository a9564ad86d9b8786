"""setup/dynamorio.sh (issue 35 item 1): DynamoRIO built from source at a pinned commit for the
emulated AArch64 guest. Its refusals (a checkout at another commit, a Debian file whose checksum
is not the pinned one, a missing cross compiler, no network) are one line each and leave nothing
good behind; a second call does nothing. All against a throwaway cache and a throwaway git
repository: nothing here builds DynamoRIO (the real build takes minutes; docs/guide/arm64-vm.md
has its measured time and disk)."""
from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DYNAMORIO_BUILD_TOOLS, REPO, path_without, stand_ins

SETUP = REPO / "setup" / "dynamorio.sh"
GUEST_SETUP = REPO / "setup" / "arm64-vm.sh"
PIN = "05e316505beb69586142243af1647449945772b7"
DIR = f"dynamorio-{PIN[:12]}"
ELFUTILS = "elfutils_0.192.orig.tar.bz2"
ZLIB = "zlib1g-dev_1.2.13.dfsg-1_arm64.deb"
VARS = ("DYNAMORIO_HOME", "DYNAMORIO_SRC", "DYNAMORIO_DEPS", "DYNAMORIO_GIT", "DEBIAN_MIRROR", "DYNAMORIO_NEED_GIB",
        "ARM64_VM_NEED_GIB")


@pytest.fixture
def dr_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k not in VARS}
    # The x86-64 host's way (the cross toolchain, the guest's fix command) on any host: on an
    # arm64 node the script checks the native g++ and names --with-dynamorio instead.
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache"), "HARNESS_HOST_ARCH": "amd64"}


def run(env: dict[str, str], *args: str, script: Path = SETUP, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], capture_output=True, text=True, env={**env, **extra}, timeout=120)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_files(env: dict[str, str]) -> list[str]:
    root = Path(env["HARNESS_CACHE"])
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


@pytest.fixture
def other_commit(tmp_path: Path) -> tuple[Path, str]:
    """A DynamoRIO-shaped git checkout (the files the source check looks at) at a commit of its own."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    src = tmp_path / "dynamorio"
    (src / "make").mkdir(parents=True)
    (src / "core").mkdir()
    (src / "make" / "toolchain-aarch64.cmake").write_text("# stub\n")
    (src / "core" / "x.c").write_text("int x;\n")
    _git(tmp_path, "init", "-q", str(src))
    _git(src, "add", ".")
    _git(src, "commit", "-q", "-m", "stub")
    return src, _git(src, "rev-parse", "HEAD")


def test_a_checkout_at_another_commit_is_refused_in_one_line_creating_nothing(
        dr_env: dict[str, str], other_commit: tuple[Path, str]) -> None:
    src, head = other_commit
    proc = run(dr_env, DYNAMORIO_SRC=str(src))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"setup/dynamorio.sh: refusing DYNAMORIO_SRC: {src} is at commit {head}, "
                           f"not the pinned {PIN} (cronbuild-11.91.20672)\n")
    assert cache_files(dr_env) == []


def _guest_tools(tmp_path: Path) -> str:
    """PATH with stubs for the guest's own tools, which this machine may lack."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in {"dpkg": "echo arm64", "qemu-system-aarch64": "exit 0", "cpio": "exit 0",
                       "aarch64-linux-gnu-readelf": "exit 0"}.items():
        (tools / name).write_text(f"#!/bin/sh\n{body}\n")
        (tools / name).chmod(0o755)
    return f"{tools}:{os.environ['PATH']}"


def test_the_guest_setup_refuses_it_too_before_creating_anything(
        dr_env: dict[str, str], other_commit: tuple[Path, str], tmp_path: Path) -> None:
    """Without DYNAMORIO_HOME, setup/arm64-vm.sh builds DynamoRIO: a wrong DYNAMORIO_SRC is refused
    before its guest steps."""
    src, head = other_commit
    proc = run(dr_env, script=GUEST_SETUP, DYNAMORIO_SRC=str(src), PATH=_guest_tools(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"setup/dynamorio.sh: refusing DYNAMORIO_SRC: {src} is at commit {head}, " \
                          f"not the pinned {PIN} (cronbuild-11.91.20672)\n"
    assert cache_files(dr_env) == []


def test_a_debian_file_whose_checksum_is_not_the_pinned_one_is_refused(dr_env: dict[str, str], tmp_path: Path) -> None:
    deps = tmp_path / "deps"
    deps.mkdir()
    (deps / ELFUTILS).write_bytes(b"not elfutils\n")
    proc = run(dr_env, DYNAMORIO_DEPS=str(deps))
    assert proc.returncode == 2
    assert proc.stderr == (f"setup/dynamorio.sh: refusing DYNAMORIO_DEPS/{ELFUTILS}: checksum mismatch "
                           f"(sha256 {_sha256(deps / ELFUTILS)}, pinned "
                           "616099beae24aba11f9b63d86ca6cc8d566d968b802391334c91df54eab416b4)\n")
    assert cache_files(dr_env) == []


def test_a_missing_cross_compiler_names_its_package(dr_env: dict[str, str], tmp_path: Path) -> None:
    """The tools checked before it stand in where missing: on a fresh Debian the line named cmake."""
    path = path_without(tmp_path / "bin", "aarch64-linux-gnu-g++")
    stand_ins(tmp_path / "bin", tuple(t for t in DYNAMORIO_BUILD_TOOLS if t != "aarch64-linux-gnu-g++"))
    proc = run(dr_env, PATH=path)
    assert proc.returncode == 1
    assert proc.stderr == ("setup/dynamorio.sh: aarch64-linux-gnu-g++ not found; fix: apt-get install "
                           "g++-aarch64-linux-gnu (or ./harness setup --with-arm64-vm, which installs it)\n")
    assert cache_files(dr_env) == []


def test_missing_cmake_names_its_package(dr_env: dict[str, str], tmp_path: Path) -> None:
    proc = run(dr_env, PATH=path_without(tmp_path / "bin", "cmake"))
    assert (proc.returncode, proc.stderr) == (1, "setup/dynamorio.sh: cmake not found; fix: apt-get install cmake "
                                                 "(or ./harness setup --with-arm64-vm, which installs it)\n")


def _source_fetched(env: dict[str, str]) -> list[str]:
    """Stamp the source step (the pinned commit is fetched before the Debian files are), so a call
    goes on to the downloads; the cache's files as they are then."""
    d = Path(env["HARNESS_CACHE"]) / DIR
    (d / "src").mkdir(parents=True)
    (d / ".done-source").write_text(f"{PIN}\n")
    return cache_files(env)


def _have_build_tools() -> None:
    missing = [t for t in DYNAMORIO_BUILD_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"DynamoRIO's build tools are missing: {' '.join(missing)} (./harness setup --with-arm64-vm)")


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet: pytest shows stderr on failure
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local Debian mirror: its pool is a directory the test fills."""
    root = tmp_path / "mirror"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             lambda *a: _Files(*a, directory=str(root)))  # type: ignore[misc]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()


def test_a_download_whose_checksum_is_not_the_pinned_one_is_refused_and_not_kept(
        dr_env: dict[str, str], mirror: tuple[str, Path]) -> None:
    _have_build_tools()
    url, root = mirror
    (root / "pool/main/e/elfutils").mkdir(parents=True)
    (root / "pool/main/e/elfutils" / ELFUTILS).write_bytes(b"a tarball someone swapped\n")
    before = _source_fetched(dr_env)
    proc = run(dr_env, DEBIAN_MIRROR=url)
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"setup/dynamorio.sh: refusing {url}/pool/main/e/elfutils/{ELFUTILS}: checksum mismatch "
                           f"(sha256 {_sha256(root / 'pool/main/e/elfutils' / ELFUTILS)}, pinned 616099be"), proc.stderr
    assert cache_files(dr_env) == sorted([*before, f"{DIR}/download.log", f"{DIR}/downloads"])


def test_no_network_is_one_line_naming_the_offline_variable(dr_env: dict[str, str]) -> None:
    """A mirror that cannot be reached (a closed port) stops at the first download; no step is
    marked done and no file is kept, so the next call downloads again."""
    _have_build_tools()
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/debian"
    before = _source_fetched(dr_env)
    proc = run(dr_env, DEBIAN_MIRROR=url)
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"setup/dynamorio.sh: downloading {url}/pool/main/e/elfutils/{ELFUTILS} failed (") and \
        last.endswith(f"offline: put {ELFUTILS} in a directory named by DYNAMORIO_DEPS"), proc.stderr
    assert "Connection refused" in last
    assert cache_files(dr_env) == sorted([*before, f"{DIR}/download.log", f"{DIR}/downloads"])


def test_a_second_call_does_nothing(dr_env: dict[str, str]) -> None:
    """The stamp names the pinned commit and the checksum of libdynamorio.so: with both current, a
    call builds nothing (no tool is looked for) and --path answers; a changed library is rebuilt."""
    home = Path(dr_env["HARNESS_CACHE"]) / DIR / "home"
    (home / "lib64" / "release").mkdir(parents=True)
    (home / "bin64").mkdir()
    lib = home / "lib64" / "release" / "libdynamorio.so"
    lib.write_bytes(b"\x7fELF built\n")
    (home / "bin64" / "drrun").write_text("")
    (home / "bin64" / "drrun").chmod(0o755)
    (home.parent / "installed").write_text(f"commit={PIN}\ntag=cronbuild-11.91.20672\nsha256={_sha256(lib)}\n"
                                           "build_seconds=200\n")
    before = cache_files(dr_env)
    proc = run(dr_env, PATH="/nonexistent:/usr/bin:/bin")
    assert (proc.returncode, proc.stderr) == (
        0, f"setup/dynamorio.sh: DynamoRIO {PIN[:12]} (cronbuild-11.91.20672) is built: {home}\n")
    assert cache_files(dr_env) == before
    assert run(dr_env, "--path").stdout == f"{home}\n"
    lib.write_bytes(b"\x7fELF changed\n")
    proc = run(dr_env, "--path")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"setup/dynamorio.sh: DynamoRIO {PIN[:12]} is not built (it would be {home}; "
                           "fix: ./harness setup --with-arm64-vm)\n")


def test_unknown_option_is_refused(dr_env: dict[str, str]) -> None:
    proc = run(dr_env, "--bogus")
    assert (proc.returncode, proc.stderr) == (
        2, "setup/dynamorio.sh: unknown option '--bogus'; usage: setup/dynamorio.sh [--path | --where | --check]\n")


def _built_guest(cache: Path, dynamorio_from: str) -> Path:
    """A guest whose every step is stamped and whose DynamoRIO was copied from `dynamorio_from`."""
    guest = cache / "arm64-vm-6.1.0-56-arm64"
    (guest / "dynamorio" / "harness").mkdir(parents=True)
    for step in ("debs", "kernel", "rootfs", "initrd"):
        (guest / f".done-{step}").write_text("2026-11-27T00:00:00Z\n")
    (guest / "initrd.img").write_text("")
    (guest / "installed").write_text("2026-11-27T00:00:00Z\n")
    (guest / ".done-dynamorio").write_text(f"{dynamorio_from} 11.91.0\n")
    (guest / "dynamorio" / "harness" / "libroi_inscount.so").write_text("")  # newer than the client's source
    return guest


def test_a_guest_with_a_dynamorio_given_earlier_keeps_it(dr_env: dict[str, str], tmp_path: Path) -> None:
    """Setup without DYNAMORIO_HOME does not build DynamoRIO over the one a user gave before."""
    guest = _built_guest(Path(dr_env["HARNESS_CACHE"]), str(tmp_path / "users-dynamorio"))
    proc = run(dr_env, script=GUEST_SETUP)
    assert (proc.returncode, proc.stderr) == (0, f"setup/arm64-vm.sh: the arm64 guest is built: {guest}\n")
    assert not (Path(dr_env["HARNESS_CACHE"]) / DIR).exists()


def test_a_guest_with_a_dynamorio_from_source_builds_the_pinned_one(
        dr_env: dict[str, str], other_commit: tuple[Path, str], tmp_path: Path) -> None:
    """A guest whose DynamoRIO came from another pin's build (or none) goes to the build: here it
    reaches the source check, which refuses the checkout given."""
    cache = Path(dr_env["HARNESS_CACHE"])
    _built_guest(cache, str(cache / "dynamorio-0123456789ab" / "home"))
    src, head = other_commit
    proc = run(dr_env, script=GUEST_SETUP, DYNAMORIO_SRC=str(src), PATH=_guest_tools(tmp_path))
    assert (proc.returncode, proc.stderr) == (2, f"setup/dynamorio.sh: refusing DYNAMORIO_SRC: {src} is at commit "
                                                 f"{head}, not the pinned {PIN} (cronbuild-11.91.20672)\n")


def test_a_stopped_build_resumes_at_make(dr_env: dict[str, str]) -> None:
    """deps, source and configure stamped (and their outputs there), make not: the next call
    downloads, fetches and configures nothing (the mirror is a closed port, GitHub is not asked, the
    build tree is not cmake's) and runs make in the tree it has, then makes the home and the stamp."""
    _have_build_tools()
    d = Path(dr_env["HARNESS_CACHE"]) / DIR
    for step, output in (("deps", "zlib"), ("source", "src"), ("configure", "build/CMakeCache.txt")):
        (d / output).parent.mkdir(parents=True, exist_ok=True)
        (d / output).mkdir() if output in ("zlib", "src") else (d / output).write_text("")
        (d / f".done-{step}").write_text(f"{PIN}\n")
    # make's targets: the library and drrun the build would leave, and an object the home drops.
    (d / "build" / "Makefile").write_text(
        "dynamorio drrun drmgr_static drreg_static drx_static:\n"
        "\tmkdir -p bin64 lib64/release CMakeFiles && touch bin64/drrun CMakeFiles/x.o && chmod +x bin64/drrun "
        "&& echo lib >lib64/release/libdynamorio.so\n")
    proc = run(dr_env, DEBIAN_MIRROR="http://127.0.0.1:1/debian")  # and no DYNAMORIO_SRC: nothing fetched
    assert proc.returncode == 0, proc.stderr
    assert "downloading" not in proc.stderr and "configuring" not in proc.stderr
    lib = d / "home" / "lib64" / "release" / "libdynamorio.so"
    assert (d / "installed").read_text().splitlines()[:3] == [f"commit={PIN}", "tag=cronbuild-11.91.20672",
                                                            f"sha256={_sha256(lib)}"]
    assert not (d / "home" / "CMakeFiles").exists() and (d / ".done-make").read_text() == f"{PIN}\n"


def test_too_little_disk_is_refused_before_anything_is_created(dr_env: dict[str, str]) -> None:
    proc = run(dr_env, DYNAMORIO_NEED_GIB="100000000")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"setup/dynamorio.sh: not enough disk at {dr_env['HARNESS_CACHE']}: ") and \
        proc.stderr.endswith("GiB free, the DynamoRIO build needs 100000000 GiB; free space or set HARNESS_CACHE\n")
    assert cache_files(dr_env) == []


def test_a_commit_that_cannot_be_fetched_is_one_line_naming_dynamorio_src(
        dr_env: dict[str, str], other_commit: tuple[Path, str]) -> None:
    """Without DYNAMORIO_SRC the pinned commit is fetched first (here from a repository that lacks
    it, as a machine without GitHub would fail): one line, no clone left, no step marked done."""
    _have_build_tools()
    upstream, _ = other_commit
    proc = run(dr_env, DYNAMORIO_GIT=str(upstream))
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"setup/dynamorio.sh: fetching {upstream} failed (") and \
        last.endswith(f"offline: set DYNAMORIO_SRC to a checkout of {PIN}"), proc.stderr
    assert cache_files(dr_env) == [DIR, f"{DIR}/clone.log"]
