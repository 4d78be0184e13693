"""stats.paired: the paired speedup, its t interval, the crossed runs x prompts variance,
the abstention rule and Holm's adjustment, each against figures worked out by hand (the
t quantiles and p-values are literals from tables, not scipy calls)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsweep.stats.paired import (
    MIN_PROMPTS,
    ONE_START,
    Speedup,
    cell_log_ratios,
    holm,
    interval,
    mean_variance,
    paired_speedup,
    run_spread,
)
from specsweep.stats.starts import StartVariance

T3_975 = 3.182446305284263  # Student t, 3 degrees of freedom, 97.5th percentile


def test_only_shared_prompts_count_and_the_point_is_a_geometric_mean() -> None:
    """p9 (method only) and p8 (baseline only) are left out; per-prompt ratios 2, 2, 0.5
    (reps averaged in log space: sqrt(10 * 40) = 20 against 10) give exp(mean ln) =
    (2 * 2 * 0.5) ** (1/3) = 2 ** (1/3)."""
    method = {"p0": [20.0], "p1": [10.0, 40.0], "p2": [5.0], "p9": [1000.0]}
    base = {"p0": [10.0], "p1": [10.0], "p2": [10.0], "p8": [1.0]}
    got = paired_speedup(method, base)
    assert got is not None and got.n_prompts == 3
    assert got.speedup == pytest.approx(2 ** (1 / 3))


def test_no_shared_prompt_is_none() -> None:
    assert paired_speedup({"p0": [1.0]}, {"p1": [1.0]}) is None


def test_one_start_per_side_is_a_point_without_interval() -> None:
    """paired_speedup compares one start of each side: how far another start would land was
    not sampled, so there is a point estimate and no interval (issue 36)."""
    got = paired_speedup({f"p{i}": [10.0 * (1 + i / 10)] for i in range(4)},
                         {f"p{i}": [10.0] for i in range(4)})  # fmt: skip
    assert got is not None and got.ci_low is None and got.p_value is None
    assert got.reason == ONE_START and not got.significant


# three rounds of the same per-prompt log ratios 0.0, 0.1, 0.2, 0.3 (+/- 0.01 between rounds)
D = np.array([[0.0, 0.1, 0.2, 0.3], [0.01, 0.11, 0.19, 0.31], [-0.01, 0.09, 0.21, 0.29]])
NO_START = StartVariance(s2=0.0, df=4.0, contrasts=4)


def test_no_start_variance_is_the_paired_t_on_prompt_means() -> None:
    """s2 = 0: V = MS_p / (R P) = var(prompt means) / P on P - 1 = 3 df; the two-sided
    p-value on 3 df in closed form: 1 - (2 / pi)(theta + sin theta cos theta), theta =
    atan(t / sqrt 3), t = mean / se."""
    got = interval(D, start=NO_START)
    means = D.mean(axis=0)
    se = math.sqrt(float(np.var(means, ddof=1)) / 4)
    assert got.df == pytest.approx(3)
    assert got.speedup == pytest.approx(math.exp(0.15))
    assert got.ci_low == pytest.approx(math.exp(0.15 - T3_975 * se))
    assert got.ci_high == pytest.approx(math.exp(0.15 + T3_975 * se))
    theta = math.atan(0.15 / se / math.sqrt(3))
    p_value = 1 - 2 / math.pi * (theta + math.sin(theta) * math.cos(theta))
    assert got.p_value == pytest.approx(p_value)


def test_the_start_variance_adds_2_s2_over_r_with_satterthwaite_df() -> None:
    """V = MS_p / (R P) + 2 s2 / R; df = V^2 / (a^2 / (P - 1) + b^2 / df_s)."""
    start = StartVariance(s2=0.004, df=8.0, contrasts=8)
    a = float(np.var(D.mean(axis=0), ddof=1)) / 4
    b = 2 * 0.004 / 3
    got = interval(D, start=start)
    assert got.log_se == pytest.approx(math.sqrt(a + b))
    assert got.df == pytest.approx((a + b) ** 2 / (a**2 / 3 + b**2 / 8))
    assert got.log_se > interval(D, start=NO_START).log_se


def test_drift_is_taken_out_and_its_uncertainty_added() -> None:
    """dt = (2, -2, 3) starts: d' = d - 0.01 dt per round; V adds Var(beta) mean(dt)^2 on
    the drift's df (7)."""
    start = StartVariance(s2=0.001, df=8.0, drift=0.01, drift_var=1e-5, drift_df=7.0,
                          contrasts=8)  # fmt: skip
    dt = np.array([2.0, -2.0, 3.0])
    got = interval(D, start=start, dt=dt)
    corrected = D - 0.01 * dt[:, None]
    a = float(np.var(corrected.mean(axis=0), ddof=1)) / 4
    b, c = 2 * 0.001 / 3, 1e-5 * 1.0**2
    assert got.speedup == pytest.approx(math.exp(corrected.mean()))
    assert got.log_se == pytest.approx(math.sqrt(a + b + c))
    assert got.df == pytest.approx((a + b + c) ** 2 / (a**2 / 3 + b**2 / 8 + c**2 / 7))


