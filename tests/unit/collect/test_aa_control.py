"""The A/A control in the plan (`aa_control: true`): the baseline again as a method of its own,
with its own config_id and service, in every phase the baseline runs in, never ranked, and a
reserved name. The live campaign is in test_aa_control_live.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.scheduling.estimate import Estimator, Measured
from specsweep.collect.scheduling.ranking import rank_methods
from specsweep.collect.scheduling.simulation import PlanJobs
from specsweep.schema.store import Store
from tests.support.fixtures.schema import request_row

PLAN = """
name: aa
engine: {kind: llamacpp, model: m.gguf, args: [-t, "2"]}
aa_control: true
methods:
  - {name: autoregressive, args: [--spec-type, none], env: {X: "1"}, workloads: [w1]}
  - {name: a, args: [--a]}
  - {name: c, args: [--c]}
workloads:
  - {name: w1, prompts: {kind: inline, texts: [x, y]}, max_tokens: [8]}
  - {name: w2, prompts: {kind: inline, texts: [z]}, max_tokens: [8]}
phases:
  - {name: p1, tp: 1}
  - {name: p2, tp: 1, methods: {best_of: p1, top: 1}}
  - {name: p3, tp: 1, methods: [c]}
"""
CONTROL = "autoregressive-aa"


def test_the_control_is_the_baseline_under_its_own_name_and_config_id() -> None:
    plan = parse_plan(PLAN)
    assert [m.name for m in plan.methods] == ["autoregressive", "a", "c", CONTROL]
    base, control = plan.methods[0], plan.methods[-1]
    assert (control.args, control.env, control.tp, control.workloads) == (
        ["--spec-type", "none"],
        {"X": "1"},
        None,
        ["w1"],
    )
    assert control.family is None and control.params == {}
    base_cfg, control_cfg = [c for c in plan.configs() if c.phase == "p1"][::3]
    assert (base_cfg.method, control_cfg.method) == (base, control)
    assert base_cfg.config_id != control_cfg.config_id
    assert [w.name for w in plan.workloads_of(control_cfg)] == ["w1"]


def test_the_control_follows_the_baseline_into_every_phase_last() -> None:
    plan = parse_plan(PLAN)
    phases = {p.name: p for p in plan.all_phases()}
    assert [c.method.name for c in plan.phase_configs(phases["p1"], ["a", "c"])] == [
        "autoregressive",
        "a",
        "c",
        CONTROL,
    ]
    # a best_of phase: before the ranking (nothing chosen) and after it
    assert [c.method.name for c in plan.phase_configs(phases["p2"], [])] == [
        "autoregressive",
        CONTROL,
    ]
    assert [c.method.name for c in plan.phase_configs(phases["p2"], ["c"])] == [
        "autoregressive",
        "c",
        CONTROL,
    ]
    assert [c.method.name for c in plan.configs() if c.phase == "p3"] == [
        "autoregressive",
        "c",
        CONTROL,
    ]


def test_off_by_default_and_the_hash_of_plans_without_it_is_unchanged() -> None:
    without = parse_plan(PLAN.replace("aa_control: true\n", ""))
    written_off = parse_plan(PLAN.replace("aa_control: true", "aa_control: false"))
    assert CONTROL not in [m.name for m in without.methods]
    assert CONTROL not in [c.method.name for c in without.configs()]
    assert without.campaign_id() == written_off.campaign_id()
    assert parse_plan(PLAN).campaign_id() != without.campaign_id()


@pytest.mark.parametrize("aa_control", ["true", "false"])
def test_a_method_named_like_the_control_is_refused_naming_the_field(aa_control: str) -> None:
    text = (
        PLAN.replace("aa_control: true", f"aa_control: {aa_control}")
        .replace("{name: c, args: [--c]}", f"{{name: {CONTROL}, args: [--c]}}")
        .replace("[c]", "[a]")
    )
    with pytest.raises(PlanError) as err:
        parse_plan(text)
    assert "aa_control" in str(err.value) and repr(CONTROL) in str(err.value)


def test_the_control_follows_a_renamed_baseline() -> None:
    text = PLAN.replace("aa_control: true", "aa_control: true\nbaseline: a")
    plan = parse_plan(text)
    assert plan.methods[-1].name == "a-aa" and plan.methods[-1].args == ["--a"]


def test_ranking_never_picks_the_control(tmp_path: Path) -> None:
    """Decode speed = 10 tokens / (e2e - ttft): baseline 10 / 1.0 = 10 tok/s, a 10 / 0.5 = 20
    (2.0x), the control 10 / 0.25 = 40 (4.0x, by chance): still not ranked."""
    store = Store(tmp_path / "r.duckdb")
    rows = [
        request_row(
            i,
            method=m,
            prompt_id="p0",
            ttft_s=0.1,
            e2e_s=0.1 + d,
            output_tokens=11,
            chunk_times_s=[0.1, 0.1 + d],
        )
        for i, (m, d) in enumerate([("autoregressive", 1.0), ("a", 0.5), (CONTROL, 0.25)])
    ]
    assert store.append("requests", rows) == 3
    ranked = rank_methods(store, "camp", 1, "autoregressive")
    assert [(r.method, round(r.score, 9)) for r in ranked] == [("a", 2.0)]


def test_simulated_best_of_never_picks_the_control() -> None:
    """Assumed speeds: a at 0.5x and c at 0.8x the baseline, the control 1.0x (the baseline's
    own speed): the simulated p1 ranking is c, a, without the control."""
    plan = parse_plan(PLAN.replace("engine:", "estimates: {speedup: {a: 0.5, c: 0.8}}\nengine:"))
    jobs = PlanJobs(plan, Estimator(plan, Measured()), gpu_host=False)
    jobs.initial()
    assert jobs.rank("p1") == ["c", "a"]


def test_check_counts_the_control(tmp_path: Path) -> None:
    """Measured requests = prompts x max_tokens x repetitions (3): w1 2 x 1 x 3 = 6, w2 3.
    p1: baseline 6 (w1 only), a 9, c 9, control 6 = 30; p2 (best_of, top 1):
    baseline 6 x (1 + 1) + control 6 = 18; p3: 6 + 9 + 6 = 21. Total 69."""
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    result = CliRunner().invoke(app, ["check", str(plan)])
    assert result.exit_code == 0, result.output
    assert f"{CONTROL} (config " in result.output
    assert "about 69 measured requests" in result.output
