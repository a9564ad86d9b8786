"""The arm64 node (issue 52): setup/arm64-node.sh's answers and refusals (against an empty
HARNESS_CACHE, nothing built), the runner's command line, boot script and arguments, the
installer's package lists by architecture, ci/aarch64-node's refusals, and, where the node is
built (`./harness setup --with-arm64-node`), one boot that runs a command as its user."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.core import arm64_node, config
from conftest import REPO

SETUP = REPO / "setup" / "arm64-node.sh"
INSTALL = REPO / "setup" / "install.sh"
CI = REPO / "ci" / "aarch64-node"
FIX = "./harness setup --with-arm64-node"


@pytest.fixture
def node_cache(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cache").mkdir()
    base = {k: v for k, v in os.environ.items() if k != "ARM64_NODE_GIB"}
    return {**base, "HARNESS_CACHE": str(tmp_path / "cache")}


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, cwd=REPO)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# --- setup/arm64-node.sh -----------------------------------------------------------------------

def test_path_says_not_built_and_names_the_command(node_cache: dict[str, str]) -> None:
    proc = run([str(SETUP), "--path"], node_cache)
    assert proc.returncode == 1 and proc.stdout == ""
    assert FIX in one_line(proc.stderr) and "not built" in proc.stderr


def test_where_names_the_folder_under_the_cache(node_cache: dict[str, str]) -> None:
    proc = run([str(SETUP), "--where"], node_cache)
    assert proc.stdout.strip() == f"{node_cache['HARNESS_CACHE']}/arm64-node-bookworm-6.1.0-56-arm64"


@pytest.mark.parametrize("args, extra, says", [
    (["--bogus"], {}, "unknown option '--bogus'"),
    ([], {"ARM64_NODE_GIB": "lots"}, "ARM64_NODE_GIB=lots"),
    ([], {"ARM64_NODE_GIB": "2"}, "4 or more"),
])
def test_bad_input_exits_2_in_one_line_creating_nothing(node_cache: dict[str, str], args: list[str],
                                                        extra: dict[str, str], says: str) -> None:
    proc = run([str(SETUP), *args], {**node_cache, **extra})
    assert proc.returncode == 2 and says in one_line(proc.stderr)
    assert list(Path(node_cache["HARNESS_CACHE"]).iterdir()) == []


# --- the runner ----------------------------------------------------------------------------------

NODE = arm64_node.Node(Path("/n"))


def test_the_node_has_user_networking_its_disk_and_the_share_on_virtio_mmio(tmp_path: Path) -> None:
    cmd = arm64_node.qemu_command(NODE, tmp_path)
    assert cmd[:7] == ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on", "-smp", "2"]
    text = " ".join(cmd)
    assert "-netdev user,id=n0 -device virtio-net-device,netdev=n0" in text
    assert "-drive file=/n/node.img,format=raw,if=none,id=d0 -device virtio-blk-device,drive=d0 -snapshot" in text
    assert f"-fsdev local,id=host,path={tmp_path},security_model=none -device virtio-9p-device,fsdev=host,mount_tag=host" in text
    assert "-icount" not in cmd


def test_the_disk_is_kept_written_through_or_under_an_overlay(tmp_path: Path) -> None:
    persist = arm64_node.qemu_command(NODE, tmp_path, persist=True)
    assert "file=/n/node.img,format=raw,if=none,id=d0" in persist and "-snapshot" not in persist
    over = arm64_node.qemu_command(NODE, tmp_path, overlay=Path("/w/o.qcow2"))
    assert "file=/w/o.qcow2,format=qcow2,if=none,id=d0" in over and "-snapshot" not in over
    with pytest.raises(arm64_node.NodeError, match="exclude each other"):
        arm64_node.qemu_command(NODE, tmp_path, persist=True, overlay=Path("/w/o.qcow2"))


def test_a64fx_gets_gicv3_and_icount_is_exact_counting(tmp_path: Path) -> None:
    cmd = arm64_node.qemu_command(NODE, tmp_path, cpu="a64fx", smp=1, icount=True)
    assert cmd[1:7] == ["-M", "virt,gic-version=3", "-cpu", "a64fx", "-smp", "1"]
    assert cmd[-2:] == ["-icount", "shift=0"]
    assert arm64_node.qemu_command(NODE, tmp_path, cpu="vl256")[3:7] == ["-cpu", "max,pauth-impdef=on,sve256=on", "-smp", "2"]
    with pytest.raises(arm64_node.NodeError, match="unknown CPU 'neoverse'"):
        arm64_node.qemu_command(NODE, tmp_path, cpu="neoverse")


def test_the_command_runs_as_the_user_in_a_clean_login_environment() -> None:
    script = arm64_node.boot_script("./harness setup", "harness", {"PIP_DEFAULT_TIMEOUT": "180"})
    line = script.splitlines()[-1]
    assert line.startswith("runuser -u harness -- /usr/bin/env -i HOME=/home/harness USER=harness LOGNAME=harness ")
    assert "PIP_DEFAULT_TIMEOUT=180 /bin/bash -c 'cd /home/harness && ./harness setup' " in line
    assert line.endswith(">/mnt/host/output.log 2>&1 </dev/null")
    root = arm64_node.boot_script("id", None, {}).splitlines()[-1]
    assert root.startswith("/usr/bin/env -i HOME=/root USER=root ") and "cd /root && id" in root


def test_only_variables_that_mean_the_same_in_the_node_are_passed() -> None:
    env = {"PIP_DEFAULT_TIMEOUT": "180", "PIP_FIND_LINKS": "/opt/wheels", "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
           "https_proxy": "http://proxy:3128", "SSL_CERT_DIR": "/etc/ssl/certs", "HOME": "/root", "PATH": "/usr/bin"}
    assert arm64_node.passed_env(env) == {"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt", "PIP_DEFAULT_TIMEOUT": "180",
                                          "SSL_CERT_DIR": "/etc/ssl/certs", "https_proxy": "http://proxy:3128"}


def test_a_bad_env_argument_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        arm64_node.parse_args(["run", "--env", "NOEQUALS", "true"])
    assert e.value.code == 2 and "--env 'NOEQUALS': give KEY=VALUE" in capsys.readouterr().err.splitlines()[-1]


def test_a_missing_node_is_one_line_naming_the_setup_command(node_cache: dict[str, str]) -> None:
    proc = run(["python3", "-m", "analysis.core.arm64_node", "run", "true"], node_cache)
    assert proc.returncode == 1 and FIX in one_line(proc.stderr) and "Traceback" not in proc.stderr


def fake_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> arm64_node.Node:
    """A qemu-system-aarch64 on PATH that runs `body` (bash; $share: the share folder), and a node
    directory with the three files the runner looks for."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-aarch64"
    qemu.write_text("#!/bin/bash\nfor a; do case $a in *,path=*) share=${a#*,path=}; share=${share%%,*};; esac; done\n"
                    + body + "\n")
    qemu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    for f in ("vmlinuz", "initrd.img", "node.img"):
        (node_dir / f).write_text("")
    return arm64_node.find_node(node_dir)


