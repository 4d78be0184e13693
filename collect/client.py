"""The streaming client: send one request, stamp every chunk on arrival, return a Result.

Timing follows DESIGN.md: t0 = perf_counter() immediately before the request is sent
(the body is encoded before t0); every network read is stamped with perf_counter() as
soon as it arrives, before any parsing, and each server-sent event in that read gets
the read's stamp. TTFT is the first event carrying generated text, E2E the last one;
role-only, usage-only and final stats events do not move them. The engine adapter's
parser says which events carry text and where the server's statistics are.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx

from schema.store import utcnow


class StreamParser(Protocol):
    """Per-request state of an engine's stream format."""

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        """Consume one decoded event; return (new text, tokens in it or None if unknown)."""

    def stats(self) -> dict[str, Any]:
        """Server statistics: output_tokens, prompt_tokens, cached_tokens, finish_reason,
        spec_verify_ct, draft_tokens, accepted_tokens, accept_length, server_stats."""


class ProtocolError(Exception):
    """The server's reply is not what the engine's protocol says."""


@dataclass
class Result:
    sent_at: datetime
    t0: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = field(default_factory=list)
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    error_kind: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def iter_sse(buffer: bytearray) -> list[bytes]:
    """Pop complete events' data payloads from buffer (events end with a blank line)."""
    out: list[bytes] = []
    while True:
        end, sep = _event_end(buffer)
        if end < 0:
            return out
        block = bytes(buffer[:end])
        del buffer[: end + sep]
        data = [ln[5:].lstrip() for ln in block.splitlines() if ln.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data))


def _event_end(buffer: bytearray) -> tuple[int, int]:
    lf, crlf = buffer.find(b"\n\n"), buffer.find(b"\r\n\r\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf, 4
    return lf, 2


async def stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    parser: StreamParser,
    timeout_s: float,
) -> Result:
    """Send one streaming request; never raises for server or network faults."""
    request = client.build_request("POST", url, json=body)
    result = Result(sent_at=utcnow(), t0=time.perf_counter())
    try:
        async with asyncio.timeout(timeout_s):
            await _consume(client, request, parser, result)
    except TimeoutError:
        _fail(result, "timeout", f"no complete reply within {timeout_s:g} s")
    except httpx.ConnectError as exc:
        _fail(result, "connect", f"cannot connect to {url}: {exc}")
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        _fail(result, "server_died", f"connection broke mid-reply: {exc!r}")
    except httpx.HTTPError as exc:
        _fail(result, "connect", f"{type(exc).__name__}: {exc}")
    except ProtocolError as exc:
        _fail(result, "protocol", str(exc))
    if result.ok and not result.chunk_times_s:
        _fail(result, "empty", "the reply carried no generated text")
    return result


async def _consume(
    client: httpx.AsyncClient, request: httpx.Request, parser: StreamParser, result: Result
) -> None:
    t0 = result.t0 = time.perf_counter()
    response = await client.send(request, stream=True)
    try:
        if response.status_code != 200:
            body = (await response.aread())[:500].decode("utf-8", "replace")
            _fail(result, "http", f"HTTP {response.status_code}: {body}")
            return
        buffer = bytearray()
        done = False
        async for raw in response.aiter_raw():
            now = time.perf_counter()
            buffer += raw
            for data in iter_sse(buffer):
                if data == b"[DONE]":
                    done = True
                    break
                _take(parser, _decode(data), now - t0, result)
            if done:
                break
        result.stats = parser.stats()
        if not done:
            # every engine ends a complete stream with `data: [DONE]`; without it the
            # reply was cut short and its counts cannot be trusted
            raise ProtocolError("the stream ended without data: [DONE] (truncated reply)")
    finally:
        await response.aclose()


def _decode(data: bytes) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except ValueError:
        raise ProtocolError(f"event is not JSON: {data[:200]!r}") from None
    if not isinstance(event, dict):
        raise ProtocolError(f"event is not a JSON object: {data[:200]!r}")
    if "error" in event:
        raise ProtocolError(f"server reported an error: {json.dumps(event['error'])[:300]}")
    return event


def _take(parser: StreamParser, event: dict[str, Any], offset: float, result: Result) -> None:
    text, n_tokens = parser.feed(event)
    if not text and not n_tokens:
        return
    result.text += text
    if result.ttft_s is None:
        result.ttft_s = offset
    result.e2e_s = offset
    result.chunk_times_s.append(offset)
    if result.chunk_tokens is not None:
        if n_tokens is None:
            result.chunk_tokens = None  # the engine does not say; per-token ITL assumes 1
        else:
            result.chunk_tokens.append(n_tokens)


def _fail(result: Result, kind: str, message: str) -> None:
    result.error_kind = kind
    result.error_message = message[:1000]
