"""One plan across the nodes of a Ray cluster (the plan's `cluster:` block, whose model
`collect.plan.components.Cluster` is the plan's). `driver` connects to the cluster and turns
each job of the runner's queue into a Ray task and lands what it returns, the one writer of
the results file; `task` is what runs on a node: the configuration's server and client there,
into a scratch store whose rows go back to the driver. Only a plan with `cluster:` imports
ray (`pip install specsweep[ray]`).

The cluster sits above the runner (it drives `collect.run`'s configuration code on every node),
so the runner never imports it: `run` here is the runner's `run` with the plan's cluster as where
the campaign runs (a `collect.hosts.base.Cluster`), what `python -m collect run` calls for a plan
with `cluster:`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collect.plan.model import Plan


def run(plan: Plan, plan_text: str, db_path: Path, log_dir: Path, **options: Any) -> str:
    """`collect.run.runner.run` across the plan's Ray cluster (options: the runner's); a plan
    without `cluster:` runs on its one host, as the runner runs it."""
    from collect.run import runner

    if plan.cluster is None:
        return runner.run(plan, plan_text, db_path, log_dir, **options)
    from collect.cluster.driver import RayCluster  # imports ray: only a plan with `cluster:`

    return runner.run(plan, plan_text, db_path, log_dir, connect=RayCluster, **options)
