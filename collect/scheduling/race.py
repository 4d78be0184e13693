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

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsweep.collect.plan.model import Plan
from specsweep.collect.plan.phases import Phase
from specsweep.schema.controls import aa_control_name
from specsweep.stats.race import Level, Prior, prior_from, replay, to_start

VALUES = "SELECT method, level, run, value, workload FROM race_values(?, ?) WHERE run < ?"
# complete campaigns begun before this one, with a start on the same host, engine and tp
EARLIER = """
SELECT c.campaign_id FROM campaigns AS c
WHERE c.campaign_id <> ? AND c.status = 'complete'
  AND c.started_at < (SELECT started_at FROM campaigns WHERE campaign_id = ?)
  AND EXISTS (SELECT 1 FROM services AS s WHERE s.campaign_id = c.campaign_id
              AND s.engine = ? AND s.tp = ? AND s.host = ?)
ORDER BY c.started_at, c.campaign_id
"""


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
    """The race of a phase with `search` before round `run` (module docstring), with the
    priors its races row fixed (none before it is written). Rounds with no value yet (a later
    round the ETA asks about) are not closed: the state is the last closed round's."""
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
    levels = replay(rows, arms, rule, closed, stored_priors(store, campaign_id, phase.name))
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


def stored_priors(store: Any, campaign_id: str, phase: str) -> dict[str, Prior]:
    """The priors the phase's races row fixed, by level ({} when none or no row yet)."""
    rows = store.execute(
        "SELECT priors FROM races WHERE campaign_id = ? AND phase = ?", [campaign_id, phase]
    )
    return {lv: Prior(*v) for lv, v in json.loads(rows[0][0]).items()} if rows else {}


def earlier_priors(store: Any, campaign_id: str, plan: Plan, phase: Phase,
                   host: str) -> tuple[dict[str, Prior], int]:  # fmt: skip
    """Each level's start variance from the complete campaigns of the results file begun
    before this one on the same host, engine and tp (stats.race.prior_from over their
    race_values at the level: every method measured there is a start like any arm's), and how
    many campaigns gave one."""
    found = store.execute(EARLIER, [campaign_id, campaign_id, plan.engine.kind, phase.tp, host])
    tables: dict[str, list[np.ndarray]] = {}
    for (cid,) in found:
        cells: dict[str, dict[str, dict[int, float]]] = {}
        for m, lv, r, v, _ in store.execute(VALUES, [cid, phase.tp, 1 << 30]):
            cells.setdefault(lv, {}).setdefault(m, {})[r] = v
        for lv, by_arm in cells.items():
            runs = sorted({r for arm in by_arm.values() for r in arm})
            table = [[arm.get(r, np.nan) for r in runs] for arm in by_arm.values()]
            tables.setdefault(lv, []).append(np.array(table, dtype=float))
    priors = {lv: p for lv, ts in tables.items() if (p := prior_from(ts)) is not None}
    return priors, len(found)


def record_race(store: Any, campaign_id: str, plan: Plan, phase: Phase, methods: list[str],
                host: str | None) -> list[str]:  # fmt: skip
    """Write the phase's races row (the rule, its arms); its priors are computed once, when
    the row is first written (before the race's first round: every earlier campaign is then
    complete or not for good), and kept by every rewrite, so that a resumed race and the
    analysis replay the same decisions. No host (a cluster's driver): no prior. Returns what
    to say about the priors the first time."""
    search = plan.search_of(phase)
    assert search is not None
    kept = store.execute(
        "SELECT priors FROM races WHERE campaign_id = ? AND phase = ?", [campaign_id, phase.name]
    )
    said: list[str] = []
    if kept:
        priors = kept[0][0]
    else:
        found, campaigns = ({}, 0)
        if search.prior == "results" and host is not None:
            found, campaigns = earlier_priors(store, campaign_id, plan, phase, host)
        priors = json.dumps({lv: [p.sigma2, p.df] for lv, p in sorted(found.items())})
        if found:
            each = ", ".join(f"{lv} sd {p.sigma2**0.5:.1%} on {p.df:g} df"
                             for lv, p in sorted(found.items()))  # fmt: skip
            said = [f"start variance from {campaigns} earlier campaign(s): {each}"]
    with store.transaction():
        store.execute(
            "DELETE FROM races WHERE campaign_id = ? AND phase = ?", [campaign_id, phase.name]
        )
        store.append("races", [races_row(campaign_id, plan, phase, methods, priors)])
    return said


def races_row(campaign_id: str, plan: Plan, phase: Phase, methods: list[str],
              priors: str = "{}") -> dict[str, Any]:  # fmt: skip
    """The phase's row of table `races`: the rule its rounds are decided by, and its priors
    (JSON {level: [sigma2, df]})."""
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
        "priors": priors,
    }
