"""schema.paired: the paired speedup, its t interval, the crossed runs x prompts variance,
the abstention rule and Holm's adjustment, each against figures worked out by hand (the
t quantiles and p-values are literals from tables, not scipy calls)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schema.paired import (
    MIN_PROMPTS,
    Speedup,
    cell_log_ratios,
    holm,
    interval,
    mean_variance,
    paired_speedup,
    run_spread,
)

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


def test_the_t_interval_on_per_prompt_log_ratios() -> None:
    """d = ln ratios 0.0, 0.1, 0.2, 0.3: mean 0.15, sd sqrt(0.05 / 3), se sd / 2, df 3;
    the two-sided p-value on 3 df in closed form: 1 - (2 / pi)(theta + sin theta cos theta),
    theta = atan(t / sqrt 3), t = 0.15 / se."""
    ratios = [1.0, math.exp(0.1), math.exp(0.2), math.exp(0.3)]
    got = paired_speedup({f"p{i}": [10 * r] for i, r in enumerate(ratios)},
                         {f"p{i}": [10.0] for i in range(4)})  # fmt: skip
    se = math.sqrt(0.05 / 3) / 2
    assert got is not None and got.df == pytest.approx(3)
    assert got.speedup == pytest.approx(math.exp(0.15))
    assert got.ci_low == pytest.approx(math.exp(0.15 - T3_975 * se))
    assert got.ci_high == pytest.approx(math.exp(0.15 + T3_975 * se))
    theta = math.atan(0.15 / se / math.sqrt(3))
    p_value = 1 - 2 / math.pi * (theta + math.sin(theta) * math.cos(theta))
    assert got.p_value == pytest.approx(p_value) and got.p_value == pytest.approx(0.1027, abs=1e-4)
    assert not got.significant  # the interval holds 1


def test_fewer_prompts_than_the_minimum_give_no_interval() -> None:
    """One prompt of three noisy reps used to give 0.98 [0.98, 0.98], 'significant'."""
    got = paired_speedup({"p": [10, 11, 9.5]}, {"p": [10.2, 10, 10.4]})
    assert got is not None and got.ci_low is None and got.ci_high is None
    assert got.p_value is None and not got.significant
    assert "1 prompt:" in got.reason and str(MIN_PROMPTS) in got.reason
    two = paired_speedup({"a": [2.0], "b": [3.0]}, {"a": [1.0], "b": [1.0]})
    assert two is not None and two.ci_low is None and "2 prompts" in two.reason


def test_no_spread_gives_no_interval() -> None:
    """Every prompt exactly 2x: a zero-width interval would claim certainty it does not have."""
    got = paired_speedup({p: [20.0] for p in "abcd"}, {p: [10.0] for p in "abcd"})
    assert got is not None and got.speedup == pytest.approx(2.0)
    assert got.ci_low is None and got.reason == "no spread between prompts"


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


def test_service_variance_widens_the_interval_with_satterthwaite_df() -> None:
    """V = var(d)/P + s2; df = (V_p + s2)^2 / (V_p^2 / (P - 1) + s2^2 / W)."""
    d = np.array([[0.0, 0.1, 0.2, 0.3]])
    v_p = 0.05 / 3 / 4
    got = interval(d, service_var=0.004, service_df=8)
    df = (v_p + 0.004) ** 2 / (v_p**2 / 3 + 0.004**2 / 8)
    assert got.df == pytest.approx(df)
    plain = interval(d)
    assert got.ci_low < plain.ci_low and got.ci_high > plain.ci_high


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
