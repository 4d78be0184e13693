"""The plan's building blocks that engine modules share with the plan: `Strict` models, `Name`,
`ModelInfo`, `Method` and `EngineConfig` (the fields every engine has). A leaf module, so that an
engine module under collect/engines/ can define its plan model without importing the plan."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from collect.engines.base import MemoryRules
from collect.plan import families
from collect.plan.families import Scalar

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelInfo(Strict):
    """What `check`'s memory budget needs to know of a model (target or draft)."""

    weights_gib: float | None = Field(
        None, gt=0, description="Size of the weights in GiB (the safetensors files' total); "
        "default: metadata.total_size of <model>/model.safetensors.index.json, read over the "
        "host by `check --probe`."
    )
    config: str | dict[str, Any] | None = Field(
        None, description="The model's config.json: a path to a local copy, or its mapping "
        "inline (at least num_hidden_layers, num_attention_heads, num_key_value_heads, "
        "head_dim, torch_dtype; hybrid models also layer_types or full_attention_interval and "
        "the linear_* keys); default: <model>/config.json, read over the host by "
        "`check --probe`."
    )


class EngineConfig(Strict):
    """Fields every engine shares; an engine module's `Config` subclasses it and adds `kind`."""

    # What the planner asks of every engine (an engine's Config overrides them):
    @property
    def uses_gpus(self) -> bool:
        """Whether its services take GPUs (False: they run on the CPU, no GPU is placed)."""
        return True

    max_tp: ClassVar[int | None] = None  # largest tensor-parallel size it can run
    memory: ClassVar[MemoryRules | None] = None  # None: no memory budget (e.g. CPU engines)

    model: str = Field(description="Model path (or hub id resolved on the host) of the target.")
    args: list[str] = Field(
        default_factory=list,
        description="Flags passed to every service of this engine ({model} expands to the "
        "model path).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for every service."
    )
    tp_args: dict[int, list[str]] = Field(
        default_factory=dict,
        description="Extra flags by tensor-parallel size (e.g. 1: [--mem-fraction-static, "
        "'0.80']).",
    )
    host_address: str = Field(
        "127.0.0.1", description="Address the server binds and is reached on."
    )
    port: int = Field(30000, ge=1, le=65535, description="Server port on the host.")
    startup_timeout_s: float = Field(600, gt=0, description="Seconds to wait for /health = 200.")
    request_timeout_s: float = Field(600, gt=0, description="Per-request timeout in seconds.")
    request_extra: dict[str, Any] = Field(
        default_factory=dict, description="Extra JSON fields merged into every request body."
    )
    model_info: ModelInfo | None = Field(
        None, description="Weights and config.json of the target, for `check`'s memory budget."
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of an environment variable holding the server's API key: sent as "
        "`Authorization: Bearer`, and put where a flag says {api_key}. The key itself never "
        "appears in the plan, the database, the logs specsweep writes or the report.",
    )

    def api_key(self) -> str | None:
        """The key from the environment; a clear error when the variable is not set."""
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ValueError(f"engine.api_key_env names {self.api_key_env}, which is not set")
        return key


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
        names = families.check_family(self.name, self.grid, self.params, self.args, self.env,
                                      self.name_template, self.family)
        bad = [n for n in names if not re.match(NAME_PATTERN, n) or len(n) > 64]
        if bad:
            raise ValueError(f"name_template: derived name {bad[0]!r} is not a valid method "
                             f"name ({NAME_PATTERN}, at most 64 characters)")
        return self

    def expanded(self) -> list[Method]:
        """The concrete methods this one stands for: itself without a grid, else one per
        combination of the grid's values (collect.plan.families)."""
        return families.expand(self)

    def runs(self, workload: str) -> bool:
        return self.workloads is None or workload in self.workloads
