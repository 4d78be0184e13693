"""The paired speedup of a method over the baseline and its interval: defined once.

Every stage that calls something faster or slower uses this module: the report's `speedup`
table (analyze.stats), the open-loop TPOT ratios, the energy ratios, `analyze compare` and
collect's best-of ranking (collect.scheduling.ranking), so none can disagree on the same rows.

Estimand. The speedup is the geometric mean over prompts of the per-prompt speed ratio:

    d[r, p]  = mean(ln M's values of prompt p in run r) - mean(ln the baseline's values)
    speedup  = exp(mean over (r, p) of d[r, p])

It differs from vLLM's and SGLang's benchmark scripts, which report one aggregate per run
(a median TPOT or an output throughput) and compare two of them: a ratio of two aggregates
pools prompts of different speeds and has no paired interval. The geometric mean of paired
ratios is the estimand a paired design can put an interval on (and the one SPEC CPU reports).

Interval (issue 36: service starts are the replicate; calibrated by simulation of how
collect runs in tests/coverage/test_start_coverage.py and through the SQL path in
tests/coverage/test_analyze_coverage.py). Prompts are a sample of the prompts a user cares
about; service starts are a sample of the starts they would get. A campaign measures every
configuration in R rounds, one start each (stats.starts has the model). For M against the
baseline in one window, with R rounds and P prompts crossed:

    Var(mean d) = s_I^2 / P + 2 sigma_s^2 / R + s_e^2 / (R P)

s_I^2 the prompts' spread of the effect, sigma_s^2 the variance of one start's effect (a
paired ratio of two starts carries 2 sigma_s^2), s_e^2 the cells' noise. The comparison's own
two-way ANOVA gives MS_p = R var_p(mean_r d), whose expectation is s_e^2 + R s_I^2, and the
stratum's starts give sigma_s^2 (stats.starts.start_variance: every configuration's starts of
the engine, tp and load level pooled, with its degrees of freedom and the drift per start):

    d'[r, p] = d[r, p] - beta dt[r]          (dt[r]: M's start position - the baseline's)
    V        = MS_p / (R P) + 2 sigma_s^2 / R + Var(beta) mean(dt)^2

on Satterthwaite's degrees of freedom (P - 1 for the first term, the start variance's for the
others). The start term is what R cannot shrink below: 3 rounds with a start sd of 0.1 give a
95% interval no narrower than about exp(+/- 0.17).

Without a pooled estimate (`start` None: a caller that has only the comparison), the
comparison's own runs carry it: the crossed ANOVA's V = max(MS_p + MS_r - MS_e, MS_p) / (R P)
with Satterthwaite's df, or V = MS_p / (R P) on P - 1 df when runs show no more than the cells'
noise (Bancroft's sometimes-pool rule: MS_r / MS_e below F's 1 - POOL_ALPHA quantile), from
MIN_OWN_RUNS runs (two runs leave one degree of freedom, and 91% coverage).

    (lo, hi) = exp(mean d' -/+ t_{df, (1 + level) / 2} sqrt(V))
    p_value  = 2 P(T_df > |mean d'| / sqrt(V))
    significant = lo > 1 or hi < 1 (unadjusted; analyze adjusts across a campaign: holm)

Abstention: below MIN_PROMPTS shared prompts, with one start per side (ONE_START: one start
cannot show how far another would land), where the stratum's starts leave fewer than 2
independent contrasts, or with no spread at all, there is no interval: ci_low = ci_high =
p_value = NULL and `reason` says why. On 2 prompts the t interval rests on 1 degree of freedom
(t quantile 12.7) and on a normality two values cannot show: MIN_PROMPTS is 3. Prompt effects
with a strong skew (exponential, sd 0.2) and no start variance bring the interval to 91% at 8
prompts: the measured limit (docs/measurements/2026-12-05-starts-as-replicates.md).

numpy and scipy only: the statistics room every stage may import (stats/).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specsweep.stats import dist
from specsweep.stats.starts import StartVariance

LEVEL = 0.95
MIN_PROMPTS = 3
MIN_OWN_RUNS = 3  # without a pooled start variance, a comparison's own runs must give 2 df
POOL_ALPHA = 0.25
ONE_START = (
    "one service start per side: how far another start would land was not sampled "
    "(plan repeat: 2 or more)"
)
# below this variance of a mean ln ratio (a standard error of 1e-9) the spread is rounding
TINY_VAR = 1e-18


@dataclass(frozen=True)
class Speedup:
    """One paired comparison: point estimate, interval (None when it abstains, with the
    reason), p-value of "no change", degrees of freedom, and the prompts it rests on."""

    speedup: float
    ci_low: float | None
    ci_high: float | None
    n_prompts: int
    p_value: float | None = None
    df: float | None = None
    reason: str | None = None
    log_se: float | None = None  # sqrt(V): the standard error of ln speedup

    @property
    def significant(self) -> bool:
        """The interval exists and excludes 1 (no change); unadjusted for multiplicity."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 1 or self.ci_high < 1


