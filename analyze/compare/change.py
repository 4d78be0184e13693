"""What a comparison of two campaigns is made of: the metrics it compares (METRICS, their
direction), one metric of one matched window (Change, its verdict), the whole comparison
(Comparison) and the gate over it (the package docstring has the columns; analyze.compare.match
builds them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from analyze.compare import stats as cs
from schema import metrics

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
DRIFT = {"runs": "paired runs", "aa": "A/A control", "none": "not measured"}


@dataclass(frozen=True)
class Change:
    """One metric of one matched window, B against A (the module docstring's columns)."""

    window: tuple[Any, ...]
    metric: str
    a: float
    b: float
    ratio: float
    kind: str = "ratio"  # ratio | difference | point
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str | None = None
    n_prompts: int = 0
    n_runs: int = 1
    drift: str | None = None  # runs | aa | none; None for a point estimate
    service_var: float = 0.0
    p_value: float | None = None
    p_holm: float | None = None
    n_family: int = 0

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
    def drift_bound(self) -> bool:
        """Holm-significant, but drift is not measured and the change is within the floor."""
        return (
            self.p_holm is not None
            and self.p_holm < cs.ALPHA
            and self.drift == "none"
            and not cs.beyond_floor(self.kind, self.ratio, self.difference)
        )

    @property
    def significant(self) -> bool:
        """Counts as a change: Holm-adjusted p below 0.05, beyond the floor if unmeasured."""
        return self.p_holm is not None and self.p_holm < cs.ALPHA and not self.drift_bound

    @property
    def verdict(self) -> str:
        if self.kind == "point":
            return "point estimate"
        if self.ci_low is None:
            return "no interval"
        if self.significant:
            return "worse" if self.worse else "better"
        return "not separable from drift" if self.drift_bound else "not significant"

    def regresses_beyond(self, threshold: float) -> bool:
        """Significantly worse, and worse than the threshold (0.05 = 5%)."""
        if not (self.significant and self.worse):
            return False
        if HIGHER_IS_BETTER[self.metric]:
            return self.ratio < 1 - threshold
        return self.ratio > 1 + threshold


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
    """The changes that fail the gate (empty: pass): Holm-significant over the whole family
    (the drift rule applied), worse, and beyond the threshold."""
    return [c for c in comparison.changes if c.regresses_beyond(threshold)]
