"""The plan's `Method` (a method's flags, environment, tp sizes, workloads and grid), and the
building blocks the plan shares with the engine modules, defined in `collect.engines.config`
(`Strict`, `Name`, `ModelInfo`, `EngineConfig`) and re-exported here for the plan's modules."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from specsweep.collect.engines.config import (  # noqa: F401 - re-exported: the plan's modules import them
    NAME_PATTERN,
    EngineConfig,
    ModelInfo,
    Name,
    Strict,
)
from specsweep.collect.plan import families
from specsweep.collect.plan.families import Scalar


class Method(Strict):
    name: Name = Field(description="Method label used in every table and chart.")
    args: list[str] = Field(
        default_factory=list, description="Engine flags selecting this method ({model} expands)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    tp: list[int] | None = Field(
        None, description="Tensor-parallel sizes for this method; default: the plan's `tp`."
    )
    workloads: list[str] | None = Field(
        None, description="Names of the workloads this method runs; default: all of them."
    )
    draft: ModelInfo | None = Field(
        None,
        description="Weights and config.json of the method's draft model, for `check`'s memory "
        "budget (default with `check --probe`: read from the draft path in args).",
    )
    grid: dict[str, list[Scalar]] = Field(
        default_factory=dict,
        description="Parameters to sweep, e.g. {budget: [8, 16, 32]}: the method is a family "
        "that expands to one method per value (the cross product for two or more parameters), "
        "each with `{param}` replaced in its args and env values ({model} and {api_key} stay). "
        "Every parameter must appear in an arg or env value.",
    )
    params: dict[str, Scalar] = Field(
        default_factory=dict,
        description="Fixed parameter values of this method, e.g. {k: 4}, stored like a grid's "
        "(table method_params); `{param}` in args and env values is replaced. An expanded "
        "method carries its family's params and its own grid values here.",
    )
    family: Name | None = Field(
        None,
        description="The family a method belongs to: set on each method a grid expands to; a "
        "method written by hand may name one (default: its own name).",
    )
    name_template: str | None = Field(
        None,
        description="Name of each method a grid expands to, e.g. 'ddtree-b{budget}' ({name}: "
        "the family's name); default '{name}-{p1}{v1}-{p2}{v2}' in grid order, e.g. "
        "ddtree-budget8.",
    )

    @model_validator(mode="after")
    def _valid_family(self) -> Method:
        names = families.check_family(
            self.name, self.grid, self.params, self.args, self.env, self.name_template, self.family
        )
        bad = [n for n in names if not re.match(NAME_PATTERN, n) or len(n) > 64]
        if bad:
            raise ValueError(
                f"name_template: derived name {bad[0]!r} is not a valid method "
                f"name ({NAME_PATTERN}, at most 64 characters)"
            )
        return self

    def expanded(self) -> list[Method]:
        """The concrete methods this one stands for: itself without a grid, else one per
        combination of the grid's values (collect.plan.families)."""
        return families.expand(self)

    def runs(self, workload: str) -> bool:
        return self.workloads is None or workload in self.workloads
