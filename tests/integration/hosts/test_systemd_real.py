"""The `systemd` manager against a real systemd as PID 1: a Debian container booted with
systemd-nspawn (tests/support/systemd_container.py), reached by specsweep's SSH host on
127.0.0.1. llama-server units start, serve, stop; a failing unit's journal reaches the log
tail; a server killed mid-campaign is restarted once; a blocking service (a systemd unit)
is stopped around a phase. Skipped, with what failed, where nspawn cannot boot."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import yaml

from specsweep.collect.hosts.base import Process
from specsweep.collect.hosts.managers import unit_name
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner
from tests.integration.hosts.test_stop_order import LAUNCHER
from tests.support.collect_cli import collect_argv, llama_engine, start_run
from tests.support.sshd import free_port, wait_for
from tests.support.systemd_container import (
    Container,
    ContainerError,
    booted,
    ensure_image,
    namespace_members,
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
        done = container.ssh(f"{paths[0]} --version")  # built here: this libc, that tree's?
        if done.returncode != 0:
            pytest.skip(f"llama-server does not run in {image.name}: {done.stderr[-300:]}")
        yield container
    assert container.proc.returncode is not None


@pytest.fixture
def host(box: Container, request: pytest.FixtureRequest) -> Iterator[SSH]:
    """The SSH host (manager systemd) on the container; stops what a failed test left."""
    with SSH(SSHHost(**box.host_cfg(f"/var/tmp/specsweep/{request.node.name}"))) as h:
        yield h
        h.run(["systemctl", "stop", "specsweep-*"])


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _tail_with(host: SSH, proc: Process, *needles: str) -> str:
    """The log tail once it holds every needle, or after 5 s (journald lags a moment)."""
    wait_for(lambda: all(n in host.log_tail(proc) for n in needles), 5)
    return host.log_tail(proc)


def _out(host: SSH, *cmd: str) -> str:
    rc, out, err = host.run(list(cmd))
    assert rc == 0, f"{cmd}: {err}"
    return out.strip()


def _server_argv(paths: tuple[str, str], port: int, model: str | None = None) -> list[str]:
    return [
        paths[0],
        "-m",
        model or paths[1],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-t",
        "1",
        "-c",
        "512",
        "--alias",
        TRICKY,
    ]


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
    t0 = time.monotonic()
    with _boot(image, paths, unified=False) as other:
        namespace = other.pid_namespace
        assert len(namespace_members(namespace)) > 3 and other.proc.pid in running_containers()
        with SSH(SSHHost(**other.host_cfg("/var/tmp/specsweep/v1"))) as h:
            assert _out(h, "stat", "-fc", "%T", "/sys/fs/cgroup") == "tmpfs"
            proc = h.start(["/bin/sleep", "1000"], {}, Path("logs/sleep.log"))
            assert h.alive(proc) and "name=systemd:/system.slice/" in _out(
                h, "cat", f"/proc/{proc.pid}/cgroup"
            )
            h.stop(proc)
            assert not h.alive(proc) and h.run(["kill", "-0", str(proc.pid)])[0] != 0
    assert other.proc.returncode == 0  # halted, not killed
    assert other.proc.pid not in running_containers() and not namespace_members(namespace)
    assert time.monotonic() - t0 < 20


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
    """A server that ignores SIGTERM, with a child that does too: stop waits its grace
    (10 s), then SIGKILLs every process of the unit's cgroup; a shorter grace is kept."""
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
    assert "status=9/KILL" in host.log_tail(proc)
    proc = host.start(["/bin/sh", "-c", script], {}, Path("logs/stubborn2.log"))
    assert wait_for(lambda: host.alive(proc), 10)
    t0 = time.monotonic()
    host.stop(proc, grace_s=2)
    assert 1.5 < time.monotonic() - t0 < 9 and not host.alive(proc)


def test_stop_signals_the_main_process_and_its_children_through_it(host: SSH) -> None:
    """SIGTERM reaches the unit's main process only (`systemctl kill --kill-who=main`); the
    stand-in launcher stops its child itself (tests/integration/hosts/test_stop_order.py)."""
    proc = host.start(["/bin/sh", "-c", LAUNCHER], {}, Path("logs/launcher.log"))
    assert wait_for(lambda: "ready" in host.log_tail(proc), 10), host.log_tail(proc)
    t0 = time.monotonic()
    host.stop(proc)
    assert time.monotonic() - t0 < 5 and not host.alive(proc)
    log = host.read_file(str(proc.log_path))
    assert "launcher: SIGTERM" in log and "child: SIGTERM" not in log, log


