"""Simulated races (stats.race) and the grids they replace, for the coverage test and the
benchmark script tests/bench/race_sim.py.

A campaign's ln objective of arm a at level l in round r (the model of stats.starts):

    y[a, l, r] = mu[a, l] + rho[r, l] + s[a, l, r] + beta t[a, r] + e[a, l, r]

rho: the round's effect (every arm of a round), s: the start's effect (sd start_sd[l], times
scale[a] for unequal variances), t: the start's position in the round's order (a seeded
permutation, reversed in the next round, as collect.scheduling.order runs), beta: drift per
start, e: the window's noise over its prompts (sd noise_sd). The race starts only what
stats.race.to_start names (the baseline, arm 0, is an arm like the others: it runs while it
can still win a level).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsweep.stats.race import Prior, RaceRule, race, to_start


@dataclass(frozen=True)
class Case:
    """A simulated campaign's truth: mu[a, l] (ln objective), the start sd per level."""

    name: str
    mu: np.ndarray
    start_sd: np.ndarray
    round_sd: float = 0.05
    noise_sd: float = 0.01
    drift: float = 0.0
    scale: np.ndarray | None = None  # per-arm multiplier of the start sd
    prior_df: float = 0.0  # > 0: the race knows each level's variance on this many df
    # (n, levels): one start's residuals at every level, resampled instead of normal draws
    residuals: np.ndarray | None = None

    def priors(self) -> list[Prior | None]:
        """The known start variance per level (the true one: a prior from earlier campaigns
        that measured it on prior_df degrees of freedom is scattered around it)."""
        if self.prior_df <= 0:
            return [None] * self.mu.shape[1]
        var = self.start_sd**2 + self.noise_sd**2
        return [Prior(float(v), self.prior_df) for v in var]

    @property
    def arms(self) -> list[str]:
        return [f"a{i}" for i in range(self.mu.shape[0])]

    @property
    def levels(self) -> list[str]:
        return [f"l{i}" for i in range(self.mu.shape[1])]


@dataclass(frozen=True)
class Outcome:
    correct: bool  # at every level, the pick is within `within` of the true best
    dropped_best: bool  # at some level, the true best arm was dropped
    starts: int  # service starts the race used
    open_levels: int  # levels still open at max_rounds


def _round(case: Case, rng: np.random.Generator, order: np.ndarray) -> np.ndarray:
    n_arms, n_levels = case.mu.shape
    scale = np.ones(n_arms) if case.scale is None else case.scale
    rho = rng.normal(scale=case.round_sd, size=n_levels)
    position = np.empty(n_arms)
    position[order] = np.arange(n_arms)
    if case.residuals is not None:  # a stored start's residuals: start effect and noise
        start = case.residuals[rng.integers(len(case.residuals), size=n_arms)]
        return case.mu + rho[None, :] + start * scale[:, None] + case.drift * position[:, None]
    start = rng.normal(size=(n_arms, n_levels)) * case.start_sd[None, :] * scale[:, None]
    noise = rng.normal(scale=case.noise_sd, size=(n_arms, n_levels))
    return case.mu + rho[None, :] + start + case.drift * position[:, None] + noise


def simulate(case: Case, rule: RaceRule, rng: np.random.Generator) -> Outcome:
    """One race on a simulated campaign of `case`."""
    arms, levels = case.arms, case.levels
    n_arms = len(arms)
    values = np.full((n_arms, len(levels), 0), np.nan)
    order = rng.permutation(n_arms)
    priors = case.priors()
    starts, decided = 0, race(values, arms, levels, rule, priors)
    for r in range(rule.max_rounds):
        names = to_start(decided, r, rule)
        if not names:
            break
        started = np.array([arms.index(a) for a in names])
        order = order[::-1] if r % 2 else rng.permutation(n_arms)
        y = _round(case, rng, order)
        column = np.full((n_arms, len(levels), 1), np.nan)
        column[started, :, 0] = y[started]
        values = np.concatenate([values, column], axis=2)
        starts += len(started)
        decided = race(values, arms, levels, rule, priors)
    return _outcome(case, rule, values, decided, starts)


