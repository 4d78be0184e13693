"""SGLang (`python -m sglang.launch_server`): launch flags, prompts, requests and the
server's own figures.

Requests go to the native `POST /generate` (`api: generate`, the default: every SGLang
build reports per-request speculative counters there), with the chat rendered by the
model's Jinja2 chat template, or to the OpenAI `POST /v1/chat/completions` (`api: chat`:
SGLang applies its own template, and builds with PR #33518 answer
`"return_spec_tokens_details": true` with `sglext.spec_tokens_details`). The two streams,
their counters and the acceptance formulas are collect/engines/sglang_streams.py's:
    accept_length        = (completion_tokens - 1) / spec_verify_ct   (the one definition)
    engine_accept_length = SGLang's spec_accept_length (completion_tokens / spec_verify_ct)
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, ClassVar, Literal

import httpx
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import Field

from specsweep.collect.engines import templates
from specsweep.collect.engines.base import (
    EngineHooks,
    EngineNotReady,
    HookFailed,
    MemoryRules,
    MethodFlags,
    ResultFormat,
    flag,
)
from specsweep.collect.engines.config import EngineConfig
from specsweep.collect.engines.openai import chat_body, parse_prometheus
from specsweep.collect.engines.sglang_streams import (  # sglang_stats: re-exported for callers
    GenerateStream,
    SGLangChatStream,
    sglang_stats,  # noqa: F401
)

# server_args fields worth recording besides every `speculative_*` one; 0.5.15 has no
# cuda_graph_max_bs but disable_cuda_graph and the resolved cuda_graph_config (recorded reply)
FINGERPRINT_KEYS = (
    "version", "model_path", "tokenizer_path", "tp_size", "dp_size", "attention_backend",
    "mem_fraction_static", "context_length", "max_running_requests", "max_total_num_tokens",
    "chunked_prefill_size", "cuda_graph_max_bs", "disable_cuda_graph", "cuda_graph_config",
    "disable_radix_cache", "dtype", "mamba_scheduler_strategy", "mamba_radix_cache_strategy",
    "kv_cache_dtype", "quantization",
)  # fmt: skip


class ChatTemplateError(EngineNotReady):
    """No usable chat template for /generate prompts."""


class FlushRefused(HookFailed):
    """SGLang did not flush its radix (prefix) cache: it refuses while requests run or
    wait."""


# --- chat template -----------------------------------------------------------------------


def chat_template_from_tokenizer_config(text: str) -> str:
    """`chat_template` of a tokenizer_config.json: a string, or a list of {name, template}
    of which the one named "default" is taken."""
    template = json.loads(text).get("chat_template")
    if isinstance(template, str):
        return template
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"]
        raise ChatTemplateError(
            f"tokenizer_config.json has no 'default' template: {sorted(map(str, named))}"
        )
    raise ChatTemplateError(
        "tokenizer_config.json has no chat_template (newer models ship chat_template.jinja; "
        "set engine.chat_template in the plan)"
    )


def special_tokens_from_tokenizer_config(text: str) -> dict[str, str]:
    """bos_token/eos_token of a tokenizer_config.json (plain strings or {content: ...})."""
    config = json.loads(text)
    out: dict[str, str] = {}
    for key in ("bos_token", "eos_token"):
        value = config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            out[key] = value
    return out


def _template_env() -> ImmutableSandboxedEnvironment:
    """The environment transformers renders chat templates in (same options and helpers)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise_template_error
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def _raise_template_error(message: str) -> None:
    raise ChatTemplateError(f"the chat template refused the messages: {message}")


# --- the adapter -------------------------------------------------------------------------


KIND = "sglang"


def _default_fraction(gpu_gib: float, tp: int) -> tuple[float, str]:
    """SGLang reserves at least 10 GiB on GPUs above 60 GiB, else about 3.5 GiB + tp/8 GiB
    (its own estimate)."""
    reserved = 10.0 if gpu_gib > 60 else 3.5 + tp / 8
    return 1 - reserved / gpu_gib, f"SGLang's default estimate: {reserved:g} GiB reserved"


MEMORY = MemoryRules(
    fraction_flag="--mem-fraction-static",
    context_flag="--context-length",
    default_fraction=_default_fraction,
    draft_path=lambda args: flag(args, "--speculative-draft-model-path"),
    state_ratio_flag="--mamba-full-memory-ratio",
    state_ratio_default=0.9,
    draft_tokens_flag="--speculative-num-draft-tokens",
)


MIN_BFS, MAX_BFS = "--speculative-ngram-min-bfs-breadth", "--speculative-ngram-max-bfs-breadth"
# (flag, SGLang's default, the least value its NGRAM corpus accepts)
NGRAM_LIMITS = (
    ("--speculative-ngram-max-trie-depth", "18", 2),
    (MIN_BFS, "1", 1),
    (MAX_BFS, "10", 1),
    ("--speculative-num-draft-tokens", "1", 1),
)