def test_a_failing_unit_shows_its_journal(host: SSH, paths: tuple[str, str]) -> None:
    argv = _server_argv(paths, free_port(), model="/nonexistent/model.gguf")
    proc = host.start(argv, {}, Path("logs/bad-model.log"))
    assert wait_for(lambda: not host.alive(proc), 30)
    tail = _tail_with(host, proc, "/nonexistent/model.gguf", "status=1/FAILURE", "exit-code")
    assert "/nonexistent/model.gguf" in tail  # llama-server's own words, from its log file
    assert "status=1/FAILURE" in tail and "exit-code" in tail  # systemd's, from the journal
    unit = unit_name(proc.log_path)
    assert _out(host, "systemctl", "show", "-p", "ActiveState", "--value", unit) == "failed"


# --- user units (a non-root login: systemctl --user) ----------------------------------------

LOGIND_FAST = "[Login]\nUserStopDelaySec=1\n"  # logind's default: 10 s


@pytest.fixture(scope="module")
def bench_cfg(box: Container) -> dict[str, Any]:
    """A non-root user `bench` with the test key; logind stops a user's manager 1 s (not
    10 s) after the last session, to keep the lingering test short."""
    setup = (
        "id bench >/dev/null 2>&1 || useradd -m bench && "
        "install -d -o bench -m 700 /home/bench/.ssh && "
        "install -o bench -m 600 /root/.ssh/authorized_keys /home/bench/.ssh/ && "
        "mkdir -p /etc/systemd/logind.conf.d && "
        f"printf '{LOGIND_FAST}' > /etc/systemd/logind.conf.d/specsweep.conf && "
        "systemctl restart systemd-logind"
    )
    done = box.ssh(setup)
    assert done.returncode == 0, done.stderr
    return {**box.host_cfg("/home/bench/specsweep"), "user": "bench"}


def test_user_units_start_stop_and_show_their_journal(bench_cfg: dict[str, Any]) -> None:
    with SSH(SSHHost(**bench_cfg)) as h:
        proc = h.start(["/bin/sleep", "1000"], {}, Path("logs/sleep.log"))
        assert h.alive(proc)
        assert unit_name(proc.log_path) in _out(h, "ls", "/home/bench/.config/systemd/user")
        assert "/user@1000.service/" in _out(h, "cat", f"/proc/{proc.pid}/cgroup")
        h.stop(proc)
        assert not h.alive(proc) and h.run(["kill", "-0", str(proc.pid)])[0] != 0
        bad = h.start(["/bin/false"], {}, Path("logs/false.log"))
        assert wait_for(lambda: not h.alive(bad), 10)
        assert "status=1/FAILURE" in _tail_with(h, bad, "status=1/FAILURE")
        # 203/EXEC: said from systemctl show and the file, whenever the journal's lines come
        for exe, why in (
            ("/nonexistent/server", "no such file"),
            ("/etc/passwd", "not executable"),
        ):
            proc = h.start([exe], {}, Path(f"logs/exec-{Path(exe).name}.log"))
            assert wait_for(lambda p=proc: not h.alive(p), 10)
            line = f"specsweep: error: systemd could not execute {exe}: {why} (status=203/EXEC)"
            assert line in _tail_with(h, proc, line)


def _user_manager_gone(box: Container) -> bool:
    return box.ssh("systemctl is-active --quiet user@1000.service").returncode != 0


