"""Phases: a campaign in ordered steps, each at one tensor-parallel size.

A phase runs the methods it names, or the `top` fastest methods of an earlier phase
(`methods: {best_of: tp1, top: 2}`; with `per: family`, the `top` fastest of each method
family, so that every family's best setting is re-measured), always with the baseline.
"Fastest" is decided from the measurements already in the store, with the report's paired
speedup and interval: collect.scheduling.ranking says how; from a raced phase, by the race's
survivors (collect.scheduling.race). A phase (or the whole plan) may race its methods instead
of measuring every one in every round (`search:`, docs/race.md). This module holds the plan
models only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from specsweep.collect.plan.components import Name, Strict
from specsweep.stats.race import FIRST_ROUNDS, RaceRule


class Search(Strict):
    """Race the phase's methods (docs/race.md): after each round, per load level, drop a
    method worse than another by more than `within` at `confidence`; start only methods still
    in contention at an open level; stop when every level is decided or at `max_rounds`."""

    objective: Literal["decode_tps"] = Field(
        "decode_tps",
        description="What is raced, bigger is better: `decode_tps`, a window's mean ln decode "
        "tok/s. (Goodput under the plan's SLO and tok/s per watt are not raceable yet.)",
    )
    within: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="The indifference zone: a method within this share of the best at a level "
        "counts as best; the race does not spend starts telling such methods apart.",
    )
    confidence: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Probability, at every level at once, that the method kept is within "
        "`within` of the best (Bonferroni over the levels).",
    )
    first_rounds: int = Field(
        FIRST_ROUNDS,
        ge=2,
        le=100,
        description="Rounds every method runs before any is dropped (two at least: the start "
        "variance is estimated from them).",
    )
    prior: Literal["results", "none"] = Field(
        "results",
        description="`results`: each level's start variance also comes from earlier complete "
        "campaigns in the results file on the same host, engine and tp at the same level "
        "(their method x round interaction), pooled with the race's own first rounds: more "
        "degrees of freedom, a narrower margin. Fixed when the race begins (table races). "
        "`none`: the race's own rounds only.",
    )
    max_rounds: int = Field(
        6,
        ge=2,
        le=100,
        description="The most rounds a method is started in; a level still open then is "
        "reported as open, with its survivors and no guarantee. Replaces `repeat` for the "
        "phase.",
    )

    @model_validator(mode="after")
    def _rounds_in_order(self) -> Search:
        if self.first_rounds > self.max_rounds:
            raise ValueError(
                f"first_rounds ({self.first_rounds}) is more than max_rounds ({self.max_rounds})"
            )
        return self

    def rule(self) -> RaceRule:
        """The race's rule (stats.race)."""
        return RaceRule(self.within, self.confidence, self.max_rounds, self.first_rounds)


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
    search: Search | None = Field(
        None,
        description="Race this phase's methods instead of running each in every round "
        "(default: the plan's `search`, if any); docs/race.md.",
    )
    stop_services: list[Name] = Field(
        default_factory=list,
        description="host.blocking_services to stop before the phase and start again after "
        "it (also after a failure or Ctrl-C).",
    )
