"""vLLM (`vllm serve`): launch flags, OpenAI chat streaming and the speculative counters.

Per request (vLLM >= 0.29): a speculative service is started with
`--per-request-spec-decode-metrics <per_request_spec_metrics>` (default detailed; set
`none` for older vLLM, which refuses the flag), and the final usage chunk then carries
`metrics.speculative_decoding` (docs/features/speculative_decoding/acceptance_metrics.md):
`mean_acceptance_length`, `draft_acceptance_rate`, `acceptance_histogram` (dense, [j] =
steps with exactly j accepted drafts, j = 0..num_spec_tokens), `num_spec_steps`,
`num_accepted_draft_tokens`, `num_draft_tokens`, `num_spec_tokens`, and with `detailed`
`per_step_accepted` / `per_step_drafted`. Renamed into the requests row
(collect/engines/acceptance.py `vllm_details`):
    spec_verify_ct       = num_spec_steps
    accept_length        = (completion_tokens - 1) / num_spec_steps   (the one definition;
                           equals mean_acceptance_length = 1 + accepted / steps when every
                           decode step yields its accepted drafts plus one)
    engine_accept_length = mean_acceptance_length, accept_histogram = acceptance_histogram,
    step_accepted        = per_step_accepted
Without it the row has no speculative counters.

Per window: the Prometheus counters on /metrics are cumulative since start, so
acceptance is measured over a window from the counters scraped before and after it (any
other traffic in the window leaks in):

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
import tenacity
from pydantic import Field

from specsweep.collect.engines import templates
from specsweep.collect.engines.acceptance import accept_length, vllm_details, vllm_spec_metrics
from specsweep.collect.engines.base import (
    EngineHooks,
    HookFailed,
    MemoryRules,
    MethodFlags,
    ResultFormat,
    flag,
)
from specsweep.collect.engines.config import EngineConfig
from specsweep.collect.engines.openai import OpenAIChatStream, chat_body, parse_prometheus

PREFIX = "vllm:spec_decode_"
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
PER_POS = "num_accepted_tokens_per_pos"
SPEC_METRICS_FLAG = "--per-request-spec-decode-metrics"
RESET_TRIES, RESET_WAIT_S = 5, 0.2  # {"success": false} is retried: blocks may still be held


class VLLMChatStream(OpenAIChatStream):
    """OpenAI chat chunks (collect.engines.openai); tokens per chunk come from
    `token_ids` when the request asked for them (`return_token_ids`), else unknown.

    Decision: specsweep does not ask for `return_token_ids` by default. With it vLLM's first
    chunk also carries every prompt token id, which for a long agentic context is hundreds
    of kilobytes of JSON written before the first token reaches the client, inside TTFT. A
    plan that wants each chunk's (each step's) token count sets it in `request_extra`, as
    plans/gpu-vllm-scale.yaml does (one request at a time, prompts of a few hundred tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.spec: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        self.spec = vllm_spec_metrics(event) or self.spec
        text, _ = super().feed(event)
        choices = event.get("choices") or []
        ids = choices[0].get("token_ids") if choices else None
        return text, len(ids) if isinstance(ids, list) else None

    def stats(self) -> dict[str, Any]:
        return vllm_stats(self.usage, self.finish_reason, self.spec)


def vllm_stats(
    usage: dict[str, Any], finish_reason: str | None, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The requests-table statistics from the final `usage` and, when the server sent it,
    `metrics.speculative_decoding` (else no speculative fields)."""
    details = usage.get("prompt_tokens_details") or {}
    counters = vllm_details(spec)
    raw = {"usage": usage, **({"speculative_decoding": spec} if spec else {})}
    return {
        "output_tokens": usage.get("completion_tokens"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "cached_tokens": details.get("cached_tokens"),
        "finish_reason": finish_reason,
        "server_stats": json.dumps(raw, sort_keys=True),
        **counters,
        "accept_length": accept_length(usage.get("completion_tokens"), counters["spec_verify_ct"]),
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
    per_request_spec_metrics: Literal["none", "summary", "detailed"] = Field(
        "detailed",
        description="--per-request-spec-decode-metrics level added to the launch of speculative "
        "methods (those with --speculative-config): per-request acceptance on the final usage "
        "chunk; 'none' adds no flag (vLLM < 0.29 does not know it).",
    )

    memory: ClassVar[MemoryRules | None] = MEMORY


class VLLM(EngineHooks):
    """Adapter for vLLM's OpenAI-compatible server."""

    kind = KIND
    health_path = "/health"
    chat_path = "/v1/chat/completions"

    def __init__(self, cfg: VLLMEngine):
        self.cfg = cfg

    def launch(self, method: MethodFlags, tp: int, port: int) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment of one service; {model} in flags expands. The server
        runs with VLLM_SERVER_DEV_MODE=1 (unless the plan's env sets it), as `vllm bench
        sweep` starts its servers: without it /reset_prefix_cache, the reset before every
        window, is not served."""
        flags = [a.replace("{model}", self.cfg.model) for a in [*self.cfg.args, *method.args]]
        argv = [
            self.cfg.executable, "serve", self.cfg.model,
            "--tensor-parallel-size", str(tp),
            "--host", self.cfg.host_address,
            "--port", str(port),
            *flags,
            *self._spec_metrics_flag(flags),
        ]  # fmt: skip
        return argv, {"VLLM_SERVER_DEV_MODE": "1", **self.cfg.env, **method.env}

    def _spec_metrics_flag(self, flags: list[str]) -> list[str]:
        """--per-request-spec-decode-metrics LEVEL for a speculative service, unless the
        level is none or the plan's flags already say it."""
        level = self.cfg.per_request_spec_metrics
        if level == "none" or flag(flags, "--speculative-config") is None:
            return []
        if flag(flags, SPEC_METRICS_FLAG) is not None:
            return []
        return [SPEC_METRICS_FLAG, level]

    def draft_model(self, method: MethodFlags) -> str | None:
        """The "model" of --speculative-config's JSON ({model} expanded)."""
        flags = [a.replace("{model}", self.cfg.model) for a in [*self.cfg.args, *method.args]]
        try:
            return _draft_path(flags)
        except (ValueError, AttributeError):  # not a JSON object: the launch will say so
            return None

    def request(
        self, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str, dict[str, Any]]:
        return self.chat_path, chat_body(messages, max_tokens, self.cfg.request_extra)

    def template_facts(self, method: MethodFlags, host: Any) -> dict[str, str]:
        """vLLM renders prompts itself: its --chat-template, else the model's own."""
        return templates.served([*self.cfg.args, *method.args], self.cfg.model, host)

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

    async def reset_cache(self, client: httpx.AsyncClient, base_url: str) -> str:
        """POST /reset_prefix_cache before a measured window: "reset_prefix_cache".

        What vLLM does (read in its source, late 2026):
        - The route exists only with `VLLM_SERVER_DEV_MODE=1` in the server's environment
          (`vllm/entrypoints/serve/cache/api_router.py`: `attach_router` returns early
          without it), so without it the server answers 404: HookFailed naming the variable
          (set it in the plan's engine.env). `vllm bench sweep` sets it for the same reason
          (`vllm/benchmarks/sweep/server.py`) and posts the same path between runs.
        - Older builds answer an empty 200 whether or not the cache was reset ("we
          currently do not check"); newer ones (`vllm/frontend/entrypoints/serve/dev/cache/
          api_router.py`) answer `{"success": bool}`, false while blocks are still held
          (running requests, async KV offload transfers), "callers may retry": retried
          RESET_TRIES times RESET_WAIT_S apart, then HookFailed.
        - Query flags are left at their defaults: `reset_running_requests=true` would
          preempt requests still running (none should be, before a window), and
          `reset_external=true` makes the scheduler answer false when no KV connector is
          configured (`Scheduler.reset_connector_cache`). A connector's own tier (CPU
          offload, LMCache) is therefore not emptied (vllm-project/vllm#57727).
        """
        url = f"{base_url}/reset_prefix_cache"

        async def post() -> httpx.Response:
            reply = await client.post(url, timeout=30)
            if reply.status_code == 404:
                raise HookFailed(
                    "vLLM does not offer POST /reset_prefix_cache (HTTP 404): it serves it only "
                    "when started with VLLM_SERVER_DEV_MODE=1 in its environment (engine.env)"
                )
            if reply.status_code != 200:
                raise HookFailed(
                    f"vLLM did not reset its prefix cache (HTTP "
                    f"{reply.status_code}: {reply.text.strip()[:300]!r})"
                )
            return reply

        # only a 200 that is not a success is sent again; an error or exception ends it at once
        reply = await tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(RESET_TRIES),
            wait=tenacity.wait_fixed(RESET_WAIT_S),
            retry=tenacity.retry_if_result(lambda reply: not _reset_succeeded(reply.text)),
            retry_error_callback=lambda state: state.outcome.result(),  # the last reply
        )(post)
        if _reset_succeeded(reply.text):
            return "reset_prefix_cache"
        raise HookFailed(
            f"vLLM did not reset its prefix cache: {RESET_TRIES} tries answered "
            f"{reply.text.strip()[:300]!r} (blocks still held by running requests or KV "
            "transfers)"
        )


def _reset_succeeded(body: str) -> bool:
    """An empty 200 (older vLLM: success not checked) or `{"success": true}`."""
    if not body.strip():
        return True
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("success") is True


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