def test_the_status_and_output_come_back_through_the_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = fake_qemu(tmp_path, monkeypatch, 'echo hello >"$share/output.log"; echo 3 >"$share/rc"; echo "NODE-DONE rc=3"')
    result = arm64_node.run(node, "true", tmp_path / "out", 60)
    assert (result.rc, result.log.read_text()) == (3, "hello\n")
    assert "runuser -u harness" in (tmp_path / "out" / "boot.sh").read_text()


def test_a_node_that_stops_early_is_one_line_with_its_last_console_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    node = fake_qemu(tmp_path, monkeypatch, 'echo "NODE-ERROR cannot mount the node\'s disk /dev/vda"; exit 0')
    with pytest.raises(arm64_node.NodeError) as e:
        arm64_node.run(node, "true", tmp_path / "out", 60)
    assert str(e.value) == ("the node stopped before its command ended (QEMU exit 0); "
                            "last console line: \"NODE-ERROR cannot mount the node's disk /dev/vda\"")


def test_a_node_past_its_time_limit_is_stopped_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = fake_qemu(tmp_path, monkeypatch, 'echo NODE-READY; exec sleep 60')
    with pytest.raises(arm64_node.NodeError, match=r"^the node did not finish in its time limit of 1 s \(stopped\); "
                                                     r"last console line: 'NODE-READY'$"):
        arm64_node.run(node, "true", tmp_path / "out", 1)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie of an exited child counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _qemu_pid(pid_file: Path) -> int:
    """The fake QEMU's pid once it started (it writes it first thing). Up to a minute: before it,
    the check bundles the repository and starts a Python runner, 10 s and more at a load of 6."""
    for _ in range(1200):
        if pid_file.is_file() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.05)
    raise AssertionError("the fake QEMU did not start")


def _stopped_in_time(pid: int) -> bool:
    for _ in range(200):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)  # the test's own sleep: it must not outlive the test
    return False


