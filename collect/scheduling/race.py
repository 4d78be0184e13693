"""A raced phase's rounds (plan `search:`, docs/race.md): which of its methods a round starts.

The arms are the phase's methods at its tp (the baseline among them; its A/A control is not an
arm: it is started whenever the baseline is). Rounds 1..first_rounds start every arm. Before
each later round, the race is replayed from the store (stats.race.replay over
schema/measured.sql's `race_values`, the rounds before this one), and the round starts every
survivor of a level still open; none once every level is decided or `max_rounds` are done.
Nothing of the race is kept but the measurements and the rule (table `races`): a resume after
`kill -9` in the middle of a round replays the same closed rounds and starts the same arms,
and redoes the round's unfinished units (collect.run.campaign.todo).

A best_of phase whose source phase is raced takes its picks from the race (`ranking`): the
source's final survivors, ordered by how many levels each survives at, then by its mean value
over the levels it ran. It therefore runs after the source's last round
(collect.run.runner.waves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsweep.collect.plan.model import Plan
from specsweep.collect.plan.phases import Phase
from specsweep.schema.controls import aa_control_name
from specsweep.stats.race import Level, replay, to_start

VALUES = "SELECT method, level, run, value, workload FROM race_values(?, ?) WHERE run < ?"


@dataclass(frozen=True)
class RaceState:
    """A raced phase before round `run`: its arms, the levels as replayed from the closed
    rounds (`rounds` of them), and the arms round `run` starts."""

    arms: list[str]
    levels: list[Level]
    rounds: int
    run: int
    start: list[str]
    means: dict[str, float]  # each arm's mean value over the closed rounds' levels

    def describe(self) -> str:
        """One line for the progress display: the drops of the last closed round, the open
        levels, what starts."""
        drops = [
            f"{d.arm} at {lv.name} ({_why(d)})"
            for lv in self.levels
            for d in lv.drops
            if d.round == self.rounds
        ]
        open_ = [lv.name for lv in self.levels if not lv.decided]
        parts = [f"after round {self.rounds}"]
        parts += [f"dropped {', '.join(drops)}"] if drops else []
        parts += [f"open: {', '.join(open_)}" if open_ else "every level decided"]
        parts += [f"round {self.run} starts {', '.join(self.start) or 'nothing'}"]
        return "; ".join(parts)


def _why(drop: Any) -> str:
    if drop.reason == "missing":
        return "no value: its start failed"
    return f"{drop.gap:.3f} ln below {drop.leader}, margin {drop.margin:.3f}"


def arms_of(plan: Plan, phase: Phase, methods: list[str]) -> list[str]:
    """The phase's arms: its configurations' methods, the A/A control left out."""
    control = aa_control_name(plan.baseline)
    return [c.method.name for c in plan.phase_configs(phase, methods) if c.method.name != control]


def race_state(store: Any, campaign_id: str, plan: Plan, phase: Phase, methods: list[str],
               run: int) -> RaceState:  # fmt: skip
    """The race of a phase with `search` before round `run` (module docstring). Rounds with no
    value yet (a later round the ETA asks about) are not closed: the state is the last
    closed round's."""
    search = plan.search_of(phase)
    if search is None:
        raise ValueError(f"phase {phase.name!r} is not raced")
    rule, arms = search.rule(), arms_of(plan, phase, methods)
    rows = [
        (m, lv, r, v)
        for m, lv, r, v, w in store.execute(VALUES, [campaign_id, phase.tp, run])
        if phase.workloads is None or w in phase.workloads
    ]
    closed = min(run - 1, max((r for *_, r, _ in rows), default=0))
    levels = replay(rows, arms, rule, closed)
    if run > rule.max_rounds:
        start: list[str] = []
    elif closed < rule.first_rounds:
        start = arms
    else:
        start = to_start(levels, closed, rule)
    means: dict[str, list[float]] = {}
    for m, _, r, v in rows:
        if m in arms and r <= closed:
            means.setdefault(m, []).append(v)
    return RaceState(arms, levels, closed, run, start,
                     {m: sum(vs) / len(vs) for m, vs in means.items()})  # fmt: skip


def ranking(state: RaceState, baseline: str) -> list[str]:
    """A finished race's survivors but the baseline, most levels survived first, then by
    their mean value over the levels they ran, then by name (module docstring)."""
    count: dict[str, int] = {}
    for lv in state.levels:
        for arm in lv.survivors:
            count[arm] = count.get(arm, 0) + 1
    count.pop(baseline, None)
    return sorted(count, key=lambda a: (-count[a], -state.means.get(a, 0.0), a))


def races_row(campaign_id: str, plan: Plan, phase: Phase, methods: list[str]) -> dict[str, Any]:
    """The phase's row of table `races`: the rule its rounds are decided by."""
    search = plan.search_of(phase)
    assert search is not None
    return {
        "campaign_id": campaign_id,
        "phase": phase.name,
        "tp": phase.tp,
        "methods": ",".join(arms_of(plan, phase, methods)),
        "workloads": ",".join(phase.workloads or []),
        "objective": search.objective,
        "within": search.within,
        "confidence": search.confidence,
        "first_rounds": search.first_rounds,
        "max_rounds": search.max_rounds,
    }
