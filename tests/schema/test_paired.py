"""schema.paired.paired_speedup: pairing by prompt, and the significance rule."""

from __future__ import annotations

import numpy as np
import pytest

from schema import paired
from schema.paired import Speedup, paired_speedup


def test_only_shared_prompts_count() -> None:
    """p9 (method only) and p8 (baseline only) are left out: on p0, p1 the method's median
    is 30, the baseline's 15: 2.0x; every resample of a constant 2x pairing gives 2.0."""
    method = {"p0": [20.0], "p1": [40.0], "p9": [1000.0]}
    base = {"p0": [10.0], "p1": [20.0], "p8": [1.0]}
    got = paired_speedup(method, base)
    assert got is not None and got.n_prompts == 2
    assert got.speedup == pytest.approx(2.0)
    assert got.ci_low == pytest.approx(2.0) and got.ci_high == pytest.approx(2.0)
    assert got.significant


def test_no_shared_prompt_is_none() -> None:
    assert paired_speedup({"p0": [1.0]}, {"p1": [1.0]}) is None


def test_significant_when_the_interval_excludes_one() -> None:
    assert Speedup(1.2, 1.01, 1.4, 5).significant
    assert Speedup(0.8, 0.7, 0.99, 5).significant
    assert not Speedup(1.2, 0.95, 1.4, 5).significant


