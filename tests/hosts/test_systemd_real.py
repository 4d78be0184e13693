"""The `systemd` manager against a real systemd as PID 1: a Debian container booted with
systemd-nspawn (tests/hosts/systemd_container.py), reached by specsweep's SSH host on
127.0.0.1. llama-server units start, serve, stop; a failing unit's journal reaches the log
tail; a server killed mid-campaign is restarted once; a blocking service (a systemd unit)
is stopped around a phase. Skipped, with what failed, where nspawn cannot boot."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import yaml

from collect.hosts.base import Process
from collect.hosts.managers import unit_name
from collect.hosts.ssh import SSH
from collect.plan.components import SSHHost
from collect.plan.file import parse_plan
from collect.run import runner
from tests.hosts.sshd import free_port
from tests.hosts.systemd_container import (
    Container,
    ContainerError,
    booted,
    descendants,
    ensure_image,
    running_containers,
)

TRICKY = 'a b "q" $HOME ${X} %n \\ ;|&'  # survives the unit file as one word


@pytest.fixture(scope="module")
def paths(llama_server: str, smollm_model: str) -> tuple[str, str]:
    return str(Path(llama_server).resolve()), str(Path(smollm_model).resolve())


@pytest.fixture(scope="module")
def image() -> Path:
    if os.geteuid() != 0:
        pytest.skip("a real systemd needs systemd-nspawn, which needs root")
    missing = [t for t in ("systemd-nspawn", "debootstrap") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{missing} not found: apt-get install -y systemd-container debootstrap")
    try:
        return ensure_image()
    except ContainerError as exc:
        pytest.skip(f"no systemd test image: {exc}")


@contextlib.contextmanager
def _boot(image: Path, paths: tuple[str, str], unified: bool = True) -> Iterator[Container]:
    binds = [Path(paths[0]).parents[1], Path(paths[1])]
    with contextlib.ExitStack() as stack:
        try:
            box = stack.enter_context(booted(image, binds, unified=unified))
        except ContainerError as exc:
            pytest.skip(f"systemd-nspawn could not boot a real systemd here: {exc}")
        yield box


@pytest.fixture(scope="module")
def box(image: Path, paths: tuple[str, str]) -> Iterator[Container]:
    """One container for the module, its systemd on cgroup v2 (the current layout)."""
    with _boot(image, paths) as container:
        yield container
    assert container.proc.returncode is not None


def _cfg(box: Container, workdir: str) -> dict[str, Any]:
    return {
        "kind": "ssh", "name": "nspawn", "address": "127.0.0.1", "port": box.port,
        "user": "root", "key_file": str(box.key_file),
        "known_hosts_file": str(box.known_hosts), "use_ssh_config": False,
        "manager": "systemd", "workdir": workdir, "connect_timeout_s": 5,
    }


@pytest.fixture
def host(box: Container, request: pytest.FixtureRequest) -> Iterator[SSH]:
    """The SSH host (manager systemd) on the container; stops what a failed test left."""
    with SSH(SSHHost(**_cfg(box, f"/var/tmp/specsweep/{request.node.name}"))) as h:
        started: list[Process] = []
        start = h.start

        def tracked(argv: list[str], env: dict[str, str], log_path: Path) -> Process:
            started.append(start(argv, env, log_path))
            return started[-1]

        h.start = tracked  # type: ignore[method-assign]
        yield h
        for proc in started:
            h.stop(proc, grace_s=1)


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _out(host: SSH, *cmd: str) -> str:
    rc, out, err = host.run(list(cmd))
    assert rc == 0, f"{cmd}: {err}"
    return out.strip()


def _server_argv(paths: tuple[str, str], port: int, model: str | None = None) -> list[str]:
    return [paths[0], "-m", model or paths[1], "--host", "127.0.0.1", "--port", str(port),
            "-t", "1", "-c", "512", "--alias", TRICKY]


# --- the container --------------------------------------------------------------------------


def test_pid_1_is_systemd(host: SSH) -> None:
    assert _out(host, "cat", "/proc/1/comm") == "systemd"
    assert _out(host, "systemctl", "is-system-running") == "running"
    assert _out(host, "systemd-detect-virt") == "systemd-nspawn"
    assert _out(host, "stat", "-fc", "%T", "/sys/fs/cgroup") == "cgroup2fs"


def test_cgroup_v1_layout_and_halting_leaves_no_process(
    image: Path, paths: tuple[str, str]
) -> None:
    """The older layout (systemd on a cgroup v1 name=systemd hierarchy) starts and stops a
    unit too; halting the container leaves none of its processes behind."""
    with _boot(image, paths, unified=False) as other:
        inside = descendants(other.proc.pid)  # the container's init and everything below
        assert len(inside) > 3 and other.proc.pid in running_containers()
        with SSH(SSHHost(**_cfg(other, "/var/tmp/specsweep/v1"))) as h:
            assert _out(h, "stat", "-fc", "%T", "/sys/fs/cgroup") == "tmpfs"
            proc = h.start(["/bin/sleep", "1000"], {}, Path("logs/sleep.log"))
            assert h.alive(proc) and "name=systemd:/system.slice/" in _out(
                h, "cat", f"/proc/{proc.pid}/cgroup")
            h.stop(proc)
            assert not h.alive(proc) and h.run(["kill", "-0", str(proc.pid)])[0] != 0
            inside = descendants(other.proc.pid)
    assert other.proc.returncode is not None
    assert other.proc.pid not in running_containers()
    assert not [p for p in inside if Path(f"/proc/{p}").exists()]


# --- units ----------------------------------------------------------------------------------


def test_a_unit_serves_and_stops(host: SSH, paths: tuple[str, str]) -> None:
    port = free_port()
    env = {"SPECSWEEP_PROBE": TRICKY}
    proc = host.start(_server_argv(paths, port), env, Path("logs/serve.log"))
    unit = unit_name(proc.log_path)
    assert wait_for(lambda: _healthy(f"http://127.0.0.1:{port}"), 60), host.log_tail(proc)
    assert host.alive(proc)
    # systemd's MainPID is the server itself, in the unit's own cgroup
    assert proc.pid == int(_out(host, "systemctl", "show", "-p", "MainPID", "--value", unit))
    assert _out(host, "cat", f"/proc/{proc.pid}/comm") == "llama-server"
    cgroup = _out(host, "systemctl", "show", "-p", "ControlGroup", "--value", unit)
    assert cgroup.endswith(f"/{unit}") and cgroup in _out(host, "cat", f"/proc/{proc.pid}/cgroup")
    # the unit file's quoting reached the process unchanged
    argv = _out(host, "sh", "-c", 'tr "\\0" "\\n" < /proc/$1/cmdline', "sh", str(proc.pid))
    assert argv.split("\n") == _server_argv(paths, port)
    environ = host.read_file(f"/proc/{proc.pid}/environ").split("\0")
    assert f"SPECSWEEP_PROBE={TRICKY}" in environ
    assert "listening on" in host.read_file(str(proc.log_path))
    t0 = time.monotonic()
    host.stop(proc, grace_s=5)
    assert time.monotonic() - t0 < 5
    assert not host.alive(proc) and not _healthy(f"http://127.0.0.1:{port}")
    assert _out(host, "systemctl", "show", "-p", "ActiveState", "--value", unit) == "inactive"
    assert host.run(["kill", "-0", str(proc.pid)])[0] != 0


def test_stop_kills_the_whole_cgroup_after_the_timeout(host: SSH) -> None:
    """A server that ignores SIGTERM, with a child that does too: `systemctl stop` waits
    TimeoutStopSec (10 s), then SIGKILLs every process of the unit's cgroup."""
    script = "trap '' TERM; sleep 1000 & echo $! > /var/tmp/child.pid; wait"
    proc = host.start(["/bin/sh", "-c", script], {}, Path("logs/stubborn.log"))
    assert wait_for(lambda: host.run(["test", "-s", "/var/tmp/child.pid"])[0] == 0, 10)
    child = _out(host, "cat", "/var/tmp/child.pid")
    assert host.run(["kill", "-0", child])[0] == 0 and host.alive(proc)
    t0 = time.monotonic()
    host.stop(proc)
    assert 9 < time.monotonic() - t0 < 30
    assert not host.alive(proc)
    assert host.run(["kill", "-0", child])[0] != 0 and host.run(["kill", "-0", str(proc.pid)])[0]
    assert "State 'stop-sigterm' timed out. Killing." in host.log_tail(proc)


