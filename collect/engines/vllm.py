"""vLLM (`vllm serve`): launch flags, OpenAI chat streaming and the speculative counters.

vLLM reports no speculative statistics per request; its Prometheus counters on /metrics
are cumulative since start, so acceptance is measured over a window from the counters
scraped before and after it (any other traffic in the window leaks in):

    accept_length  = 1 + d(num_accepted_tokens) / d(num_drafts)
    accept_rate    = d(num_accepted_tokens) / d(num_draft_tokens)
    per_position k = d(num_accepted_tokens_per_pos{position=k}) / d(num_drafts)

Counter names start with `vllm:spec_decode_` and end in `_total` in Prometheus exposition;
both spellings are read, and samples of several engines (label sets) are summed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field

from collect.engines.base import EngineHooks, MemoryRules, ResultFormat, flag
from collect.engines.llamacpp import ChatStream, chat_body, parse_prometheus
from collect.plan.fields import EngineConfig, Method

PREFIX = "vllm:spec_decode_"
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
PER_POS = "num_accepted_tokens_per_pos"


class VLLMChatStream(ChatStream):
    """OpenAI chat chunks as llama.cpp's parser reads them; tokens per chunk come from
    `token_ids` when the request asked for them (`return_token_ids`), else unknown."""

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        text, _ = super().feed(event)
        choices = event.get("choices") or []
        ids = choices[0].get("token_ids") if choices else None
        return text, len(ids) if isinstance(ids, list) else None

    def stats(self) -> dict[str, Any]:
        return vllm_stats(self.usage, self.finish_reason)


def vllm_stats(usage: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    """The requests-table statistics from the final `usage` (no speculative fields)."""
    details = usage.get("prompt_tokens_details") or {}
    return {
        "output_tokens": usage.get("completion_tokens"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "cached_tokens": details.get("cached_tokens"),
        "finish_reason": finish_reason,
        "server_stats": json.dumps({"usage": usage}, sort_keys=True),
        "spec_verify_ct": None,
        "draft_tokens": None,
        "accepted_tokens": None,
        "accept_length": None,
    }


KIND = "vllm"


def _draft_path(args: list[str]) -> str | None:
    """The draft model named in --speculative-config's JSON."""
    spec = flag(args, "--speculative-config")
    return json.loads(spec).get("model") if spec else None


MEMORY = MemoryRules(
    fraction_flag="--gpu-memory-utilization",
    context_flag="--max-model-len",
    default_fraction=lambda gpu_gib, tp: (0.9, "--gpu-memory-utilization default"),
    draft_path=_draft_path,
)


class VLLMEngine(EngineConfig):
    kind: Literal["vllm"] = Field(description="vLLM (vllm serve).")
    executable: str = Field("vllm", description="The vllm command on the host.")
    port: int = Field(8000, ge=1, le=65535, description="Server port on the host.")

    memory: ClassVar[MemoryRules | None] = MEMORY


class VLLM(EngineHooks):
    """Adapter for vLLM's OpenAI-compatible server."""

    kind = KIND
    health_path = "/health"
    chat_path = "/v1/chat/completions"

    def __init__(self, cfg: VLLMEngine):
        self.cfg = cfg

    def launch(self, method: Method, tp: int, port: int) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment of one service; {model} in flags expands."""
        flags = [a.replace("{model}", self.cfg.model) for a in [*self.cfg.args, *method.args]]
        argv = [
            self.cfg.executable, "serve", self.cfg.model,
            "--tensor-parallel-size", str(tp),
            "--host", self.cfg.host_address,
            "--port", str(port),
            *flags,
        ]  # fmt: skip
        return argv, {**self.cfg.env, **method.env}

    def request(
        self, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str, dict[str, Any]]:
        return self.chat_path, chat_body(messages, max_tokens, self.cfg.request_extra)

    def parser(self) -> VLLMChatStream:
        return VLLMChatStream()

    async def fingerprint(self, client: httpx.AsyncClient, base_url: str) -> dict[str, str]:
        """Version (GET /version) and the served model (GET /v1/models)."""
        version = await _get_json(client, f"{base_url}/version")
        models = (await _get_json(client, f"{base_url}/v1/models")).get("data") or [{}]
        model = models[0] if isinstance(models[0], dict) else {}
        facts = {
            "engine.version": version.get("version"),
            "engine.served_model": model.get("id"),
            "engine.model_root": model.get("root"),
            "engine.max_model_len": model.get("max_model_len"),
        }
        return {k: str(v) for k, v in facts.items() if v is not None}

    async def scrape(self, client: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
        """Prometheus samples from /metrics; [] when it does not answer."""
        try:
            reply = await client.get(f"{base_url}/metrics", timeout=10)
        except httpx.HTTPError:
            return []
        return parse_prometheus(reply.text) if reply.status_code == 200 else []


async def _get_json(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    try:
        reply = await client.get(url, timeout=10)
        value = reply.json() if reply.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


# --- window acceptance -------------------------------------------------------------------


def window_acceptance(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Acceptance over a window from two scrapes of /metrics (see the module docstring).

    Returns the counter deltas (drafts, draft_tokens, accepted_tokens) and accept_length,
    accept_rate, per_position {k: rate}; a ratio is None when its denominator's delta is 0
    (no speculation in the window, or the counters are absent)."""
    start, end = spec_counters(before), spec_counters(after)
    delta = {key: end[key] - start.get(key, 0.0) for key in end}
    drafts = delta.get(("num_drafts", None), 0.0)
    draft_tokens = delta.get(("num_draft_tokens", None), 0.0)
    accepted = delta.get(("num_accepted_tokens", None), 0.0)
    positions = sorted(int(pos) for name, pos in delta if name == PER_POS)
    return {
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "accept_length": 1 + accepted / drafts if drafts > 0 else None,
        "accept_rate": accepted / draft_tokens if draft_tokens > 0 else None,
        "per_position": {
            k: delta[(PER_POS, str(k))] / drafts if drafts > 0 else None for k in positions
        },
    }


def spec_counters(samples: list[dict[str, Any]]) -> dict[tuple[str, str | None], float]:
    """{(counter, position or None): value} summed over label sets; `_total` dropped,
    `_created` timestamps ignored."""
    sums: dict[tuple[str, str | None], float] = defaultdict(float)
    for sample in samples:
        name = sample["name"].removesuffix("_total")
        if not name.startswith(PREFIX):
            continue
        counter = name[len(PREFIX) :]
        if counter in COUNTERS:
            sums[(counter, None)] += float(sample["value"])
        elif counter == PER_POS:
            position = _labels(sample.get("labels")).get("position")
            if position is not None:
                sums[(PER_POS, str(position))] += float(sample["value"])
    return dict(sums)


def _labels(labels: Any) -> dict[str, Any]:
    """Labels as parse_prometheus stores them (JSON text) or as a dict."""
    if isinstance(labels, str):
        return json.loads(labels) if labels else {}
    return labels or {}


# `vllm bench serve --save-result --save-detailed`: the format the other tools extend
RESULT_FILE = ResultFormat()

Config = VLLMEngine
Adapter = VLLM
