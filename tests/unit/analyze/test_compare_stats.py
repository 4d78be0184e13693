"""The formulas of analyze.compare.stats and analyze.compare.variance on hand-built figures,
each expected value computed here from the textbook formula (Wilson's score interval written
out), never by the code under test: Newcombe's hybrid score interval on his worked example
(Newcombe 1998, Stat Med 17:873, Table II: 56/70 vs 48/80 -> 0.2000, 95% CI 0.0524 to
0.3339), its non-zero width where one side never meets the SLO, its p-value by inversion, the
start term added to it (a t quantile on the start variance's df), a share's start variance
from per-start shares, the two campaigns' start variances combined, and no interval with one
start per side; acceptance length's start variance pooled without the baseline; and Wilson's
interval of analyze.compare.stats equal to its SQL macros (wilson.sql) at any z."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest
from scipy import stats

from specsweep.analyze import build
from specsweep.analyze.compare import stats as cs
from specsweep.analyze.compare import variance as cv
from specsweep.stats.paired import ONE_START
from specsweep.stats.starts import StartVariance

Z = 1.959963984540054  # the standard normal's 97.5th percentile


def _wilson(x: int, n: int, z: float = Z) -> tuple[float, float]:
    """Wilson (1927): (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _hybrid(
    x1: int, n1: int, x2: int, n2: int, z: float = Z, extra: float = 0.0
) -> tuple[float, float, float]:
    """Newcombe's method 10 by hand: d = p1 - p2, d -/+ sqrt of the squared distances (and
    extra, the start term's squared half-width)."""
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = _wilson(x1, n1, z), _wilson(x2, n2, z)
    d = p1 - p2
    return (
        d,
        d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2 + extra),
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2 + extra),
    )


def test_newcombe_matches_the_worked_example() -> None:
    d, lo, hi = _hybrid(56, 70, 48, 80)
    assert (round(d, 4), round(lo, 4), round(hi, 4)) == (0.2, 0.0524, 0.3339)  # the paper's
    assert cs.newcombe(56, 70, 48, 80) == (pytest.approx(d), pytest.approx(lo), pytest.approx(hi))


def test_newcombe_has_width_where_one_side_never_meets_the_slo() -> None:
    """0/10 against 10/10: d = -1; the Wilson interval of 0/10 is [0, z^2 / (10 + z^2)], so
    hi = -1 + sqrt(2) z^2 / (10 + z^2), lo = -1 (a share cannot fall further)."""
    d, lo, hi = cs.newcombe(0, 10, 10, 10)
    u = Z * Z / (10 + Z * Z)
    assert (d, lo) == (-1.0, pytest.approx(-1.0))
    assert hi == pytest.approx(-1 + math.sqrt(2) * u) and hi - lo > 0.3
    same = cs.newcombe(0, 10, 0, 10)  # both never: no difference, an interval around 0
    assert same[0] == 0 and same[1] == pytest.approx(-u) and same[2] == pytest.approx(u)


def test_the_p_value_inverts_the_interval() -> None:
    """At level 1 - p the hand-computed interval's lower end is 0."""
    p = cs.newcombe_p(56, 70, 48, 80)
    assert 0.001 < p < 0.05  # the 95% interval excludes 0, barely
    z = stats.norm.ppf(1 - p / 2)
    assert _hybrid(56, 70, 48, 80, z)[1] == pytest.approx(0.0, abs=1e-9)
    assert cs.newcombe_p(48, 80, 56, 70) == pytest.approx(p)  # symmetric
    assert cs.newcombe_p(5, 10, 5, 10) == 1.0


def test_the_start_term_widens_the_interval() -> None:
    """A start variance of 0.006 enters as z^2 0.006 on infinite df, as t_{4, 0.975}^2 0.006
    on 4 df (wider still)."""
    d, lo, hi = _hybrid(56, 70, 48, 80, extra=Z * Z * 0.006)
    assert cs.newcombe(56, 70, 48, 80, start_var=0.006) == (
        pytest.approx(d),
        pytest.approx(lo),
        pytest.approx(hi),
    )
    assert lo < 0 and cs.newcombe_p(56, 70, 48, 80, 0.006) > 0.05  # 0 inside: p > 0.05
    q = stats.t.ppf(0.975, 4)
    _, lo4, hi4 = _hybrid(56, 70, 48, 80, extra=q * q * 0.006)
    got = cs.newcombe(56, 70, 48, 80, start_var=0.006, start_df=4)
    assert got[1:] == (pytest.approx(lo4), pytest.approx(hi4)) and lo4 < lo
    p4 = cs.newcombe_p(56, 70, 48, 80, 0.006, 4)  # inverts the interval on 4 df too
    z4 = stats.norm.isf(p4 / 2)
    q4 = stats.t.isf(stats.norm.sf(z4), 4)
    assert _hybrid(56, 70, 48, 80, z4, q4 * q4 * 0.006)[1] == pytest.approx(0.0, abs=1e-9)