@dataclass(frozen=True)
class RunSpread:
    """How a speedup measured in several runs varies between them (None with one run):
    the point estimate within each run alone (its least and greatest) and the share of one
    run's ln speedup variance that is between runs, from the ANOVA: tau2 = max(0, (MS_r -
    MS_e) / P), within = var_p of one run's d / P estimated as (MS_e + (MS_p - MS_e) / R) / P,
    share = tau2 / (tau2 + within) (0 when both are 0)."""

    n_runs: int
    run_speedup_min: float | None = None
    run_speedup_max: float | None = None
    between_run_share: float | None = None


def cell_log_ratios(
    m_values: np.ndarray,
    m_run: np.ndarray,
    m_prompt: np.ndarray,
    b_values: np.ndarray,
    b_run: np.ndarray,
    b_prompt: np.ndarray,
) -> np.ndarray:
    """The (R, P) matrix d[r, p] = mean ln M - mean ln B over the values of run r, prompt p
    (run and prompt: ordinals from 0). Every cell must hold a value on both sides, and every
    value must be positive (a speed, a time)."""
    n_runs = int(max(m_run.max(initial=0), b_run.max(initial=0))) + 1
    n_prompts = int(max(m_prompt.max(initial=-1), b_prompt.max(initial=-1))) + 1
    means = []
    for values, run, prompt in ((m_values, m_run, m_prompt), (b_values, b_run, b_prompt)):
        values = np.asarray(values, dtype=float)
        if not (values > 0).all():
            raise ValueError("paired ratios need positive values (a speed or a time)")
        cell = np.asarray(run, dtype=np.int64) * n_prompts + np.asarray(prompt, dtype=np.int64)
        count = np.bincount(cell, minlength=n_runs * n_prompts)
        if n_prompts == 0 or not count.all():
            raise ValueError("every prompt needs at least one value in every run on both sides")
        means.append(np.bincount(cell, np.log(values), n_runs * n_prompts) / count)
    return (means[0] - means[1]).reshape(n_runs, n_prompts)


def mean_squares(d: np.ndarray) -> tuple[float, float, float]:
    """(MS_p, MS_r, MS_e) of the (R, P) two-way table d (one run: var_p(d), 0, 0); a mean
    square without degrees of freedom (one prompt) is NaN."""
    n_runs, n_prompts = d.shape
    nan = float("nan")
    ms_p = float(np.var(d.mean(axis=0), ddof=1)) * n_runs if n_prompts > 1 else nan
    if n_runs == 1:
        return ms_p, 0.0, 0.0
    row, col, grand = d.mean(axis=1), d.mean(axis=0), d.mean()
    resid = d - row[:, None] - col[None, :] + grand
    df_e = (n_runs - 1) * (n_prompts - 1)
    ms_e = float((resid**2).sum()) / df_e if df_e else nan
    return ms_p, n_prompts * float(np.var(row, ddof=1)), ms_e


