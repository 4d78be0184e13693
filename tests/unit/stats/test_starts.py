"""stats.starts: the pooled start variance and the drift, on hand-built tables whose answer
is known exactly (no noise, or noise whose mean square is worked out by hand)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from specsweep.stats.starts import StartTable, start_variance

CONFIGS, ROUNDS, PROMPTS = ("a", "b", "c"), (1, 2, 3), 4


def table(y: np.ndarray, t: np.ndarray | None = None, configs=CONFIGS, rounds=ROUNDS):
    t = np.zeros(y.shape[:2]) if t is None else t
    return StartTable(y, t, tuple(configs), tuple(rounds))


def additive(extra: np.ndarray) -> np.ndarray:
    """Config, round and prompt main effects plus `extra` (C, R) on every prompt."""
    c, r = extra.shape
    return (np.arange(c)[:, None, None] * 0.3 + np.arange(r)[None, :, None] * 0.1
            + np.linspace(0, 1, PROMPTS)[None, None, :] + extra[:, :, None])  # fmt: skip


START = np.array([[0.05, -0.02, 0.01], [-0.03, 0.04, 0.02], [0.0, -0.01, -0.06]])


def test_start_effects_without_noise_are_the_interaction_variance() -> None:
    """Shared by every prompt and no noise: B = 0, A = sum(I^2) / ((C-1)(R-1)) with I the
    double-centred effects, on 4 df (9 starts - 3 configs - 3 rounds + 1)."""
    inter = START - START.mean(1, keepdims=True) - START.mean(0, keepdims=True) + START.mean()
    got = start_variance([table(additive(START))])
    assert got.usable and got.contrasts == 4 and not got.has_drift
    assert got.ms_noise == pytest.approx(0.0, abs=1e-20)
    assert got.s2 == pytest.approx(float((inter**2).sum()) / 4)
    assert got.df == pytest.approx(4.0)


def test_a_linear_drift_is_recovered_and_removed() -> None:
    """y = main effects + 2% per start along a counterbalanced order: beta = 0.02 exactly and
    nothing is left for the start variance (pooled to 0)."""
    t = np.array([[0, 5, 6], [1, 4, 7], [2, 3, 8]], dtype=float)  # abc, cba, abc
    got = start_variance([table(additive(0.02 * t), t)])
    assert got.drift == pytest.approx(0.02)
    assert got.s2 == 0.0 and got.pooled and got.drift_df == 3.0


def test_an_order_that_only_follows_config_and_round_shows_no_drift() -> None:
    """The plan's order in every round: positions are config + round effects, whose
    double-centring is 0 up to rounding; no drift is estimated (it cannot be told from the
    configurations), and rounding does not pass for one."""
    t = np.array([[0, 3, 6], [1, 4, 7], [2, 5, 8]], dtype=float)
    got = start_variance([table(additive(START), t)])
    assert not got.has_drift and got.drift == 0.0


def test_windows_share_their_starts_so_they_add_no_contrasts() -> None:
    """Two windows on the same 9 starts: still 4 contrasts, not 8."""
    got = start_variance([table(additive(START)), table(additive(START) + 1.0)])
    assert (got.contrasts, got.windows, got.starts) == (4, 2, 9)


def test_noise_is_subtracted_with_bancroft_and_satterthwaite() -> None:
    """Noise of known three-way mean square: s2 = A - B when A > B F_0.75(4, 8 P-ish), with
    Satterthwaite's df; below it, pooled to 0."""
    rng = np.random.default_rng(3)
    y = additive(START) + rng.normal(0, 0.01, (3, 3, PROMPTS))
    got = start_variance([table(y)])
    a, b = got.ms_start, got.ms_noise
    df_b = 4 * (PROMPTS - 1)
    assert a > b * stats.f.ppf(0.75, 4, df_b)
    assert got.s2 == pytest.approx(a - b)
    assert got.df == pytest.approx((a - b) ** 2 / (a**2 / 4 + b**2 / df_b))
    quiet = start_variance([table(additive(START * 0.01) + rng.normal(0, 0.05, (3, 3, 4)))])
    assert quiet.pooled and quiet.s2 == 0.0


@pytest.mark.parametrize(
    ("configs", "rounds", "why"),
    [(2, 2, "1 independent start contrast"), (3, 1, "one service start per configuration")],
)
def test_too_few_contrasts_give_no_estimate(configs: int, rounds: int, why: str) -> None:
    y = additive(np.zeros((configs, rounds)))
    got = start_variance([table(y, None, CONFIGS[:configs], ROUNDS[:rounds])])
    assert not got.usable and why in got.reason


def test_a_missing_start_counts_once() -> None:
    """Configurations of different windows: the starts of the union are counted once each."""
    small = table(additive(START[:2]), None, CONFIGS[:2])
    got = start_variance([small, table(additive(START))])
    starts = set(itertools.product(CONFIGS, ROUNDS))
    assert got.starts == len(starts) and got.contrasts == 4
