"""Blocking services across a Ray cluster (collect/cluster/blocking.py): a phase that stops
one runs each configuration on the node that joined with the service's custom resource,
stopping the service before and starting it after, with the service's GPU; a service that
will not stop leaves its configurations unmeasured; a worker killed while the service is
stopped still has it started again (the guard)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.cluster.launch import run as run_on_cluster
from specsweep.collect.plan.file import parse_plan
from tests.e2e.cluster.conftest import plan_text, query

pytestmark = [pytest.mark.timeout(150)]
SERVICE = "specsweep:gpu0-service"


def _plan(address: str, events: Path, stop_exit: int = 0) -> str:
    """The tiny plan (gpu: true) whose one phase, tp1, stops a service on GPU 4 that the
    node with SERVICE runs; its stop and start append to `events`."""
    stop = f"echo stop >> {events}; exit {stop_exit}"
    host = (
        "host:\n  kind: local\n  blocking_services:\n    - {name: gpu0-service, "
        f"stop: [sh, -c, '{stop}'], start: [sh, -c, 'echo start >> {events}'], "
        "gpus: [4]}\nphases:\n  - {name: tp1, tp: 1, stop_services: [gpu0-service]}\n"
    )
    return plan_text(address, "gpu: true").replace("host: {kind: local}\n", host)


@pytest.fixture(scope="module")
def service_node(cluster: Any) -> Iterator[Any]:
    """A third node that runs the service: joined with its resource and without its GPU
    (none of Ray's), so the phase's configuration runs there on the service's GPU 4."""
    node = cluster.add_node(
        num_cpus=1, num_gpus=0, object_store_memory=100 * 1024 * 1024, resources={SERVICE: 1}
    )
    cluster.wait_for_nodes(timeout=60)
    try:
        yield node
    finally:
        cluster.remove_node(node)


@pytest.mark.llama
def test_a_stop_phase_runs_on_the_services_node_with_its_gpu(
    cluster: Any, service_node: Any, tmp_path: Path
) -> None:
    db, events = tmp_path / "results.duckdb", tmp_path / "events"
    text = _plan(cluster.address, events)
    run_on_cluster(
        parse_plan(text), text, db, tmp_path / "logs", show_progress=False, only=["autoregressive"]
    )
    resources = json.loads(
        query(
            db, "SELECT value FROM environment WHERE host = 'cluster' AND key = 'cluster.resources'"
        )[0][0]
    )
    [node] = [name for name, r in resources.items() if SERVICE in r]
    assert query(db, "SELECT host, gpus FROM services") == [(node, "4")]
    assert events.read_text() == "stop\nstart\n"
    assert query(db, "SELECT count(*), bool_and(complete) FROM units") == [(2, True)]


@pytest.mark.llama
def test_a_service_that_will_not_stop_leaves_its_configurations_unmeasured(
    cluster: Any, service_node: Any, tmp_path: Path
) -> None:
    """Each of the phase's three configurations tries on the node, none is measured, the
    service is not started (its stop failed: its state is unknown); the campaign partial."""
    db, events = tmp_path / "results.duckdb", tmp_path / "events"
    text = _plan(cluster.address, events, stop_exit=3)
    run_on_cluster(parse_plan(text), text, db, tmp_path / "logs", show_progress=False)
    assert events.read_text() == "stop\n" * 3
    assert query(db, "SELECT count(*) FROM services") == [(0,)]
    assert query(db, "SELECT count(*) FROM units") == [(0,)]
    assert query(db, "SELECT status FROM campaigns") == [("partial",)]


KILLED = """
import os, signal, sys
from specsweep.collect.cluster.blocking import stopped
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.components import BlockingService, LocalHost
service = BlockingService(name="s", stop=["sh", "-c", "echo stop >> " + sys.argv[1]],
                          start=["sh", "-c", "sleep 0.5; echo start >> " + sys.argv[1]])
class Notes:
    def note(self, text): print(text, flush=True)
with stopped(Local(LocalHost(kind="local")), [service], Notes()) as state:
    os.kill(os.getpid(), signal.SIGKILL)  # as a force-cancelled Ray worker dies
"""


def test_a_killed_task_still_starts_the_service_again(tmp_path: Path) -> None:
    events = tmp_path / "events"
    done = subprocess.run(
        [sys.executable, "-c", KILLED, str(events)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )
    assert done.returncode == -9 and "stopped blocking service s" in done.stdout
    deadline = time.monotonic() + 20
    while events.read_text() != "stop\nstart\n" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert events.read_text() == "stop\nstart\n"