def test_a_runner_stopped_by_sigterm_stops_its_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QEMU runs in a session of its own: a runner ended by SIGTERM (a stopped CI job, a `kill`)
    left it running, as an orphan, until someone found it."""
    node = fake_qemu(tmp_path, monkeypatch, f'echo $$ >{tmp_path}/qemu.pid; echo NODE-READY; exec sleep 60')
    proc = subprocess.Popen([sys.executable, "-m", "analysis.core.arm64_node", "run", "--dir", str(node.dir),
                             "--out", str(tmp_path / "out"), "--", "true"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    qemu = _qemu_pid(tmp_path / "qemu.pid")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert _stopped_in_time(qemu), "QEMU outlived its runner"


def test_a_sigterm_as_qemu_starts_still_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that arrives while QEMU's process is being started (after the fork, before the
    runner holds it) ended the runner and left QEMU running (seen under load: the runner is
    descheduled there while QEMU starts). Here the signal arrives at the very end of Popen."""
    node = fake_qemu(tmp_path, monkeypatch, f'echo $$ >{tmp_path}/qemu.pid; echo NODE-READY; exec sleep 60')
    real_popen = subprocess.Popen

    def popen_then_sigterm(cmd: list[str], **kw: object) -> subprocess.Popen:
        proc = real_popen(cmd, **kw)
        if cmd[0] == arm64_node.QEMU:
            qemu.append(_qemu_pid(tmp_path / "qemu.pid"))
            os.kill(os.getpid(), signal.SIGTERM)
        return proc

    qemu: list[int] = []
    monkeypatch.setattr(arm64_node.subprocess, "Popen", popen_then_sigterm)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as stopped:
            arm64_node.main(["run", "--dir", str(node.dir), "--out", str(tmp_path / "out"), "--", "true"])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert qemu and _stopped_in_time(qemu[0]), "QEMU outlived its runner"


