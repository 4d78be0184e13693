"""What the OpenAI-compatible servers (llama.cpp, vLLM, SGLang) share: the streaming chat request
body, the parser state of one chat completion stream, and the Prometheus samples of their
`/metrics`. Every adapter imports these from here; no adapter imports another adapter.

A chat stream is a run of SSE events, each a JSON chunk whose `choices[0].delta.content` carries
the next text; `choices[0].finish_reason` is set on the last chunk with choices, and (with
`stream_options.include_usage`) a final chunk without choices carries `usage`. What an engine
adds (llama.cpp's `timings`, vLLM's `metrics.speculative_decoding`, SGLang's `sglext`) its own
subclass keeps, and its `stats` turns into the requests table's statistics.
"""

from __future__ import annotations

import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def chat_body(
    messages: list[dict[str, str]], max_tokens: int, extra: dict[str, Any]
) -> dict[str, Any]:
    """An OpenAI streaming chat request at temperature 0 whose last event carries usage."""
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


class OpenAIChatStream:
    """Parser state of one OpenAI-style chat completion stream: the last `usage` and
    `finish_reason` seen. `feed` returns the chunk's text and None tokens (the chunk does not
    say how many; the client counts one per non-empty delta). An engine's subclass gives
    `stats` (collect.engines.base.StreamParser)."""

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        choices = event.get("choices") or []
        if not choices:
            return "", None
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return (choice.get("delta") or {}).get("content") or "", None

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError("an engine's stream says which statistics its server sends")


def parse_prometheus(text: str) -> list[dict[str, Any]]:
    """Samples of a Prometheus text exposition as {source, name, labels (JSON), value}."""
    return [
        {
            "source": "metrics",
            "name": sample.name,
            "labels": json.dumps(sample.labels, sort_keys=True),
            "value": float(sample.value),
        }
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
