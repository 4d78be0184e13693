"""The `Engine` protocol the runner, the service lifecycle and the measurement windows are typed
against, the no-op hooks adapters inherit, and `MemoryRules`: what an engine's flags say about
its GPU memory (read by `collect.scheduling.memory`'s budget) and `ResultFormat`: how its benchmark
tool's result files differ (read by `collect.importing.files`).

An engine module under collect/engines/ defines `KIND`, a pydantic `Config` (its plan model,
subclassing `collect.engines.config.EngineConfig`) and an `Adapter` class that satisfies `Engine`;
docs/adding-an-engine.md walks through one. Nothing here imports the plan: an adapter reads a
plan's method through `MethodFlags`, which the plan's `Method` satisfies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx


class EngineNotReady(ValueError):
    """What an engine's `prepare` found missing on the host before any service starts (a
    model's chat template); the message says what to give in the plan. `specsweep run`
    prints it as one line and exits 2."""


class HookFailed(RuntimeError):
    """A hook could not do its job (e.g. the server refused to empty its prefix cache, or
    does not offer a way to). Its message says why and what to change (a flag, an
    environment variable); the caller records it in `endpoint_errors`: a failed
    `reset_cache` marks the window's `cache_reset` 'failed', a failed `before_workload`
    fails the service."""


class StreamParser(Protocol):
    """Reads one streamed reply: `feed` takes each SSE event's JSON and returns the text delta
    and the tokens it carries (None: count one per non-empty delta); `stats` the engine's
    per-request speculative statistics once the stream ended."""

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]: ...
    def stats(self) -> dict[str, Any]: ...


class MethodFlags(Protocol):
    """What an adapter reads of a plan's method (`collect.plan.fields.Method`): the flags and
    environment variables that select it."""

    @property
    def args(self) -> list[str]: ...
    @property
    def env(self) -> dict[str, str]: ...


class Engine(Protocol):
    """What a campaign asks of an engine adapter."""

    kind: str
    health_path: str
    cfg: Any  # the engine's plan model (its module's `Config`)

    def launch(
        self, method: MethodFlags, tp: int, port: int
    ) -> tuple[list[str], dict[str, str]]: ...
    def request(
        self, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str, dict[str, Any]]: ...
    def parser(self) -> StreamParser: ...
    async def fingerprint(self, client: httpx.AsyncClient, base_url: str) -> dict[str, str]: ...
    async def scrape(self, client: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]: ...
    def prepare(self, host: Any) -> None: ...
    async def before_workload(self, client: httpx.AsyncClient, base_url: str) -> None: ...
    async def reset_cache(self, client: httpx.AsyncClient, base_url: str) -> str: ...
    def draft_model(self, method: MethodFlags) -> str | None: ...
    def template_facts(self, method: MethodFlags, host: Any) -> dict[str, str]: ...


CACHE_RESETS = (
    "flush_cache",
    "reset_prefix_cache",
    "slots_erase",
    "cache_prompt_off",
    "unsupported",
)  # what reset_cache may return (windows.cache_reset values)


class EngineHooks:
    """Default (no-op) hooks; adapters override what their engine needs."""

    def prepare(self, host: Any) -> None:
        """Once per campaign before any service starts (e.g. read a chat template)."""

    async def before_workload(self, client: httpx.AsyncClient, base_url: str) -> None:
        """Before each workload on a running service (nothing by default; the prefix cache
        is emptied per window by `reset_cache`)."""

    def draft_model(self, method: MethodFlags) -> str | None:
        """The draft model a method's launch flags name ({model} expanded), for the
        service's fingerprint; None when it names none (n-gram drafting, no speculation)."""
        return None

    def template_facts(self, method: MethodFlags, host: Any) -> dict[str, str]:
        """chat_template_sha256 and chat_template_source of the template a method's server
        applies (collect.engines.templates); {} when the server's own fingerprint says it
        (llama.cpp's /props) or nothing is known."""
        return {}

    async def reset_cache(self, client: httpx.AsyncClient, base_url: str) -> str:
        """Empty the server's prefix cache before a measured window; return how, one of
        `CACHE_RESETS` (the values of `windows.cache_reset`): flush_cache | reset_prefix_cache
        | slots_erase | cache_prompt_off | unsupported. Raise HookFailed (or let the
        request's exception out) when the server refused or failed: the caller records an
        `endpoint_errors` row (hook 'reset_cache') and marks the window 'failed'.

        The default: the engine has no way, "unsupported" (nothing is sent)."""
        return "unsupported"


def flag(args: list[str], name: str) -> str | None:
    """The value of the last `name V` or `name=V` in args (the engines' argparse keeps it)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


@dataclass(frozen=True)
class MemoryRules:
    """Where an engine's flags put the numbers the memory budget reads. Flags are read in
    launch order (engine args, method args, tp_args), the last occurrence winning."""

    fraction_flag: str
    context_flag: str
    default_fraction: Callable[[float, int], tuple[float, str]]  # (gpu GiB, tp) -> value, why
    draft_path: Callable[[list[str]], str | None]  # the draft model a method's flags name
    state_ratio_flag: str | None = None  # None: states come out of the shared pool (vLLM)
    state_ratio_default: float = 0.0
    draft_tokens_flag: str | None = None  # tokens verified per step, with their own states

    def fraction(self, args: list[str], gpu_gib: float, tp: int) -> tuple[float, str]:
        """The fraction flag's value, else the engine's default."""
        given = flag(args, self.fraction_flag)
        return (
            (float(given), self.fraction_flag)
            if given is not None
            else (self.default_fraction(gpu_gib, tp))
        )

    def draft_tokens(self, args: list[str]) -> int:
        given = flag(args, self.draft_tokens_flag) if self.draft_tokens_flag else None
        return int(given) if given else 0

    def state_ratio(self, args: list[str]) -> float | None:
        if self.state_ratio_flag is None:
            return None
        return float(flag(args, self.state_ratio_flag) or self.state_ratio_default)


@dataclass(frozen=True)
class ResultFormat:
    """How an engine's own benchmark tool writes a result file that `collect import` reads:
    the per-request lists (ttfts, itls, output_lens, errors) are common to the tools, which
    derive from vLLM's; what differs is named here (collect/importing/importer.py documents
    the formats)."""

    markers: tuple[str, ...] = ()  # keys only this tool writes; () = the format others extend
    metric_keys: dict[str, str] = field(default_factory=dict)  # metric -> its summary-key name

    def summary_key(self, metric: str, stat: str) -> str:
        """The file's key for a summary number, e.g. mean_e2el_ms."""
        return f"{stat}_{self.metric_keys.get(metric, metric)}_ms"
