"""Run a plan: across its Ray cluster when it has `cluster:`, else on its one host (the
runner's `run`); what `specsweep run` calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specsweep.collect.plan.model import Plan


def run(plan: Plan, plan_text: str, db_path: Path, log_dir: Path, **options: Any) -> str:
    """`collect.run.runner.run` across the plan's Ray cluster (options: the runner's); a plan
    without `cluster:` runs on its one host, as the runner runs it."""
    from specsweep.collect.run import runner

    if plan.cluster is None:
        return runner.run(plan, plan_text, db_path, log_dir, **options)
    from specsweep.collect.cluster.driver import (
        RayCluster,  # imports ray: only a plan with `cluster:`
    )

    return runner.run(plan, plan_text, db_path, log_dir, connect=RayCluster, **options)
