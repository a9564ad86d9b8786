"""Tests of setup/install.sh (stdlib + pytest only).

Why shims: the apt paths must be tested without touching the machine. Fake
`apt-get`, `dpkg-query` and `sudo` executables are put first on PATH; they log
every call and replay canned `apt-get install -s` outputs from
tests/fixtures/apt/ (real outputs captured on Debian 12). `--force` makes the
installer skip its stamp so it reaches the apt step.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "setup" / "install.sh"
FIXTURES = ROOT / "tests" / "fixtures" / "apt"
STAMP = ROOT / ".venv" / ".installed"

APT_SHIM = r"""#!/bin/bash
# Logs its arguments; answers `install -s` from canned files, one per call.
echo "apt-get $*" >> "$SHIM_LOG"
if [[ "$1" == update ]]; then exit 0; fi
for a in "$@"; do
  if [[ "$a" == -s ]]; then
    n=$(grep -c -- ' -s ' "$SHIM_LOG")
    f="$(sed -n "${n}p" "$SHIM_SIMS")"
    [[ -n "$f" ]] || f="$(tail -n1 "$SHIM_SIMS")"
    cat "$f"
    grep -q '^E:' "$f" && exit 100
    exit 0
  fi
done
exit 0
"""

LOG_SHIM = """#!/bin/bash
echo "{name} $*" >> "$SHIM_LOG"
{tail}
"""


def _write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def shims(tmp_path: Path):
    """PATH with logging fakes of apt-get, dpkg-query (reports nothing installed) and sudo."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _write_exe(bindir / "apt-get", APT_SHIM)
    _write_exe(bindir / "dpkg-query", LOG_SHIM.format(name="dpkg-query", tail="exit 1"))
    # `sudo -n true`: the installer asks whether sudo lets this user in (the suite run as a user).
    _write_exe(bindir / "sudo", LOG_SHIM.format(name="sudo", tail='[[ "$1" == -n ]] && shift; exec "$@"'))
    log = tmp_path / "calls.log"
    log.write_text("")
    sims = tmp_path / "sims.txt"

    def run(*args: str, sim_files: list[str] = (), timeout: float = 60, program: Path = INSTALL,
            arch: str | None = "amd64"):
        """arch: the host the installer is told it runs on. The fixtures are an x86-64 host's apt
        (its cross packages), on any host; None for this host's own installation (its stamp)."""
        sims.write_text("".join(str(FIXTURES / f) + "\n" for f in sim_files))
        env = {k: v for k, v in os.environ.items() if k != "HARNESS_HOST_ARCH"}
        env.update(PATH=f"{bindir}:{env['PATH']}", SHIM_LOG=str(log), SHIM_SIMS=str(sims), LC_ALL="C",
                   **({"HARNESS_HOST_ARCH": arch} if arch else {}))
        proc = subprocess.run(
            ["bash", str(program), *args], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=timeout,
        )
        return proc, log.read_text().splitlines()

    return run


def _real_installs(calls: list[str]) -> list[str]:
    """apt-get install calls that are not simulations."""
    return [c for c in calls if c.startswith("apt-get install") and " -s " not in f"{c} "]


# --- the removal guard on canned simulations -------------------------------

