"""The statistics of `analyze compare` and the gate (analyze.compare): which interval a
change between two campaigns gets, how the start variance enters it, and the SLO attainment
difference (docs/compare.md).

Ratio metrics (medians of decode_tps, ttft_s, tpot_s, accept_length). B is put in the place
of the method and A of the baseline of stats.paired. Round k of A (in run order) is paired
with round k of B, for k = 1..min(R_A, R_B); the larger campaign's further rounds are left
out, and only prompts measured in every paired round of both campaigns count:

    d[k, p] = mean ln B's values (round k, prompt p) - mean ln A's values
    ratio   = exp(mean d), its t interval and p-value: stats.paired.interval(d, start=s)

s is the stratum's start variance pooled from both campaigns (analyze.compare.variance), with
no drift term (dt None: start positions of two campaigns do not compare):

    V = MS_p / (R P) + 2 s2 / R,   Satterthwaite's df

Where neither campaign's starts give a usable estimate (a campaign of one configuration) and
the comparison has MIN_OWN_RUNS paired rounds or more, its own rounds carry the start
variance (start None: the crossed prompt x round ANOVA of stats.paired). With fewer than 2
paired rounds there is no interval (stats.paired.ONE_START), and no verdict. `source` says
which applied: 'pooled', 'own rounds', or None (no interval).

SLO attainment (open loop): the difference of two shares, B - A (each side's steady requests
of every round on the shared prompts), with Newcombe's hybrid score interval (Newcombe 1998,
method 10) from the two Wilson intervals (l, u) at z, and the start term as one more
component of the same MOVER sum:

    d  = p_B - p_A
    lo = d - sqrt((p_B - l_B)^2 + (u_A - p_A)^2 + q^2 s2 (1 / R_A + 1 / R_B))
    hi = d + sqrt((u_B - p_B)^2 + (p_A - l_A)^2 + q^2 s2 (1 / R_A + 1 / R_B))

s2 the variance of one start's share, pooled from both campaigns' configurations at that
load on df degrees of freedom (analyze.compare.variance), R the rounds each side pooled, and
q the t quantile on df at z's tail (each component of a MOVER sum at its own limit). Bounds
are clipped to [-1, 1]. Requests are taken as independent trials within a start (open-loop
requests share a queue: a limit). Its p-value inverts the interval: p = 2 (1 - Phi(z*)) at
the z* where the interval's near end touches 0. With fewer than 2 rounds on a side, or no
usable start variance, there is no interval.

The campaign-wide shift (decode_tps, SHIFT_METRICS): one test of "B is slower or faster
everywhere", which the per-window tests miss when the effect is spread thin over many windows.
Each window w's d gives one mean per paired round, m[w, k] = mean over prompts of d[k, p];

    D_k   = mean over windows of m[w, k]        (one value per paired round)
    shift = exp(mean D_k), its t interval and p-value on R - 1 df, se = sd(D_k) / sqrt(R)

Each round's D_k rests on that round's own starts (one per configuration and side), so the
rounds are independent replicates of the whole comparison: sd(D_k) carries the starts, the
host's state during a round (an effect shared by every configuration of one round, which the
per-window intervals leave out) and the prompts, each counted once per round, not once per
window. Only windows paired on the same rounds are averaged (the largest such set; a window
that lost a round to a failed start is left out). With fewer than 2 paired rounds, or rounds
whose means agree exactly, there is no shift. Every window weighs the same.

Multiplicity: every tested change of the comparison, the shift included, is one family,
adjusted with Holm's weighted form (stats.paired.holm): the shift tests share SHIFT_WEIGHT of
the level and the window tests the rest, equally. So the shift is tested at alpha / 2 before
any window is rejected, and the windows at alpha / 2 shared among them until the shift is
rejected, after which they get the whole level (the step-down passes the share on). Without
a shift test every window weighs the same (plain Holm). A change counts (`significant`) when
p_holm < 0.05. p90s are point estimates: no interval, outside the family.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from specsweep.analyze.compare.variance import Cells
from specsweep.stats import dist
from specsweep.stats.paired import (
    LEVEL,
    MIN_OWN_RUNS,
    ONE_START,
    Speedup,
    cell_log_ratios,
    interval,
    t_speedup,
)
from specsweep.stats.starts import StartVariance

ALPHA = 1 - LEVEL
SHIFT_METRICS = ("decode_tps",)  # the metrics with a campaign-wide shift test
SHIFT_WEIGHT = 0.5  # the share of the family's level the shift tests hold (module docstring)
Z_MAX = 37.0  # beyond it a p-value is below 1e-298: reported as that bound


@dataclass(frozen=True)
class Measured:
    """A ratio metric's paired comparison, the rounds it paired and where its start variance
    came from ('pooled', 'own rounds'; None: no interval)."""

    result: Speedup
    n_runs: int
    source: str | None
    # ((run of A, run of B), mean over prompts of d) per paired round, for the shift
    rounds: tuple[tuple[tuple[int, int], float], ...] = ()


@dataclass(frozen=True)
class Difference:
    """An attainment difference B - A, its interval and p-value (None: no interval, reason)."""

    d: float
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    reason: str | None = None


def runs_of(cells: Cells) -> list[int]:
    return sorted({run for run, _ in cells})


def _prompts(cells: Cells, runs: list[int]) -> set[str]:
    """Prompts with a value in every one of runs."""
    sets = [{p for (r, p) in cells if r == run} for run in runs]
    return set.intersection(*sets) if sets else set()


def _flat(cells: Cells, runs: list[int], prompts: list[str]) -> tuple[np.ndarray, ...]:
    """(values, run ordinal, prompt ordinal) of the given runs and prompts."""
    values, run, prompt = [], [], []
    for k, r in enumerate(runs):
        for j, p in enumerate(prompts):
            values += cells[(r, p)]
            run += [k] * len(cells[(r, p)])
            prompt += [j] * len(cells[(r, p)])
    return np.asarray(values, float), np.asarray(run, int), np.asarray(prompt, int)


def measure(b: Cells, a: Cells, start: StartVariance) -> Measured | None:
    """B against A, rounds paired in run order, with the pooled start variance (module
    docstring); None without a prompt measured in every paired round."""
    runs_a, runs_b = runs_of(a), runs_of(b)
    n = min(len(runs_a), len(runs_b))
    prompts = sorted(_prompts(a, runs_a[:n]) & _prompts(b, runs_b[:n]))
    if not prompts:
        return None
    d = cell_log_ratios(*_flat(b, runs_b[:n], prompts), *_flat(a, runs_a[:n], prompts))
    own = not start.usable and n >= MIN_OWN_RUNS
    result = interval(d, LEVEL, None if own else start, None)
    source = None if result.ci_low is None else "own rounds" if own else "pooled"
    rounds = tuple(zip(zip(runs_a[:n], runs_b[:n]), map(float, d.mean(axis=1))))
    return Measured(result, n, source, rounds)


def shift(windows: list[tuple[tuple[tuple[int, int], float], ...]]) -> Speedup | None:
    """The campaign-wide shift from each window's per-round means (Measured.rounds): exp of
    the mean over rounds of D_k, with a t interval from the rounds' spread on R - 1 df
    (module docstring); n_prompts holds the windows averaged. None with fewer than 2 rounds
    shared by any window, or rounds whose means agree exactly (nothing to test against; the
    window tests decide alone)."""
    by_rounds = Counter(tuple(k for k, _ in w) for w in windows if len(w) >= 2)
    if not by_rounds:
        return None
    keys = max(by_rounds, key=lambda k: (by_rounds[k], len(k)))
    means = np.array([[m for _, m in w] for w in windows if tuple(k for k, _ in w) == keys])
    d_k = means.mean(axis=0)
    var = float(d_k.var(ddof=1)) / len(d_k)
    got = t_speedup(float(d_k.mean()), var, len(d_k) - 1, len(means), LEVEL, "flat")
    return None if got.ci_low is None else got


def wilson(x: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of x / n at normal quantile z: the Python twin of the
    wilson_lo and wilson_hi macros of analyze/sql/wilson.sql (tests/unit/
    analyze/test_compare_stats.py proves they agree), here because the p-value inverts the interval
    over z (:func:`newcombe_p`), a root search of many evaluations."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _start_term(z: float, var: float, df: float) -> float:
    """q^2 var: the start component of the MOVER sum, q the t quantile on df at z's tail."""
    if var <= 0:
        return 0.0
    q = z if math.isinf(df) else float(dist.t_isf(dist.norm_sf(z), df))
    return q * q * var


