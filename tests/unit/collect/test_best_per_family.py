"""`best_of` with `per: family` (collect/plan/phases.py BestOf): the fastest setting of each
method family is re-measured, not the overall top N, in the run (collect.run.campaign via
collect.scheduling.ranking.pick), in `simulate` and in `check`'s request count."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.plan.fields import Method
from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.plan.phases import BestOf
from specsweep.collect.scheduling.ranking import pick

METHODS = [
    *(Method(name=f"{f}-k{k}", family=f) for f in ("x", "y") for k in (1, 2)),
    Method(name="solo"),
]


def test_pick_takes_the_first_of_each_family_in_ranked_order() -> None:
    ranked = ["x-k2", "x-k1", "y-k1", "solo", "y-k2"]

    def rule(top: int, per: str) -> BestOf:
        return BestOf(best_of="tp1", top=top, per=per)

    assert pick(ranked, rule(1, "family"), METHODS) == ["x-k2", "y-k1", "solo"]
    assert pick(ranked, rule(2, "family"), METHODS) == ranked
    assert pick(ranked, rule(2, "method"), METHODS) == ["x-k2", "x-k1"]  # the overall top 2
    assert pick([], rule(1, "family"), METHODS) == []


PLAN = """
name: fam
host: {kind: local, name: h, gpus: [0]}
engine: {kind: vllm, model: /models/m}
estimates: {speedup: {x: 1.5, y: 0.5}}
methods:
  - {name: autoregressive}
  - {name: x, grid: {k: [1, 2]}, args: [--x, "{k}"]}
  - {name: y, grid: {k: [1, 2]}, args: [--y, "{k}"]}
workloads:
  - {name: w1, prompts: {kind: inline, texts: [a, b]}, max_tokens: [8], repetitions: 1}
phases:
  - {name: p1, tp: 1}
  - {name: p2, tp: 1, methods: {best_of: p1, top: 1, PER}}
"""


def _run(tmp_path: Path, per: str, command: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(PLAN.replace("PER", f"per: {per}"))
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exit_code == 0, result.output
    return result.output


def _p2_methods(output: str) -> set[str]:
    """Method names on simulate's order lines of phase p2 (`p2  METHOD  tp  gpus  start  end`)."""
    lines = [line.split() for line in output.splitlines()]
    return {f[1] for f in lines if len(f) >= 4 and f[0] == "p2"}


def test_simulate_reruns_one_setting_of_each_family(tmp_path: Path) -> None:
    """x is assumed 3x faster than y: per method, top 1 is an x setting alone; per family,
    the best x and the best y (ties within a family broken by name: x-k1, y-k1)."""
    per_family = _p2_methods(_run(tmp_path, "family", "simulate"))
    assert per_family == {"autoregressive", "x-k1", "y-k1"}
    assert _p2_methods(_run(tmp_path, "method", "simulate")) == {"autoregressive", "x-k1"}


def test_check_counts_one_pick_per_family(tmp_path: Path) -> None:
    """Measured requests: p1 runs 5 services x 2 prompts = 10; p2 the baseline's 2 plus one
    pick per family (2 families x 2) = 6 per family, 4 per method (2 + 2)."""
    assert "about 16 measured requests" in _run(tmp_path, "family", "check")
    assert "about 14 measured requests" in _run(tmp_path, "method", "check")
    assert "plus the 1 fastest of each family of phase p1" in _run(tmp_path, "family", "check")


def test_per_takes_method_or_family_only() -> None:
    with pytest.raises(PlanError, match="per"):
        parse_plan(PLAN.replace("PER", "per: workload"))
