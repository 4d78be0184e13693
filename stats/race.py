"""Racing the settings of a campaign: start only the arms that can still win a load level.

The arms are a phase's configurations (method families x parameters, TP; the baseline among
them). A race runs in rounds, as a campaign does (stats.starts): each round starts every
surviving arm once and measures every load level on that start, so a restart is paid once
per arm and round. After each round, per level, an arm is dropped when it is worse than
another survivor by more than the indifference zone at the stated confidence; an arm that
survives at no open level stops being started. A level is decided when one arm is left.

Procedure: Kim and Nelson's fully sequential procedure (KN; "A fully sequential procedure for
indifference-zone selection in simulation", ACM TOMACS 11(3), 2001), per level, on the ln
values of the objective (decode tok/s, goodput, tok/s per watt: bigger is better; a metric
where smaller is better enters negated):

    delta  = -ln(1 - within)                 the indifference zone on the ln scale
    alpha  = (1 - confidence) / levels       Bonferroni over the levels: the guarantee holds
                                             at every level at once
    eta    = ((2 alpha / (k - 1)) ** (-2 / nu) - 1) / 2,   h2 = 2 eta nu
    W(r)   = max(0, delta / (2 r) (h2 S2 / delta**2 - r))
    drop i at round r >= n0 when mean_i(r) < mean_j(r) - W(r) for a surviving j

mean_i(r): arm i's mean over rounds 1..r (every survivor of a level ran every round, so the
round effect, shared by all arms of a round, cancels in mean_i - mean_j); k: the arms.

Where this differs from KN. KN estimates each pair's variance S2_ij from its own first n0
differences (n0 - 1 degrees of freedom); with 2 or 3 rounds that makes h2 enormous and drops
nothing. Here the arms share one start variance per level (the model of stats.starts: one
start's effect has the same variance in every configuration of a stratum), estimated from the
arm x round interaction of the first n0 rounds, on nu = (k - 1)(n0 - 1) degrees of freedom,
and S2_ij = 2 sigma2 for every pair. KN's bound carries over (the variance estimate is
independent of the later rounds' means, and chi-square with nu degrees of freedom), with the
assumption of equal start variances added: tests/coverage/test_race.py checks the guarantee
by simulation, with unequal variances and drift too. Successive halving would fit a fixed
budget but gives no probability of a correct selection; F-race drops by a Friedman test with
no indifference zone (it cannot stop between two arms that are equal).

Guarantee, in words: when the best arm of a level is better than every other by at least
`within`, the race keeps it with probability at least `confidence`, at every level at once;
when several are within `within` of the best, the one it keeps is within `within` of it
(KN's indifference-zone statement). A level still open at `max_rounds` carries no guarantee:
its survivors are reported as open.

A set. Two arms whose means differ by less than the zone are never told apart by KN before
its region closes (h2 S2 / delta^2 rounds: dozens at a start sd near the zone). The race also
stops a level when every survivor is within the zone of the best with a one-sided t bound
(the pooled variance's degrees of freedom; Bonferroni over the survivors and over the
max_rounds looks, so looking after every round costs no coverage): then any survivor is
within `within` of the best, which is what the indifference zone asks.

The decisions are a function of the measured values alone (replayed from round n0 on every
call), so a race resumed after a crash decides exactly as one that was not interrupted.

numpy and scipy only: the statistics room every stage may import (stats/).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specsweep.stats import dist

FIRST_ROUNDS = 2  # n0: rounds every arm runs before any is dropped (a variance needs two)


@dataclass(frozen=True)
class Prior:
    """A start variance known before the race: sigma2 of one arm's ln value on df degrees of
    freedom, from earlier campaigns of the same engine, TP and level in the results file (the
    stratum's stats.starts.StartVariance: s2 plus the window noise). With it, the race may
    drop after the first round (first_rounds 1), and the first rounds' own interaction pools
    in."""

    sigma2: float
    df: float


@dataclass(frozen=True)
class RaceRule:
    """What a plan's `search:` asks: drop an arm when it is worse than a survivor by more
    than `within` (a share of the survivor's value) at `confidence`; stop by `max_rounds`."""

    within: float = 0.05
    confidence: float = 0.95
    max_rounds: int = 6
    first_rounds: int = FIRST_ROUNDS

    def __post_init__(self) -> None:
        if not 0 < self.within < 1:
            raise ValueError(f"within must be between 0 and 1, not {self.within}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1, not {self.confidence}")
        if self.first_rounds < 1 or self.max_rounds < self.first_rounds:
            raise ValueError(
                f"first_rounds must be 1 or more and max_rounds at least first_rounds "
                f"(got {self.first_rounds}, {self.max_rounds})"
            )

    @property
    def delta(self) -> float:
        """The indifference zone on the ln scale."""
        return -math.log1p(-self.within)


def kn_h2(arms: int, alpha: float, df: float) -> float:
    """KN's h^2 for `arms` arms at error `alpha`, the variance on `df` degrees of freedom."""
    if arms < 2:
        return 0.0
    eta = ((2 * alpha / (arms - 1)) ** (-2 / df) - 1) / 2
    return 2 * eta * df


@dataclass(frozen=True)
class Drop:
    """Arm `arm` dropped at a level in round `round`: its mean was `gap` (ln) below
    `leader`'s, beyond the continuation region's half-width `margin` (ln); or (reason
    "missing") it has no value in that round (its start failed: gap and margin NaN, no
    leader)."""

    arm: str
    round: int
    leader: str
    gap: float
    margin: float
    reason: str = "behind"


@dataclass
class Level:
    """One load level's race after the rounds seen: who is left, who was dropped and why."""

    name: str
    survivors: list[str]
    drops: list[Drop] = field(default_factory=list)
    sigma2: float | None = None  # the pooled start variance of one arm's ln value
    df: float | None = None
    h2: float | None = None
    rounds: int = 0
    equivalent: bool = False  # the survivors are all within the zone of the best (a set)

    @property
    def decided(self) -> bool:
        return len(self.survivors) == 1 or self.equivalent

    @property
    def winner(self) -> str | None:
        return self.survivors[0] if len(self.survivors) == 1 else None


def prior_from(tables: Sequence[np.ndarray]) -> Prior | None:
    """The start variance of earlier campaigns as a Prior: each table values[a, r] one earlier
    campaign's ln values at the level (arms with a value in every round; NaN rows are left
    out), its arm x round interaction pooled over the tables (sum of squares over sum of
    degrees of freedom). None when no table has 2 arms and 2 rounds."""
    ss = df = 0.0
    for table in tables:
        complete = table[~np.isnan(table).any(axis=1)]
        if complete.shape[0] >= 2 and complete.shape[1] >= 2:
            s2, d = _pooled_variance(complete)
            ss, df = ss + s2 * d, df + d
    return Prior(ss / df, df) if df else None


def _pooled_variance(first: np.ndarray) -> tuple[float, float]:
    """(sigma2, df) of the arm x round interaction of an (arms, rounds) table."""
    resid = first - first.mean(axis=1, keepdims=True) - first.mean(axis=0, keepdims=True)
    resid += first.mean()
    df = (first.shape[0] - 1) * (first.shape[1] - 1)
    return float((resid**2).sum()) / df, float(df)


def race_level(
    values: np.ndarray,
    arms: Sequence[str],
    rule: RaceRule,
    levels: int,
    name: str = "",
    prior: Prior | None = None,
) -> Level:
    """KN on one level: values[a, r] the ln objective of arm a in round r (bigger is better;
    NaN: no value). Replays every round from n0 on; the state is the values. An arm without a
    value in a round it should have run (a failed start) is dropped there as "missing"; the
    first rounds' variance rests on the arms that ran them all."""
    arms = list(arms)
    n_rounds = values.shape[1]
    level = Level(name, arms, rounds=min(n_rounds, rule.first_rounds - 1))
    n0 = rule.first_rounds
    if n_rounds < n0 or len(arms) < 2:
        level.rounds = n_rounds
        return level
    alive = []
    for a, arm in enumerate(arms):
        gaps = np.flatnonzero(np.isnan(values[a, :n0]))
        if gaps.size:
            level.drops.append(Drop(arm, int(gaps[0]) + 1, "", math.nan, math.nan, "missing"))
        else:
            alive.append(a)
    if len(alive) < 2:
        level.rounds, level.survivors = n0, [arms[a] for a in alive]
        return level
    sigma2, df = _pooled_variance(values[alive, :n0]) if n0 > 1 else (0.0, 0.0)
    if prior is not None:
        sigma2, df = (df * sigma2 + prior.df * prior.sigma2) / (df + prior.df), df + prior.df
    if df <= 0:
        raise ValueError(f"level {name!r}: one first round and no prior start variance")
    alpha = (1 - rule.confidence) / levels
    h2 = kn_h2(len(alive), alpha, df)
    level.sigma2, level.df, level.h2 = sigma2, df, h2
    for r in range(n0, n_rounds + 1):
        level.rounds = r
        missing = [a for a in alive if np.isnan(values[a, r - 1])]
        level.drops += [Drop(arms[a], r, "", math.nan, math.nan, "missing") for a in missing]
        alive = [a for a in alive if a not in missing]
        if len(alive) < 2:
            break
        means = values[alive, :r].mean(axis=1)
        margin = continuation(rule, h2, sigma2, r)
        best = int(np.argmax(means))
        keep = [a for a, m in zip(alive, means) if m >= means[best] - margin]
        for a, m in zip(alive, means):
            if a not in keep:
                level.drops.append(Drop(arms[a], r, arms[alive[best]], float(means[best] - m),
                                        margin))  # fmt: skip
        alive = keep
        if len(alive) == 1:
            break
        if _equivalent(values[alive, :r], sigma2, df, alpha, rule):
            level.equivalent = True
            break
    level.survivors = [arms[a] for a in alive]
    return level


def continuation(rule: RaceRule, h2: float, sigma2: float, r: int) -> float:
    """W(r), the continuation region's half-width (ln) after round r: an arm whose mean is
    more than this below a survivor's is dropped (module docstring; every pair's S2 is
    2 sigma2). The analysis prints it beside each round's gaps (analyze.race)."""
    return max(0.0, rule.delta / (2 * r) * (h2 * 2 * sigma2 / rule.delta**2 - r))


def _equivalent(values: np.ndarray, sigma2: float, df: float, alpha: float,
                rule: RaceRule) -> bool:  # fmt: skip
    """Every survivor is within the zone of the best at the level's confidence: the best
    mean minus each survivor's, plus a one-sided t bound on the difference, stays under
    delta. Bonferroni over the survivors and over the max_rounds looks."""
    means = values.mean(axis=1)
    q = 1 - alpha / ((len(means) - 1) * rule.max_rounds)
    bound = float(dist.t_ppf(q, df)) * math.sqrt(2 * sigma2 / values.shape[1])
    return bool(((means.max() - means) + bound < rule.delta).all())


def race(
    values: np.ndarray,
    arms: Sequence[str],
    levels: Sequence[str],
    rule: RaceRule,
    priors: Sequence[Prior | None] | None = None,
) -> list[Level]:
    """Every level's race: values[a, l, r] the ln objective (bigger is better; NaN: arm a was
    not started in round r); priors[l] the level's known start variance, if any."""
    priors = list(priors) if priors is not None else [None] * len(levels)
    return [
        race_level(values[:, i, :], arms, rule, len(levels), name, priors[i])
        for i, name in enumerate(levels)
    ]


def to_start(levels: Sequence[Level], rounds_done: int, rule: RaceRule,
             keep: Sequence[str] = ()) -> list[str]:  # fmt: skip
    """The arms the next round starts: every survivor of a level still open, and `keep` (the
    baseline, which every round starts as the reference). None once `max_rounds` are done."""
    if rounds_done >= rule.max_rounds:
        return []
    wanted = {a for lv in levels if not lv.decided for a in lv.survivors}
    if not wanted:
        return []
    arms = [a for lv in levels for a in lv.survivors] + [d.arm for lv in levels for d in lv.drops]
    order = list(dict.fromkeys(arms))
    return [a for a in order if a in wanted or a in keep]


Row = tuple[str, str, int, float]  # (arm, level, round, ln value): schema race_values' rows


def replay(
    rows: Sequence[Row],
    arms: Sequence[str],
    rule: RaceRule,
    rounds: int,
    priors: dict[str, Prior] | None = None,
) -> list[Level]:
    """Every level's race after `rounds` closed rounds, from stored values: rows (arm,
    level, round, ln value) of any of `arms` (their order is the tie order), later rounds
    ignored. A level's arms are those with a value at it in any of those rounds (an arm
    measured at other levels only is not in its race); levels in the order first seen. Collect calls
    this to choose a round's arms, analyze to show the race: one function, one answer."""
    cells = {(a, lv, r): v for a, lv, r, v in rows if r <= rounds and a in arms}
    names = list(dict.fromkeys(lv for (_, lv, _) in cells))
    out = []
    for name in names:
        present = [a for a in arms if any((a, name, r) in cells for r in range(1, rounds + 1))]
        values = np.array(
            [[cells.get((a, name, r), np.nan) for r in range(1, rounds + 1)] for a in present]
        ).reshape(len(present), rounds)
        prior = (priors or {}).get(name)
        out.append(race_level(values, present, rule, len(names), name, prior))
    return out


def on_grid(rows: Sequence[Row], arms: Sequence[str], rule: RaceRule, grid_rounds: int,
            keep: Sequence[str] = ()) -> dict[int, list[str]]:  # fmt: skip
    """The starts a race would have made on a grid's own starts (rows of `grid_rounds` rounds
    of every arm): {round: arms started}. Rounds 1..first_rounds start every arm; before each
    later round, replay on the rows of the starts made so far picks the round's arms as
    collect would (to_start, `keep`: the baseline); the race ends at an empty round, at
    max_rounds or at the grid's last round. A replay, not a race: a real race's later starts
    would be new ones, with their own noise (.ci/gpu/race_replay.py)."""
    started = {r: list(arms) for r in range(1, min(rule.first_rounds, grid_rounds) + 1)}
    for r in range(rule.first_rounds + 1, min(rule.max_rounds, grid_rounds) + 1):
        seen = [row for row in rows if row[0] in started.get(row[2], ())]
        nxt = to_start(replay(seen, arms, rule, r - 1), r - 1, rule, keep=keep)
        if not nxt:
            break
        started[r] = nxt
    return started
