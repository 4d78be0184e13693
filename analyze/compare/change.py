"""What a comparison of two campaigns is made of: the metrics it compares (METRICS, their
direction), one metric of one matched window (Change, its verdict), the whole comparison
(Comparison) and the gate over it (the package docstring has the columns; analyze.compare.match
builds them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specsweep.analyze.compare import stats as cs
from specsweep.schema import metrics

# metric -> (column, quantile, higher is better); the direction is the metric's catalogue entry
METRICS = {
    name: (column, q, metrics.metric(name).higher_is_better)
    for name, column, q in (
        ("decode_tps", "decode_tps", 0.5),
        ("ttft_s", "ttft_s", 0.5),
        ("tpot_s", "tpot_s", 0.5),
        ("accept_length", "accept_length", 0.5),
        ("ttft_s_p90", "ttft_s", 0.9),
        ("tpot_s_p90", "tpot_s", 0.9),
    )
}
HIGHER_IS_BETTER = {
    name: metrics.metric(name).higher_is_better for name in (*METRICS, "attainment")
}
# where a change's start variance came from (analyze.compare.stats; None: no interval)
SOURCES = {
    "pooled": "both campaigns' starts",
    "own rounds": "the paired rounds' own spread",
    "rounds": "the spread of the paired rounds' means over every window (a shift)",
}
# the window of a campaign-wide shift (kind 'shift'): every column NULL but the load
SHIFT_WINDOW = (None, None, None, None, None, None, "all windows")
# the gate's exit codes (docs/compare.md): bad input is 2, as for every analyze command
PASS, REGRESSION, UNDECIDED = 0, 1, 3


@dataclass(frozen=True)
class Change:
    """One metric of one matched window, B against A (the module docstring's columns)."""

    window: tuple[Any, ...]
    metric: str
    a: float
    b: float
    ratio: float
    kind: str = "ratio"  # ratio | difference | point | shift (campaign-wide, SHIFT_WINDOW)
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str | None = None
    n_prompts: int = 0
    n_runs: int = 1  # rounds paired (a ratio), the fewer rounds of the two sides (attainment)
    start_source: str | None = None  # SOURCES' keys; None without an interval
    start_sd: float | None = None  # the pooled sd of one start's effect: ln value, or a share
    start_df: float | None = None  # its degrees of freedom
    p_value: float | None = None
    p_holm: float | None = None
    n_family: int = 0
    n_windows: int = 1  # the windows a shift averages (1 for one window's change)
    # ((run of A, run of B), mean ln B/A over prompts) per paired round: the shift's input
    rounds: tuple[tuple[tuple[int, int], float], ...] = ()

    @property
    def worse(self) -> bool:
        if self.kind == "difference":
            return (self.difference or 0.0) < 0
        return self.ratio < 1 if HIGHER_IS_BETTER[self.metric] else self.ratio > 1

    @property
    def effect(self) -> float:
        return abs(math.log(self.ratio)) if self.ratio > 0 else math.inf

    @property
    def significant_raw(self) -> bool:
        """The unadjusted interval excludes no change (1 for a ratio, 0 for a difference)."""
        if self.ci_low is None or self.ci_high is None:
            return False
        null = 0.0 if self.kind == "difference" else 1.0
        return self.ci_low > null or self.ci_high < null

    @property
    def significant(self) -> bool:
        """Counts as a change: Holm-adjusted p below 0.05."""
        return self.p_holm is not None and self.p_holm < cs.ALPHA

    @property
    def verdict(self) -> str:
        if self.kind == "point":
            return "point estimate"
        if self.ci_low is None:
            return "no interval"
        if self.significant:
            return "worse" if self.worse else "better"
        return "not significant"

    def beyond(self, threshold: float) -> bool:
        """Worse than the threshold (0.05 = 5%) in the point estimate."""
        if not self.worse:
            return False
        if HIGHER_IS_BETTER[self.metric]:
            return self.ratio < 1 - threshold
        return self.ratio > 1 + threshold

    def regresses_beyond(self, threshold: float) -> bool:
        """Significantly worse, and worse than the threshold (0.05 = 5%)."""
        return self.significant and self.beyond(threshold)

    def undecided(self, threshold: float) -> bool:
        """A tested kind with no interval whose point estimate is worse than the threshold:
        an interval could have made it fail, so the gate cannot tell."""
        return self.kind != "point" and self.ci_low is None and self.beyond(threshold)


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    changes: list[Change]
    only_a: list[tuple[Any, ...]]
    only_b: list[tuple[Any, ...]]
    speedup_ratio: dict[tuple[Any, ...], tuple[float, float]]
    environment: list[tuple[str, str, str | None, str | None]]
    # (workload, method, tp, prompt_id, status, detail): prompts not paired, workloads
    # not checked (method, tp, prompt_id NULL where it concerns every one)
    prompts: list[tuple[str, str | None, int | None, str | None, str, str | None]] = ()


def gate(comparison: Comparison, threshold: float) -> list[Change]:
    """The changes that fail the gate (empty: pass): Holm-significant over the whole family,
    worse, and beyond the threshold."""
    return [c for c in comparison.changes if c.regresses_beyond(threshold)]


def undecided(comparison: Comparison, threshold: float) -> list[Change]:
    """The changes the gate cannot decide (Change.undecided)."""
    return [c for c in comparison.changes if c.undecided(threshold)]


def exit_code(comparison: Comparison, threshold: float) -> int:
    """REGRESSION when a change fails, else UNDECIDED when one cannot be decided, else PASS."""
    if gate(comparison, threshold):
        return REGRESSION
    return UNDECIDED if undecided(comparison, threshold) else PASS
