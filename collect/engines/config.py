"""The plan model every engine's `Config` builds on: `Strict` models, `Name`, `ModelInfo` and
`EngineConfig` (the fields every engine has). It lives here, below the plan, so that an engine
module defines its plan model without importing the plan: `collect.plan` imports the engines
(its `engine` union is built from their `Config`s), never the reverse."""

from __future__ import annotations

import os
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from specsweep.collect.engines.base import MemoryRules

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelInfo(Strict):
    """What `check`'s memory budget needs to know of a model (target or draft)."""

    weights_gib: float | None = Field(
        None,
        gt=0,
        description="Size of the weights in GiB (the safetensors files' total); "
        "default: read over the host by `check --probe` from the sharded index "
        "(metadata.total_size), a single model.safetensors header, or a .gguf file's size.",
    )
    config: str | dict[str, Any] | None = Field(
        None,
        description="The model's config.json: a path to a local copy, or its mapping "
        "inline (at least num_hidden_layers, num_attention_heads, num_key_value_heads, "
        "head_dim, torch_dtype; hybrid models also layer_types or full_attention_interval and "
        "the linear_* keys); default: <model>/config.json, read over the host by "
        "`check --probe`.",
    )


class EngineConfig(Strict):
    """Fields every engine shares; an engine module's `Config` subclasses it and adds `kind`."""

    # What the planner asks of every engine (an engine's Config overrides them):
    @property
    def uses_gpus(self) -> bool:
        """Whether its services take GPUs (False: they run on the CPU, no GPU is placed)."""
        return True

    max_tp: ClassVar[int | None] = None  # largest tensor-parallel size it can run

    def method_problems(self, args: list[str]) -> list[str]:
        """What the engine would refuse at start in a method's flags (engine args, then the
        method's), found before a GPU is taken; [] when nothing is known to be wrong."""
        return []

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