def test_a_stratum_without_a_start_variance_gives_no_interval() -> None:
    why = "2 service starts of 2 configurations in 1 rounds leave 0 independent start contrasts"
    got = interval(D, start=StartVariance(reason=why))
    assert got.ci_low is None and got.reason == why


def test_fewer_prompts_than_the_minimum_give_no_interval() -> None:
    """One prompt of three noisy reps used to give 0.98 [0.98, 0.98], 'significant'."""
    got = interval(D[:, :1], start=NO_START)
    assert got.ci_low is None and got.ci_high is None and got.p_value is None
    assert "1 prompt:" in got.reason and str(MIN_PROMPTS) in got.reason
    assert "2 prompts" in interval(D[:, :2], start=NO_START).reason


def test_no_spread_gives_no_interval() -> None:
    """Every prompt exactly 2x in every round: a zero-width interval would claim certainty."""
    got = interval(np.full((3, 4), math.log(2.0)), start=NO_START)
    assert got.speedup == pytest.approx(2.0)
    assert got.ci_low is None and got.reason == "no spread between prompts or starts"


def test_without_a_pooled_variance_two_runs_are_too_few() -> None:
    """The comparison's own runs must give 2 degrees of freedom for starts: 3 runs."""
    assert "1 degree of freedom" in interval(D[:2]).reason
    assert interval(D).ci_low is not None


def test_significant_needs_an_interval_that_excludes_one() -> None:
    assert Speedup(1.2, 1.01, 1.4, 5).significant
    assert Speedup(0.8, 0.7, 0.99, 5).significant
    assert not Speedup(1.2, 0.95, 1.4, 5).significant
    assert not Speedup(1.2, None, None, 2, reason="2 prompts").significant


def test_cells_average_reps_in_log_space_per_run_and_prompt() -> None:
    """Run 0 prompt 0: M's reps 2 and 8 (geometric mean 4) against 2: ln 2."""
    d = cell_log_ratios(np.array([2.0, 8.0, 3.0, 1.0, 1.0]), np.array([0, 0, 0, 1, 1]),
                        np.array([0, 0, 1, 0, 1]), np.array([2.0, 3.0, 1.0, 2.0]),
                        np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))  # fmt: skip
    assert d == pytest.approx(np.array([[math.log(2), 0.0], [0.0, math.log(0.5)]]))
    with pytest.raises(ValueError, match="every prompt"):
        cell_log_ratios(np.array([1.0]), np.array([0]), np.array([1]), np.array([1.0, 1.0]),
                        np.array([0, 0]), np.array([0, 1]))  # fmt: skip
    with pytest.raises(ValueError, match="positive"):
        cell_log_ratios(np.array([0.0]), np.array([0]), np.array([0]), np.array([1.0]),
                        np.array([0]), np.array([0]))  # fmt: skip