class SGLangEngine(EngineConfig):
    kind: Literal["sglang"] = Field(description="SGLang (python -m sglang.launch_server).")
    python: str = Field("python3", description="Python interpreter on the host (e.g. a venv's).")
    chat_template: str | None = Field(
        None,
        description="Jinja2 chat template for /generate prompts; default: `chat_template` of "
        "the model's tokenizer_config.json, read over the host (api: generate only).",
    )
    api: Literal["generate", "chat"] = Field(
        "generate",
        description="Where requests go: 'generate' (native /generate, per-request speculative "
        "counters from every SGLang build) or 'chat' (/v1/chat/completions with "
        "return_spec_tokens_details: SGLang's own chat template; counters only from builds "
        "with PR #33518).",
    )

    memory: ClassVar[MemoryRules | None] = MEMORY

    def method_problems(self, args: list[str]) -> list[str]:
        """NGRAM's corpus refuses these at start (sglang/jit_kernel/csrc/ngram_corpus/
        ngram.cpp, 0.5.15), after the weights are loaded: about a minute of GPU time each.
        Found on the H200 on 2026-12-04 with a depth of 1 for K = 1."""
        if (flag(args, "--speculative-algorithm") or "").upper() != "NGRAM":
            return []
        problems, given = [], {}
        for name, default, low in NGRAM_LIMITS:
            value = flag(args, name) or default
            if not value.lstrip("-").isdigit():
                problems.append(f"{name} {value!r} is not a whole number")
            elif int(value) < low:
                problems.append(f"{name} {value}: SGLang's NGRAM needs at least {low}")
            else:
                given[name] = int(value)
        low, high = given.get(MIN_BFS), given.get(MAX_BFS)
        if low is not None and high is not None and low > high:
            problems.append(f"{MIN_BFS} {low} is above {MAX_BFS} {high}")
        return problems