def _cells(*runs: tuple[int, int]) -> dict:
    """Met flags of one configuration: run r (from 1) has x of n requests meeting the SLO,
    spread over two prompts."""
    out: dict = {}
    for run, (x, n) in enumerate(runs, 1):
        flags = [1.0] * x + [0.0] * (n - x)
        out[(run, "p0")], out[(run, "p1")] = flags[::2], flags[1::2]
    return out


def test_a_shares_start_variance_comes_from_every_configurations_starts() -> None:
    """Configuration X: 9/10, 3/10, 6/10 over three starts; Y: 2/10, 8/10 over two. Within a
    configuration the shares vary by the start and by the binomial draw:
    A = (sum_X (p - 0.6)^2 + sum_Y (p - 0.5)^2) / (2 + 1), B = the (R_c - 1)-weighted mean of
    mean_r p (1 - p) / (n - 1), s2 = A - B on 3 df. A second window measured on the same
    starts adds no degree of freedom."""
    x, y = _cells((9, 10), (3, 10), (6, 10)), _cells((2, 10), (8, 10))
    a = (0.09 + 0.09 + 0.0 + 0.09 + 0.09) / 3
    b = (2 * (0.09 + 0.21 + 0.24) / 9 / 3 + 1 * (0.16 + 0.16) / 9 / 2) / 3
    one = cv.share_variance([{"X": x, "Y": y}])
    assert (one.s2, one.df, one.usable) == (pytest.approx(a - b), 3.0, True)
    two = cv.share_variance([{"X": x, "Y": y}, {"X": x, "Y": y}])
    assert (two.s2, two.df) == (pytest.approx(a - b), 3.0)
    calm = cv.share_variance([{"X": _cells((5, 10), (5, 10), (6, 10))}])  # binomial only
    assert calm.s2 == 0.0 and calm.pooled and calm.df == 2.0
    single = cv.share_variance([{"X": _cells((9, 10))}, {"Y": _cells((2, 10))}])
    assert not single.usable and single.reason.startswith("one service start per configuration")
    few = cv.share_variance([{"X": _cells((9, 10), (3, 10))}])  # 1 df: too few
    assert not few.usable and "1 degree(s) of freedom" in few.reason


def test_two_campaigns_start_variances_combine_weighted_by_df() -> None:
    """s2 = (6 x 0.004 + 2 x 0.001) / 8 on 8 df, no drift (each campaign's drift is its own);
    one usable estimate is taken alone; none leaves the reasons."""
    a = StartVariance(0.004, 6.0, drift=0.01, drift_var=1e-5, drift_df=6.0, contrasts=7)
    b = StartVariance(0.001, 2.0, contrasts=2)
    both = cv.combine(a, b)
    assert (both.s2, both.df) == (pytest.approx(0.026 / 8), 8.0)
    assert (both.drift, both.drift_var, both.has_drift, both.contrasts) == (0.0, 0.0, False, 9)
    bad = StartVariance(reason="too few")
    assert (cv.combine(bad, b).s2, cv.combine(bad, b).df) == (0.001, 2.0)
    assert (cv.combine(a, None).s2, cv.combine(a, None).df) == (0.004, 6.0)
    assert not cv.combine(a, None).has_drift
    assert cv.combine(bad, StartVariance(reason="other")).reason == "too few; other"
    assert cv.combine(None, None).reason == cv.NO_TABLE


