"""Every plan in plans/ loads and passes `check` (without --probe: no host is reached), and
the vLLM GPU plans say what their comments promise: no per-request flag for vLLM 0.24, the
grids they sweep, and only (K, L) points a step can reach (L <= K + 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.engines.base import flag
from specsweep.collect.plan.file import load_plan

PLAN_DIR = Path(__file__).resolve().parents[3] / "plans"
PLANS = sorted(PLAN_DIR.glob("*.yaml"))


def test_the_vllm_plans_are_among_them() -> None:
    assert {"gpu-vllm.yaml", "gpu-vllm-scale.yaml"} <= {p.name for p in PLANS}


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.name)
def test_every_plan_passes_check(plan: Path) -> None:
    load_plan(plan)
    result = CliRunner().invoke(app, ["check", str(plan)])
    assert result.exit_code == 0, result.output
    assert "is valid" in result.output


def _spec(method: object) -> dict[str, object]:
    """The --speculative-config JSON of a method ({} without one)."""
    given = flag(method.args, "--speculative-config")  # type: ignore[attr-defined]
    return json.loads(given) if given else {}


def test_gpu_vllm_methods() -> None:
    plan = load_plan(PLAN_DIR / "gpu-vllm.yaml")
    assert plan.engine.kind == "vllm" and plan.engine.per_request_spec_metrics == "none"
    assert not plan.aa_control  # its rounds measure the start-to-start spread
    specs = {m.name: _spec(m) for m in plan.methods}
    assert list(specs) == ["autoregressive", "ngram-k4", "draft-k2", "draft-k4"]
    assert specs["ngram-k4"] == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
    }
    # the target drafts for itself: the launch (and the memory budget) expand {model}
    assert specs["draft-k2"] == {"model": "{model}", "num_speculative_tokens": 2}
    assert specs["draft-k4"]["num_speculative_tokens"] == 4


def test_gpu_vllm_scale_sweep() -> None:
    plan = load_plan(PLAN_DIR / "gpu-vllm-scale.yaml")
    assert plan.engine.model == "/tmp/models/llama8b-random"
    assert plan.engine.per_request_spec_metrics == "none" and not plan.aa_control
    points = {
        (s["num_speculative_tokens"], s["synthetic_acceptance_length"])
        for s in map(_spec, plan.methods)
        if s
    }
    assert points == {
        (1, 1.5),
        (1, 2.0),
        (2, 1.5),
        (2, 2.0),
        (2, 2.5),
        (2, 3.0),
        (8, 2.5),
        (8, 5.0),
    }
    assert all(length <= k + 1 for k, length in points)
    for method in plan.methods[1:]:
        spec = _spec(method)
        assert spec["model"] == "/tmp/models/smollm2-135m"
        assert spec["rejection_sample_method"] == "synthetic"
        assert method.params == {
            "k": spec["num_speculative_tokens"],
            "L": spec["synthetic_acceptance_length"],
        }
    assert [w.name for w in plan.workloads] == ["rewrite"]
