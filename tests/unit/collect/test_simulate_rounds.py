"""`simulate` and `check` model the rounds as the runner runs them: one after another, each
starting every configuration once in its counterbalanced order, a best_of phase picking once
(round 1, when its source has finished) and queuing its picks at once after that; and they put
the device time of the plan's rounds beside one start per configuration, with what the rounds
buy."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.plan.model import Plan
from specsweep.collect.scheduling.estimate import Estimator
from specsweep.collect.scheduling.order import phase_seed, round_order
from specsweep.collect.scheduling.schedule import Slot, makespan
from specsweep.collect.scheduling.simulation import Simulation, device_time_lines, simulate_plan

PLAN = """
name: rounds
host: {kind: local, name: h, gpus: [0, 1]}
engine: {kind: vllm, model: /models/m}
estimates: {startup_s: [10, 20], speedup: {a: 1.5, b: 1.2, c: 0.8}}
methods: [{name: autoregressive}, {name: a}, {name: b}, {name: c}]
workloads:
  - {name: w, prompts: {kind: inline, texts: [x, y, z]}, max_tokens: [16], repetitions: 1}
phases:
  - {name: p1, tp: 1}
  - {name: p2, tp: 2, methods: {best_of: p1, top: 1}}
"""


def _sim(text: str = PLAN) -> tuple[Plan, Simulation]:
    plan = parse_plan(text)
    return plan, simulate_plan(plan, Estimator(plan), seed=None)


def _methods(sim: Simulation, slots: list[Slot], phase: str) -> list[str]:
    """The methods of the slots whose job key names the phase ('p1:'), in the slots' order."""
    return [sim.configs[s.job.key][1].method.name for s in slots if phase in s.job.key]


def test_rounds_run_one_after_another_in_their_counterbalanced_order() -> None:
    plan, sim = _sim()
    assert plan.repeat == 3 and len(sim.packed_rounds) == 3
    ends = [makespan(r) for r in sim.packed_rounds]
    assert makespan(sim.packed) == sum(ends)
    starts = [min(s.start for s in sim.packed if sim.round_of[s.job.key] == r) for r in (2, 3)]
    assert starts == [ends[0], ends[0] + ends[1]]  # a round starts when the last has ended
    seed = phase_seed(plan.campaign_id(), "p1")
    names = ["autoregressive", "a", "b", "c"]
    for run, timeline in enumerate(sim.serial_rounds, 1):  # serial: the order added
        assert _methods(sim, timeline, "p1:") == round_order(names, seed, run)


def test_a_best_of_phase_picks_in_round_1_and_queues_its_picks_at_once_later() -> None:
    _, sim = _sim()
    first, second = sim.packed_rounds[0], sim.packed_rounds[1]
    p1_end = max(s.end for s in first if "p1:" in s.job.key)
    pick = [s for s in first if "p2:" in s.job.key and not s.job.baseline]
    assert [s.job.after != frozenset() for s in pick] == [True] and pick[0].start >= p1_end
    later = [s for s in second if "p2:" in s.job.key and not s.job.baseline]
    assert later[0].job.after == frozenset()
    assert _methods(sim, pick, "p2:") == _methods(sim, later, "p2:") == ["a"]  # 1.5x


def test_device_time_of_the_rounds_against_one_start(tmp_path: Path) -> None:
    plan, sim = _sim()
    head, buy = device_time_lines(plan, Estimator(plan), sim)
    assert "packed on GPUs 0,1; start-ups not measured at 10-20 s" in head
    assert "3 rounds " in head and "for one start per configuration (repeat 1)" in head
    # p2 at tp 2 has the baseline and one pick: 2 configurations x 3 rounds leave 2 contrasts
    assert "fewest: 2, tp 2, concurrency 1 with 2 configurations" in buy
    assert "repeat 1 prints none" in buy and "no interval" not in buy
    two = parse_plan(PLAN + "repeat: 2\n")
    _, buy = device_time_lines(two, Estimator(two), simulate_plan(two, Estimator(two)))
    assert "fewest: 1" in buy and "below 2 there is no interval: ask for more rounds" in buy
    one = parse_plan(PLAN + "repeat: 1\n")
    head, buy = device_time_lines(one, Estimator(one), simulate_plan(one, Estimator(one)))
    assert "repeat 1, one start per configuration:" in head and "the default 3 rounds" in head
    assert buy.startswith("repeat 1 buys point estimates only") and "no interval" in buy


def test_a_race_is_a_range_from_its_first_rounds_to_its_last() -> None:
    """Low: every level decided after first_rounds rounds; high: all of max_rounds; the
    grid: the plan's repeat rounds; a round costs what the grid's rounds do on average."""
    raced = parse_plan(PLAN.replace("{name: p1, tp: 1}", "{name: p1, tp: 1, search: "
                                    "{within: 0.1, first_rounds: 2, max_rounds: 6}}"))  # fmt: skip
    sim = simulate_plan(raced, Estimator(raced), seed=None)
    *_, race = device_time_lines(raced, Estimator(raced), sim)
    assert race.startswith("race (phase p1: within 10%, confidence 95%, 2-6 rounds): ")
    assert "for the grid's 3 rounds (0.67x-2.00x)" in race
    assert len(device_time_lines(*_sim()[:1], Estimator(_sim()[0]), _sim()[1])) == 2


def test_check_and_simulate_print_the_rounds(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PLAN)
    check = CliRunner().invoke(app, ["check", str(path)])
    assert check.exit_code == 0, check.output
    # p1: 4 services x 3 prompts; p2: the baseline and one pick, 3 each
    assert "about 18 measured requests a round, 54 in its 3 rounds" in check.output
    assert "device time (packed on GPUs 0,1" in check.output and "what 3 rounds buy" in check.output
    simulate = CliRunner().invoke(app, ["simulate", str(path)])
    assert simulate.exit_code == 0, simulate.output
    lines = simulate.output.splitlines()
    assert [line for line in lines if line.startswith("round ")] == [
        f"round {r} of 3" for r in (1, 2, 3)
    ]
