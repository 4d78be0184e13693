"""Engine-shaped HTTP test servers: SGLang's and vLLM's reply shapes with scripted timing.

A stdlib asyncio HTTP/1.1 server (keep-alive, chunked streaming) runs in a background
thread on 127.0.0.1, port 0. A Script fixes when chunks leave (first chunk `ttft_s` after
the request arrived, then one every `gap_s`, scheduled on absolute times so delays do not
add up), how many tokens each chunk holds, and the acceptance: every chunk is one target
verify step yielding its tokens (accepted drafts + 1 bonus), the first chunk also holding
the token sampled at prefill (shaped_details.step_accepted); the acceptance details the
servers send are shaped_details.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tests.support.shaped_details import sglang_spec, sglext_details, step_accepted, vllm_spec
from tests.support.shaped_http import Reply, Request, serve

__all__ = ["Reply", "Request", "Script", "SGLangServer", "ShapedServer", "VLLMServer", "serve"]


@dataclass(frozen=True)
class Script:
    ttft_s: float = 0.08
    gap_s: float = 0.03
    chunk_tokens: tuple[int, ...] = (4, 3, 4, 3, 4, 3, 4, 3)
    drafts_per_step: int = 7  # draft tokens proposed per verify step
    prompt_tokens: int = 17
    cached_tokens: int = 5
    tail_s: float = 0.0  # vLLM: delay of the finish and usage chunks after the last text
    old_names: bool = False  # SGLang: spec_draft_token_num / spec_accept_token_num
    finish_as_dict: bool = True  # SGLang: {"type": "length", "length": N} vs "length"
    report_verify_ct: bool = True  # SGLang: send spec_verify_ct
    legacy_info_path: bool = False  # SGLang: only /get_server_info answers
    flush_refusal_body: str | None = None  # SGLang: refuse with 200 and this body
    flush_always_busy: bool = False  # SGLang: /flush_cache answers as if requests were running
    stamp: bool = False  # put perf_counter() at send time into each event as "t_sent"
    serial: bool = False  # vLLM: one chat at a time, the rest wait (a server at capacity)
    total_suffix: bool = True  # vLLM: counters exposed as *_total (typed) or bare (untyped)
    dev_mode: bool = True  # vLLM: VLLM_SERVER_DEV_MODE=1, else /reset_prefix_cache is a 404
    reset_reply: str = "success"  # vLLM: "success" ({"success": bool}) or "empty" (older: bare 200)
    reset_refusals: int = 0  # vLLM: answer {"success": false} to the first N resets
    spec_metrics: str = "none"  # vLLM: none | summary | detailed | stats (the earlier form)
    sglext: bool = True  # SGLang chat: a build with PR #33518 (spec_tokens_details)

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def steps(self) -> int:
        return len(self.chunk_tokens)

    @property
    def step_accepted(self) -> list[int]:
        """Accepted drafts of each verify step (shaped_details.step_accepted)."""
        return step_accepted(self.chunk_tokens, self.drafts_per_step)

    @property
    def verify_steps(self) -> int:
        return len(self.step_accepted)

    def words(self, start: int, n: int) -> str:
        return "".join(f"t{i} " for i in range(start, start + n))

    @property
    def text(self) -> str:
        return self.words(0, self.tokens)


class ShapedServer:
    """Connection handling; subclasses implement route()."""

    def __init__(self, script: Script):
        self.script = script
        self.busy = 0
        self.bodies: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()  # "POST /flush_cache" -> times asked
        self.one_at_a_time = asyncio.Lock()  # Script.serial

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                line, *fields = head.split("\r\n")
                method, target, _ = line.split(" ", 2)
                headers = dict(f.lower().split(": ", 1) for f in fields if ": " in f)
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.calls[f"{method} {urlsplit(target).path}"] += 1
                await self.route(Request(method, urlsplit(target).path, body), Reply(writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def route(self, req: Request, reply: Reply) -> None:
        raise NotImplementedError

    async def play(self, reply: Reply, chunk_event: Any) -> None:
        """Send one event per scripted chunk at t_arrival + ttft + i * gap."""
        loop = asyncio.get_running_loop()
        start, sent = loop.time(), 0
        for i, n in enumerate(self.script.chunk_tokens):
            await asyncio.sleep(
                max(0.0, start + self.script.ttft_s + i * self.script.gap_s - loop.time())
            )
            event = chunk_event(i, sent, n)
            if self.script.stamp:  # CLOCK_MONOTONIC: comparable with the client's stamps
                event["t_sent"] = time.perf_counter()
            await reply.event(event)
            sent += n


# --- SGLang ------------------------------------------------------------------------------


class SGLangServer(ShapedServer):
    """/health, /generate (cumulative text and meta_info), /server_info, /flush_cache."""

    def __init__(self, script: Script):
        super().__init__(script)
        self.served_tokens = 0
        self.served_steps = 0

    async def route(self, req: Request, reply: Reply) -> None:
        info_path = "/get_server_info" if self.script.legacy_info_path else "/server_info"
        if req.path == "/health":
            await reply.send(200, "")
        elif req.path == "/generate":
            await self.generate(req, reply)
        elif req.path == "/v1/chat/completions":
            await self.chat(req, reply)
        elif req.path == info_path:
            await reply.send(200, self.server_info())
        elif req.path == "/flush_cache":
            await self.flush(reply)
        else:
            await reply.send(404, {"detail": "Not Found"})

    async def generate(self, req: Request, reply: Reply) -> None:
        self.bodies.append(req.json())
        self.busy += 1
        try:
            await reply.start_stream()

            def chunk(i: int, sent: int, n: int) -> dict[str, Any]:
                done = i == self.script.steps - 1
                return {
                    "text": self.script.words(0, sent + n),
                    "meta_info": self.meta(sent + n, i + 1, done),
                }

            await self.play(reply, chunk)
            self.served_tokens += self.script.tokens
            self.served_steps += self.script.verify_steps
            await reply.end_stream()
        finally:
            self.busy -= 1

    async def chat(self, req: Request, reply: Reply) -> None:
        """OpenAI chunks; sglext.spec_tokens_details in a chunk of its own (empty choices)
        after the finish chunk when asked, then usage (serving_chat.py's order)."""
        body = req.json()
        self.bodies.append(body)
        await reply.start_stream()

        def chunk(i: int, sent: int, n: int) -> dict[str, Any]:
            return _chunk({"content": self.script.words(sent, n)})

        await self.play(reply, chunk)
        await reply.event(_chunk({}, finish_reason="length"))
        meta = self.meta(self.script.tokens, self.script.steps, True)
        if body.get("return_spec_tokens_details") and self.script.sglext:
            await reply.event(_event([], sglext={"spec_tokens_details": sglext_details(meta)}))
        if (body.get("stream_options") or {}).get("include_usage"):
            await reply.event(_event([], usage=_usage(self.script)))
        await reply.end_stream()

    def meta(self, tokens: int, steps: int, done: bool) -> dict[str, Any]:
        """Cumulative meta_info after `steps` verify steps that produced `tokens`."""
        s = self.script
        finish = {"type": "length", "length": tokens} if s.finish_as_dict else "length"
        spec = sglang_spec(s.chunk_tokens[:steps], s.drafts_per_step)
        if not s.report_verify_ct:
            del spec["spec_verify_ct"]
        if s.old_names:  # older builds: other names, no histogram
            spec["spec_accept_token_num"] = spec.pop("spec_num_correct_drafts")
            spec["spec_draft_token_num"] = spec.pop("spec_num_proposed_drafts")
            del spec["spec_correct_drafts_histogram"]
        return {
            "id": "req-1",
            "prompt_tokens": s.prompt_tokens,
            "completion_tokens": tokens,
            "cached_tokens": s.cached_tokens,
            "finish_reason": finish if done else None,
            "e2e_latency": s.ttft_s + (steps - 1) * s.gap_s,
            **spec,
        }

    def server_info(self) -> dict[str, Any]:
        avg = self.served_tokens / self.served_steps if self.served_steps else 0.0
        return {
            "model_path": "shaped/model",
            "tp_size": 2,
            "attention_backend": "fa3",
            "speculative_algorithm": "DFLASH",
            "speculative_num_draft_tokens": self.script.drafts_per_step + 1,
            "speculative_draft_model_path": None,
            "internal_states": [{"avg_spec_accept_length": avg, "num_running_reqs": self.busy}],
            "version": "0.0.shaped",
        }

    async def flush(self, reply: Reply) -> None:
        busy = self.busy or self.script.flush_always_busy
        if busy and self.script.flush_refusal_body is not None:
            await reply.send(200, self.script.flush_refusal_body, "text/plain")
            return
        # a refusal is a 400 that still says "Cache flushed.", as several SGLang builds answer
        await reply.send(
            400 if busy else 200,
            "Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n",
            "text/plain",
        )


# --- vLLM --------------------------------------------------------------------------------


class VLLMServer(ShapedServer):
    """/health, /v1/chat/completions (OpenAI chunks), /metrics (spec_decode counters),
    /reset_prefix_cache (only in dev mode, as vLLM)."""

    def __init__(self, script: Script):
        super().__init__(script)
        # non-zero start: only deltas are meaningful
        self.counters = dict(num_drafts=100.0, num_draft_tokens=700.0, num_accepted_tokens=250.0)
        self.per_pos = [90.0 - 10 * k for k in range(script.drafts_per_step)]

    async def route(self, req: Request, reply: Reply) -> None:
        if req.path == "/health":
            await reply.send(200, "")
        elif req.path == "/v1/chat/completions":
            await self.chat(req, reply)
        elif req.path == "/metrics":
            await reply.send(200, self.metrics(), "text/plain; version=0.0.4")
        elif req.path == "/reset_prefix_cache" and self.script.dev_mode:
            await self.reset(reply)
        elif req.path == "/version":
            await reply.send(200, {"version": "0.0.shaped"})
        elif req.path == "/v1/models":
            model = {"id": "shaped/model", "root": "/models/shaped", "max_model_len": 4096}
            await reply.send(200, {"object": "list", "data": [model]})
        else:
            await reply.send(404, {"detail": "Not Found"})

    async def chat(self, req: Request, reply: Reply) -> None:
        body = req.json()
        self.bodies.append(body)
        ids = bool(body.get("return_token_ids"))
        self.busy += 1
        try:
            async with self.one_at_a_time if self.script.serial else contextlib.nullcontext():
                await self._chat(body, ids, reply)
        finally:
            self.busy -= 1

    async def _chat(self, body: dict[str, Any], ids: bool, reply: Reply) -> None:
        await reply.start_stream()
        await reply.event(_chunk({"role": "assistant", "content": ""}))

        def chunk(i: int, sent: int, n: int) -> dict[str, Any]:
            extra = {"token_ids": list(range(sent, sent + n))} if ids else {}
            return _chunk({"content": self.script.words(sent, n)}, **extra)

        await self.play(reply, chunk)
        self.advance()
        await asyncio.sleep(self.script.tail_s)
        s = self.script
        level = s.spec_metrics
        stats = vllm_spec(s.chunk_tokens, s.drafts_per_step, "detailed", sparse=True)
        extra = {"speculative_decoding_stats": stats} if level == "stats" else {}
        await reply.event(_chunk({}, finish_reason="length", **extra))
        if (body.get("stream_options") or {}).get("include_usage"):
            metrics = (
                {
                    "metrics": {
                        "speculative_decoding": vllm_spec(s.chunk_tokens, s.drafts_per_step, level)
                    }
                }
                if level in ("summary", "detailed")
                else {}
            )
            await reply.event(_event([], usage=self.usage(), **metrics))
        await reply.end_stream()

    async def reset(self, reply: Reply) -> None:
        """Newer vLLM: {"success": bool}, false while blocks are held; older: an empty 200."""
        if self.script.reset_reply == "empty":
            await reply.send(200, "", "text/plain")
            return
        refused = self.calls["POST /reset_prefix_cache"] <= self.script.reset_refusals
        await reply.send(200, {"success": not refused and not self.busy})

    def advance(self) -> None:
        """Counters after one request: each verify step is one draft of drafts_per_step tokens."""
        s = self.script
        self.counters["num_drafts"] += s.verify_steps
        self.counters["num_draft_tokens"] += s.verify_steps * s.drafts_per_step
        self.counters["num_accepted_tokens"] += sum(s.step_accepted)
        for accepted in s.step_accepted:
            for k in range(accepted):
                self.per_pos[k] += 1

    def usage(self) -> dict[str, Any]:
        return _usage(self.script)

    def metrics(self) -> str:
        """Prometheus text: typed counters with `_total` (and `_created`), or bare untyped."""
        labels = 'engine="0",model_name="shaped/model"'
        lines = [f"vllm:num_requests_running{{{labels}}} 0.0"]
        series = [(name, labels, v) for name, v in self.counters.items()]
        series += [
            ("num_accepted_tokens_per_pos", f'{labels},position="{k}"', v)
            for k, v in enumerate(self.per_pos)
        ]
        for name, labelset, value in series:
            full = f"vllm:spec_decode_{name}"
            if not self.script.total_suffix:
                lines.append(f"{full}{{{labelset}}} {value}")
                continue
            if f"# TYPE {full} counter" not in lines:
                lines += [f"# HELP {full} Speculative decoding counter.", f"# TYPE {full} counter"]
            lines += [f"{full}_total{{{labelset}}} {value}", f"{full}_created{{{labelset}}} 1.7e9"]
        return "\n".join(lines) + "\n"


def _usage(s: Script) -> dict[str, Any]:
    return {
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.tokens,
        "total_tokens": s.prompt_tokens + s.tokens,
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens},
    }


def _chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason, **extra}
    return _event([choice])


def _event(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "c-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": choices,
        **extra,
    }
