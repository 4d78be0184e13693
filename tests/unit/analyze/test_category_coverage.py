"""Calibration at a category's size: the t interval of stats.paired keeps its coverage at
the prompt counts between the grid of tests/unit/stats/test_paired_coverage.py (3, 5, 8, 30),
and above 10, where the categories of category_speedup and category_pooled fall (MT-Bench: 10
prompts a category; the GPU plans' ShareGPT sweep: 32 prompts split into code and chat), for
the speedup and for the acceptance length.

Speedup: the grid's model (tests/unit/stats/test_paired_coverage.simulate_cells: log-normal speeds,
prompts of sd 0.3 in ln, a true speedup of 1.0 or 1.3 varying by prompt with sd 0.1, noise sd
0.1 between 3 repetitions; 3 runs with service starts of sd 0.03) at 4, 6, 7, 9, 10, 16, 25
and 32 prompts, on the comparison's own runs (interval without a pooled start variance: with
one, tests/coverage/test_start_coverage.py covers the design). One run gives no interval
(issue 36), so every cell has 3.

Acceptance: each prompt's draft acceptance rate a ~ Beta(alpha, beta), a chain drafter of K = 4
tokens, whose expected acceptance length is L(a) = (1 - a^(K+1)) / (1 - a); a request's
ln acceptance length is ln L(a) plus noise of sd 0.08, in each of 3 runs. The estimand is the
population's geometric mean exp(E ln L(a)), computed on a 200 000-point quantile grid of the
Beta. Three shapes: Beta(4, 2) (most drafts accepted), Beta(1.5, 4) (few; skewed to the
right) and Beta(8, 1.5) (almost all; skewed to the left). Measured (1000 campaigns a cell,
these seeds, 2026-12-05): acceptance 93.3-95.9% for Beta(4, 2), 90.9-94.7% for Beta(1.5, 4)
and 93.1-94.7% for Beta(8, 1.5) at 3-32 prompts (under 95% for skewed shapes, as the
statistics page found for skewed prompt effects, docs/measurements/2026-12-04-statistics.md).
Asserted: 92.5-97.5% for the speedup as the grid does, 90.5-97.5% for acceptance. About 15 s
on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specsweep.stats.paired import interval
from tests.unit.stats.test_paired_coverage import simulate_cells

N_SIM = 1000
K = 4


def accept_length(a: np.ndarray) -> np.ndarray:
    """Expected tokens per verify step of a chain of K drafts accepted each with rate a."""
    return (1 - a ** (K + 1)) / (1 - a)


def geometric_truth(alpha: float, beta: float) -> float:
    """exp(E ln L(a)) for a ~ Beta(alpha, beta), on a fine quantile grid (deterministic)."""
    q = (np.arange(200_000) + 0.5) / 200_000
    return float(np.exp(np.log(accept_length(stats.beta.ppf(q, alpha, beta))).mean()))


@pytest.mark.parametrize("n_prompts", [4, 6, 7, 9, 10, 16, 25, 32])
@pytest.mark.parametrize(("true", "n_runs"), [(1.0, 3), (1.3, 3)])
def test_speedup_interval_covers_at_category_sizes(
    n_prompts: int, true: float, n_runs: int
) -> None:
    rng = np.random.default_rng([27, n_prompts, n_runs, int(true * 10)])
    held = 0
    for _ in range(N_SIM):
        start_sd = 0.03 if n_runs > 1 else 0.0
        got = interval(simulate_cells(rng, true, n_prompts, n_runs, 0.1, start_sd))
        held += got.ci_low <= true <= got.ci_high
    assert 0.925 <= held / N_SIM <= 0.975, held / N_SIM


@pytest.mark.parametrize("n_prompts", [3, 5, 8, 9, 10, 16, 25, 32])
@pytest.mark.parametrize("shape", [(4.0, 2.0), (1.5, 4.0), (8.0, 1.5)])
def test_acceptance_interval_covers_at_category_sizes(
    n_prompts: int, shape: tuple[float, float]
) -> None:
    truth = geometric_truth(*shape)
    rng = np.random.default_rng([27, n_prompts, int(shape[0] * 10), int(shape[1] * 10)])
    held = 0
    for _ in range(N_SIM):
        a = rng.beta(*shape, n_prompts)
        got = interval(np.log(accept_length(a))[None, :] + rng.normal(0, 0.08, (3, n_prompts)))
        held += got.ci_low <= truth <= got.ci_high
    assert 0.905 <= held / N_SIM <= 0.975, held / N_SIM


def test_the_check_can_fail() -> None:
    """A wrong estimand (the arithmetic mean acceptance length of Beta(1.5, 4), above the
    geometric one) is missed far more often than 5%: the check is sensitive."""
    q = (np.arange(200_000) + 0.5) / 200_000
    arithmetic = float(accept_length(stats.beta.ppf(q, 1.5, 4.0)).mean())
    rng = np.random.default_rng(27)
    held = 0
    for _ in range(N_SIM):
        a = rng.beta(1.5, 4.0, 10)
        got = interval(np.log(accept_length(a))[None, :] + rng.normal(0, 0.08, (3, 10)))
        held += got.ci_low <= arithmetic <= got.ci_high
    assert held / N_SIM < 0.9
