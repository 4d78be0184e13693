"""The CT200 campaign's shape on 8 logical GPUs of this CPU machine (plans/dry-ct200-shape.yaml).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_ct200_shape_dry_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.collect.test_ct200_shape_dry_run import _check, _print_makespans, _run, ray


def test_the_dry_run_keeps_gpu0_for_the_blocker_and_reruns_the_measured_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, services, scores, span, wall = _run(tmp_path)
    down = _check(tmp_path / "state", services, scores)
    tp8 = [s for s in services if s[1] == 8]
    assert len(down) == 1  # one host: stopped once for the whole TP8 phase
    assert down[0][0] < min(s[4] for s in tp8) and down[0][1] > max(s[5] for s in tp8)
    _print_makespans(capsys, plan, services, span, wall, scores)


def test_the_ray_path_one_node_for_gpus_1_to_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if ray is None:
        pytest.skip("ray is not installed: pip install -e '.[dev]' (or '.[ray]')")
    from ray.cluster_utils import Cluster

    nodes = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "num_gpus": 0, "include_dashboard": False},
    )
    try:
        # Ray hands out the GPU indices CUDA_VISIBLE_DEVICES names when the node starts
        with pytest.MonkeyPatch.context() as env:
            env.setenv("CUDA_VISIBLE_DEVICES", "1,2,3,4,5,6,7")
            env.setenv("RAY_USAGE_STATS_ENABLED", "0")
            nodes.add_node(
                num_cpus=7,  # one per task (logical): up to 7 TP1 servers at once
                num_gpus=7,
                resources={"specsweep:gpu0-service": 1},
                object_store_memory=100 * 1024 * 1024,
            )
        nodes.wait_for_nodes(timeout=60)
        ray_block = f"cluster: {{kind: ray, address: '{nodes.address}'}}\n"
        plan, services, scores, span, wall = _run(tmp_path, ray_block)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.shutdown()
    down = _check(tmp_path / "state", services, scores)
    tp8 = [s for s in services if s[1] == 8]
    # Ray: a stop and a start around each TP8 configuration (docs/cluster.md)
    assert len(down) == len(tp8), (down, tp8)
    _print_makespans(capsys, plan, services, span, wall, scores, "Ray dry run")
