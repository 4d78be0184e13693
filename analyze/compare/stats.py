"""The statistics of `analyze compare` and the gate (analyze.compare): which interval a
change between two campaigns gets, how drift between the campaigns enters it, the SLO
attainment difference, and the rule that decides whether a change counts (docs/compare.md).

Ratio metrics (medians of decode_tps, ttft_s, tpot_s, accept_length). B is put in the place
of the method and A of the baseline of schema.paired, on the prompts both measured:

    d[r, p] = mean ln B's values (run r, prompt p) - mean ln A's values
    ratio   = exp(mean d), its t interval and p-value: schema.paired

Drift between campaigns. Each campaign ran on its own service starts, so B/A carries the
start-to-start effect g_B - g_A besides any real change; an interval that sees only prompts
is too narrow for it. Three cases, in this order (`drift` names the one used):

- 'runs': both campaigns measured the window in 2 or more runs (`repeat`). Run k of A (in
  run order) is paired with run k of B, for k = 1..min(R_A, R_B); the runs of the larger
  campaign beyond that are left out. Every run is an independent service start, so any
  one-to-one pairing gives rows d[k, .] that are independent draws of (g_B - g_A) plus
  prompt noise, and the crossed prompt x run interval (flat_paired_speedup) carries the
  start variance through its run mean square; the run order is the deterministic choice.
  Only prompts measured in every paired run of both campaigns count.
- 'aa': otherwise, where either campaign has an A/A control (the baseline started twice,
  schema.controls): each A/A window w of either campaign and each of its runs gives a
  one-run log-ratio row of the control against the baseline, for the same metric and loop
  (closed / open); analyze.stats.service_noise turns them into s2, the variance of the log
  ratio of two starts, on W degrees of freedom. Runs are pooled per prompt on each side,
  and a side that pools R starts carries sigma^2 / R of start variance (s2 = 2 sigma^2), so

      service_var = s2 / 2 * (1 / R_A + 1 / R_B)      (s2 itself with one run each)

  is added to the prompt variance (paired_speedup's service_var, service_df = W).
- 'none': neither: the interval covers prompts only and drift between campaigns is not
  measured. A change then counts only when its size also exceeds DRIFT_FLOOR: a ratio
  outside [1 / 1.25, 1.25], the spread docs/aa-control.md reports between two starts of
  identical services (0.80x to 1.04x); inside it the verdict is 'not separable from drift'.

The A/A noise is measured within a campaign; drift between campaigns (days apart, another
host load) can exceed it, which no figure of the two campaigns can show.

SLO attainment (open loop): the difference of two shares, B - A, with Newcombe's hybrid
score interval (Newcombe 1998, method 10) from the two Wilson intervals (l, u) at z:

    d = p_B - p_A,  lo = d - sqrt((p_B - l_B)^2 + (u_A - p_A)^2 + z^2 s2),
                    hi = d + sqrt((u_B - p_B)^2 + (p_A - l_A)^2 + z^2 s2)

with s2 = 0 unless an A/A control measured attainment's start variance (the same MOVER
sum with a normal term: s2 = max(0, mean over A/A window runs of (p_aa - p_base)^2 -
p_aa(1 - p_aa) / (n_aa - 1) - p_base(1 - p_base) / (n_base - 1))). Requests are taken as
independent trials (open-loop requests share a queue: a limit). Its p-value inverts the
interval: p = 2 (1 - Phi(z*)) at the z* where the interval's near end touches 0. Without
an A/A control a difference counts only beyond ATTAINMENT_FLOOR (10 points: a convention,
not a measurement).

Multiplicity: every tested change of the comparison (one family) is adjusted with Holm
(schema.paired.holm); a change counts (`significant`) when p_holm < 0.05 and, with drift
'none', it exceeds the floor. p90s are point estimates: no interval, outside the family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from analyze.stats import service_noise
from schema.paired import LEVEL, Speedup, cell_log_ratios, flat_paired_speedup, paired_speedup

ALPHA = 1 - LEVEL
DRIFT_FLOOR = 1.25
ATTAINMENT_FLOOR = 0.10
Z_MAX = 40.0  # beyond it a p-value is below 1e-300: reported as that bound
# one side of one window and metric: (run, prompt_id) -> values
Cells = dict[tuple[int, str], list[float]]


@dataclass(frozen=True)
class Noise:
    """Service variance of the log ratio (or share difference) of two starts, on df."""

    s2: float
    df: float


@dataclass(frozen=True)
class Measured:
    """A ratio metric's paired comparison and how drift entered it."""

    result: Speedup
    drift: str  # runs | aa | none
    n_runs: int  # runs per side the comparison rests on (paired runs, or the fewer pooled)
    service_var: float


def runs_of(cells: Cells) -> list[int]:
    return sorted({run for run, _ in cells})


def _prompts(cells: Cells, runs: list[int]) -> set[str]:
    """Prompts with a value in every one of runs."""
    sets = [{p for (r, p) in cells if r == run} for run in runs]
    return set.intersection(*sets) if sets else set()


def _pooled(cells: Cells) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for (_, prompt), values in sorted(cells.items()):
        out.setdefault(prompt, []).extend(values)
    return out


