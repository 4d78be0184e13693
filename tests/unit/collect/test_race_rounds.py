"""A raced phase's rounds from hand-built rows (collect.scheduling.race, collect.run.campaign):
what round 3 starts after two rounds in which one arm was far behind, the A/A control with
the baseline, the races row, a best_of phase's picks, and a round no one needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run.campaign import Campaign, phase_methods, todo
from specsweep.collect.run.progress import CampaignProgress
from specsweep.collect.scheduling.race import race_state, ranking
from specsweep.schema.store import Store
from tests.support.analyze_rows import decode_req

PLAN = """
name: raced
engine: {kind: vllm, model: /models/m}
aa_control: true
methods: [{name: autoregressive}, {name: fast}, {name: slow}]
workloads:
  - {name: w, prompts: {kind: inline, texts: [x, y, z]}, max_tokens: [16], repetitions: 1}
phases:
  - {name: race, tp: 1, search: {within: 0.1, first_rounds: 2, max_rounds: 4}}
  - {name: pick, tp: 1, methods: {best_of: race, top: 1}}
"""
# decode tok/s by method and round: slow is a third of the others; the start variance (the
# method x round interaction, 0.0025) leaves a margin of 0.41 ln at round 2: slow's gap of 1.09
# is beyond it, fast's lead of 0.03 over the baseline is not
SPEEDS = {"autoregressive": (100.0, 90.0), "fast": (104.0, 85.0), "slow": (33.0, 31.0),
          "autoregressive-aa": (99.0, 91.0)}  # fmt: skip


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    plan = parse_plan(PLAN)
    cid = plan.campaign_id()
    rows = [
        decode_req(tps * (1 + 0.01 * p), method=m, run=r, prompt_id=f"p{p}", campaign_id=cid,
                   engine="vllm", workload="w", max_tokens=16, window_id=f"{m}-{r}",
                   config_id=f"cfg-{m}", service_id=f"svc-{m}-{r}")
        for m, speeds in SPEEDS.items()
        for r, tps in enumerate(speeds, 1)
        for p in range(3)
    ]  # fmt: skip
    store = Store(tmp_path / "r.duckdb")
    store.append("requests", rows)
    return Campaign(store, plan, cid, None, None, tmp_path, CampaignProgress(0, enabled=False))  # type: ignore[arg-type]


def test_round_3_starts_the_survivors_and_the_control_with_the_baseline(
    campaign: Campaign,
) -> None:
    race = campaign.plan.all_phases()[0]
    arms = ["autoregressive", "fast", "slow"]
    state = race_state(campaign.store, campaign.campaign_id, campaign.plan, race, arms, run=3)
    (level,) = state.levels
    assert (level.name, state.rounds) == ("w:16:c1", 2)
    (drop,) = level.drops
    assert (drop.arm, drop.round, drop.leader) == ("slow", 2, "autoregressive")
    assert drop.margin == pytest.approx(0.406, abs=0.001) and level.survivors == arms[:2]
    assert state.start == ["autoregressive", "fast"]
    campaign.run = 3
    started = sorted(config.method.name for config, _ in todo(campaign, race, announce=True))
    assert started == ["autoregressive", "autoregressive-aa", "fast"]
    ((methods, workloads, within, rounds),) = campaign.store.execute(
        "SELECT methods, workloads, within, max_rounds FROM races WHERE phase = 'race'"
    )
    assert (methods, workloads, within, rounds) == ("autoregressive,fast,slow", "", 0.1, 4)
    campaign.run = 2  # the first rounds start every arm, whatever the values say
    assert len(todo(campaign, race)) == 4
    campaign.run = 5  # past max_rounds
    assert todo(campaign, race) == []


def test_a_best_of_phase_picks_the_race_survivor(campaign: Campaign) -> None:
    race = campaign.plan.all_phases()[0]
    arms = ["autoregressive", "fast", "slow"]
    state = race_state(campaign.store, campaign.campaign_id, campaign.plan, race, arms, run=5)
    assert ranking(state, "autoregressive") == ["fast"]  # the survivors but the baseline
    assert phase_methods(campaign, campaign.plan.all_phases()[1], announce=False) == ["fast"]
