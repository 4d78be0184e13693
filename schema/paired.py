"""The paired speedup of a method over the baseline, and its bootstrap interval: defined once.

Both the report's `speedup` table (analyze.stats) and collect's best-of ranking
(collect.planning.ranking) call `paired_speedup`, so the two cannot disagree on the same rows.

On the prompts that the method's window and the baseline's window share:

    speedup         = median(all the method's values) / median(all the baseline's values)
    ci_low, ci_high = the (1 - level) / 2 and (1 + level) / 2 percentiles of that ratio over
                      n_boot paired bootstrap resamples of the PROMPTS (one index matrix for
                      both sides; every rep of a drawn prompt comes along)
    significant     = ci_low > 1 or ci_high < 1

Each call starts a fresh `numpy.random.default_rng(seed)`, so an interval depends only on its
own data, never on how many other comparisons were made before it. numpy only: schema is the
data contract every stage may import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

N_BOOT = 2000
SEED = 20260101
LEVEL = 0.95


@dataclass(frozen=True)
class Speedup:
    """One paired comparison: point estimate, interval, and how many prompts it rests on."""

    speedup: float
    ci_low: float
    ci_high: float
    n_prompts: int

    @property
    def significant(self) -> bool:
        """The interval excludes 1 (no change)."""
        return self.ci_low > 1 or self.ci_high < 1


def resample_counts(rng: np.random.Generator, n_prompts: int, n_boot: int) -> np.ndarray:
    """Draw the (n_boot, n_prompts) prompt-index matrix once and count the draws.

    Returns C with C[b, p] = how many times prompt p is in resample b (each row sums to
    n_prompts). Counting instead of gathering lets resamples with uneven reps stay vectorised.
    """
    idx = rng.integers(0, n_prompts, size=(n_boot, n_prompts))
    flat = idx + n_prompts * np.arange(n_boot)[:, None]
    return np.bincount(flat.ravel(), minlength=n_boot * n_prompts).reshape(n_boot, n_prompts)


def resampled_medians(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of every resample, without building the resamples.

    Value j appears counts[b, prompt_idx[j]] times in resample b, a multiset of N_b values.
    With the values sorted once, the median (as np.median) is the mean of the elements at
    0-based ranks floor((N_b - 1) / 2) and floor(N_b / 2), found on the cumulative weights.
    """
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    cumulative = np.cumsum(counts[:, prompt_idx[order]], axis=1)
    total = cumulative[:, -1]
    lower = _position_of_rank(cumulative, (total - 1) // 2)
    upper = _position_of_rank(cumulative, total // 2)
    return (sorted_values[lower] + sorted_values[upper]) / 2


def _position_of_rank(cumulative: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Index of the sorted value holding 0-based `rank`: the first j with cumulative[j] > rank."""
    return (cumulative <= rank[:, None]).sum(axis=1)


def _flatten(by_prompt: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt value lists -> (all values, the prompt index of each value)."""
    arrays = [np.asarray(v, dtype=float) for v in by_prompt]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every prompt needs at least one value")
    sizes = [a.size for a in arrays]
    return np.concatenate(arrays), np.repeat(np.arange(len(arrays)), sizes)


def bootstrap_ratio_of_medians(
    m_by_prompt: Sequence[Sequence[float]],
    b_by_prompt: Sequence[Sequence[float]],
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float]:
    """Point estimate and paired percentile-bootstrap CI of median(M) / median(B).

    m_by_prompt[p] and b_by_prompt[p] hold the values (all reps) of the same prompt p.
    point = median(all M values) / median(all B values); (lo, hi) = the (1 - level) / 2 and
    (1 + level) / 2 quantiles of the ratio over n_boot resamples of the prompts.
    """
    if len(m_by_prompt) != len(b_by_prompt):
        raise ValueError("method and baseline must cover the same prompts")
    m_values, m_idx = _flatten(m_by_prompt)
    b_values, b_idx = _flatten(b_by_prompt)
    point = np.median(m_values) / np.median(b_values)
    counts = resample_counts(np.random.default_rng(seed), len(m_by_prompt), n_boot)
    ratios = resampled_medians(m_values, m_idx, counts) / resampled_medians(b_values, b_idx, counts)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(point), float(lo), float(hi)


def paired_speedup(
    method: Mapping[str, Sequence[float]],
    baseline: Mapping[str, Sequence[float]],
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> Speedup | None:
    """Speedup of method over baseline on the prompts both measured (prompt_id -> values).

    Prompts only one side measured are left out (that is what makes it paired); None when
    the two share no prompt.
    """
    prompts = sorted(method.keys() & baseline.keys())
    if not prompts:
        return None
    point, lo, hi = bootstrap_ratio_of_medians(
        [method[p] for p in prompts], [baseline[p] for p in prompts], n_boot, seed, level
    )
    return Speedup(point, lo, hi, len(prompts))
