"""A raced phase's rounds from hand-built rows (collect.scheduling.race, collect.run.campaign):
what round 3 starts after two rounds in which one arm was far behind, the A/A control with
the baseline, the races row, a best_of phase's picks, a round no one needs, and the start
variance an earlier campaign of the file lends the race (its prior)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run.campaign import Campaign, phase_methods, todo
from specsweep.collect.run.progress import CampaignProgress
from specsweep.collect.scheduling.race import race_state, ranking, record_race
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


def _earlier(store: Store, cid: str, started: datetime, speeds: dict[str, list[float]]) -> None:
    """A complete campaign `cid` on host h (vLLM, tp 1) at the same level, begun at `started`."""
    store.append("campaigns", [{
        "campaign_id": cid, "plan_name": "raced", "plan_sha256": "ab" * 32, "plan_yaml": "x",
        "baseline": "autoregressive", "started_at": started,
        "finished_at": started + timedelta(hours=1), "status": "complete"}])  # fmt: skip
    store.append("services", [{
        "service_id": f"{cid}-{m}-{r}", "campaign_id": cid, "config_id": f"cfg-{m}",
        "engine": "vllm", "method": m, "tp": 1, "gpus": "", "host": "h", "launch_command": "x",
        "requested_at": started, "ready_at": None, "stopped_at": None, "startup_s": None,
        "state": "stopped", "error": None, "log_tail": None, "transport": "direct", "run": r}
        for m, runs in speeds.items() for r in range(1, len(runs) + 1)])  # fmt: skip
    store.append("requests", [
        decode_req(tps, method=m, run=r, prompt_id="p0", campaign_id=cid, engine="vllm",
                   workload="w", max_tokens=16, window_id=f"{cid}-{m}-{r}",
                   config_id=f"cfg-{m}", service_id=f"{cid}-{m}-{r}")
        for m, runs in speeds.items() for r, tps in enumerate(runs, 1)])  # fmt: skip


def test_a_prior_from_an_earlier_campaign_narrows_the_margin(campaign: Campaign) -> None:
    """Round 2 alone: the interaction's 2 df give a margin of 0.41 ln, and fast stays within
    it of the baseline. An earlier campaign of 3 arms x 4 rounds whose starts varied 0.1%
    adds 6 df and almost no variance: KN's region has closed at round 2 (margin 0) and the
    better mean, the baseline's, wins. A later campaign, or one on another host, lends
    nothing; the prior is fixed in the races row when the race begins."""
    store, cid, plan = campaign.store, campaign.campaign_id, campaign.plan
    race = plan.all_phases()[0]
    arms = ["autoregressive", "fast", "slow"]
    quiet = {"autoregressive": [100.0, 100.1, 99.9, 100.0], "fast": [104.0, 104.0, 104.1, 104.0],
             "slow": [33.0, 33.0, 33.0, 33.1]}  # fmt: skip
    begun = datetime(2026, 1, 1, 12)
    store.append("campaigns", [{
        "campaign_id": cid, "plan_name": "raced", "plan_sha256": "cd" * 32, "plan_yaml": "x",
        "baseline": "autoregressive", "started_at": begun, "finished_at": None,
        "status": "running"}])  # fmt: skip
    _earlier(store, "old", begun - timedelta(days=1), quiet)
    _earlier(store, "later", begun + timedelta(days=1), {"fast": [1.0, 9.0], "slow": [9.0, 1.0]})
    said = record_race(store, cid, plan, race, arms, host="h")
    ((priors,),) = store.execute("SELECT priors FROM races")
    ((level, (sigma2, df)),) = json.loads(priors).items()
    assert level == "w:16:c1" and df == 6.0 and sigma2 < 1e-5
    assert said == [
        f"start variance from 1 earlier campaign(s): w:16:c1 sd {sigma2**0.5:.1%} on 6 df"
    ]
    state = race_state(store, cid, plan, race, arms, run=3)
    (lv,) = state.levels
    assert lv.df == 8.0 and lv.survivors == ["autoregressive"]
    assert [(d.arm, d.margin) for d in lv.drops] == [("fast", 0.0), ("slow", 0.0)]
    assert record_race(store, cid, plan, race, arms, host="h") == []  # kept, not recomputed
    assert store.execute("SELECT priors FROM races") == [(priors,)]
    store.execute("DELETE FROM races")
    assert record_race(store, cid, plan, race, arms, host="elsewhere") == []
    assert store.execute("SELECT priors FROM races") == [("{}",)]