def _bounds(
    x_b: int, n_b: int, x_a: int, n_a: int, z: float, var: float, df: float
) -> tuple[float, float]:
    p_b, p_a = x_b / n_b, x_a / n_a
    (l_b, u_b), (l_a, u_a) = wilson(x_b, n_b, z), wilson(x_a, n_a, z)
    extra = _start_term(z, var, df)
    d = p_b - p_a
    return (
        max(-1.0, d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2 + extra)),
        min(1.0, d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2 + extra)),
    )


def newcombe(
    x_b: int,
    n_b: int,
    x_a: int,
    n_a: int,
    level: float = LEVEL,
    start_var: float = 0.0,
    start_df: float = math.inf,
) -> tuple[float, float, float]:
    """(p_B - p_A, lo, hi): Newcombe's hybrid score interval with a start term of variance
    start_var on start_df (module docstring)."""
    z = float(dist.norm_ppf((1 + level) / 2))
    return (x_b / n_b - x_a / n_a, *_bounds(x_b, n_b, x_a, n_a, z, start_var, start_df))


def newcombe_p(
    x_b: int, n_b: int, x_a: int, n_a: int, start_var: float = 0.0, start_df: float = math.inf
) -> float:
    """The p-value of "no difference" that inverts the Newcombe interval: 2 (1 - Phi(z*))
    where the interval at z* just reaches 0; 1 when the shares are equal."""
    d = x_b / n_b - x_a / n_a
    if d == 0:
        return 1.0

    def gap(z: float) -> float:
        lo, hi = _bounds(x_b, n_b, x_a, n_a, z, start_var, start_df)
        return lo if d > 0 else -hi

    if gap(Z_MAX) > 0:
        return float(2 * dist.norm_sf(Z_MAX))
    return float(2 * dist.norm_sf(dist.root(gap, 0.0, Z_MAX, xtol=1e-12)))


def attainment(
    b: list[float], a: list[float], rounds: tuple[int, int], start: StartVariance
) -> Difference:
    """share(B) - share(A) of the met flags b and a, pooled over each side's rounds
    (rounds: (R_B, R_A)), with Newcombe's interval and the start term (module docstring)."""
    x_b, n_b, x_a, n_a = int(sum(b)), len(b), int(sum(a)), len(a)
    d = x_b / n_b - x_a / n_a
    reason = ONE_START if min(rounds) < 2 else start.reason
    if reason:
        return Difference(d, reason=reason)
    var = start.s2 * (1 / rounds[0] + 1 / rounds[1])
    _, lo, hi = newcombe(x_b, n_b, x_a, n_a, LEVEL, var, start.df)
    return Difference(d, lo, hi, newcombe_p(x_b, n_b, x_a, n_a, var, start.df))
