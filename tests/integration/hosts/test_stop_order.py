"""A stop signals the server before its group (collect/hosts/local.py says why: SGLang's
launcher reads its scheduler's SIGTERM as a crash and sleeps 5 s), on the local host and on
the SSH process manager over the real sshd; the systemd manager's case is in
tests/integration/hosts/test_systemd_real.py. Stand-ins in sh: a launcher that stops its own
child on SIGTERM, and one that exits leaving a child that ignores SIGTERM."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.hosts.local import Local
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import LocalHost, SSHHost
from tests.support.sshd import wait_for

# A launcher with a child that says so when it gets SIGTERM. On SIGTERM the launcher waits
# 0.5 s (SGLang drains its requests), SIGKILLs its child and exits: a SIGTERM sent to the
# whole group reaches the child in those 0.5 s, one sent to the launcher alone never does.
LAUNCHER = (
    "(trap 'echo child: SIGTERM; exit 143' TERM; while :; do sleep 0.05; done) & c=$!; "
    "trap 'echo launcher: SIGTERM; sleep 0.5; kill -9 $c; exit 0' TERM; "
    'echo "ready $c"; wait $c; echo launcher: child ended'
)
# A launcher that exits on SIGTERM and leaves behind a child that ignores SIGTERM.
LEAVER = "(trap '' TERM; sleep 1000) & echo \"ready $!\"; trap 'exit 0' TERM; wait"


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest, ssh_cfg: dict[str, Any]) -> Iterator[Local | SSH]:
    if request.param == "local":
        yield Local(LocalHost(kind="local"))
        return
    with SSH(SSHHost(**ssh_cfg)) as remote:
        yield remote


def _child(host: Local | SSH, proc: Any) -> int:
    assert wait_for(lambda: "ready" in host.log_tail(proc), 10), host.log_tail(proc)
    return int(host.log_tail(proc).split("ready ")[1].split()[0])


def _gone(host: Local | SSH, pid: int) -> bool:
    return wait_for(lambda: host.run(["kill", "-0", str(pid)])[0] != 0, 3)


def _timed_stop(host: Local | SSH, proc: Any) -> float:
    """Seconds a stop with a 10 s grace took."""
    t0 = time.monotonic()
    host.stop(proc, grace_s=10)
    return time.monotonic() - t0


def test_the_launcher_stops_its_own_child(host: Local | SSH, tmp_path: Path) -> None:
    proc = host.start(["sh", "-c", LAUNCHER], {}, tmp_path / "launcher.log")
    child = _child(host, proc)
    try:
        took = _timed_stop(host, proc)
    finally:
        host.stop(proc, grace_s=1)
    log = host.log_tail(proc)
    assert "launcher: SIGTERM" in log
    assert "child: SIGTERM" not in log, "the child was signalled by specsweep, not its launcher"
    assert took < 5 and not host.alive(proc) and _gone(host, child)


def test_what_the_launcher_leaves_is_killed_once_it_has_exited(
    host: Local | SSH, tmp_path: Path
) -> None:
    proc = host.start(["sh", "-c", LEAVER], {}, tmp_path / "leaver.log")
    child = _child(host, proc)
    try:
        took = _timed_stop(host, proc)
        assert _gone(host, child), "a child that ignores SIGTERM outlived the stop"
        assert took < 5, f"the stop waited its grace ({took:.1f} s) after the launcher exited"
    finally:
        host.stop(proc, grace_s=1)
        host.run(["kill", "-9", str(child)])