def mean_variance(d: np.ndarray) -> tuple[float, float, tuple[float, float, float]]:
    """(V, df, (MS_p, MS_r, MS_e)) of mean(d) for the crossed design (module docstring)."""
    n_runs, n_prompts = d.shape
    ms_p, ms_r, ms_e = mean_squares(d)
    if n_runs == 1:
        return ms_p / n_prompts, float(n_prompts - 1), (ms_p, 0.0, 0.0)
    df_p, df_r, df_e = n_prompts - 1, n_runs - 1, (n_runs - 1) * (n_prompts - 1)
    if ms_r <= ms_e * float(dist.f_ppf(1 - POOL_ALPHA, df_r, df_e)):
        # runs show no more than the cells' noise (Bancroft's preliminary F test): pooled, the
        # prompts' means over runs carry the variance, the paired t on P - 1 df
        combo, df = ms_p, float(df_p)
    else:
        combo = max(ms_p + ms_r - ms_e, ms_p)
        df = combo**2 / (ms_p**2 / df_p + ms_r**2 / df_r + ms_e**2 / df_e)
    return combo / (n_runs * n_prompts), float(df), (ms_p, ms_r, ms_e)


def interval(
    d: np.ndarray,
    level: float = LEVEL,
    start: StartVariance | None = None,
    dt: np.ndarray | None = None,
) -> Speedup:
    """The speedup, its interval and p-value from the (R, P) log-ratio matrix d
    (cell_log_ratios). start: the stratum's pooled start variance and drift
    (stats.starts); dt[r]: M's start position minus the baseline's in round r (the drift
    correction). Without `start`, the comparison's own runs carry the start variance (the
    crossed ANOVA, mean_variance), which needs MIN_OWN_RUNS runs (module docstring)."""
    n_runs, n_prompts = d.shape
    dt = np.zeros(n_runs) if dt is None else np.asarray(dt, dtype=float)
    if start is not None and start.usable:  # the drift is taken out of the point too
        d = d - start.drift * dt[:, None]
    point = float(np.exp(d.mean()))
    why = _abstain(n_runs, n_prompts, start)
    if why:
        return Speedup(point, None, None, n_prompts, reason=why)
    if start is None:
        var, df, _ = mean_variance(d)
        return t_speedup(d.mean(), var, df, n_prompts, level, "no spread between prompts")
    ms_p = mean_squares(d)[0]
    parts = [  # (variance term, its degrees of freedom)
        (ms_p / (n_runs * n_prompts), float(n_prompts - 1)),
        (2 * start.s2 / n_runs, start.df),
        (start.drift_var * float(dt.mean()) ** 2, start.drift_df),
    ]  # fmt: skip
    var = sum(v for v, _ in parts)
    df = var**2 / sum(v**2 / f for v, f in parts if v > 0) if var > 0 else float(n_prompts - 1)
    return t_speedup(d.mean(), var, df, n_prompts, level, "no spread between prompts or starts")


def _abstain(n_runs: int, n_prompts: int, start: StartVariance | None) -> str | None:
    """Why a comparison gets no interval (None: it gets one)."""
    if n_prompts < MIN_PROMPTS:
        return (
            f"{n_prompts} prompt{'s' if n_prompts != 1 else ''}: an interval needs at least "
            f"{MIN_PROMPTS} to keep its coverage"
        )
    if n_runs < 2:
        return ONE_START
    if start is None and n_runs < MIN_OWN_RUNS:
        return f"{n_runs} runs: the runs alone leave {n_runs - 1} degree of freedom for starts"
    if start is not None and not start.usable:
        return start.reason
    return None


def t_speedup(
    mean: float, var: float, df: float, n_prompts: int, level: float, flat: str
) -> Speedup:
    """exp(mean), its t interval on df at level with variance var, and the p-value of "no
    change"; no interval (reason flat) where var is zero."""
    point = float(np.exp(mean))
    if not var > TINY_VAR:
        return Speedup(point, None, None, n_prompts, reason=flat)
    se = var**0.5
    half = float(dist.t_ppf((1 + level) / 2, df)) * se
    p_value = float(2 * dist.t_sf(abs(mean) / se, df))
    return Speedup(point, float(np.exp(mean - half)), float(np.exp(mean + half)), n_prompts,
                   p_value, float(df), log_se=float(se))  # fmt: skip


