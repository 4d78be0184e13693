"""The plan's `cluster:` block (collect/plan/components.py): validated before anything starts,
errors naming the field; left out of the plan's hash; and a single-host campaign (the
runner, a plan with or without the block) never imports ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.plan.file import PlanError, parse_plan

REPO = Path(__file__).resolve().parents[3]
LOCAL = (REPO / "plans/local.yaml").read_text()


def test_cluster_is_not_in_the_hash() -> None:
    plan = parse_plan(LOCAL + "\ncluster: {kind: ray, address: 'head:6379', max_retries: 1}\n")
    assert plan.cluster is not None and plan.cluster.address == "head:6379"
    assert plan.campaign_id() == parse_plan(LOCAL).campaign_id()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("cluster: {kind: ray, adress: auto}", "cluster.adress"),
        ("cluster: {kind: dask}", "cluster.kind"),
        ("cluster: {kind: ray, max_retries: -1}", "cluster.max_retries"),
        ("cluster: {kind: ray, pin: {nope: h200a}}", "cluster.pin names ['nope']"),
    ],
)
def test_a_bad_cluster_block_names_the_field(extra: str, says: str) -> None:
    with pytest.raises(PlanError, match=r"cluster") as exc:
        parse_plan(LOCAL + "\n" + extra + "\n")
    assert says in str(exc.value)


def test_pin_takes_phases_methods_and_families() -> None:
    plan = parse_plan(
        LOCAL + "\ncluster: {kind: ray, pin: {tp1: a, ngram-simple: b, draft-simple: c}}\n"
    )
    assert plan.cluster is not None and plan.cluster.pin["draft-simple"] == "c"


def test_a_cluster_needs_a_local_host() -> None:
    ssh = LOCAL.replace("host:\n  kind: local\n", "host:\n  kind: ssh\n  address: gpu1\n")
    with pytest.raises(PlanError) as exc:
        parse_plan(ssh + "\ncluster: {kind: ray}\n")
    assert "cluster" in str(exc.value) and "host.kind must be 'local', not 'ssh'" in str(exc.value)


def test_a_cluster_accepts_blocking_services() -> None:
    """Each runs on the nodes with its custom resource (collect/cluster/blocking.py)."""
    blocking = LOCAL.replace(
        "host:\n  kind: local\n",
        "host:\n  kind: local\n  blocking_services: [{name: s, stop: [x], start: [y]}]\n",
    )
    plan = parse_plan(blocking + "\ncluster: {kind: ray}\n")
    assert plan.cluster is not None and [s.name for s in plan.host.blocking_services] == ["s"]
