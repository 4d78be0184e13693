"""Plan `search:` (docs/race.md): validated with the field named, out of the plan's hash, the
rounds a raced phase runs, and the waves a best_of phase fed by a race waits in."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run.campaign import waves

LOCAL = (Path(__file__).parents[3] / "plans" / "local.yaml").read_text()
PHASES = """
phases:
  - {name: tp1, tp: 1, search: {within: 0.1, max_rounds: 4}}
  - {name: tp1-again, tp: 1, methods: {best_of: tp1, top: 1}}
  - {name: tp1-third, tp: 1, methods: {best_of: tp1-again, top: 1}}
  - {name: plain, tp: 1, methods: [ngram-simple]}
"""


def test_a_race_leaves_the_hash_and_sets_the_phase_rounds() -> None:
    grid = parse_plan(LOCAL)
    raced = parse_plan(LOCAL + "search: {within: 0.1, max_rounds: 4}\n")
    assert raced.sha256() == grid.sha256()
    (phase,) = raced.all_phases()
    assert raced.search_of(phase) is raced.search
    assert (raced.rounds_of(phase), grid.rounds_of(phase), grid.rounds_of(phase, 5)) == (4, 3, 5)
    rule = raced.search.rule()
    assert (rule.within, rule.confidence, rule.first_rounds, rule.max_rounds) == (0.1, 0.95, 2, 4)


@pytest.mark.parametrize(
    "search, problem",
    [("{within: 1.5}", "search.within"), ("{first_rounds: 1}", "search.first_rounds"),
     ("{objective: goodput}", "search.objective"),
     ("{first_rounds: 5, max_rounds: 3}", "first_rounds (5) is more than max_rounds (3)")],
)  # fmt: skip
def test_a_bad_search_names_its_field(search: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_plan(LOCAL + f"search: {search}\n")


def test_a_best_of_fed_by_a_race_waits_for_its_last_round() -> None:
    plan = parse_plan(LOCAL + PHASES)
    phases = plan.all_phases()
    assert [[p.name for p in w] for w in waves(plan, phases)] == [
        ["tp1", "plain"],
        ["tp1-again", "tp1-third"],  # tp1-again is not raced: tp1-third follows it as before
    ]
    assert plan.search_of(phases[0]) is not None and plan.search_of(phases[1]) is None
    assert [[p.name for p in w] for w in waves(plan, phases[1:3])] == [["tp1-again", "tp1-third"]]
    grid = parse_plan(LOCAL)
    assert [len(w) for w in waves(grid, grid.all_phases())] == [1]
