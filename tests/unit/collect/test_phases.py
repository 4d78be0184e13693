"""Phases: validation and the services each phase starts (ranking: test_ranking.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.plan.file import PlanError, parse_plan

PLAN = """
name: phased
engine: {kind: sglang, model: /models/m, chat_template: "{{ messages }}"}
methods:
  - {name: autoregressive}
  - {name: a, args: [--a]}
  - {name: b, args: [--b]}
  - {name: c, args: [--c]}
workloads:
  - {name: w1, prompts: {kind: inline, texts: [x]}, max_tokens: [8]}
  - {name: w2, prompts: {kind: inline, texts: [y]}, max_tokens: [8]}
phases:
  - {name: tp1, tp: 1}
  - {name: tp4, tp: 4, methods: {best_of: tp1, top: 2}, workloads: [w2]}
"""


def test_static_phases_list_their_services_and_best_of_waits_for_results() -> None:
    plan = parse_plan(PLAN)
    assert [(c.method.name, c.tp, c.phase) for c in plan.configs()] == [
        ("autoregressive", 1, "tp1"),
        ("a", 1, "tp1"),
        ("b", 1, "tp1"),
        ("c", 1, "tp1"),
    ]
    tp4 = plan.all_phases()[1]
    configs = plan.phase_configs(tp4, ["c", "a"])
    # the baseline always runs; plan order otherwise; only the phase's workloads
    assert [(c.method.name, c.tp) for c in configs] == [("autoregressive", 4), ("a", 4), ("c", 4)]
    assert [w.name for w in plan.workloads_of(configs[0])] == ["w2"]
    assert configs[1].config_id != plan.configs()[1].config_id  # tp is part of the id


def test_without_phases_there_is_one_per_tp() -> None:
    plan = parse_plan(PLAN.split("phases:")[0].replace("methods:\n", "tp: [1, 4]\nmethods:\n"))
    assert [(p.name, p.tp) for p in plan.all_phases()] == [("tp1", 1), ("tp4", 4)]
    assert len(plan.configs()) == 8


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("{best_of: tp1, top: 2}", None),
        ("{best_of: tp9, top: 2}", "best_of 'tp9' is not an earlier phase"),
        ("[a, zz]", "unknown methods/workloads/services ['zz']"),
    ],
)
def test_phase_validation(change: str, words: str | None) -> None:
    text = PLAN.replace("{best_of: tp1, top: 2}", change)
    if words is None:
        parse_plan(text)
        return
    with pytest.raises(PlanError, match="phases") as err:
        parse_plan(text)
    assert words in str(err.value)


def test_tp_args_reach_the_config_id() -> None:
    base = parse_plan(PLAN)
    more = parse_plan(
        PLAN.replace(
            "chat_template:", "tp_args: {1: [--mem-fraction-static, '0.8']}, chat_template:"
        )
    )
    assert base.configs()[0].config_id != more.configs()[0].config_id


def test_ct200_plan_passes_check() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specsweep.collect",
            "check",
            str(root / "plans" / "ct200-qwen36.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "phase tp4 (tp 4); plus the 2 fastest of phase tp1" in done.stdout
    # 5 types x (5 + 5 + 2 prompts) x 3 reps + 6 turns x 3 sessions = 198 per TP1 service
    assert "ddtree-b64 [family ddtree: budget=64] (config" in done.stdout
    assert "198 requests" in done.stdout
