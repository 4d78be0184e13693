"""A plan across the nodes of a Ray cluster on this machine (tests/e2e/cluster/conftest.py): CPU
llama-servers of three methods, two workloads each (six units), against real DuckDB files.

- the same plan on one host and on the cluster gives rows of the same shape and counts, every
  unit once, the services on different nodes, an environment per node;
- the driver interrupted (SIGINT to `specsweep run`) exits 130 with the campaign
  interrupted and no server left; a resume runs only what had not landed;
- a node removed while a configuration runs on it: Ray runs it again on another node and
  the campaign completes, every unit once, nothing from the removed node; with
  max_retries 0 the configuration is lost, the campaign partial, and a resume redoes it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.cluster.launch import run as run_on_cluster
from specsweep.collect.plan.file import parse_plan
from tests.e2e.cluster.conftest import NODE, plan_text, query
from tests.support.collect_cli import collect_run

REPO = Path(__file__).resolve().parents[3]
ALIAS = "specsweep-cluster-test"
pytestmark = [pytest.mark.llama, pytest.mark.timeout(240)]


def _run(text: str, db: Path, logs: Path) -> str:
    return run_on_cluster(parse_plan(text), text, db, logs, show_progress=False)


def _shape(db: Path) -> dict[str, Any]:
    """What must not depend on where the plan ran: row counts per table, per configuration
    and workload, and the units (every one complete, each once)."""
    shape: dict[str, Any] = {}
    for table in (
        "services",
        "units",
        "windows",
        "server_metrics",
        "endpoint_errors",
        "quarantine",
    ):
        shape[table] = query(db, f"SELECT count(*) FROM {table}")[0][0]
    shape["requests"] = query(
        db, "SELECT method, workload, is_warmup, count(*) FROM requests GROUP BY ALL ORDER BY ALL"
    )
    shape["units"] = query(
        db, "SELECT config_id, workload, run, complete, n_requests FROM units ORDER BY ALL"
    )
    return shape


def _hosts(db: Path) -> list[str]:
    return [r[0] for r in query(db, "SELECT host FROM services ORDER BY method")]


def test_a_plan_across_nodes_lands_like_one_host(cluster: Any, tmp_path: Path) -> None:
    one, many = tmp_path / "one.duckdb", tmp_path / "cluster.duckdb"
    t0 = time.perf_counter()
    cid = _run(plan_text(None), one, tmp_path / "logs")
    t1 = time.perf_counter()
    assert _run(plan_text(cluster.address), many, tmp_path / "logs") == cid  # not in the hash
    t2 = time.perf_counter()
    print(f"one host {t1 - t0:.1f} s, cluster {t2 - t1:.1f} s")
    assert _shape(many) == _shape(one)
    assert len(_shape(one)["units"]) == 6 and all(u[3] for u in _shape(one)["units"])
    assert query(many, "SELECT status FROM campaigns") == [("complete",)]
    hosts = _hosts(many)
    assert all(re.fullmatch(r"[^/]+/[0-9a-f]{8}", h) for h in hosts) and len(set(hosts)) == 2
    assert set(_hosts(one)) == {"localhost"}
    env = {r[0] for r in query(many, "SELECT DISTINCT host FROM environment")}
    assert env == set(hosts) | {"cluster"}
    gpus = query(many, "SELECT DISTINCT value FROM environment WHERE key = 'ray.gpu_ids'")
    assert gpus == [("none",)]  # llama.cpp on CPU takes no GPU of the nodes' four


def _servers() -> list[int]:
    """pids of this plan's llama-servers still running on this machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ALIAS.encode() in argv:
            found.append(int(pid))
    return found


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.2)


def test_ctrl_c_cancels_the_tasks_and_a_resume_finishes(cluster: Any, tmp_path: Path) -> None:
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(plan_text(cluster.address))
    driver = subprocess.Popen(
        collect_run(plan, db, tmp_path / "logs"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait(
            lambda: (
                db.exists()
                and query(db, "SELECT count(*) FROM units")[0][0] > 0
                or driver.poll() is not None
            ),
            120,
            "a first configuration to land",
        )
        _wait(lambda: _servers() or driver.poll() is not None, 60, "a running server")
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=90)
    finally:
        driver.kill()
    assert driver.returncode == 130, out
    assert query(db, "SELECT status FROM campaigns") == [("interrupted",)]
    _wait(lambda: not _servers(), 30, "the cancelled tasks' servers to die")
    before = query(db, "SELECT config_id, workload FROM units WHERE complete ORDER BY ALL")
    assert 0 < len(before) < 6
    landed = {c for c, _ in before}
    _run(plan.read_text(), db, tmp_path / "logs")
    assert query(db, "SELECT status FROM campaigns") == [("complete",)]
    units = query(db, "SELECT config_id, workload, complete FROM units ORDER BY ALL")
    assert len(units) == 6 and all(u[2] for u in units)
    starts = dict(query(db, "SELECT config_id, count(*) FROM services GROUP BY 1"))
    assert all(starts[c] == 1 for c in landed)  # a landed configuration did not run again
    assert len(starts) == 3


def _remove_a_node_mid_run(cluster: Any, text: str, db: Path, logs: Path) -> str:
    """Run the plan (a driver thread) on the cluster plus a third node, removed as soon as
    a configuration runs on it; the removed node's id."""
    from ray._private import ray_constants

    victim = cluster.add_node(**NODE)
    cluster.wait_for_nodes(timeout=60)
    raylet = victim.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    done: list[str] = []
    driver = threading.Thread(target=lambda: done.append(_run(text, db, logs)))
    driver.start()

    def on_victim() -> bool:  # a server whose Ray worker is a child of the victim's raylet
        return any(_ppid(_ppid(pid)) == raylet for pid in _servers())

    try:
        _wait(on_victim, 120, "a configuration to run on the third node")
        cluster.remove_node(victim, allow_graceful=False)
    finally:
        driver.join(timeout=180)
    assert done and not driver.is_alive()
    return victim.node_id[:8]


def test_a_node_removed_mid_run_reruns_its_configuration(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    victim = _remove_a_node_mid_run(cluster, plan_text(cluster.address), db, tmp_path / "logs")
    assert query(db, "SELECT status FROM campaigns") == [("complete",)]
    units = query(db, "SELECT config_id, workload, complete FROM units ORDER BY ALL")
    assert len(units) == 6 and all(u[2] for u in units)
    hosts = _hosts(db)
    assert len(hosts) == 3 and not any(h.endswith(victim) for h in hosts)
    assert not query(db, "SELECT * FROM quarantine")


def test_a_configuration_lost_past_its_retries_is_left_to_a_resume(
    cluster: Any, tmp_path: Path
) -> None:
    db, logs = tmp_path / "results.duckdb", tmp_path / "logs"
    text = plan_text(cluster.address, "max_retries: 0")
    victim = _remove_a_node_mid_run(cluster, text, db, logs)
    assert query(db, "SELECT status FROM campaigns") == [("partial",)]
    units = query(db, "SELECT config_id, workload, complete FROM units ORDER BY ALL")
    assert len(units) == 4 and all(u[2] for u in units)  # the lost one's two are absent
    assert not any(h.endswith(victim) for h in _hosts(db))
    _run(text, db, logs)
    assert query(db, "SELECT status FROM campaigns") == [("complete",)]
    assert query(db, "SELECT count(*), bool_and(complete) FROM units") == [(6, True)]
    assert len(_hosts(db)) == 3


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1