def test_guard_refuses_and_names_removed_packages():
    proc = subprocess.run(
        ["bash", str(INSTALL), "--check-simulation", str(FIXTURES / "sim-remv-gcc-multilib.txt")],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 1
    assert "REMOVE 2 package(s): gcc-aarch64-linux-gnu gcc-12-aarch64-linux-gnu" in proc.stderr
    assert "apt-get install -s" in proc.stderr
    assert "nothing was installed" in proc.stderr


def test_guard_without_a_file_names_what_it_needs():
    proc = subprocess.run(["bash", str(INSTALL), "--check-simulation"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--check-simulation needs a file" in proc.stderr
    assert "apt-get install -s" in proc.stderr


@pytest.mark.parametrize("name", ["sim-clean.txt", "sim-unmet.txt"])
def test_guard_accepts_simulation_without_remv(name: str):
    proc = subprocess.run(
        ["bash", str(INSTALL), "--check-simulation", str(FIXTURES / name)],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr


def test_install_refuses_when_simulation_removes(shims):
    proc, calls = shims("--force", sim_files=["sim-remv-gcc-multilib.txt"])
    assert proc.returncode == 1
    assert "gcc-aarch64-linux-gnu gcc-12-aarch64-linux-gnu" in proc.stderr
    # the investigate command names the same packages as the simulated install
    sim_call = next(c for c in calls if c.startswith("apt-get install -s"))
    assert sim_call[len("apt-get "):] in proc.stderr
    assert _real_installs(calls) == []


def test_install_names_host_toolchain_in_same_command(shims):
    proc, calls = shims("--force", sim_files=["sim-clean.txt"])
    sim_call = next(c for c in calls if c.startswith("apt-get install -s"))
    for pkg in ("qemu-user", "gcc-aarch64-linux-gnu", "gcc", "libc6-dev", "make", "binutils"):
        assert f" {pkg}" in sim_call
    installs = _real_installs(calls)
    assert len(installs) == 1
    # real install = the simulated command minus -s (plus -y -q): same package list
    pkgs = lambda c: c.split("--no-install-recommends", 1)[1].split()
    assert pkgs(installs[0]) == pkgs(sim_call)
    # the fake dpkg-query still reports the packages missing, so the installer
    # must notice that apt did not deliver them
    assert proc.returncode == 1
    assert "still not installed" in proc.stderr


def test_simulation_error_installs_nothing(shims):
    proc, calls = shims("--force", sim_files=["sim-unmet.txt"])
    assert proc.returncode == 1
    assert "Unable to correct problems" in proc.stderr
    assert _real_installs(calls) == []


def test_apt_update_runs_once_only_when_a_package_is_unknown(shims):
    proc, calls = shims("--force", sim_files=["sim-unlocatable.txt", "sim-unlocatable.txt"])
    assert proc.returncode == 1
    assert sum(c.startswith("apt-get update") for c in calls) == 1
    # with empty package lists the update runs first and the unknown package is final
    lists_empty = not list(Path("/var/lib/apt/lists").glob("*_Packages*"))
    assert sum(c.startswith("apt-get install -s") for c in calls) == (1 if lists_empty else 2)
    assert _real_installs(calls) == []
    assert "Unable to locate package" in proc.stderr


# --- on this machine, after installation ---------------------------------

needs_install = pytest.mark.skipif(
    not STAMP.exists(), reason="harness not installed here yet: run setup/install.sh first"
)


@needs_install
def test_check_passes_after_installation():
    proc = subprocess.run(["bash", str(INSTALL), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all present" in proc.stdout


@needs_install
def test_noop_path_installs_nothing(shims):
    """The no-op path is fast because it calls no tool and writes nothing, which is what is
    asserted (a wall-clock bound failed under emulation in the arm64 node: 1.14 s against 1.0)."""
    before = STAMP.stat().st_mtime_ns
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    site_before = site.stat().st_mtime_ns
    proc, calls = shims(arch=None)  # this host's installation, as recorded for its architecture
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert calls == []  # no apt-get, dpkg-query or sudo at all
    assert STAMP.stat().st_mtime_ns == before
    assert site.stat().st_mtime_ns == site_before


# --- --with-mpi: the arm64 Open MPI (the trap this guard exists for) -------------

def test_guard_refuses_the_mpi_install_that_removes_the_toolchains():
    """REAL simulation: libopenmpi-dev:arm64 with its Fortran dependency resolved through
    gfortran-12:arm64 removes the host gcc, g++, clang-14, binutils and the cross gcc."""
    proc = subprocess.run(
        ["bash", str(INSTALL), "--check-simulation", str(FIXTURES / "sim-mpi-gfortran-remv.txt")],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 1
    removed = proc.stderr.split("package(s): ", 1)[1].split("\n", 1)[0].split()
    assert len(removed) == 17
    for pkg in ("gcc", "g++", "clang-14", "binutils", "gcc-aarch64-linux-gnu", "binutils-aarch64-linux-gnu", "dpkg-dev"):
        assert pkg in removed


def test_guard_accepts_the_mpi_install_with_the_toolchains_named():
    """REAL simulation of what the installer runs: toolchains named at their versions, nothing removed."""
    first = (FIXTURES / "sim-mpi-named-clean.txt").read_text().splitlines()[0]
    for pkg in ("libopenmpi-dev:arm64", "gcc=", "clang-14=", "gcc-aarch64-linux-gnu=", "qemu-user="):
        assert pkg in first
    proc = subprocess.run(
        ["bash", str(INSTALL), "--check-simulation", str(FIXTURES / "sim-mpi-named-clean.txt")],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr


def test_with_mpi_enables_arm64_then_simulates_and_refuses(shims, tmp_path):
    """--with-mpi on a machine without arm64: dpkg --add-architecture, apt-get update, then the
    simulated install names libopenmpi-dev:arm64 with the host toolchain; a simulation that
    removes packages stops it before any real install."""
    bindir = tmp_path / "bin"
    _write_exe(bindir / "dpkg", LOG_SHIM.format(name="dpkg", tail="exit 0"))
    proc, calls = shims("--force", "--with-mpi", sim_files=["sim-mpi-gfortran-remv.txt"])
    assert proc.returncode == 1
    assert "REMOVE 17 package(s)" in proc.stderr
    i_arch = calls.index("dpkg --add-architecture arm64")
    i_update = next(i for i, c in enumerate(calls) if c.startswith("apt-get update"))
    i_sim = next(i for i, c in enumerate(calls) if c.startswith("apt-get install -s"))
    assert i_arch < i_update < i_sim
    for pkg in ("libopenmpi-dev:arm64", "gcc", "libc6-dev", "binutils"):
        assert f" {pkg}" in calls[i_sim]
    assert _real_installs(calls) == []


@pytest.mark.needs_mpi
@needs_install
def test_check_with_mpi_passes_after_installation():
    proc = subprocess.run(["bash", str(INSTALL), "--check", "--with-mpi"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


MULTIARCH_DPKG_QUERY = r"""#!/bin/bash
# libc6-dev installed for amd64 and arm64 (after --with-mpi): dpkg-query prints the format
# once per instance, without a separator; everything else is not installed.
echo "dpkg-query $*" >> "$SHIM_LOG"
printf '%s\n' "$@" | grep -qx libc6-dev || exit 1
case "$*" in
  *'${db:Status-Abbrev}'*'${Package}'*) printf 'ii  libc6-dev amd64\nii  libc6-dev arm64\n' ;;
  *'${db:Status-Abbrev}'*) printf 'ii ii ' ;;
  *'${Version}\n'*) printf '2.36-9+deb12u14\n2.36-9+deb12u14\n' ;;
  *'${Version}'*) printf '2.36-9+deb12u142.36-9+deb12u14' ;;
esac
"""


def test_toolchain_installed_in_two_architectures_is_named_at_one_version(shims, tmp_path):
    """With libc6-dev:amd64 and libc6-dev:arm64 installed (as --with-mpi leaves them), the
    named host toolchain said libc6-dev=<version><version> and apt refused every install."""
    _write_exe(tmp_path / "bin" / "dpkg-query", MULTIARCH_DPKG_QUERY)
    proc, calls = shims("--force", sim_files=["sim-clean.txt"])
    sim_call = next((c for c in calls if c.startswith("apt-get install -s")), proc.stderr)
    assert " libc6-dev=2.36-9+deb12u14 " in f"{sim_call} ", sim_call


def test_with_chromium_installs_it_through_the_guard(shims):
    """`./harness test` asks for chromium (the report test loads the page in it): the same
    simulated, no-removal install as every other package."""
    proc, calls = shims("--force", "--with-chromium", sim_files=["sim-remv-gcc-multilib.txt"])
    sim_call = next(c for c in calls if c.startswith("apt-get install -s"))
    assert " chromium " in f"{sim_call} "
    assert _real_installs(calls) == [] and proc.returncode != 0


def test_plain_setup_installs_what_sweep_and_test_need(shims):
    """`./harness setup` without options: clang-14 (the default sweep's second compiler) and
    chromium (the report test) in the one guarded install, so that after root's plain setup no
    other user's sweep or test has anything to install (it installed neither)."""
    proc, calls = shims("setup", "--force", sim_files=["sim-remv-gcc-multilib.txt"], program=ROOT / "harness")
    sim_call = next(c for c in calls if c.startswith("apt-get install -s"))
    assert " clang-14 " in f"{sim_call} " and " chromium " in f"{sim_call} ", sim_call
    assert _real_installs(calls) == [] and proc.returncode == 1


HELD_DPKG_QUERY = r"""#!/bin/bash
# The real dpkg-query, every installed package shown as held by the admin (apt-mark hold: "hi").
/usr/bin/dpkg-query "$@" | sed 's/^ii/hi/'
"""


@needs_install
def test_a_held_package_counts_as_installed(tmp_path):
    """An admin who holds the toolchain (apt-mark hold gcc) has it installed: dpkg says "hi", and
    --check listed every held package as missing (and install asked for it again)."""
    _write_exe(tmp_path / "dpkg-query", HELD_DPKG_QUERY)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    assert subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "gcc"], env=env, capture_output=True,
                          text=True, timeout=30).stdout == "hi "
    proc = subprocess.run(["bash", str(INSTALL), "--check"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "all present" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.needs_clang
@pytest.mark.needs_chromium
@needs_install
def test_after_setup_the_sweeps_install_is_a_no_op(shims, tmp_path: Path):
    """`./harness setup` installs the set of `./harness test` (clang and chromium): it records the
    sweep's set (clang) as installed too, so the next sweep looks for nothing (no dpkg-query)."""
    root = tmp_path / "clone"
    _tree_with_venv(root)
    install = root / "setup" / "install.sh"
    # The real dpkg-query; an apt-get that refuses, so that a package missing here is not installed.
    no_apt = tmp_path / "no-apt"
    no_apt.mkdir()
    _write_exe(no_apt / "apt-get", "#!/bin/sh\necho 'apt-get: not in this test' >&2; exit 1\n")
    proc = subprocess.run(["bash", str(install), "--with-clang", "--with-chromium"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": f"{no_apt}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc, calls = shims("--with-clang", program=install, arch=None)  # the set just installed for this host
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert calls == []


def test_with_slurm_goes_through_the_removal_guard(shims):
    """--with-slurm installs slurm-wlm and munge in the same guarded command as the toolchain; a
    simulation that removes packages stops it before any install and before any daemon starts."""
    proc, calls = shims("--force", "--with-slurm", sim_files=["sim-remv-gcc-multilib.txt"])
    assert proc.returncode == 1
    assert "refusing to install" in proc.stderr and "Slurm is up" not in proc.stderr
    sim_call = next(c for c in calls if c.startswith("apt-get install -s"))
    for pkg in ("slurm-wlm", "munge", "gcc", "libc6-dev", "binutils"):
        assert f" {pkg}" in sim_call
    assert _real_installs(calls) == []


def test_guard_accepts_the_ompi5_build_dependencies():
    """A real simulation of --with-ompi5's arm64 package on Debian 12 with slurm installed
    (`apt-get install -s --no-install-recommends libhwloc-dev:arm64`): 48 packages, nothing removed."""
    sim = FIXTURES / "sim-ompi5-hwloc-clean.txt"
    assert "Inst libhwloc-dev:arm64" in sim.read_text()
    proc = subprocess.run(["bash", str(INSTALL), "--check-simulation", str(sim)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_with_ompi5_simulates_and_refuses_before_building(shims, tmp_path):
    """--with-ompi5: arm64 enabled, one simulated install naming autotools, flex, the arm64 hwloc
    and the host toolchain; a simulation that removes packages stops it before any real install
    and before the Open MPI build starts (setup/ompi5.sh would say so on stderr)."""
    bindir = tmp_path / "bin"
    _write_exe(bindir / "dpkg", LOG_SHIM.format(name="dpkg", tail="exit 0"))
    proc, calls = shims("--force", "--with-ompi5", sim_files=["sim-mpi-gfortran-remv.txt"])
    assert proc.returncode == 1
    assert "REMOVE 17 package(s)" in proc.stderr and "ompi5.sh" not in proc.stderr
    sim = next(c for c in calls if c.startswith("apt-get install -s"))
    for pkg in ("autoconf", "automake", "libtool", "flex", "libhwloc-dev:arm64", "gcc", "libc6-dev", "binutils"):
        assert f" {pkg}" in sim, (pkg, sim)
    assert "libopenmpi-dev:arm64" not in sim  # Debian's Open MPI is neither needed nor touched
    assert _real_installs(calls) == []


def test_check_with_ompi5_names_the_missing_build(tmp_path):
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(["bash", str(INSTALL), "--check", "--with-ompi5"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 1
    assert f"Open MPI 5 not built at {tmp_path / 'cache' / 'ompi-v5.0.9' / 'install'} (fix: setup/install.sh --with-ompi5)" in proc.stdout
    assert "run setup/install.sh --with-ompi5" in proc.stdout  # after root's apt line, for a user who may not install


def test_check_with_arm64_vm_names_the_missing_guest(tmp_path):
    # The guest is an x86-64 host's part (an arm64 host skips it in one line).
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "cache"), "HARNESS_HOST_ARCH": "amd64"}
    proc = subprocess.run(["bash", str(INSTALL), "--check", "--with-arm64-vm"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 1
    assert (f"the arm64 guest is not built at {tmp_path / 'cache' / 'arm64-vm-6.1.0-56-arm64'} "
            "(fix: setup/install.sh --with-arm64-vm)") in proc.stdout
    assert "run setup/install.sh --with-arm64-vm" in proc.stdout  # after root's apt line, for a user who may not install


def test_harness_caches_bytecode_under_venv_despite_dontwritebytecode(tmp_path: Path):
    """Every count job and figure is a Python start: with PYTHONDONTWRITEBYTECODE in the
    caller's environment (CI here sets it) each start compiled the harness's modules again,
    ~80 ms per job. ./harness keeps the bytecode, under .venv, never beside the sources."""
    target = ROOT / ".venv" / "pycache" / (ROOT / "analysis" / "core").relative_to("/") / \
        f"config.{sys.implementation.cache_tag}.pyc"
    target.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([str(ROOT / "harness"), "validate", "--config", str(ROOT / "configs" / "tiny.yaml")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert target.exists()


# --- the venv at another clone path, and a package deleted from it -------------------------------

def _tree_with_venv(root: Path) -> Path:
    """setup/ and the requirements at `root`, with a venv there that shares this one's packages:
    its site-packages a folder of links to ours (so one can be deleted there alone), the
    Slurm site copied (install writes into it), and the snakemake launcher pip writes for that
    path (a /bin/sh polyglot when the path has a space). Returns the venv's site-packages."""
    import sysconfig

    root.mkdir(parents=True)
    shutil.copytree(ROOT / "setup", root / "setup")
    for req in ("requirements.txt", "requirements-slurm.txt"):
        shutil.copy(ROOT / req, root / req)
    venv, real = root / ".venv", ROOT / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(real / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(os.path.realpath(real / "bin" / "python"))
    real_site = Path(sysconfig.get_paths()["purelib"])
    site = venv / real_site.relative_to(sys.prefix)
    site.mkdir(parents=True)
    for entry in real_site.iterdir():
        if entry.name != "__pycache__":
            (site / entry.name).symlink_to(entry)
    shutil.copytree(real / "slurm-executor", venv / "slurm-executor", symlinks=True)
    python = str(venv / "bin" / "python")
    exec_line = f"'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n" if " " in python else None
    body = "# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom snakemake.cli import main\nif __name__ == '__main__':\n" \
           "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n"
    _write_exe(venv / "bin" / "snakemake", (f"#!/bin/sh\n{exec_line}" if exec_line else f"#!{python}\n") + body)
    return site


@needs_install
@pytest.mark.parametrize("folder", ["my clone", "x$(touch PWNED)y"])
def test_check_passes_for_a_clone_path_with_a_space(tmp_path: Path, folder: str):
    """The launcher of a venv whose path has a space is a /bin/sh polyglot: --check took it for
    a venv made at another path (and install would have recreated it). A path holding `$(...)`
    runs nothing in the installer."""
    root = tmp_path / folder / "repo"
    _tree_with_venv(root)
    assert (root / ".venv" / "bin" / "snakemake").read_text().startswith("#!/bin/sh\n'''exec' \"")
    proc = subprocess.run(["bash", str(root / "setup" / "install.sh"), "--check"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "all present" in proc.stdout, proc.stdout + proc.stderr
    assert "another path" not in proc.stdout
    assert not list(tmp_path.rglob("PWNED")) and not (ROOT / "PWNED").exists()


@pytest.mark.slow
@needs_install
def test_a_deleted_package_is_named_by_check_and_reinstalled_by_setup(tmp_path: Path):
    """pandas deleted from the venv (its metadata left): --check said all present, setup's no-op
    path repaired nothing, and every command was a ModuleNotFoundError."""
    root = tmp_path / "clone" / "repo"
    site = _tree_with_venv(root)
    install = ["bash", str(root / "setup" / "install.sh")]
    python = str(root / ".venv" / "bin" / "python")
    (site / "pandas").unlink()
    proc = subprocess.run([*install, "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "venv pin: pandas: installed" in proc.stdout and f"{site / 'pandas'} is gone" in proc.stdout, proc.stdout
    (site / "pandas").symlink_to(Path(os.readlink(site / "numpy")).parent / "pandas")
    # Repair, through the no-op path: install once (stamp), delete a small package, install again.
    for name in [p.name for p in site.iterdir() if p.name.startswith("throttler")]:
        (site / name).unlink()  # a copy of its own: the reinstall removes its files
        shutil.copytree(ROOT / ".venv" / site.relative_to(root / ".venv") / name, site / name)
    proc = subprocess.run([*install, "--venv-only"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shutil.rmtree(site / "throttler")
    assert subprocess.run([python, "-c", "import throttler"], capture_output=True).returncode == 1
    proc = subprocess.run([*install, "--venv-only"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reinstalling packages whose files are missing: throttler==" in proc.stderr, proc.stderr
    assert subprocess.run([python, "-c", "import throttler"], capture_output=True).returncode == 0
    assert (ROOT / ".venv" / site.relative_to(root / ".venv") / "throttler").is_dir()  # ours untouched
