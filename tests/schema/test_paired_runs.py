"""schema.paired over several runs: the runs-then-prompts (two-stage cluster) bootstrap, the
within-run bootstrap, and the share of the interval's variance that comes from runs."""

from __future__ import annotations

import numpy as np
import pytest

from schema import paired


def _flat(sides: list[dict[tuple[int, int], list[float]]]) -> list[np.ndarray]:
    """{(run, prompt): values} per side -> values, run, prompt arrays of method then baseline."""
    out = []
    for side in sides:
        keys = [k for k, v in side.items() for _ in v]
        out += [np.array([x for v in side.values() for x in v], dtype=float),
                np.array([r for r, _ in keys]), np.array([p for _, p in keys])]  # fmt: skip
    return out


def _runs(n_runs: int, n_prompts: int, factors: list[float], noise: float, seed: int = 7):
    """Baseline b_p * noise in every run; the method factor[r] * 2 * b_p * noise in run r; 2
    reps. Returns (method, baseline) as {(run, prompt): values}."""
    rng = np.random.default_rng(seed)
    level = rng.uniform(8, 12, size=n_prompts)
    base = {(r, p): list(level[p] * rng.lognormal(0, noise, 2))
            for r in range(n_runs) for p in range(n_prompts)}  # fmt: skip
    method = {(r, p): list(2 * factors[r] * level[p] * rng.lognormal(0, noise, 2))
              for r in range(n_runs) for p in range(n_prompts)}  # fmt: skip
    return method, base


def test_run_counts_draw_whole_runs_then_prompts() -> None:
    """Every resample holds n_runs run copies of n_prompts draws: each run's block sums to a
    multiple of n_prompts, the row to n_runs * n_prompts; with 3 runs some resample leaves a
    run out and some takes one run twice."""
    counts = paired.run_counts(np.random.default_rng(1), n_runs=3, n_prompts=5, n_boot=400)
    blocks = counts.reshape(400, 3, 5).sum(axis=2)
    assert counts.shape == (400, 15) and (counts.sum(axis=1) == 15).all()
    assert (blocks % 5 == 0).all()
    assert (blocks == 0).any() and (blocks == 10).any()


def test_one_run_is_the_prompt_bootstrap_itself() -> None:
    """Same floats as flat_ratio_of_medians, no spread columns."""
    m_v, m_r, m_p, b_v, b_r, b_p = _flat(list(_runs(1, 12, [1.0], 0.2)))
    got = paired.flat_runs_ratio_of_medians(m_v, m_r, m_p, b_v, b_r, b_p)
    assert got[:3] == paired.flat_ratio_of_medians(m_v, m_p, b_v, b_p)
    assert got[3] == paired.RunSpread(1, None, None, None)


def test_per_run_speedups_by_hand() -> None:
    """Baseline 10..15 on prompts 0..5 in both runs; the method 2x in run 0, 3x in run 1.
    Per run: 2 * 12.5 / 12.5 = 2.0 and 3.0. Pooled: the method's 12 values 20 22 24 26 28 30
    30 33 36 39 42 45 have median 30, the baseline's 12.5: 2.4."""
    base = {(r, p): [10.0 + p] for r in range(2) for p in range(6)}
    method = {(r, p): [(2.0 + r) * (10.0 + p)] for r in range(2) for p in range(6)}
    point, lo, hi, spread = paired.flat_runs_ratio_of_medians(*_flat([method, base]))
    assert point == pytest.approx(2.4)
    assert (spread.n_runs, spread.run_speedup_min, spread.run_speedup_max) == (2, 2.0, 3.0)
    assert lo <= point <= hi


