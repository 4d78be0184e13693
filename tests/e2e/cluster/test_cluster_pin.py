"""Where the driver puts a configuration (tests/e2e/cluster/conftest.py's cluster): pinned to a
custom resource, on the node that has it; with `gpu: true`, on the GPUs Ray assigned (the
services row and the node's environment say which); nowhere, said and skipped, when no node
could ever hold it. The driver's host reads files on a node (an engine's prepare); a cluster
that does not answer is unreachable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.cluster.launch import run as run_on_cluster
from specsweep.collect.hosts.base import HostUnreachable
from specsweep.collect.plan.file import parse_plan
from tests.e2e.cluster.conftest import plan_text, query

pytestmark = [pytest.mark.llama, pytest.mark.timeout(120)]


def _run_only(text: str, db: Path, logs: Path, *methods: str) -> None:
    run_on_cluster(parse_plan(text), text, db, logs, show_progress=False, only=list(methods))


def test_pinned_configurations_run_on_their_node_with_rays_gpus(
    cluster: Any, tmp_path: Path
) -> None:
    """Two configurations pinned to the node of 1 CPU that has pin_a: both run there, one
    after the other (unpinned, they would take one node each)."""
    db = tmp_path / "results.duckdb"
    text = plan_text(cluster.address, "gpu: true, pin: {autoregressive: pin_a, tp1: pin_a}")
    _run_only(text, db, tmp_path / "logs", "autoregressive", "ngram-simple")
    resources = json.loads(
        query(
            db, "SELECT value FROM environment WHERE host = 'cluster' AND key = 'cluster.resources'"
        )[0][0]
    )
    [node_a] = [name for name, r in resources.items() if "pin_a" in r]
    services = query(db, "SELECT host, gpus FROM services")
    assert len(services) == 2 and {h for h, _ in services} == {node_a}
    assert all(g in {"0", "1", "2", "3"} for _, g in services)  # one of the node's four
    assert query(
        db, f"SELECT value FROM environment WHERE host = '{node_a}' AND key = 'ray.gpu_ids'"
    )[0][0] in {g for _, g in services}
    assert query(db, "SELECT count(*), bool_and(complete) FROM units") == [(4, True)]
    assert query(db, "SELECT status FROM campaigns") == [("partial",)]  # --only


def test_a_configuration_no_node_can_hold_is_skipped(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    _run_only(
        plan_text(cluster.address, "pin: {autoregressive: nowhere}"),
        db,
        tmp_path / "logs",
        "autoregressive",
    )
    assert query(db, "SELECT count(*) FROM services") == [(0,)]
    assert query(db, "SELECT status FROM campaigns") == [("partial",)]


def test_the_driver_reads_a_file_on_a_node(cluster: Any, tmp_path: Path) -> None:
    from specsweep.collect.cluster.driver import RayCluster

    path = tmp_path / "tokenizer_config.json"
    path.write_text('{"chat_template": "{{ messages }}"}')
    host = RayCluster(parse_plan(plan_text(cluster.address)), "")
    try:
        assert host.read_file(str(path)) == path.read_text()
        facts = host.fingerprint()
    finally:
        host.close()
    assert int(facts["cluster.nodes"]) >= 3 and facts["cluster.kind"] == "ray"


def test_a_cluster_that_does_not_answer_is_unreachable(tmp_path: Path) -> None:
    """At once, not after ray.init's minutes of retries; the campaign says so."""
    db = tmp_path / "results.duckdb"
    text = plan_text("127.0.0.1:1")  # nothing listens on port 1
    with pytest.raises(HostUnreachable, match=r"host cluster \(127.0.0.1:1\) cannot be reached"):
        run_on_cluster(parse_plan(text), text, db, tmp_path / "logs", show_progress=False)
    assert query(db, "SELECT status FROM campaigns") == [("unreachable",)]