def test_a_failing_unit_shows_its_journal(host: SSH, paths: tuple[str, str]) -> None:
    argv = _server_argv(paths, free_port(), model="/nonexistent/model.gguf")
    proc = host.start(argv, {}, Path("logs/bad-model.log"))
    assert wait_for(lambda: not host.alive(proc), 30)
    tail = host.log_tail(proc)
    assert "/nonexistent/model.gguf" in tail  # llama-server's own words, from its log file
    assert "status=1/FAILURE" in tail and "exit-code" in tail  # systemd's, from the journal
    unit = unit_name(proc.log_path)
    assert _out(host, "systemctl", "show", "-p", "ActiveState", "--value", unit) == "failed"


def test_a_binary_systemd_cannot_execute_is_a_failed_start(host: SSH) -> None:
    """`systemctl start` fails at once (status 203/EXEC): the server exited during start-up,
    the journal says why (before the fix: a RuntimeError that ended the campaign)."""
    proc = host.start(["/nonexistent/llama-server"], {}, Path("logs/no-binary.log"))
    assert not host.alive(proc)
    tail = host.log_tail(proc)
    assert "Failed to locate executable /nonexistent/llama-server" in tail
    assert "status=203/EXEC" in tail


# --- campaigns ------------------------------------------------------------------------------