@pytest.mark.parametrize("factors", [[1.0, 1.5], [1.0, 1.5, 1.0]])
def test_runs_that_differ_widen_the_interval(factors: list[float]) -> None:
    """The method is 1.5x faster in one run (the baseline is not): the runs-then-prompts
    interval is wider than the prompts-only one (every run's reps pooled under its prompt),
    reaches towards both runs' levels, and nearly all its variance is between runs."""
    m_v, m_r, m_p, b_v, b_r, b_p = _flat(list(_runs(len(factors), 20, factors, 0.05)))
    point, lo, hi, spread = paired.flat_runs_ratio_of_medians(m_v, m_r, m_p, b_v, b_r, b_p)
    _, p_lo, p_hi = paired.flat_ratio_of_medians(m_v, m_p, b_v, b_p)
    assert hi - lo > 2 * (p_hi - p_lo)
    per_run = [np.median(m_v[m_r == r]) / np.median(b_v[b_r == r]) for r in range(len(factors))]
    assert spread.run_speedup_min == pytest.approx(min(per_run))
    assert spread.run_speedup_max == pytest.approx(max(per_run))
    assert spread.run_speedup_max / spread.run_speedup_min == pytest.approx(1.5, rel=0.05)
    assert lo < spread.run_speedup_min * 1.05 and hi > spread.run_speedup_max * 0.95
    assert spread.between_run_share > 0.9


def test_runs_that_agree_give_a_small_share() -> None:
    """Run 1 repeats run 0's values exactly: drawing a run twice or both is the same data,
    so the runs-then-prompts variance is the within-run variance (share about 0). Runs that
    agree only up to noise land between that and runs that differ."""
    method, base = _runs(1, 20, [1.0], 0.2)
    copy = [{(r, p): v for (_, p), v in side.items() for r in range(3)} for side in (method, base)]
    point, lo, hi, spread = paired.flat_runs_ratio_of_medians(*_flat(copy))
    assert spread.between_run_share < 0.1
    assert spread.run_speedup_min == spread.run_speedup_max == pytest.approx(point)
    noisy = paired.flat_runs_ratio_of_medians(*_flat(list(_runs(3, 20, [1.0] * 3, 0.2))))[3]
    differ = paired.flat_runs_ratio_of_medians(*_flat(list(_runs(3, 20, [1, 1.5, 1], 0.2))))[3]
    assert noisy.between_run_share < differ.between_run_share


def test_share_by_hand() -> None:
    """Method of moments: per-run speedups 1 and 4 (ln: 0 and ln 4, var with ddof 1 =
    (ln 4)^2 / 2) against within-run variances (ln 2)^2 and 0 (mean (ln 2)^2 / 2):
    tau2 = 2 (ln 2)^2 - (ln 2)^2 / 2 = 1.5 (ln 2)^2, share = 1.5 / 2 = 0.75."""
    ln2 = np.log(2.0)
    assert paired.between_run_share(np.array([1.0, 4.0]),
                                    np.array([ln2**2, 0.0])) == pytest.approx(0.75)
    # runs that differ less than their own noise: tau2 clipped to 0
    assert paired.between_run_share(np.array([1.0, 1.1]), np.array([0.5, 0.5])) == 0.0
    assert paired.between_run_share(np.full(3, 2.0), np.zeros(3)) == 0.0  # nothing varies
    assert paired.between_run_share(np.array([1.0, 2.0]), np.zeros(2)) == 1.0


def test_runs_that_agree_up_to_noise_give_about_zero() -> None:
    """Runs drawn from one distribution: the share's median over 40 seeds is 0 (tau2 is
    clipped to 0 whenever the runs differ less than their noise predicts)."""
    shares = [paired.flat_runs_ratio_of_medians(
        *_flat(list(_runs(3, 20, [1.0] * 3, 0.2, seed=s))), n_boot=300)[3].between_run_share
        for s in range(40)]
    assert np.median(shares) < 0.1 and np.mean(shares) < 0.25


def test_every_prompt_in_every_run_on_both_sides() -> None:
    """Prompt 1 has no method value in run 1: not a paired multi-run comparison."""
    method = {(0, 0): [2.0], (0, 1): [2.0], (1, 0): [2.0]}
    base = {(r, p): [1.0] for r in range(2) for p in range(2)}
    with pytest.raises(ValueError):
        paired.flat_runs_ratio_of_medians(*_flat([method, base]))