def test_attainment_with_one_start_per_side_has_no_interval() -> None:
    start = StartVariance(0.001, 8.0)
    one = cs.attainment([1.0] * 9, [0.0] * 9, (1, 3), start)
    assert (one.d, one.ci_low, one.p_value, one.reason) == (1.0, None, None, ONE_START)
    got = cs.attainment([1.0] * 27, [0.0] * 27, (3, 3), start)
    _, lo, hi = cs.newcombe(27, 27, 0, 27, start_var=0.001 * 2 / 3, start_df=8.0)
    assert (got.ci_low, got.ci_high) == (pytest.approx(lo), pytest.approx(hi)) and lo > 0.5


def test_acceptance_length_pools_its_starts_without_the_baseline() -> None:
    """Plain decoding has no acceptance length: the window's table takes the method of the
    most rounds as its baseline. Two drafters in 3 rounds, one with start factors f_r:
    s2 = var(ln f) / 2 on 2 df (as for a speed), for each campaign, combined on 4 df."""
    factors = (1.1, 0.9, 1.0)
    key = ("sglang", 1, "m", "chat", 256, 1, "closed")

    def campaign() -> dict:
        windows = {}
        for method, f in (("eagle", factors), ("ngram", (1.0, 1.0, 1.0))):
            cells = {(r, p): [2.0 * f[r - 1] * (1 + 0.1 * i)] for r in (1, 2, 3)
                     for i, p in enumerate(("p0", "p1", "p2"))}  # fmt: skip
            windows[(*key[:2], method, *key[3:])] = {"accept_length": cells}
        return windows

    values = {"A": campaign(), "B": campaign()}
    got = cv.ratio_variances(values, {"A": {}, "B": {}}, {"A": "ar", "B": "ar"}, "accept_length")
    start = got[cv.stratum(key)]
    s2 = float(np.var(np.log(factors), ddof=1)) / 2
    assert start.usable and (start.s2, start.df) == (pytest.approx(s2), pytest.approx(4.0))


def _rounds(*means: float) -> tuple:
    """A window's per-round means, rounds k paired with k."""
    return tuple(((k, k), m) for k, m in enumerate(means, 1))


def test_the_shift_averages_windows_per_round_and_tests_the_rounds_spread() -> None:
    """Two windows over 3 rounds: D_k = (-0.25, -0.25, -0.30), mean -0.26667, sd(D_k) =
    0.028868, se = sd / sqrt(3) = 0.016667, t = 16.0 on 2 df (t_0.975 = 4.3027): ratio
    exp(-0.26667) = 0.76593, CI exp(-0.26667 -/+ 0.071711) = [0.71293, 0.82287], p = 0.0038835.
    A window paired on rounds 1 and 2 only is left out: the 2 windows of 3 rounds are more."""
    got = cs.shift([
        _rounds(-0.2, -0.3, -0.25),
        _rounds(-0.3, -0.2, -0.35),
        _rounds(5.0, 5.0),
    ])  # fmt: skip
    assert got.speedup == pytest.approx(0.76593, abs=1e-5)
    assert (got.ci_low, got.ci_high) == (pytest.approx(0.71293, abs=1e-5),
                                         pytest.approx(0.82287, abs=1e-5))  # fmt: skip
    assert got.p_value == pytest.approx(0.0038835, rel=1e-4)
    assert got.df == 2 and got.n_prompts == 2  # n_prompts: the windows averaged


def test_a_shift_needs_two_rounds_and_a_spread() -> None:
    assert cs.shift([_rounds(-0.2), _rounds(-0.1)]) is None
    assert cs.shift([_rounds(-0.2, -0.2), _rounds(-0.1, -0.1)]) is None  # no spread


@pytest.mark.parametrize("z", [Z, 1.0, 2.5758293035489004, 5.0])
def test_wilson_is_the_twin_of_the_sql_macros(z: float) -> None:
    """One Wilson interval: analyze.compare.stats.wilson equals wilson.sql's wilson_lo and
    wilson_hi at any z (compare's p-value moves z), the edges 0 and n included."""
    con = duckdb.connect()
    con.execute(build.read_sql("wilson.sql"))
    sql = "SELECT wilson_lo($k, $n, $z), wilson_hi($k, $n, $z)"
    for n in (1, 7, 50):
        for k in sorted({0, 1, n // 2, n - 1, n}):
            got = con.execute(sql, {"k": k, "n": n, "z": z}).fetchone()
            assert cs.wilson(k, n, z) == pytest.approx(got, rel=1e-14, abs=1e-15), (k, n)