def _anova_by_hand(d: list[list[float]]) -> tuple[float, float, float]:
    """Mean squares of a two-way table without replication, by explicit sums."""
    r, p = len(d), len(d[0])
    grand = sum(map(sum, d)) / (r * p)
    rows = [sum(row) / p for row in d]
    cols = [sum(d[i][j] for i in range(r)) / r for j in range(p)]
    ss_p = r * sum((c - grand) ** 2 for c in cols)
    ss_r = p * sum((x - grand) ** 2 for x in rows)
    ss_e = sum((d[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(r) for j in range(p))
    return ss_p / (p - 1), ss_r / (r - 1), ss_e / ((r - 1) * (p - 1))


def test_runs_that_differ_use_the_two_way_variance() -> None:
    """Run 1 is 0.2 faster throughout: MS_r / MS_e is far above F(2, 6)'s 75th percentile
    (1.76), so V = (MS_p + MS_r - MS_e) / (R P) with Satterthwaite df (MS_p + MS_r - MS_e)^2
    / (MS_p^2 / (P-1) + MS_r^2 / (R-1) + MS_e^2 / ((R-1)(P-1)))."""
    d = [[0.10, 0.30, 0.20, 0.00], [0.30, 0.52, 0.40, 0.25], [0.05, 0.20, 0.25, -0.02]]
    ms_p, ms_r, ms_e = _anova_by_hand(d)
    assert ms_r / ms_e > 10
    combo = ms_p + ms_r - ms_e
    var, df, _ = mean_variance(np.array(d))
    assert var == pytest.approx(combo / 12)
    assert df == pytest.approx(combo**2 / (ms_p**2 / 3 + ms_r**2 / 2 + ms_e**2 / 6))


def test_runs_that_agree_are_pooled_into_the_prompt_means() -> None:
    """Runs equal up to noise (MS_r / MS_e below 1.76): V = MS_p / (R P) on P - 1 df, i.e.
    the paired t on each prompt's mean over runs."""
    d = [[0.10, 0.30, 0.20, 0.00], [0.12, 0.28, 0.22, 0.01], [0.09, 0.31, 0.18, 0.00]]
    ms_p, ms_r, ms_e = _anova_by_hand(d)
    assert ms_r / ms_e < 1.76
    var, df, _ = mean_variance(np.array(d))
    prompt_means = [sum(d[r][p] for r in range(3)) / 3 for p in range(4)]
    assert var == pytest.approx(float(np.var(prompt_means, ddof=1)) / 4)
    assert df == pytest.approx(3)


def test_run_spread_by_hand() -> None:
    """Per-run speedups exp(row means); tau2 = (MS_r - MS_e) / P, within =
    (MS_e + (MS_p - MS_e) / R) / P."""
    d = [[0.10, 0.30, 0.20, 0.00], [0.35, 0.52, 0.50, 0.25], [0.05, 0.20, 0.25, -0.02]]
    ms_p, ms_r, ms_e = _anova_by_hand(d)
    tau2, within = (ms_r - ms_e) / 4, (ms_e + (ms_p - ms_e) / 3) / 4
    got = run_spread(np.array(d))
    assert got.n_runs == 3
    assert got.run_speedup_max == pytest.approx(math.exp(sum(d[1]) / 4))
    assert got.run_speedup_min == pytest.approx(math.exp(sum(d[2]) / 4))
    assert got.between_run_share == pytest.approx(tau2 / (tau2 + within))
    assert run_spread(np.array([d[0]])).n_runs == 1


def test_holm_by_hand() -> None:
    """p = .01 .04 .03 .005: sorted .005 x4 = .02, .01 x3 = .03, .03 x2 = .06, .04 x1 =
    .04 -> raised to .06 (monotone); an untested comparison stays None."""
    got = holm([0.01, 0.04, None, 0.03, 0.005])
    assert got[2] is None
    assert got[0] == pytest.approx(0.03) and got[1] == pytest.approx(0.06)
    assert got[3] == pytest.approx(0.06) and got[4] == pytest.approx(0.02)
    assert holm([0.9, 0.8]) == [pytest.approx(1.0), pytest.approx(1.0)]


def test_one_prompt_in_several_rounds_is_a_point_without_a_crash() -> None:
    """An agentic turn of one session in 3 rounds: no prompt spread to measure (the mean
    squares that need it are NaN), the per-round speedups still given."""
    d = np.array([[0.1], [0.2], [0.15]])
    got, spread = interval(d, start=NO_START), run_spread(d)
    assert got.ci_low is None and got.reason.startswith("1 prompt:")
    assert spread.run_speedup_max == pytest.approx(math.exp(0.2))
    assert spread.between_run_share is None


def test_weighted_holm_orders_by_p_over_weight_and_passes_the_weight_on() -> None:
    """p = (0.01, 0.04, 0.03) with weights (0.5, 0.25, 0.25): q = p / w = (0.02, 0.16, 0.12).
    Step 1: 0.02 x (0.5 + 0.25 + 0.25) = 0.02. Step 2: 0.12 x (0.25 + 0.25) = 0.06. Step 3:
    0.16 x 0.25 = 0.04, raised to the running 0.06. Plain Holm gives the first test 0.03."""
    assert holm([0.01, 0.04, 0.03], [0.5, 0.25, 0.25]) == pytest.approx([0.02, 0.06, 0.06])
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01, None, 0.03], [2.0, 1.0, 2.0]) == pytest.approx([0.02, None, 0.03])