def test_ci_stopped_by_sigterm_stops_the_running_step_s_node(tmp_path: Path, node_cache: dict[str, str]) -> None:
    """The check runs each step's runner in the background and forwards the stop to it: a shell
    killed while its runner ran in the foreground left the runner, and its QEMU, running."""
    env = fake_node(tmp_path, node_cache, f"echo $$ >{tmp_path}/qemu.pid; exec sleep 60")
    proc = subprocess.Popen([str(CI), "--dir", str(tmp_path)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    qemu = _qemu_pid(tmp_path / "qemu.pid")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "ci/aarch64-node: stopped by SIGTERM; the node of the running step is stopped" in out
    assert _stopped_in_time(qemu), "QEMU outlived the stopped check"


def fake_node(tmp_path: Path, node_cache: dict[str, str], qemu_body: str) -> dict[str, str]:
    """A built node (its files empty) where the cache says, and a qemu-img and
    qemu-system-aarch64 on PATH (`qemu_body`: bash; $share the share folder, $drive the disk):
    the environment to run ci/aarch64-node in."""
    node_dir = Path(run([str(SETUP), "--where"], node_cache).stdout.strip())
    node_dir.mkdir(parents=True)
    for f in ("vmlinuz", "initrd.img", "node.img", "installed"):
        (node_dir / f).write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qemu-img").write_text(f'#!/bin/bash\necho "$*" >>{tmp_path}/qemu-img.log\n'
                                      'for a; do last=$a; done; : >"$last"\n')
    (bin_dir / "qemu-system-aarch64").write_text(
        "#!/bin/bash\nfor a; do case $a in *,path=*) share=${a#*,path=}; share=${share%%,*};; "
        "file=*) drive=${a#file=}; drive=${drive%%,*};; esac; done\n" + qemu_body + "\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {**node_cache, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_one_vcpu_steps_run_two_at_a_time_each_on_an_overlay_of_its_own(tmp_path: Path,
                                                                       node_cache: dict[str, str]) -> None:
    """The perf and Slurm steps run on one vCPU: two boot together and the next one boots as soon
    as one ends (max before slurm's end), never three; each writes an overlay of its own backed
    by the work folder's, which the clone writes."""
    log = tmp_path / "boots.log"
    secs = "case $(basename \"$share\") in slurm) s=10;; *) s=1;; esac"
    env = fake_node(tmp_path, node_cache, f'{secs}; echo "start $(basename "$share") $drive" >>{log}; sleep $s; '
                                          f'echo "end $(basename "$share")" >>{log}; echo 0 >"$share/rc"; '
                                          'echo "NODE-DONE rc=0"')
    proc = subprocess.run([str(CI), "--dir", str(tmp_path), "--only", "a64fx,slurm,max,vl256"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [ln.split() for ln in log.read_text().splitlines()]
    work = Path(events[0][2]).parent
    assert events[:2] == [["start", "clone", str(work / "disk.qcow2")], ["end", "clone"]]
    running, most = set(), 0
    for e in events[2:]:
        (running.add if e[0] == "start" else running.remove)(e[1])
        most = max(most, len(running))
        if e[0] == "start":
            assert e[2] == str(work / e[1] / "disk.qcow2")
            assert f"create -q -f qcow2 -F qcow2 -b {work / 'disk.qcow2'} {e[2]}" in (tmp_path / "qemu-img.log").read_text()
    assert most == 2 and not running
    names = [e[1] for e in events if e[0] == "start"]
    assert names[0] == "clone" and set(names[1:3]) == {"a64fx", "slurm"} and set(names[3:]) == {"max", "vl256"}
    # The check's own lines, in the order it acted: max booted when a64fx ended, before slurm did.
    out = proc.stdout
    assert out.index("ci/aarch64-node: a64fx  rc 0") < out.index("ci/aarch64-node: max: started") \
        < out.index("ci/aarch64-node: slurm  rc 0"), out
    summary = proc.stdout[proc.stdout.index("ci/aarch64-node: summary"):].splitlines()[1:]
    assert sorted(ln.split()[0] for ln in summary) == ["a64fx", "clone", "max", "slurm", "vl256"]
    assert all(" rc 0, " in ln for ln in summary)

# --- the installer by architecture -------------------------------------------------------------

def packages(arch: str, *args: str) -> subprocess.CompletedProcess:
    return run(["bash", str(INSTALL), "--print-packages", *args], {**os.environ, "HARNESS_HOST_ARCH": arch})


def test_on_arm64_the_installer_names_the_native_toolchain() -> None:
    proc = packages("arm64", "--with-clang")
    assert proc.returncode == 0
    assert proc.stdout.split() == ["binutils", "qemu-user", "gcc", "libc6-dev", "make", "python3", "python3-venv",
                                   "git", "linux-perf", "clang-14"]


def test_on_amd64_the_installer_names_the_cross_toolchain() -> None:
    proc = packages("amd64")
    assert proc.stdout.split()[:3] == ["gcc-aarch64-linux-gnu", "binutils-aarch64-linux-gnu", "libc6-dev-arm64-cross"]


def test_the_node_option_adds_its_tools_on_amd64_and_is_one_skip_line_on_arm64() -> None:
    amd = packages("amd64", "--with-arm64-node").stdout.split()
    assert amd[-5:] == ["qemu-system-arm", "qemu-utils", "cpio", "debootstrap", "e2fsprogs"]
    arm = packages("arm64", "--with-arm64-node")
    assert "qemu-system-arm" not in arm.stdout.split()
    assert "skipping --with-arm64-vm and --with-arm64-node" in one_line(arm.stderr)


# --- ci/aarch64-node ---------------------------------------------------------------------------

def test_ci_refuses_an_unknown_step_in_one_line(node_cache: dict[str, str]) -> None:
    proc = run([str(CI), "--only", "bogus"], node_cache)
    assert proc.returncode == 2 and "--only bogus" in one_line(proc.stderr)


def test_ci_resumes_only_a_work_folder_with_its_overlay(tmp_path: Path, node_cache: dict[str, str]) -> None:
    proc = run([str(CI), "--resume", str(tmp_path), "--only", "a64fx"], node_cache)
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f"ci/aarch64-node: --resume {tmp_path}: no disk.qcow2 there; give the work folder "
                                     "an earlier run printed (ci/aarch64-node: ... work folder: DIR)")


@pytest.mark.parametrize("step", ["a64fx", "max", "vl256"])
def test_each_perf_step_s_configs_are_valid(step: str) -> None:
    """The sweep files ci/aarch64-node's perf steps give ci/node/perf-check.sh, read from the
    script itself: each is valid, counts with QEMU (the reference) and asks perf for SVE runs."""
    text = CI.read_text()
    start = text.index(f"{step}) start {step} ")
    line = text[start:text.index(";;", start)]
    # perf's instructions: exact only under -icount, the same from process to process on one vCPU.
    assert "--icount --smp 1" in line
    configs = [w for w in line.split() if w.startswith("ci/node/") and w.endswith(".yaml")]
    assert configs and (REPO / configs[0]).exists()
    for c in configs:
        sweep = config.load(REPO / c)
        assert sweep.perf is not None and sweep.perf.sve != "off"
    assert config.load(REPO / configs[0]).backends == ["qemu"]


def test_the_perf_check_s_bad_usage_is_one_line() -> None:
    proc = subprocess.run([str(REPO / "ci" / "node" / "perf-check.sh"), "only-one"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage: ci/node/perf-check.sh CONFIG" in one_line(proc.stderr)


def test_ci_without_the_node_is_one_line_naming_the_setup_command(node_cache: dict[str, str]) -> None:
    proc = run([str(CI)], node_cache)
    assert proc.returncode == 1 and FIX in one_line(proc.stderr)


# --- the node itself ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.needs_arm64_node
@pytest.mark.timeout(600)
def test_a_command_runs_in_the_node_as_its_user_and_returns_its_status(tmp_path: Path) -> None:
    result = arm64_node.run(arm64_node.find_node(), "id -un; uname -m; python3 -c 'import sys; print(sys.version_info[:2])'; exit 3",
                            tmp_path, 600)
    assert result.rc == 3
    assert result.log.read_text().splitlines() == ["harness", "aarch64", "(3, 11)"]


@pytest.mark.slow
@pytest.mark.needs_arm64_node
@pytest.mark.timeout(900)
@pytest.mark.parametrize("cpu, vls", [("a64fx", "16 32 64"), ("vl256", "16 32"), ("max", "16 32 48 64 128 256")])
def test_each_cpu_offers_its_vector_lengths_to_the_node_s_kernel(cpu: str, vls: str, tmp_path: Path) -> None:
    """The VLs (bytes) the node's Linux grants when asked for 128, 256, 384, 512, 1024 and 2048
    bits (prctl grants the largest offered length not above the one asked): the CPUs of
    ci/aarch64-node's perf steps (A64FX: 128/256/512; Graviton3-like: up to 256; max: all)."""
    # PR_SVE_SET_VL is 50; the low 16 bits of its result are the VL granted, in bytes.
    (tmp_path / "probe.py").write_text(
        "import ctypes\nc = ctypes.CDLL(None)\n"
        "print(*sorted({c.prctl(50, b // 8, 0, 0, 0) & 0xffff for b in (128, 256, 384, 512, 1024, 2048)}))\n")
    tmp_path.chmod(0o755)  # the node's user reads it
    result = arm64_node.run(arm64_node.find_node(), f"python3 {arm64_node.GUEST_SHARE}/probe.py", tmp_path, 900, cpu=cpu)
    assert result.rc == 0, result.log.read_text()
    assert result.log.read_text().split() == vls.split()


# --- host-only rows of another ISA -------------------------------------------------------------

def test_x86_host_rows_are_one_skip_line_on_an_aarch64_host() -> None:
    from analysis.backends import perf
    from analysis.core import config
    sweep = config.load(REPO / "configs" / "beyond.yaml")
    assert perf.other_isa_note(sweep, "x86_64") is None
    assert perf.other_isa_note(sweep, "aarch64") == (
        "perf: 5 x86_64 host-only rows skipped on this aarch64 host: memcpy/x86_avx2, memcpy/x86_avx2_stream, "
        "memcpy/x86_avx2_stream_prefetch, memcpy/x86_avx2_x4, memcpy/x86_mt")


# --- the toolchain on either host --------------------------------------------------------------

def _toolchain_on(arch: str, expr: str) -> str:
    """`expr` of analysis.core.toolchain (as t) in a fresh interpreter told the host is `arch`."""
    code = f"from analysis.core import toolchain as t; print({expr})"
    proc = run([sys.executable, "-c", code], {**os.environ, "HARNESS_HOST_ARCH": arch})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_on_arm64_clang_is_the_native_compiler_without_the_cross_sysroot() -> None:
    """An arm64 Debian has no /usr/aarch64-linux-gnu: clang there links the host's libc as gcc
    does, and the libc's package is libc6-dev, not the cross one."""
    assert _toolchain_on("arm64", "t.COMPILERS['clang'].cc, t.libc_package(t.host_arch())") == (
        "('clang-14',) libc6-dev")
    assert _toolchain_on("amd64", "t.COMPILERS['clang'].cc, t.libc_package(t.host_arch())") == (
        "('clang-14', '--target=aarch64-linux-gnu', '--sysroot=/usr/aarch64-linux-gnu') libc6-dev-arm64-cross")


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="needs the harness's gcc (./harness setup)")
def test_the_static_libc_s_package_version_is_in_the_preflight_versions() -> None:
    """The counts of every copying ROI depend on glibc's memcpy: its package version is recorded
    with the compiler's (plans, provenance.csv, the regression fingerprint)."""
    from analysis.core import toolchain
    pkg = run(["dpkg-query", "-W", "-f=${Version}", toolchain.libc_package(toolchain.host_arch())]).stdout
    assert pkg and toolchain.preflight(["gcc"])["libc.gcc"].startswith(f"{pkg} libc.a:")
