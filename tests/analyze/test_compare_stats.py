"""The formulas of analyze.compare.stats on hand-built figures, each expected value
computed here from the textbook formula (Wilson's score interval written out), never by the
code under test: Newcombe's hybrid score interval on his worked example (Newcombe 1998,
Stat Med 17:873, Table II: 56/70 vs 48/80 -> 0.2000, 95% CI 0.0524 to 0.3339), its non-zero
width where one side never meets the SLO, its p-value by inversion, the A/A start variance
added to it, attainment's A/A start variance, and the drift floor."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from analyze.compare import stats as cs

Z = 1.959963984540054  # the standard normal's 97.5th percentile


def _wilson(x: int, n: int, z: float = Z) -> tuple[float, float]:
    """Wilson (1927): (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _hybrid(
    x1: int, n1: int, x2: int, n2: int, z: float = Z, s2: float = 0.0
) -> tuple[float, float, float]:
    """Newcombe's method 10 by hand: d = p1 - p2, d -/+ sqrt of the squared distances."""
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = _wilson(x1, n1, z), _wilson(x2, n2, z)
    d = p1 - p2
    return (
        d,
        d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2 + z * z * s2),
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2 + z * z * s2),
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


def test_the_aa_start_variance_widens_the_interval() -> None:
    d, lo, hi = _hybrid(56, 70, 48, 80, s2=0.006)
    assert cs.newcombe(56, 70, 48, 80, service_var=0.006) == (
        pytest.approx(d),
        pytest.approx(lo),
        pytest.approx(hi),
    )
    assert lo < 0 and cs.newcombe_p(56, 70, 48, 80, 0.006) > 0.05  # 0 inside: p > 0.05


def test_attainment_start_variance_from_aa_windows() -> None:
    """Two A/A window runs: control 8/10 vs baseline 5/10, and 6/10 vs 6/10; each term is
    (p_c - p_b)^2 - p_c(1 - p_c)/(n - 1) - p_b(1 - p_b)/(n - 1)."""

    def cells(*met: list[int]) -> dict:
        return {(run, "p0"): m for run, m in enumerate(met, 1)}

    control = cells([1] * 8 + [0] * 2, [1] * 6 + [0] * 4)
    baseline = cells([1] * 5 + [0] * 5, [1] * 6 + [0] * 4)
    t1 = 0.3**2 - 0.8 * 0.2 / 9 - 0.5 * 0.5 / 9
    t2 = 0.0 - 2 * 0.6 * 0.4 / 9
    noise = cs.share_noise([(control, baseline)])
    assert noise == cs.Noise(pytest.approx(max(0.0, (t1 + t2) / 2)), 2.0)
    assert cs.share_noise([]) is None


def test_the_drift_floor() -> None:
    assert not cs.beyond_floor("ratio", 0.85, None) and not cs.beyond_floor("ratio", 1.2, None)
    assert cs.beyond_floor("ratio", 0.7, None) and cs.beyond_floor("ratio", 1.3, None)
    assert cs.beyond_floor("difference", 1.0, -0.15)
    assert not cs.beyond_floor("difference", 1.0, 0.05)