def run_spread(d: np.ndarray) -> RunSpread:
    """RunSpread of the (R, P) matrix d: RunSpread(1) with one run."""
    n_runs, n_prompts = d.shape
    if n_runs == 1:
        return RunSpread(1)
    per_run = np.exp(d.mean(axis=1))
    if n_prompts < 2:  # no within-run spread to weigh the runs' against
        return RunSpread(n_runs, float(per_run.min()), float(per_run.max()))
    ms_p, ms_r, ms_e = mean_squares(d)
    tau2 = max(0.0, (ms_r - ms_e) / n_prompts)
    within = max(0.0, (ms_e + (ms_p - ms_e) / n_runs) / n_prompts)
    share = tau2 / (tau2 + within) if tau2 + within > 0 else 0.0
    return RunSpread(n_runs, float(per_run.min()), float(per_run.max()), share)


def flat_paired_speedup(
    m_values: np.ndarray,
    m_run: np.ndarray,
    m_prompt: np.ndarray,
    b_values: np.ndarray,
    b_run: np.ndarray,
    b_prompt: np.ndarray,
    level: float = LEVEL,
    start: StartVariance | None = None,
    dt: np.ndarray | None = None,
) -> tuple[Speedup, RunSpread]:
    """The speedup of M over B from flat arrays: value j of a side belongs to run m_run[j]
    and prompt m_prompt[j] (ordinals from 0, every (run, prompt) present on both sides);
    start and dt as interval's."""
    d = cell_log_ratios(m_values, m_run, m_prompt, b_values, b_run, b_prompt)
    return interval(d, level, start, dt), run_spread(d)


def _flatten(by_prompt: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt value lists -> (all values, the prompt ordinal of each value)."""
    arrays = [np.asarray(v, dtype=float) for v in by_prompt]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every prompt needs at least one value")
    return np.concatenate(arrays), np.repeat(np.arange(len(arrays)), [a.size for a in arrays])


def paired_speedup(
    method: Mapping[str, Sequence[float]], baseline: Mapping[str, Sequence[float]]
) -> Speedup | None:
    """Speedup of method over baseline on the prompts both measured (prompt_id -> values of
    one start each). Prompts only one side measured are left out (that is what makes it
    paired); None when the two share no prompt. One start per side: the point estimate, and
    no interval (reason ONE_START), since no start-to-start variance was sampled."""
    prompts = sorted(method.keys() & baseline.keys())
    if not prompts:
        return None
    m_values, m_prompt = _flatten([method[p] for p in prompts])
    b_values, b_prompt = _flatten([baseline[p] for p in prompts])
    zeros = np.zeros
    return flat_paired_speedup(m_values, zeros(m_values.size, int), m_prompt,
                               b_values, zeros(b_values.size, int), b_prompt)[0]  # fmt: skip


def t_interval(point: float, log_se: float, df: float, level: float) -> tuple[float, float]:
    """exp(ln point -/+ t_{df, (1 + level) / 2} log_se): the interval of a speedup at another
    level, from its standard error (for simultaneous intervals over a family)."""
    half = float(dist.t_ppf((1 + level) / 2, df)) * log_se
    return float(np.exp(np.log(point) - half)), float(np.exp(np.log(point) + half))


def holm(
    p_values: Sequence[float | None], weights: Sequence[float] | None = None
) -> list[float | None]:
    """Holm's step-down adjustment of a family's p-values (None: no test, left out of the
    family): sorted ascending p_(1) <= ... <= p_(m), adjusted p_(i) = max over j <= i of
    min(1, (m - j + 1) p_(j)). Rejecting where adjusted < alpha keeps the family-wise error
    rate at alpha under any dependence between the tests (they share a baseline).

    weights (positive, one per p-value; None: all equal) give Holm's weighted form (Holm
    1979): the tests are ordered by q = p / w, and adjusted q_(i) = max over j <= i of
    min(1, q_(j) * (the weights of the tests j..m)). A test of weight w starts at the level
    alpha w / (all weights) and, as others are rejected, takes on their share. Equal weights
    give the form above."""
    w = [1.0] * len(p_values) if weights is None else [float(x) for x in weights]
    present = [(p / w[i], i) for i, p in enumerate(p_values) if p is not None and not np.isnan(p)]
    out: list[float | None] = [None] * len(p_values)
    running, left = 0.0, sum(w[i] for _, i in present)
    for q, i in sorted(present):
        running = max(running, min(1.0, q * left))
        out[i] = running
        left -= w[i]
    return out