def _outcome(case: Case, rule: RaceRule, values: np.ndarray, levels: list, starts: int) -> Outcome:
    correct, dropped = True, False
    for i, lv in enumerate(levels):
        best = int(np.argmax(case.mu[:, i]))
        idx = [case.arms.index(a) for a in lv.survivors]
        pick = idx[int(np.argmax(np.nanmean(values[idx, i, :], axis=1)))]
        correct &= bool(case.mu[pick, i] > case.mu[best, i] - rule.delta + 1e-12)
        dropped |= case.arms[best] in {d.arm for d in lv.drops}
    return Outcome(correct, dropped, starts, sum(not lv.decided for lv in levels))


def grid_pick_correct(case: Case, rounds: int, rule: RaceRule, rng: np.random.Generator) -> bool:
    """The full grid of `rounds` rounds, every arm every round: the best mean at every level
    is within `within` of the true best (the grid's own chance of a right answer)."""
    n_arms = len(case.arms)
    order = rng.permutation(n_arms)
    ys = []
    for r in range(rounds):
        order = order[::-1] if r % 2 else rng.permutation(n_arms)
        ys.append(_round(case, rng, order))
    means = np.mean(ys, axis=0)
    best = case.mu.argmax(axis=0)
    pick = means.argmax(axis=0)
    cols = np.arange(case.mu.shape[1])
    return bool((case.mu[pick, cols] > case.mu[best, cols] - rule.delta + 1e-12).all())


def summary(case: Case, rule: RaceRule, n: int, seed: int, grid_rounds: int = 3) -> dict:
    """n races of `case`: the share correct, the share that dropped the true best, the mean
    starts as a share of the grid of max_rounds rounds and of `grid_rounds` rounds, the share
    with a level left open, and the grid's own share correct at grid_rounds and 1 round."""
    rng = np.random.default_rng(seed)
    runs = [simulate(case, rule, rng) for _ in range(n)]
    n_arms = len(case.arms)
    starts = float(np.mean([o.starts for o in runs]))
    return {
        "case": case.name,
        "correct": float(np.mean([o.correct for o in runs])),
        "dropped_best": float(np.mean([o.dropped_best for o in runs])),
        "starts": starts,
        "share_of_max_grid": starts / (n_arms * rule.max_rounds),
        "share_of_grid": starts / (n_arms * grid_rounds),
        "open": float(np.mean([o.open_levels > 0 for o in runs])),
        "grid_correct": float(
            np.mean([grid_pick_correct(case, grid_rounds, rule, rng) for _ in range(n)])
        ),  # fmt: skip
        "grid1_correct": float(np.mean([grid_pick_correct(case, 1, rule, rng) for _ in range(n)])),
    }


def stored_case(db: str, campaign: str) -> Case:
    """A case from a stored campaign of R rounds: the truth is each method's mean ln decode
    tok/s over the rounds at every window all methods measured in every round (a level), and
    a start's residuals are its double-centred (method x round) values at every level, scaled
    up by sqrt(C R / ((C - 1)(R - 1))) to a start's own variance, resampled whole (a start's
    levels move together)."""
    import duckdb

    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute(
            "SELECT method, workload || ':' || max_tokens || ':c' || concurrency AS level, run, "
            "avg(ln(decode_tps)) FROM request_metrics WHERE campaign_id = ? AND ok "
            "AND NOT is_warmup AND decode_tps > 0 GROUP BY ALL",
            [campaign],
        ).fetchall()
    methods = sorted({r[0] for r in rows})
    runs = sorted({r[2] for r in rows})
    cells = {(m, lv, r): y for m, lv, r, y in rows}
    every = {lv for _, lv, _, _ in rows}
    levels = sorted(lv for lv in every if all((m, lv, r) in cells for m in methods for r in runs))
    y = np.array([[[cells[(m, lv, r)] for r in runs] for lv in levels] for m in methods])
    n_c, n_r = len(methods), len(runs)
    grand = y.mean(axis=(0, 2), keepdims=True)
    centred = y - y.mean(axis=2, keepdims=True) - y.mean(axis=0, keepdims=True) + grand
    inflate = np.sqrt(n_c * n_r / ((n_c - 1) * (n_r - 1)))
    residuals = (centred * inflate).transpose(0, 2, 1).reshape(n_c * n_r, len(levels))
    sd = residuals.std(axis=0, ddof=0)
    return Case(f"{campaign} ({n_c} methods, {len(levels)} levels, {n_r} rounds)",
                y.mean(axis=2), sd, round_sd=0.0, noise_sd=0.0, residuals=residuals)  # fmt: skip
