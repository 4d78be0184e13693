"""stats.dist: each quantile and tail probability equals scipy.stats' on a grid of levels
and degrees of freedom, those the intervals use (df from 1 to thousands, and infinite)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from specsweep.stats import dist

LEVELS = [0.005, 0.025, 0.05, 0.5, 0.9, 0.95, 0.975, 0.995]
DFS = [1, 1.5, 2, 3, 4.7, 10, 30, 1000, 1e6]


@pytest.mark.parametrize("df", [*DFS, math.inf])
def test_t(df: float) -> None:
    q = np.array(LEVELS)
    assert np.allclose(dist.t_ppf(q, df), stats.t.ppf(q, df), rtol=1e-12)
    assert np.allclose(dist.t_isf(q, df), stats.t.isf(q, df), rtol=1e-12)
    x = np.array([-8.0, -2.0, -0.1, 0.0, 0.3, 1.96, 4.0, 40.0])
    assert np.allclose(dist.t_sf(x, df), stats.t.sf(x, df), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("df", DFS)
def test_f_and_chi2(df: float) -> None:
    q = np.array(LEVELS)
    for other in (1, 2.5, 7, 100):
        assert np.allclose(dist.f_ppf(q, df, other), stats.f.ppf(q, df, other), rtol=1e-10)
    assert np.allclose(dist.chi2_ppf(q, df), stats.chi2.ppf(q, df), rtol=1e-10)


def test_normal() -> None:
    q = np.array(LEVELS)
    assert np.allclose(dist.norm_ppf(q), stats.norm.ppf(q), rtol=1e-14)
    x = np.array([-40.0, -3.0, 0.0, 1.0, 8.0, 37.0])
    assert np.allclose(dist.norm_sf(x), stats.norm.sf(x), rtol=1e-12, atol=0)


def test_root() -> None:
    assert dist.root(lambda x: x * x - 2, 0.0, 2.0) == pytest.approx(math.sqrt(2), abs=1e-11)
    with pytest.raises(ValueError):
        dist.root(lambda x: x * x + 1, 0.0, 2.0)  # no sign change
