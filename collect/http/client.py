"""The streaming client: send one request, stamp every chunk on arrival, return a Result.

Timing follows DESIGN.md: t0 = perf_counter() immediately before the request is sent
(the body is encoded before t0); every network read is stamped with its arrival, the
kernel's receive time where the system gives one (collect/http/connection.py says why and how),
and each server-sent event gets the stamp of the read that completed it. TTFT is the
first event carrying generated text, E2E the last one;
role-only, usage-only and final stats events do not move them. The engine adapter's
parser says which events carry text and where the server's statistics are.

JSON is decoded by the C scanner directly (json.loads' Python layers around it cost as
much as the parse), and the text is joined once at the end: the reader callback's cost
per event delays the reads of every other stream (collect/http/connection.py says why that counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx

from specsweep.collect.http import connection as http1
from specsweep.collect.http.loop_lag import Shared
from specsweep.schema.store import utcnow


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
    # reads that carried bytes after a chunk (collect/http/loop_lag.py: whose stamps may be
    # late if the loop was); kept in memory for the window's verdict, never stored
    shared: list[Shared] = field(default_factory=list)
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    error_kind: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def iter_sse(buffer: bytearray) -> list[bytes]:
    """Pop complete events' data payloads from buffer (events end with a blank line). One
    pass over what arrived: line ends are made LF (a CR left at the end waits for its LF),
    then the buffer splits on blank lines."""
    if b"\r\n" in buffer:
        buffer[:] = buffer.replace(b"\r\n", b"\n")
    *blocks, rest = buffer.split(b"\n\n")
    if not blocks:
        return []
    buffer[:] = rest
    out: list[bytes] = []
    for block in blocks:
        if block.startswith(b"data:") and b"\n" not in block:  # the usual one-line event
            out.append(_field_value(block))
            continue
        data = [_field_value(ln) for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data))
    return out


def _field_value(line: bytes) -> bytes:
    """A `data:` line's value: what follows the colon, less ONE leading space (the SSE
    spec; any other whitespace is part of the data)."""
    return line[6:] if line.startswith(b"data: ") else line[5:]


def http_client(**options: Any) -> httpx.AsyncClient:
    """The httpx client of a service's other requests (health, scrapes, server info, cache
    flush), which also owns the measurement path's connection pool. Environment proxies
    (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY) are ignored, as the measurement path ignores them:
    see collect/http/__init__.py."""
    return httpx.AsyncClient(trust_env=False, **options)


async def prewarm(
    client: httpx.AsyncClient, base_url: str, n: int, probe: str | None = None
) -> None:
    """Before a window of n concurrent streams: hold n open connections to the server in
    `client`'s pool, each having answered `GET probe` if given (see http1.prewarm); a failure
    here is left to the requests to report."""
    with contextlib.suppress(http1.ConnectFailed, OSError):
        await http1.prewarm(client, base_url, n, probe)


async def stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    parser: StreamParser,
    timeout_s: float,
) -> Result:
    """Send one streaming request; never raises for server or network faults. The request
    carries `client`'s headers (API keys) and reuses its pooled connections (see http1).

    The resend loop (NO_REPLY_ATTEMPTS) stays hand-written rather than tenacity's: only
    the first send may reuse a pooled connection, t0 is re-taken before each send, nothing
    waits between sends, and it runs per request on the event loop that stamps every
    stream's reads, where an AsyncRetrying costs about 25 us against 0.4 us for the loop
    (one send that succeeds; measured 2026-12-04 on the 2-core VM, tenacity 9.2.1)."""
    await _turn()  # many requests due at once go out a few per turn of the loop
    payload = json.dumps(body).encode()
    headers = {k: v for k, v in client.headers.items() if k.lower() not in NOT_FORWARDED}
    headers["Content-Type"] = "application/json"
    result = Result(sent_at=utcnow(), t0=time.perf_counter())
    events = _Events(parser, result)
    try:
        async with asyncio.timeout(timeout_s):
            for attempt in range(NO_REPLY_ATTEMPTS):
                result.t0 = time.perf_counter()  # a resent request is measured from its send
                try:
                    status, error_body = await http1.post(
                        client, url, headers, payload, events, result.t0, reuse=not attempt
                    )
                    break
                except http1.NoReply:
                    if attempt == NO_REPLY_ATTEMPTS - 1:
                        raise
        if status != 200:
            _fail(result, "http", f"HTTP {status}: {error_body.decode('utf-8', 'replace')}")
        else:
            result.stats = parser.stats()
            if not events.done:
                # every engine ends a complete stream with `data: [DONE]`; without it the
                # reply was cut short and its counts cannot be trusted
                raise ProtocolError("the stream ended without data: [DONE] (truncated reply)")
    except TimeoutError:
        _fail(result, "timeout", f"no complete reply within {timeout_s:g} s")
    except http1.ConnectFailed as exc:
        _fail(result, "connect", f"cannot connect to {url}: {exc}")
    except http1.ConnectionBroke as exc:
        _fail(result, "server_died", f"connection broke mid-reply: {exc}")
    except (ProtocolError, http1.BadReply) as exc:
        _fail(result, "protocol", str(exc))
    result.text = "".join(events.texts)  # what came before a fault too, for the record
    if result.ok and not result.chunk_times_s:
        _fail(result, "empty", "the reply carried no generated text")
    return result


class _Turns:
    """Lets SENDS_PER_TURN requests go out per turn of the event loop; the others wait for
    later turns, in order. A window of 1,024 streams starts all its requests in one turn,
    and sending one costs about 0.1 ms (encoding, a pooled connection, the write), so
    without this the loop was held 110-130 ms before any stream's reply was read again: the
    first replies' chunks then shared reads under late stamps (tests/bench/bench_client.py,
    2026-12-06). A turn's sends cost at most about 1.8 ms. An open-loop request waits here
    like any other: its t0 is its real send, and start_s - scheduled_s (collect/run/openloop.py)
    keeps the wait."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.used, self.armed = loop, 0, False
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def wait(self) -> None:
        if self.used < SENDS_PER_TURN and not self.waiting:
            self.used += 1
        else:
            self.waiting.append(future := self.loop.create_future())
            self._arm()
            await future
        self._arm()

    def _arm(self) -> None:
        if not self.armed:
            self.armed = True
            self.loop.call_soon(self._next)

    def _next(self) -> None:
        """A new turn: release the next waiters (they run in the turn after this one)."""
        self.armed, self.used = False, 0
        while self.waiting and self.used < SENDS_PER_TURN:
            if not (future := self.waiting.popleft()).done():  # not cancelled meanwhile
                future.set_result(None)
                self.used += 1
        if self.waiting:
            self._arm()


