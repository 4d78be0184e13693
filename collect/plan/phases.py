"""Phases: a campaign in ordered steps, each at one tensor-parallel size.

A phase runs the methods it names, or the `top` fastest methods of an earlier phase
(`methods: {best_of: tp1, top: 2}`), always with the baseline. "Fastest" is decided from
the measurements already in the store, never assumed: for every window (workload,
max_tokens, concurrency) the earlier phase measured, a method's speedup is its median
decode tok/s over the baseline's; its score is the median of those speedups.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import Field

from collect.plan.components import Name, Strict


class BestOf(Strict):
    best_of: Name = Field(description="An earlier phase whose results rank the methods.")
    top: int = Field(2, ge=1, le=64, description="How many of its fastest methods to run.")


class Phase(Strict):
    name: Name = Field(description="Phase label, selectable with `collect run --phase NAME`.")
    tp: int = Field(ge=1, description="Tensor-parallel size of every service in the phase.")
    methods: list[Name] | BestOf | None = Field(
        None,
        description="Methods to run (default: all the plan's methods), or {best_of: PHASE, "
        "top: N}: the N fastest methods of an earlier phase. The baseline always runs.",
    )
    workloads: list[Name] | None = Field(
        None, description="Workloads to run in this phase (default: all)."
    )
    stop_services: list[Name] = Field(
        default_factory=list,
        description="host.blocking_services to stop before the phase and start again after "
        "it (also after a failure or Ctrl-C).",
    )


DECODE_SPEEDS = """
SELECT method, workload, max_tokens, concurrency,
       median((output_tokens - 1) / (e2e_s - ttft_s)) AS decode_tps
FROM requests AS r
WHERE campaign_id = ? AND tp = ? AND ok AND NOT is_warmup
  AND output_tokens > 1 AND e2e_s > ttft_s
  AND NOT EXISTS (SELECT 1 FROM units AS u WHERE NOT u.complete
                  AND u.campaign_id = r.campaign_id AND u.config_id = r.config_id
                  AND u.workload = r.workload)
GROUP BY ALL
"""


def rank_methods(store: Any, campaign_id: str, tp: int, baseline: str) -> list[tuple[str, float]]:
    """(method, score) of every non-baseline method measured at tp, fastest first."""
    rows = store.execute(DECODE_SPEEDS, [campaign_id, tp])
    base = {(w, mt, c): tps for m, w, mt, c, tps in rows if m == baseline}
    ratios: dict[str, list[float]] = {}
    for method, w, mt, c, tps in rows:
        if method != baseline and base.get((w, mt, c)):
            ratios.setdefault(method, []).append(tps / base[(w, mt, c)])
    scores = [(m, statistics.median(r)) for m, r in ratios.items()]
    return sorted(scores, key=lambda item: (-item[1], item[0]))
