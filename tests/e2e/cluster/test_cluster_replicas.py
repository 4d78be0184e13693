"""Replicas on a cluster (tests/e2e/cluster/conftest.py's two nodes of 4 logical GPUs): with
`gpu: true` the driver gives the replica split the nodes' GPUs, so a configuration whose
work is long next to its start-up runs as replicas, each a Ray task with whole workloads;
every unit lands once, services.replica says which replica ran it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.collect.cluster.launch import run as run_on_cluster
from specsweep.collect.plan.file import parse_plan
from tests.e2e.cluster.conftest import plan_text

pytestmark = [pytest.mark.llama, pytest.mark.timeout(120)]

# assumed speeds that make the two workloads long next to a 1 s start-up (no warm-up)
SLOW = "estimates: {startup_s: 1, decode_tps: {1: 0.5}}\n"


def test_a_long_configuration_runs_as_replicas_across_the_cluster(
    cluster: Any, tmp_path: Path
) -> None:
    db = tmp_path / "results.duckdb"
    text = (
        plan_text(cluster.address, "gpu: true").replace("warmup_requests: 1", "warmup_requests: 0")
        + SLOW
    )
    run_on_cluster(
        parse_plan(text), text, db, tmp_path / "logs", show_progress=False, only=["autoregressive"]
    )
    con = duckdb.connect(str(db), read_only=True)
    try:
        services = con.execute(
            "SELECT replica, gpus, state FROM services ORDER BY replica"
        ).fetchall()
        units = con.execute(
            "SELECT s.replica, u.workload, u.complete FROM units AS u "
            "JOIN services AS s USING (service_id) ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    assert [r for r, _, _ in services] == [1, 2]
    assert all(g in {"0", "1", "2", "3"} and state == "stopped" for _, g, state in services)
    assert sorted(w for _, w, _ in units) == ["chat", "rewrite"]  # each unit once
    assert {r for r, _, _ in units} == {1, 2} and all(c for _, _, c in units)