def _plan(box: Container, paths: tuple[str, str], workdir: str, reps: int,
          **extra: Any) -> dict[str, Any]:
    return {
        "name": "nspawn-systemd",
        "host": _cfg(box, workdir),
        "engine": {"kind": "llamacpp", "binary": paths[0], "model": paths[1],
                   "args": ["-t", "1", "-c", "2048", "-np", "1"],  # -t 1: fast on a busy CPU
                   "startup_timeout_s": 60, "request_timeout_s": 60},
        "methods": [{"name": "autoregressive", "args": ["--spec-type", "none"]}],
        "workloads": [{
            "name": "rewrite",
            "prompts": {"kind": "inline", "texts": [
                "Repeat exactly: def add(a, b): return a + b",
                "Repeat exactly: for i in range(3): print(i)",
                "Repeat exactly: while True: break",
            ]},
            "max_tokens": [16], "repetitions": reps,
        }],
        **extra,
    }


def _units(box: Container, state: str) -> list[str]:
    done = box.ssh(f"systemctl list-units --all --state={state} --plain --no-legend "
                   "'specsweep-*' | cut -d' ' -f1")
    return done.stdout.split()


def _server_pid_mid_workload(box: Container, workdir: str, timeout_s: float) -> int:
    """MainPID of the running unit once its log shows two answered requests (the warm-up
    and the first measured one)."""
    deadline = time.monotonic() + timeout_s
    count = f"cat $(find {workdir}/logs -name '*.log') | grep -c 'print_timing.*total time'"
    while time.monotonic() < deadline:
        done = box.ssh(count).stdout.strip()
        if done.isdigit() and int(done) >= 2:
            for unit in _units(box, "active"):
                pid = box.ssh(f"systemctl show -p MainPID --value {unit}").stdout.strip()
                if pid.isdigit() and pid != "0":
                    return int(pid)
        time.sleep(0.1)
    raise AssertionError(f"no llama-server unit answered twice in {timeout_s} s")


def test_a_server_killed_mid_campaign_is_restarted_once(
    box: Container, paths: tuple[str, str], tmp_path: Path
) -> None:
    workdir = "/var/tmp/specsweep/crash"
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(yaml.safe_dump(_plan(box, paths, workdir, reps=4)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "collect", "run", str(plan), "--db", str(db), "--logs", "logs",
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        pid = _server_pid_mid_workload(box, workdir, timeout_s=90)
        assert box.ssh(f"kill -9 {pid}").returncode == 0
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute("SELECT state, error, log_tail FROM services "
                               "ORDER BY requested_at").fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        failed = con.execute("SELECT count(*) FROM requests WHERE NOT ok").fetchone()[0]
        measured = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
    assert [s[0] for s in services] == ["failed", "stopped"] and "died" in services[0][1]
    assert "status=9/KILL" in services[0][2]  # the journal's account of the kill
    assert status == "complete" and failed == 0 and measured == 3 * 4
    assert _units(box, "active") == [] and box.ssh("pgrep -x llama-server").returncode == 1


BLOCKER = """[Unit]
Description=a service holding what a phase needs
[Service]
ExecStartPre=/bin/sh -c 'echo start $$(date +%%s.%%N) >> /var/tmp/blocker.events'
ExecStart=/bin/sleep infinity
ExecStopPost=/bin/sh -c 'echo stop $$(date +%%s.%%N) >> /var/tmp/blocker.events'
"""


def test_a_blocking_unit_is_stopped_around_the_phase(
    box: Container, host: SSH, paths: tuple[str, str], tmp_path: Path
) -> None:
    host.write_file("/etc/systemd/system/blocker.service", BLOCKER)
    _out(host, "systemctl", "daemon-reload")
    _out(host, "systemctl", "start", "blocker.service")
    blocking = [{"name": "blocker", "stop": ["systemctl", "stop", "blocker.service"],
                 "start": ["systemctl", "start", "blocker.service"]}]
    plan = _plan(box, paths, "/var/tmp/specsweep/blocking", reps=1,
                 phases=[{"name": "p1", "tp": 1, "stop_services": ["blocker"]}])
    plan["host"]["blocking_services"] = blocking
    text = yaml.safe_dump(plan)
    db = tmp_path / "results.duckdb"
    runner.run(parse_plan(text), text, db, Path("logs"), show_progress=False)
    events = [line.split() for line in host.read_file("/var/tmp/blocker.events").splitlines()]
    assert [e[0] for e in events] == ["start", "stop", "start"]
    assert _out(host, "systemctl", "is-active", "blocker.service") == "active"
    with duckdb.connect(str(db), read_only=True) as con:
        state, requested, stopped = con.execute(
            "SELECT state, epoch(requested_at), epoch(stopped_at) FROM services").fetchone()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert state == "stopped" and status == "complete"
    # the container shares this machine's clock: the blocker was down while the server ran
    assert float(events[1][1]) <= requested and stopped <= float(events[2][1])
