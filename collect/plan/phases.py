"""Phases: a campaign in ordered steps, each at one tensor-parallel size.

A phase runs the methods it names, or the `top` fastest methods of an earlier phase
(`methods: {best_of: tp1, top: 2}`; with `per: family`, the `top` fastest of each method
family, so that every family's best setting is re-measured), always with the baseline.
"Fastest" is decided from the measurements already in the store, with the report's paired
speedup and interval: collect.scheduling.ranking says how. This module holds the plan models only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specsweep.collect.plan.components import Name, Strict


class BestOf(Strict):
    best_of: Name = Field(description="An earlier phase whose results rank the methods.")
    top: int = Field(2, ge=1, le=64, description="How many of its fastest methods to run.")
    per: Literal["method", "family"] = Field(
        "method",
        description="`method`: the `top` fastest methods overall; `family`: the `top` fastest "
        "of each method family (a method without a family is its own), each family's best "
        "setting re-measured even when one family holds every fastest method.",
    )


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
