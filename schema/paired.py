"""The paired speedup of a method over the baseline, and its bootstrap interval: defined once.

Both the report's `speedup` table (analyze.stats) and collect's best-of ranking
(collect.planning.ranking) call `paired_speedup`, so the two cannot disagree on the same rows.

On the prompts that the method's window and the baseline's window share:

    speedup         = median(all the method's values) / median(all the baseline's values)
    ci_low, ci_high = the (1 - level) / 2 and (1 + level) / 2 percentiles of that ratio over
                      n_boot paired bootstrap resamples of the PROMPTS (one index matrix for
                      both sides; every rep of a drawn prompt comes along)
    significant     = ci_low > 1 or ci_high < 1

With several runs of a campaign (run ordinals 0..n_runs-1, flat_runs_ratio_of_medians), the
interval is a two-stage cluster bootstrap: each resample draws n_runs runs with replacement,
then n_prompts prompts with replacement within each drawn run copy (run_counts); one count
matrix over the (run, prompt) clusters serves both sides (paired). Only prompts present in
every run on both sides are paired (the caller's rows: analyze's speedup_pairs view). With
one run it is exactly the prompt bootstrap above (same draws, same floats). How much of the
spread is between runs, by the method of moments (as a random-effects meta-analysis's
DerSimonian-Laird estimate), on s_r = ln(speedup of run r alone) and v_r = the variance of
ln(ratio) over a prompt bootstrap of run r alone:

    tau2              = max(0, var(s_r, ddof=1) - mean(v_r))   (between-run variance)
    between_run_share = tau2 / (tau2 + mean(v_r))              (0 when tau2 + mean(v_r) = 0)

the share of one run's speedup variance that comes from runs: about 0 (half the time exactly
0) when runs agree up to prompt noise, near 1 when they disagree beyond it. With 2 or 3 runs
var(s_r) rests on 1 or 2 degrees of freedom: a rough figure, which the report says. Cost:
about 2 x n_runs times the one-run bootstrap (3 runs of 1000 prompts x 20 reps, about 3.5 s a
comparison against 0.3 s for one run).

Each call starts a fresh `numpy.random.default_rng(seed)`, so an interval depends only on its
own data, never on how many other comparisons were made before it. What is resampled is the
prompts: one (n_boot, n_prompts) matrix of draw counts; a resample's median is found in rank
space (resampled_medians), so the cost is O(n_boot * n_prompts * log(n_values)) whatever the
number of reps per prompt (with at most FEW_REPS reps per prompt on average, cumulative counts
over every value, O(n_boot * n_values), in chunks of bounded size: cheaper there). numpy
only: schema is the data contract every stage may import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
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


# few reps per prompt (at most FEW_REPS on average): cumulative counts over every sorted
# value, O(n_boot * n_values), are cheaper than the binary search in rank space,
# O(n_boot * n_prompts * log(n_values)); done CUMSUM_CELLS at a time (64 MiB of int64)
FEW_REPS = 4
CUMSUM_CELLS = 1 << 23


def resampled_medians(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of every resample, without building the resamples.

    Value j appears counts[b, prompt_idx[j]] times in resample b, a multiset of N_b values.
    Its median (as np.median) is the mean of the elements at 0-based positions
    floor((N_b - 1) / 2) and floor(N_b / 2). With the distinct values u_0 < u_1 < ... ranked,
    position k holds u_r for the least r with F_b(r) > k, where
    F_b(r) = sum_p counts[b, p] * #(values of prompt p with rank <= r); r is found by a binary
    search run for all resamples at once (rank space). The upper position holds the same
    rank when F_b(r) > floor(N_b / 2), else the next rank any drawn prompt holds. Cost
    O(n_boot * n_prompts * log(n_values)) (a log(n_values) more per step within a grid
    bucket, only past DENSE_LIMIT), whatever the number of reps per prompt; with few reps,
    F_b at every value instead (_cumsum_medians). Both give the same floats.
    """
    if values.size <= FEW_REPS * counts.shape[1]:
        return _cumsum_medians(values, prompt_idx, counts)
    distinct, rank = np.unique(values, return_inverse=True)
    draws = _Draws(counts, prompt_idx.astype(np.int64), rank.ravel(), distinct.size)
    total = counts @ draws.size
    lower = draws.rank_at((total - 1) // 2)
    held = draws.held(lower)
    upper = np.where(draws.below(held) > total // 2, lower, draws.next_rank(held))
    return (distinct[lower] + distinct[upper]) / 2


def _cumulative(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray
                ) -> Iterator[tuple[np.ndarray, slice, np.ndarray]]:
    """(the sorted values, a slice of resamples, their cumulative counts over the sorted
    values), CUMSUM_CELLS cells at a time: the sorted value holding position k of resample b
    is the first j with cumulative[b, j] > k."""
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_prompt = values[order], prompt_idx[order]
    rows = max(1, CUMSUM_CELLS // values.size)
    for first in range(0, counts.shape[0], rows):
        part = slice(first, first + rows)
        yield sorted_values, part, np.cumsum(counts[part, sorted_prompt], axis=1)


def _cumsum_medians(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """resampled_medians by cumulative counts over the sorted values (_cumulative)."""
    out = np.empty(counts.shape[0])
    for sorted_values, part, cumulative in _cumulative(values, prompt_idx, counts):
        total = cumulative[:, -1]
        lower = (cumulative <= ((total - 1) // 2)[:, None]).sum(axis=1)
        upper = (cumulative <= (total // 2)[:, None]).sum(axis=1)
        out[part] = (sorted_values[lower] + sorted_values[upper]) / 2
    return out


# held(p, r) = #(values of prompt p with rank <= r) is looked up in a (n_prompts x n_grid)
# table of at most this many cells (16 MiB of int32) at every step-th rank, the grid; between
# grid ranks (step > 1: many prompts x many distinct values) a binary search in sorted keys
DENSE_LIMIT = 1 << 22


class _Draws:
    """A count matrix and one side's (prompt, rank) pairs, for counting below a rank."""

    def __init__(self, counts: np.ndarray, prompt: np.ndarray, rank: np.ndarray, n_ranks: int):
        n_prompts = counts.shape[1]
        self.counts, self.n_ranks = counts, n_ranks
        self.size = np.bincount(prompt, minlength=n_prompts)  # values per prompt
        self.offset = np.arange(n_prompts, dtype=np.int64) * n_ranks
        self.keys = np.sort(prompt * n_ranks + rank)  # (prompt, rank) flattened, sorted
        self.start = np.searchsorted(self.keys, self.offset)  # prompt p's first key
        self.step = -(-n_prompts * n_ranks // max(DENSE_LIMIT, n_prompts))  # ceil
        n_grid = -(-n_ranks // self.step)
        # grid point g: rank min((g + 1) * step - 1, n_ranks - 1), the last rank of bucket g
        self.grid = np.minimum(np.arange(1, n_grid + 1) * self.step - 1, n_ranks - 1)
        hist = np.bincount(prompt * n_grid + rank // self.step, minlength=n_prompts * n_grid)
        self.table = np.cumsum(hist.reshape(n_prompts, n_grid), axis=1, dtype=np.int32).ravel()
        self.grid_offset = np.arange(n_prompts, dtype=np.int64) * n_grid

    def held(self, rank: np.ndarray) -> np.ndarray:
        """(n_boot, n_prompts): #(values of prompt p with rank <= rank[b])."""
        if self.step == 1:  # every rank is a grid point
            return self.table[self.grid_offset + rank[:, None]]
        key = self.offset + rank[:, None]
        return np.searchsorted(self.keys, key, side="right") - self.start

    def below(self, held: np.ndarray) -> np.ndarray:
        """F_b: how many elements of resample b have a rank <= the rank `held` was taken at."""
        return (self.counts * held).sum(axis=1)

    def next_rank(self, held: np.ndarray) -> np.ndarray:
        """Per resample, the least rank above the one `held` was taken at that a drawn prompt
        holds (n_ranks where none does): prompt p's next is its key number held[b, p]."""
        more = (held < self.size) & (self.counts > 0)
        key = self.keys[np.minimum(self.start + held, self.keys.size - 1)]
        return np.where(more, key - self.offset, self.n_ranks).min(axis=1)

    def rank_at(self, position: np.ndarray) -> np.ndarray:
        """Per resample b, the rank of the element at 0-based `position[b]`: the least rank r
        with F_b(r) > position[b], by binary search over the grid, then within the bucket."""
        zero = np.zeros(position.size, dtype=np.int64)
        bucket = _least(zero, zero + self.grid.size - 1, lambda g: self.below(
            self.table[self.grid_offset + g[:, None]]) > position)  # fmt: skip
        return _least(bucket * self.step, self.grid[bucket],
                      lambda r: self.below(self.held(r)) > position)  # fmt: skip


def _least(lo: np.ndarray, hi: np.ndarray, above: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per row, the least x in [lo, hi] with above(x) true (true at hi, monotone in x)."""
    while (open_ := lo < hi).any():
        mid = (lo + hi) // 2
        yes = above(mid)
        hi = np.where(open_ & yes, mid, hi)
        lo = np.where(open_ & ~yes, mid + 1, lo)
    return lo


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
    return flat_ratio_of_medians(m_values, m_idx, b_values, b_idx, n_boot, seed, level)


def flat_ratio_of_medians(
    m_values: np.ndarray,
    m_prompt: np.ndarray,
    b_values: np.ndarray,
    b_prompt: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float]:
    """bootstrap_ratio_of_medians on flat arrays: value j of a side belongs to prompt
    m_prompt[j] (b_prompt[j]), an ordinal 0..n_prompts-1 in the prompts' order; every
    ordinal must occur on both sides."""
    n_prompts = int(max(m_prompt.max(initial=-1), b_prompt.max(initial=-1))) + 1
    for prompt in (m_prompt, b_prompt):
        if n_prompts == 0 or not np.bincount(prompt, minlength=n_prompts).all():
            raise ValueError("every prompt needs at least one value on both sides")
    point = np.median(m_values) / np.median(b_values)
    counts = resample_counts(np.random.default_rng(seed), n_prompts, n_boot)
    ratios = resampled_medians(m_values, m_prompt, counts) / resampled_medians(
        b_values, b_prompt, counts
    )
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


def resampled_quantiles(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray,
                        q: float) -> np.ndarray:
    """The q-quantile of every resample (value j counted counts[b, prompt_idx[j]] times in
    resample b), as np.quantile's default (linear: position h = (N_b - 1) q between the
    elements at floor(h) and floor(h) + 1), by cumulative counts over the sorted values,
    (_cumulative): O(n_boot * n_values). For the tails `analyze compare` reports; the median
    keeps resampled_medians (rank space, cheaper with many reps)."""
    out = np.empty(counts.shape[0])
    for sorted_values, part, cumulative in _cumulative(values, prompt_idx, counts):
        h = (cumulative[:, -1] - 1) * q
        low = np.floor(h)
        at = (cumulative <= low[:, None]).sum(axis=1)
        above = np.minimum((cumulative <= (low + 1)[:, None]).sum(axis=1), values.size - 1)
        out[part] = sorted_values[at] + (h - low) * (
            sorted_values[above] - sorted_values[at])
    return out


def paired_quantile_ratio(
    method: Mapping[str, Sequence[float]],
    baseline: Mapping[str, Sequence[float]],
    q: float,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> Speedup | None:
    """paired_speedup with the q-quantile in the median's place: quantile(M, q) /
    quantile(B, q) on the prompts both measured, its interval from the same prompt draws
    (same seed: the same resamples as the median's). None when no prompt is shared."""
    prompts = sorted(method.keys() & baseline.keys())
    if not prompts:
        return None
    m_values, m_idx = _flatten([method[p] for p in prompts])
    b_values, b_idx = _flatten([baseline[p] for p in prompts])
    counts = resample_counts(np.random.default_rng(seed), len(prompts), n_boot)
    ratios = resampled_quantiles(m_values, m_idx, counts, q) / resampled_quantiles(
        b_values, b_idx, counts, q)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    point = np.quantile(m_values, q) / np.quantile(b_values, q)
    return Speedup(float(point), float(lo), float(hi), len(prompts))


@dataclass(frozen=True)
class RunSpread:
    """How a speedup measured in several runs varies between them (None with one run):
    the point estimate within each run alone (its least and greatest) and the share of one
    run's ln speedup variance that is between runs (between_run_share)."""

    n_runs: int
    run_speedup_min: float | None = None
    run_speedup_max: float | None = None
    between_run_share: float | None = None


def run_counts(rng: np.random.Generator, n_runs: int, n_prompts: int, n_boot: int) -> np.ndarray:
    """Two-stage cluster draws: C[b, r * n_prompts + p] = how many times prompt p of run r is
    in resample b. Resample b draws n_runs runs with replacement, then n_prompts prompts with
    replacement within each drawn run copy (a run drawn twice gets two independent prompt
    draws); each row sums to n_runs * n_prompts. Drawn one run copy at a time, an
    (n_boot, n_prompts) index matrix each (resample_counts)."""
    runs = rng.integers(0, n_runs, size=(n_boot, n_runs))
    counts = np.zeros((n_boot, n_runs, n_prompts), dtype=np.int64)
    boot = np.arange(n_boot)
    for copy in range(n_runs):  # (boot, run) pairs are distinct within one copy: += is safe
        counts[boot, runs[:, copy]] += resample_counts(rng, n_prompts, n_boot)
    return counts.reshape(n_boot, n_runs * n_prompts)


def between_run_share(per_run: np.ndarray, within_var: np.ndarray) -> float:
    """tau2 / (tau2 + mean(within_var)), tau2 = max(0, var(ln per_run, ddof=1) -
    mean(within_var)): per_run, each run's speedup alone; within_var, the variance of its
    ln ratio over a prompt bootstrap of that run alone. 0 when nothing varies."""
    noise = float(np.mean(within_var))
    tau2 = max(0.0, float(np.var(np.log(per_run), ddof=1)) - noise)
    return tau2 / (tau2 + noise) if tau2 + noise > 0 else 0.0


def flat_runs_ratio_of_medians(
    m_values: np.ndarray,
    m_run: np.ndarray,
    m_prompt: np.ndarray,
    b_values: np.ndarray,
    b_run: np.ndarray,
    b_prompt: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float, RunSpread]:
    """flat_ratio_of_medians over several runs: value j of a side belongs to run m_run[j]
    (an ordinal 0..n_runs-1) and prompt m_prompt[j]; every (run, prompt) must occur on both
    sides (only prompts present in every run on both sides are paired). point = median(all
    M values) / median(all B values); (lo, hi) from the runs-then-prompts bootstrap
    (run_counts); the RunSpread from each run alone and its own prompt bootstrap. One run:
    flat_ratio_of_medians itself, RunSpread(1)."""
    n_runs = int(max(m_run.max(initial=0), b_run.max(initial=0))) + 1
    if n_runs == 1:
        point, lo, hi = flat_ratio_of_medians(m_values, m_prompt, b_values, b_prompt,
                                              n_boot, seed, level)  # fmt: skip
        return point, lo, hi, RunSpread(1)
    n_prompts = int(max(m_prompt.max(initial=-1), b_prompt.max(initial=-1))) + 1
    m_cluster, b_cluster = m_run * n_prompts + m_prompt, b_run * n_prompts + b_prompt
    for cluster in (m_cluster, b_cluster):
        if not np.bincount(cluster, minlength=n_runs * n_prompts).all():
            raise ValueError("every prompt needs at least one value in every run on both sides")

    def ratios(counts: np.ndarray) -> np.ndarray:
        return resampled_medians(m_values, m_cluster, counts) / resampled_medians(
            b_values, b_cluster, counts
        )

    total = ratios(run_counts(np.random.default_rng(seed), n_runs, n_prompts, n_boot))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(total, [tail, 100 - tail])
    per_run, within_var = np.empty(n_runs), np.empty(n_runs)
    for r in range(n_runs):  # each run alone: its speedup and its prompt-bootstrap variance
        m, b = m_run == r, b_run == r
        per_run[r] = np.median(m_values[m]) / np.median(b_values[b])
        counts = resample_counts(np.random.default_rng(seed), n_prompts, n_boot)
        alone = resampled_medians(m_values[m], m_prompt[m], counts) / resampled_medians(
            b_values[b], b_prompt[b], counts)
        within_var[r] = np.var(np.log(alone))
    spread = RunSpread(n_runs, float(per_run.min()), float(per_run.max()),
                       between_run_share(per_run, within_var))  # fmt: skip
    return float(np.median(m_values) / np.median(b_values)), float(lo), float(hi), spread