def _flat(cells: Cells, runs: list[int], prompts: list[str]) -> tuple[np.ndarray, ...]:
    """(values, run ordinal, prompt ordinal) of the given runs and prompts."""
    values, run, prompt = [], [], []
    for k, r in enumerate(runs):
        for j, p in enumerate(prompts):
            values += cells[(r, p)]
            run += [k] * len(cells[(r, p)])
            prompt += [j] * len(cells[(r, p)])
    return np.asarray(values, float), np.asarray(run, int), np.asarray(prompt, int)


def measure(b: Cells, a: Cells, noise: Noise | None) -> Measured | None:
    """B against A with drift accounted for (module docstring); None without a shared
    prompt."""
    runs_a, runs_b = runs_of(a), runs_of(b)
    n = min(len(runs_a), len(runs_b))
    if n >= 2:
        prompts = sorted(_prompts(a, runs_a[:n]) & _prompts(b, runs_b[:n]))
        if prompts:
            result, _ = flat_paired_speedup(
                *_flat(b, runs_b[:n], prompts), *_flat(a, runs_a[:n], prompts)
            )
            return Measured(result, "runs", n, 0.0)
    s2, df, drift = 0.0, math.inf, "none"
    if noise is not None:
        s2 = noise.s2 / 2 * (1 / len(runs_a) + 1 / len(runs_b))
        df, drift = noise.df, "aa"
    result = paired_speedup(_pooled(b), _pooled(a), service_var=s2, service_df=df)
    return None if result is None else Measured(result, drift, n, s2)


def aa_rows(control: Cells, baseline: Cells) -> list[np.ndarray]:
    """One (1, P) log-ratio row of the control against the baseline per run both measured,
    on that run's shared prompts (2 at least: a row needs a spread to subtract)."""
    rows = []
    for run in sorted(set(runs_of(control)) & set(runs_of(baseline))):
        prompts = sorted(_prompts(control, [run]) & _prompts(baseline, [run]))
        if len(prompts) >= 2:
            rows.append(
                cell_log_ratios(*_flat(control, [run], prompts), *_flat(baseline, [run], prompts))
            )
    return rows


def aa_noise(rows: list[np.ndarray]) -> Noise | None:
    """analyze.stats.service_noise of the A/A rows; None without any."""
    if not rows:
        return None
    return Noise(*service_noise(rows))


def share_noise(pairs: list[tuple[Cells, Cells]]) -> Noise | None:
    """Attainment's start variance from (control, baseline) met-flag cells (module
    docstring); None without an A/A window run of 2 or more requests a side."""
    terms = []
    for control, baseline in pairs:
        for run in sorted(set(runs_of(control)) & set(runs_of(baseline))):
            prompts = _prompts(control, [run]) & _prompts(baseline, [run])
            sides = [[v for p in prompts for v in side[(run, p)]] for side in (control, baseline)]
            if min(map(len, sides)) < 2:
                continue
            p = [float(np.mean(s)) for s in sides]
            binomial = sum(q * (1 - q) / (len(s) - 1) for q, s in zip(p, sides))
            terms.append((p[0] - p[1]) ** 2 - binomial)
    return Noise(max(0.0, float(np.mean(terms))), float(len(terms))) if terms else None


def wilson(x: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of x / n at normal quantile z."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _bounds(x_b: int, n_b: int, x_a: int, n_a: int, z: float, s2: float) -> tuple[float, float]:
    p_b, p_a = x_b / n_b, x_a / n_a
    (l_b, u_b), (l_a, u_a) = wilson(x_b, n_b, z), wilson(x_a, n_a, z)
    extra = z * z * s2
    d = p_b - p_a
    return (
        d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2 + extra),
        d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2 + extra),
    )


def newcombe(
    x_b: int, n_b: int, x_a: int, n_a: int, level: float = LEVEL, service_var: float = 0.0
) -> tuple[float, float, float]:
    """(p_B - p_A, lo, hi): Newcombe's hybrid score interval (module docstring)."""
    z = float(stats.norm.ppf((1 + level) / 2))
    return (x_b / n_b - x_a / n_a, *_bounds(x_b, n_b, x_a, n_a, z, service_var))


def newcombe_p(x_b: int, n_b: int, x_a: int, n_a: int, service_var: float = 0.0) -> float:
    """The p-value of "no difference" that inverts the Newcombe interval: 2 (1 - Phi(z*))
    where the interval at z* just reaches 0; 1 when the shares are equal."""
    d = x_b / n_b - x_a / n_a
    if d == 0:
        return 1.0

    def gap(z: float) -> float:
        lo, hi = _bounds(x_b, n_b, x_a, n_a, z, service_var)
        return lo if d > 0 else -hi

    if gap(Z_MAX) > 0:
        return float(2 * stats.norm.sf(Z_MAX))
    return float(2 * stats.norm.sf(optimize.brentq(gap, 0.0, Z_MAX, xtol=1e-12)))


def beyond_floor(kind: str, ratio: float, difference: float | None) -> bool:
    """The change exceeds the default drift floor (used when drift is not measured)."""
    if kind == "difference":
        return difference is not None and abs(difference) > ATTAINMENT_FLOOR
    return not ratio > 0 or abs(math.log(ratio)) > math.log(DRIFT_FLOOR)