def test_user_units_outlive_the_ssh_session_only_when_lingering(
    box: Container, bench_cfg: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Without lingering, logind stops the user's manager (and every unit) once the last
    session ends: specsweep warns. With `loginctl enable-linger`, the server survives."""
    assert box.ssh("loginctl disable-linger bench").returncode == 0
    with SSH(SSHHost(**bench_cfg)) as h:
        proc = h.start(["/bin/sleep", "1000"], {}, Path("logs/no-linger.log"))
        assert h.alive(proc)
    assert "loginctl enable-linger" in caplog.text
    assert wait_for(lambda: _user_manager_gone(box), 15)
    with SSH(SSHHost(**bench_cfg)) as h:
        assert not h.alive(proc)  # the dropped session took the server with it
    caplog.clear()
    assert box.ssh("loginctl enable-linger bench").returncode == 0
    try:
        with SSH(SSHHost(**bench_cfg)) as h:
            proc = h.start(["/bin/sleep", "1000"], {}, Path("logs/linger.log"))
        assert "enable-linger" not in caplog.text
        time.sleep(3)  # three times UserStopDelaySec
        with SSH(SSHHost(**bench_cfg)) as h:
            assert h.alive(proc)
            h.stop(proc)
    finally:
        box.ssh("loginctl disable-linger bench")


# --- campaigns ------------------------------------------------------------------------------


def _plan(
    box: Container, paths: tuple[str, str], workdir: str, reps: int, **extra: Any
) -> dict[str, Any]:
    return {
        "name": "nspawn-systemd",
        "repeat": 1,  # one round: this is about systemd, not the rounds
        "host": box.host_cfg(workdir),
        "engine": llama_engine(
            paths[0],
            paths[1],
            ["-t", "1", "-c", "2048", "-np", "1"],  # -t 1: fast on a busy CPU
        ),
        "methods": [{"name": "autoregressive", "args": ["--spec-type", "none"]}],
        "workloads": [
            {
                "name": "rewrite",
                "max_tokens": [16],
                "repetitions": reps,
                "prompts": {
                    "kind": "inline",
                    "texts": [
                        f"Repeat exactly: {code}"
                        for code in ("def f(a): return a", "print(1)", "while True: break")
                    ],
                },
            }
        ],
        **extra,
    }


def _run_plan(plan: dict[str, Any], tmp_path: Path) -> Path:
    text = yaml.safe_dump(plan)
    runner.run(
        parse_plan(text), text, tmp_path / "results.duckdb", Path("logs"), show_progress=False
    )
    return tmp_path / "results.duckdb"


def test_a_server_killed_mid_campaign_is_restarted_once(
    box: Container, paths: tuple[str, str], tmp_path: Path
) -> None:
    workdir = "/var/tmp/specsweep/crash"
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(yaml.safe_dump(_plan(box, paths, workdir, reps=4)))
    proc = start_run(plan, db, "logs")
    try:
        pid = box.server_pid_mid_workload(workdir, timeout_s=90)
        assert box.ssh(f"kill -9 {pid}").returncode == 0
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute(
            "SELECT state, error, log_tail FROM services ORDER BY requested_at"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        failed = con.execute("SELECT count(*) FROM requests WHERE NOT ok").fetchone()[0]
        measured = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
    assert [s[0] for s in services] == ["failed", "stopped"] and "died" in services[0][1]
    assert "status=9/KILL" in services[0][2]  # the journal's account of the kill
    assert status == "complete" and failed == 0 and measured == 3 * 4
    assert box.units("active") == [] and box.ssh("pgrep -x llama-server").returncode == 1


def test_a_unit_left_by_a_killed_run_is_stopped_by_the_next(
    box: Container, paths: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """specsweep killed with SIGKILL: systemd keeps its unit serving; the rerun stops it
    (reap_orphans) before it starts its own, and completes."""
    workdir = "/var/tmp/specsweep/orphan"
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(yaml.safe_dump(_plan(box, paths, workdir, reps=4)))
    cmd = collect_argv("run", str(plan), "--db", str(db), "--no-progress")
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        orphan = box.server_pid_mid_workload(workdir, timeout_s=90)
        proc.kill()
    assert box.units("active") and box.ssh(f"kill -0 {orphan}").returncode == 0
    _run_plan(yaml.safe_load(plan.read_text()), tmp_path)
    assert f"stopped a server (pid {orphan})" in caplog.text
    assert box.units("active") == [] and box.ssh(f"kill -0 {orphan}").returncode != 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT status FROM campaigns").fetchone()[0] == "complete"


BLOCKER = """[Service]
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
    blocking = [
        {
            "name": "blocker",
            "stop": ["systemctl", "stop", "blocker.service"],
            "start": ["systemctl", "start", "blocker.service"],
        }
    ]
    plan = _plan(
        box,
        paths,
        "/var/tmp/specsweep/blocking",
        reps=1,
        phases=[{"name": "p1", "tp": 1, "stop_services": ["blocker"]}],
    )
    plan["host"]["blocking_services"] = blocking
    db = _run_plan(plan, tmp_path)
    events = [line.split() for line in host.read_file("/var/tmp/blocker.events").splitlines()]
    assert [e[0] for e in events] == ["start", "stop", "start"]
    assert _out(host, "systemctl", "is-active", "blocker.service") == "active"
    with duckdb.connect(str(db), read_only=True) as con:
        state, requested, stopped = con.execute(
            "SELECT state, epoch(requested_at), epoch(stopped_at) FROM services"
        ).fetchone()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert state == "stopped" and status == "complete"
    # the container shares this machine's clock: the blocker was down while the server ran
    assert float(events[1][1]) <= requested and stopped <= float(events[2][1])


def test_a_campaign_records_a_binary_systemd_cannot_execute(
    box: Container, paths: tuple[str, str], tmp_path: Path
) -> None:
    """The configuration fails (exited during start-up, which file systemd could not
    execute and why in its error and log_tail, whether or not the journal has said it yet)
    and the campaign ends `partial` instead of stopping with a traceback."""
    plan = _plan(box, paths, "/var/tmp/specsweep/no-binary", reps=1)
    plan["engine"]["binary"] = "/nonexistent/llama-server"
    db = _run_plan(plan, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        state, error, tail = con.execute("SELECT state, error, log_tail FROM services").fetchone()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    line = "systemd could not execute /nonexistent/llama-server: no such file (status=203/EXEC)"
    assert (state, status) == ("failed", "partial")
    assert error == f"server exited during start-up: specsweep: error: {line}"
    assert tail.endswith(line), tail