def _cumsum_medians(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The oracle: resampled_medians before issue 12, cumulative counts over every sorted
    value (an n_boot x n_values matrix): value j's weight in resample b is
    counts[b, prompt_idx[j]]; the median takes the sorted values holding positions
    floor((N_b - 1) / 2) and floor(N_b / 2)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    cumulative = np.cumsum(counts[:, prompt_idx[order]], axis=1)
    total = cumulative[:, -1]
    lower = (cumulative <= ((total - 1) // 2)[:, None]).sum(axis=1)
    upper = (cumulative <= (total // 2)[:, None]).sum(axis=1)
    return (sorted_values[lower] + sorted_values[upper]) / 2


def _cumsum_bootstrap(m: list[np.ndarray], b: list[np.ndarray], seed: int) -> tuple:
    """The oracle: bootstrap_ratio_of_medians before issue 12."""
    counts = paired.resample_counts(np.random.default_rng(seed), len(m), paired.N_BOOT)
    idx = [np.repeat(np.arange(len(s)), [len(v) for v in s]) for s in (m, b)]
    ratios = _cumsum_medians(np.concatenate(m), idx[0], counts) / _cumsum_medians(
        np.concatenate(b), idx[1], counts)  # fmt: skip
    point = np.median(np.concatenate(m)) / np.median(np.concatenate(b))
    tail = (1 - paired.LEVEL) / 2 * 100  # 2.4999999999999978, as the code before
    return (float(point), *(float(x) for x in np.percentile(ratios, [tail, 100 - tail])))


def _side(rng: np.random.Generator, n_prompts: int) -> list[np.ndarray]:
    """Uneven reps (1 to 6 per prompt), values rounded to 0-2 decimals so that ties occur."""
    decimals = int(rng.integers(0, 3))
    return [np.round(rng.normal(20, 4, size=rng.integers(1, 7)), decimals)
            for _ in range(n_prompts)]  # fmt: skip


@pytest.fixture(
    params=[(10**9, 7, 0), (0, 0, paired.DENSE_LIMIT), (0, 0, 24), (0, 0, 0)],
    ids=["cumsum", "table", "grid", "sorted keys"],
)
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """Run a test with each way of finding a resample's median: cumulative counts over every
    value (few reps), 7 cells at a time (several chunks of resamples); in rank space with a
    table of every rank; with a table of every step-th rank (24 cells: steps of several
    ranks, several buckets) and a binary search between; with a binary search in the sorted
    keys only (0 cells: one bucket)."""
    few_reps, cumsum_cells, dense_cells = request.param
    monkeypatch.setattr(paired, "FEW_REPS", few_reps)
    monkeypatch.setattr(paired, "CUMSUM_CELLS", cumsum_cells)
    monkeypatch.setattr(paired, "DENSE_LIMIT", dense_cells)
    return request.param


def test_rank_space_medians_equal_the_cumsum_medians(counting: tuple) -> None:
    """Bit for bit, on 300 random cases: 1 to 9 prompts (1 included), uneven reps, ties,
    1 to 60 resamples."""
    rng = np.random.default_rng(12)
    for _ in range(300):
        by_prompt = _side(rng, int(rng.integers(1, 10)))
        values = np.concatenate(by_prompt)
        prompt_idx = np.repeat(np.arange(len(by_prompt)), [len(v) for v in by_prompt])
        counts = paired.resample_counts(rng, len(by_prompt), int(rng.integers(1, 61)))
        got = paired.resampled_medians(values, prompt_idx, counts)
        assert np.array_equal(got, _cumsum_medians(values, prompt_idx, counts))


def test_rank_space_medians_by_hand(counting: tuple) -> None:
    """Prompt 0 holds 1, 5, 5; prompt 1 holds 2. Resample (0, 0): 1 1 5 5 5 5 -> 5;
    (0, 1): 1 2 5 5 -> 3.5; (1, 1): 2 2 -> 2. One prompt of reps 3, 1, 2: every resample is
    that prompt, median 2. All values equal: that value."""
    values, prompt_idx = np.array([5.0, 1.0, 2.0, 5.0]), np.array([0, 0, 1, 0])
    counts = np.array([[2, 0], [1, 1], [0, 2]])
    assert paired.resampled_medians(values, prompt_idx, counts).tolist() == [5.0, 3.5, 2.0]
    one = paired.resampled_medians(
        np.array([3.0, 1.0, 2.0]), np.zeros(3, int), np.ones((4, 1), int)
    )
    assert one.tolist() == [2.0] * 4
    flat = paired.resampled_medians(
        np.full(5, 7.0), np.array([0, 0, 1, 2, 2]), counts[:, [0, 1, 1]]
    )
    assert flat.tolist() == [7.0] * 3


def test_bootstrap_equals_the_cumsum_bootstrap(counting: tuple) -> None:
    """point, ci_low, ci_high identical to the algorithm before issue 12 (same seed), on 40
    random paired cases including single-prompt ones."""
    rng = np.random.default_rng(21)
    for case in range(40):
        n_prompts = 1 if case % 8 == 0 else int(rng.integers(2, 16))
        m, b = _side(rng, n_prompts), _side(rng, n_prompts)
        seed = int(rng.integers(0, 2**31))
        assert paired.bootstrap_ratio_of_medians(m, b, seed=seed) == _cumsum_bootstrap(m, b, seed)


def test_flat_form_needs_every_prompt_on_both_sides() -> None:
    """Prompt 1 has no baseline value: not a paired comparison."""
    with pytest.raises(ValueError):
        paired.flat_ratio_of_medians(np.array([1.0, 2.0]), np.array([0, 1]),
                                     np.array([1.0]), np.array([0]))  # fmt: skip


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 0.99, 1.0])
def test_resampled_quantiles_equal_np_quantile_of_each_built_resample(q: float) -> None:
    """Each resample built as a list (every value of a drawn prompt, once per draw) and
    handed to np.quantile: the same figure, for uneven reps, ties and a small chunk size."""
    rng = np.random.default_rng(3)
    by_prompt = [rng.integers(0, 6, size=n).astype(float) for n in (1, 4, 2, 7, 3)]
    values = np.concatenate(by_prompt)
    idx = np.repeat(np.arange(5), [v.size for v in by_prompt])
    counts = paired.resample_counts(rng, 5, 40)
    want = [np.quantile(np.concatenate([np.repeat(v, c) for v, c in zip(by_prompt, row)]), q)
            for row in counts]
    assert paired.resampled_quantiles(values, idx, counts, q) == pytest.approx(want)
    small = paired.CUMSUM_CELLS
    try:
        paired.CUMSUM_CELLS = values.size * 3  # three resamples per chunk
        assert paired.resampled_quantiles(values, idx, counts, q) == pytest.approx(want)
    finally:
        paired.CUMSUM_CELLS = small


def test_a_tail_change_the_median_does_not_see() -> None:
    """Ten prompts at 1.0 s in A; in B the slowest two take 3x as long: the median ratio is
    1, the p90 ratio near 3 (np.quantile over the pooled values). Not significant: a tenth
    of the resamples draw neither slow prompt, so the interval reaches down to 1."""
    a = {f"p{i}": [1.0 + 0.01 * i] for i in range(10)}
    b = {p: [v[0] * (3 if p in ("p8", "p9") else 1)] for p, v in a.items()}
    assert paired_speedup(b, a).speedup == pytest.approx(1.0)
    tail = paired.paired_quantile_ratio(b, a, 0.9)
    want = np.quantile([v[0] for v in b.values()], 0.9) / np.quantile(
        [v[0] for v in a.values()], 0.9)
    assert tail.speedup == pytest.approx(want) and tail.speedup > 2.5 and tail.n_prompts == 10
    assert tail.ci_low == pytest.approx(1.0, abs=0.02) and tail.ci_high >= tail.speedup
    assert paired.paired_quantile_ratio({"p0": [1.0]}, {"p1": [1.0]}, 0.9) is None
