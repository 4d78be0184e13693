"""Best-of ranking: which methods of an earlier phase were fastest, with the report's statistic.

A phase `{best_of: tp1, top: 2}` runs the two fastest methods of phase tp1. "Fastest" is
decided from the measurements already in the store, with the same paired speedup and t
interval as the report's `speedup` table (stats.paired.paired_speedup on the schema.metrics
decode_tps of each request), never from an unpaired median:

- per window (workload, max_tokens, concurrency) the earlier phase measured: the paired
  speedup of the method's decode tok/s over the baseline's on the prompts both measured,
  with its 95% interval (none below stats.paired.MIN_PROMPTS prompts). Windows without a
  shared prompt are left out.
- a method's score: the median of its window speedups; its interval: the median of the
  window interval bounds over the windows that have one (with one window, exactly the
  report's row; with several, a summary of the per-window intervals, not a joint interval;
  None when no window has one, and then the method is not separable from any other).
- order: by score, highest first; equal scores by method name, so a rerun chooses the same.
  `top` takes the first N of that order even when intervals overlap (the phase needs
  methods to run); the log line marks every method whose interval overlaps the leader's as
  "not separable" from it, so a choice the data cannot support is visible.
- rows: the earlier phase's own (its workloads and methods, at its tp) of the campaign's
  first run, so the choice never changes once made: not when the best_of phase's own rows
  at the same tp land (the picked method measured on other workloads would move its
  median and could hand the lead to another method, which a resume would then also run),
  and not when a later run lands (every run of a campaign measures the same
  configurations).
- the baseline's A/A control (plan `aa_control`, named by schema.controls) is never a
  candidate: it is the baseline started again, so "choosing" it would run the baseline twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from specsweep.collect.plan.fields import Method
from specsweep.collect.plan.phases import BestOf
from specsweep.schema.controls import aa_control_name
from specsweep.stats.paired import paired_speedup

DECODE_SPEEDS = """
SELECT method, workload, max_tokens, concurrency, prompt_id,
       decode_tps(output_tokens, e2e_s, ttft_s) AS decode_tps
FROM measured_request_rows()  -- schema/measured.sql: the analysis' rule, closed loop
WHERE campaign_id = ? AND tp = ? AND run = ? AND ok
  AND decode_tps(output_tokens, e2e_s, ttft_s) IS NOT NULL
ORDER BY ALL
"""

Window = tuple[str, int, int]
ByPrompt = dict[str, list[float]]


@dataclass(frozen=True)
class Ranked:
    """A method's score over the baseline and its interval (see the module docstring)."""

    method: str
    score: float
    ci_low: float | None
    ci_high: float | None
    n_windows: int

    def overlaps(self, other: Ranked) -> bool:
        """The two intervals share a point, or one has none: the data cannot order them."""
        if None in (self.ci_low, self.ci_high, other.ci_low, other.ci_high):
            return True
        return self.ci_low <= other.ci_high and other.ci_low <= self.ci_high


def pick(ranked: list[str], rule: BestOf, methods: Sequence[Method]) -> list[str]:
    """The methods a best_of phase runs, from `ranked` (fastest first): the rule's first `top`,
    or with per == "family" the first `top` of each family of the plan's `methods` (a method
    without a family is its own), in ranked order."""
    if rule.per != "family":
        return ranked[: rule.top]
    family_of = {m.name: m.family or m.name for m in methods}
    taken: dict[str, int] = defaultdict(int)
    chosen = []
    for m in ranked:
        family = family_of.get(m, m)
        if taken[family] < rule.top:
            taken[family] += 1
            chosen.append(m)
    return chosen


def rank_methods(
    store: Any,
    campaign_id: str,
    tp: int,
    baseline: str,
    workloads: list[str] | None = None,
    methods: list[str] | None = None,
    run: int = 1,
) -> list[Ranked]:
    """Every method measured at tp in run with a paired window, fastest first, but the
    baseline and its A/A control (schema.controls: the baseline started again, never a pick);
    only the given workloads and methods when given (an earlier phase's: the module
    docstring says why)."""
    speeds: dict[str, dict[Window, ByPrompt]] = defaultdict(lambda: defaultdict(dict))
    rows = store.execute(DECODE_SPEEDS, [campaign_id, tp, run])
    for method, w, mt, c, prompt, tps in rows:
        if (workloads is None or w in workloads) and (
            methods is None or method in methods or method == baseline
        ):
            speeds[method][(w, mt, c)].setdefault(prompt, []).append(tps)
    base = speeds.pop(baseline, {})
    speeds.pop(aa_control_name(baseline), None)  # the baseline again (A/A): no candidate
    ranked = [r for m, windows in speeds.items() if (r := _score(m, windows, base))]
    return sorted(ranked, key=lambda r: (-r.score, r.method))


def _score(
    method: str, windows: dict[Window, ByPrompt], base: dict[Window, ByPrompt]
) -> Ranked | None:
    """Median over the windows the method shares with the baseline; None when none."""
    found = [
        s
        for w, by_prompt in windows.items()
        if w in base and (s := paired_speedup(by_prompt, base[w])) is not None
    ]
    if not found:
        return None
    bounded = [s for s in found if s.ci_low is not None]
    return Ranked(
        method,
        median(s.speedup for s in found),
        median(s.ci_low for s in bounded) if bounded else None,
        median(s.ci_high for s in bounded) if bounded else None,
        len(found),
    )


def describe(ranked: list[Ranked]) -> str:
    """One line: each method's score and interval, the ones not separable from the leader."""
    parts = [
        f"{r.method} {r.score:.2f}x "
        + (f"[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r.ci_low is not None else "[no interval]")
        for r in ranked
    ]
    text = ", ".join(parts)
    if ranked:
        close = [r.method for r in ranked[1:] if r.overlaps(ranked[0])]
        if close:
            text += f" (not separable from {ranked[0].method}: {', '.join(close)})"
    return text