class SGLang(EngineHooks):
    """Adapter for SGLang's HTTP server."""

    kind = KIND
    health_path = "/health"
    generate_path = "/generate"
    chat_path = "/v1/chat/completions"

    def __init__(self, cfg: SGLangEngine):
        self.cfg = cfg
        self._template = None
        self._tokens: dict[str, str] = {}
        self._template_facts = templates.facts(None, templates.UNKNOWN)
        if cfg.chat_template:
            self.set_chat_template(cfg.chat_template)
            self._template_facts = templates.facts(cfg.chat_template, "plan engine.chat_template")

    def launch(self, method: MethodFlags, tp: int, port: int) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment of one service; {model} in flags expands."""
        flags = [a.replace("{model}", self.cfg.model) for a in [*self.cfg.args, *method.args]]
        argv = [
            self.cfg.python, "-m", "sglang.launch_server",
            "--model-path", self.cfg.model,
            "--tp-size", str(tp),
            "--host", self.cfg.host_address,
            "--port", str(port),
            *flags,
        ]  # fmt: skip
        return argv, {**self.cfg.env, **method.env}

    def prepare(self, host: Any) -> None:
        """Read the chat template (and bos/eos) from the model's tokenizer_config.json on
        the host, unless the plan gives one or requests go to the chat endpoint."""
        if self._template is not None or self.cfg.api == "chat":
            return
        path = f"{self.cfg.model.rstrip('/')}/tokenizer_config.json"
        try:
            text = host.read_file(path)
        except OSError as exc:
            raise ChatTemplateError(
                f"cannot read {path} on the host ({exc}); give engine.chat_template in the plan"
            ) from None
        try:
            template = chat_template_from_tokenizer_config(text)
        except ChatTemplateError:
            # transformers >= 4.43 saves the template beside it, as chat_template.jinja
            path = f"{self.cfg.model.rstrip('/')}/chat_template.jinja"
            try:
                template = host.read_file(path)
            except OSError:
                raise ChatTemplateError(
                    f"neither tokenizer_config.json nor {path} holds a chat template on the "
                    "host; give engine.chat_template in the plan"
                ) from None
        self.set_chat_template(template, **special_tokens_from_tokenizer_config(text))
        self._template_facts = templates.facts(template, f"specsweep renders {path}")

    def set_chat_template(
        self, template: str, bos_token: str | None = None, eos_token: str | None = None
    ) -> None:
        """Compile the Jinja2 chat template (errors surface here, not per request)."""
        self._template = _template_env().from_string(template)
        tokens = {"bos_token": bos_token, "eos_token": eos_token}
        self._tokens = {k: v for k, v in tokens.items() if v is not None}

    def render_prompt(self, messages: list[dict[str, str]]) -> str:
        if self._template is None:
            raise ChatTemplateError(
                "SGLang's /generate needs a chat template: set engine.chat_template in the plan "
                "or call set_chat_template() with the model's tokenizer_config.json chat_template"
            )
        return self._template.render(messages=messages, add_generation_prompt=True, **self._tokens)

    def request(
        self, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str, dict[str, Any]]:
        if self.cfg.api == "chat":
            extra = {
                "model": self.cfg.model,
                "return_spec_tokens_details": True,
                **self.cfg.request_extra,
            }
            return self.chat_path, chat_body(messages, max_tokens, extra)
        # request_extra's sampling_params (e.g. ignore_eos) join the defaults, not replace them
        extra = dict(self.cfg.request_extra)
        sampling = {
            "max_new_tokens": max_tokens,
            "temperature": 0,
            **extra.pop("sampling_params", {}),
        }
        body = {
            "text": self.render_prompt(messages),
            "sampling_params": sampling,
            "stream": True,
            **extra,
        }
        return self.generate_path, body

    def template_facts(self, method: MethodFlags, host: Any) -> dict[str, str]:
        """api generate: the template specsweep renders (the plan's, else the model's
        tokenizer_config.json); api chat: SGLang's own (--chat-template, else the model's)."""
        if self.cfg.api == "chat":
            return templates.served([*self.cfg.args, *method.args], self.cfg.model, host)
        return dict(self._template_facts)

    def parser(self) -> GenerateStream | SGLangChatStream:
        return SGLangChatStream() if self.cfg.api == "chat" else GenerateStream()

    def draft_model(self, method: MethodFlags) -> str | None:
        """--speculative-draft-model-path of the launch flags ({model} expanded)."""
        given = MEMORY.draft_path([*self.cfg.args, *method.args])
        return given.replace("{model}", self.cfg.model) if given else None

    async def fingerprint(self, client: httpx.AsyncClient, base_url: str) -> dict[str, str]:
        """Version, model and every speculative_* server argument from /server_info."""
        info = await server_info(client, base_url)
        keys = [*FINGERPRINT_KEYS, *sorted(k for k in info if k.startswith("speculative_"))]
        return {f"engine.{k}": _text(info[k]) for k in keys if k in info}

    async def scrape(self, client: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
        """avg_spec_accept_length of internal_states[0] (cumulative since start), plus the
        Prometheus samples of /metrics when the server runs with --enable-metrics."""
        samples = _server_info_samples(await server_info(client, base_url))
        try:
            reply = await client.get(f"{base_url}/metrics", timeout=10)
        except httpx.HTTPError:
            return samples
        if reply.status_code == 200:
            samples += parse_prometheus(reply.text)
        return samples

    async def reset_cache(self, client: httpx.AsyncClient, base_url: str) -> str:
        """Before each measured window (plan `prefix_cache: reset`): POST /flush_cache,
        "flush_cache"; FlushRefused (a HookFailed) when SGLang did not flush."""
        await self.flush_cache(client, base_url)
        return "flush_cache"

    async def flush_cache(self, client: httpx.AsyncClient, base_url: str) -> None:
        """POST /flush_cache; raise FlushRefused unless SGLang says it flushed.

        SGLang answers 400 when it refuses (requests running), and some builds send the
        "Cache flushed." text with that 400, so both status and body must agree."""
        reply = await client.post(f"{base_url}/flush_cache", timeout=30)
        body = reply.text.strip()
        if reply.status_code == 200 and body.startswith("Cache flushed"):
            return
        raise FlushRefused(
            f"SGLang did not flush its cache (HTTP {reply.status_code}: {body[:300]!r}); "
            "it refuses while requests are running or waiting"
        )


async def server_info(client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
    """GET /server_info (older builds: /get_server_info); {} when neither answers."""
    for path in ("/server_info", "/get_server_info"):
        try:
            reply = await client.get(f"{base_url}{path}", timeout=10)
            info = reply.json() if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(info, dict):
            return info
    return {}


def _server_info_samples(info: dict[str, Any]) -> list[dict[str, Any]]:
    states = info.get("internal_states") or [{}]
    value = states[0].get("avg_spec_accept_length") if isinstance(states[0], dict) else None
    if not isinstance(value, (int, float)):
        return []
    return [
        {
            "source": "server_info",
            "name": "avg_spec_accept_length",
            "labels": "{}",
            "value": float(value),
        }
    ]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


# `python -m sglang.bench_serving --output-details`: vLLM's lists plus keys of its own
RESULT_FILE = ResultFormat(
    markers=("total_output_tokens_retokenized", "mean_e2e_latency_ms"),
    metric_keys={"e2el": "e2e_latency"},
)

Config = SGLangEngine
Adapter = SGLang