SENDS_PER_TURN = 16
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def _turn() -> None:
    loop = asyncio.get_running_loop()
    if (turns := _TURNS.get(loop)) is None:
        turns = _TURNS[loop] = _Turns(loop)
    await turns.wait()


# sends of one request whose connection ends before any byte of the reply (the first on a
# pooled connection, the others on new ones); then it is recorded as server_died
NO_REPLY_ATTEMPTS = 3

# httpx's own defaults, or framing the streaming client sets itself
NOT_FORWARDED = {"accept-encoding", "connection", "host", "content-length", "transfer-encoding"}


class _Events:
    """The sink of a 200 reply's body: events in it, stamped with the read that completed
    them, go through the engine's parser into the Result (in the connection's reader
    callback, as bytes arrive; the text is joined once the reply is over)."""

    def __init__(self, parser: StreamParser, result: Result):
        self.parser, self.result = parser, result
        self.buffer = bytearray()
        self.texts: list[str] = []
        self.done = False

    def __call__(self, stamp: float, data: bytes) -> bool:
        self.buffer += data
        offset, times = stamp - self.result.t0, self.result.chunk_times_s
        before = len(times)
        last_was_text = False  # the read's last event was a text chunk
        for payload in iter_sse(self.buffer):
            if payload == b"[DONE]":
                self.done, last_was_text = True, False
                break
            n = len(times)
            _take(self.parser, _decode(payload), offset, self.result, self.texts)
            last_was_text = len(times) > n
        if len(times) > before:
            # the chunks this read completed; the last one's stamp is its own only when
            # nothing came after it in the read (no other event, no part of one)
            own = last_was_text and not self.buffer
            if (end := len(times) - own) > before:
                self.result.shared.append((time.perf_counter(), stamp, before, end, int(not own)))
        return self.done


_scan = json.JSONDecoder().scan_once  # the C scanner: json.loads' own layers cost as much


def _decode(data: bytes) -> dict[str, Any]:
    """One event's JSON object, as json.loads reads it (whitespace around it allowed)."""
    try:
        text = data.decode()
        start = len(text) - len(text.lstrip(" \t\n\r")) if text[:1] in " \t\n\r" else 0
        event, end = _scan(text, start)
        if text[end:].strip(" \t\n\r"):
            raise ValueError("extra data")
    except (ValueError, StopIteration):  # UnicodeDecodeError too
        raise ProtocolError(f"event is not JSON: {data[:200]!r}") from None
    if not isinstance(event, dict):
        raise ProtocolError(f"event is not a JSON object: {data[:200]!r}")
    if "error" in event:
        raise ProtocolError(f"server reported an error: {json.dumps(event['error'])[:300]}")
    return event


def _take(
    parser: StreamParser, event: dict[str, Any], offset: float, result: Result, texts: list[str]
) -> None:
    """Feed one event to the parser; a text event moves TTFT and E2E and adds to texts
    (joined into result.text at the end: += on an attribute copies the whole text)."""
    text, n_tokens = parser.feed(event)
    if not text and not n_tokens:
        return
    texts.append(text)
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
