"""Server faults reach the requests table classified, never as ok rows: HTTP 5xx, a crash
mid-stream, a truncated stream, malformed events, an empty reply, a hang, a refused
connection. A raw asyncio server on 127.0.0.1 plays each fault over a real socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import httpx
import pytest

from specsweep.collect.engines.llamacpp import ChatStream
from specsweep.collect.http import client
from specsweep.collect.http import connection as http1
from tests.support.raw_server import Handler, raw_server, read_request

CHUNK = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
FINAL = b'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\n'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"

FAULTS = {
    # path: (bytes to send, then: "close" | "hang")
    "/ok": (HEAD + CHUNK + CHUNK + FINAL + b"data: [DONE]\n\n", "close"),
    "/http500": (
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n"
        b"Connection: close\r\n\r\nboom!",
        "close",
    ),
    "/truncated": (HEAD + CHUNK + CHUNK, "close"),
    "/malformed": (HEAD + CHUNK + b"data: {not json\n\n", "close"),
    "/error-event": (HEAD + b'data: {"error": {"message": "OOM"}}\n\n', "close"),
    "/empty": (HEAD + b"data: [DONE]\n\n", "close"),
    "/hang": (HEAD + CHUNK, "hang"),
    "/crash": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: 10000\r\n\r\n" + CHUNK,
        "close",
    ),
}


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await read_request(reader)
    path = head.split(b" ", 2)[1].decode()
    payload, then = FAULTS[path]
    writer.write(payload)
    await writer.drain()
    if then == "hang":
        await asyncio.sleep(30)
    writer.close()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with raw_server(_handle) as url:
        yield url


def _send(url: str, timeout_s: float = 5.0) -> client.Result:
    async def go() -> client.Result:
        async with httpx.AsyncClient() as http:
            return await client.stream(http, url, {"x": 1}, ChatStream(), timeout_s)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "kind", "words"),
    [
        ("/http500", "http", "HTTP 500: boom!"),
        ("/truncated", "protocol", "without data: [DONE]"),
        ("/malformed", "protocol", "not JSON"),
        ("/error-event", "protocol", "OOM"),
        ("/empty", "empty", "no generated text"),
        ("/crash", "server_died", "broke mid-reply"),
    ],
)
def test_fault_is_classified(base_url: str, path: str, kind: str, words: str) -> None:
    res = _send(base_url + path)
    assert not res.ok and res.error_kind == kind and words in res.error_message


def test_a_hang_is_a_timeout(base_url: str) -> None:
    res = _send(base_url + "/hang", timeout_s=0.5)
    assert res.error_kind == "timeout" and res.ttft_s is not None  # the first chunk came


def test_the_same_server_answers_a_good_stream(base_url: str) -> None:
    res = _send(base_url + "/ok")
    assert res.ok and res.text == "hihi" and len(res.chunk_times_s) == 2


def test_refused_connection() -> None:
    with raw_server(_handle) as url:
        pass  # closed: nothing listens there any more
    res = _send(url + "/ok")
    assert res.error_kind == "connect"


KEEP_ALIVE_OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (CHUNK, CHUNK, FINAL, b"data: [DONE]\n\n"))
    + b"0\r\n\r\n"
)


async def _closing_on_reuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one request keep-alive, then read the next request on the same connection
    and close it unanswered: a keep-alive close that races the client's reuse (seen with
    llama-server behind an SSH tunnel)."""
    for answered in (True, False):
        await read_request(reader)
        if not answered:
            break
        writer.write(KEEP_ALIVE_OK)
        await writer.drain()
    writer.close()


async def _serve(handle: Handler) -> tuple[asyncio.Server, str]:
    """handle's server on 127.0.0.1, port 0, in the running loop, and its base URL."""
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


def test_a_pooled_connection_closed_as_it_is_reused_is_retried_on_a_new_one() -> None:
    """The second request goes out on the pooled connection, which the server closes
    unanswered; it is sent again on a new connection and measured from that send."""

    async def go() -> tuple[list[client.Result], int]:
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            await _closing_on_reuse(reader, writer)

        server, url = await _serve(handle)
        async with server, httpx.AsyncClient() as http:
            results = [
                await client.stream(http, url, {"x": 1}, ChatStream(), 5.0) for _ in range(2)
            ]
        return results, connections

    results, connections = asyncio.run(go())
    assert [r.error_kind for r in results] == [None, None]
    assert [r.text for r in results] == ["hihi", "hihi"] and connections == 2
    assert results[1].ttft_s < 0.5


def test_a_server_that_closes_every_connection_unanswered_is_server_died() -> None:
    """A close before any reply byte is resent on new connections a bounded number of
    times (a tunnel may drop one); a server that always does it is recorded server_died."""

    async def go() -> tuple[client.Result, int]:
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.close()

        server, url = await _serve(handle)
        async with server, httpx.AsyncClient() as http:
            return await client.stream(http, url, {"x": 1}, ChatStream(), 5.0), connections

    result, connections = asyncio.run(go())
    assert result.error_kind == "server_died" and connections == client.NO_REPLY_ATTEMPTS


def test_prewarm_opens_the_window_s_connections_before_it_starts() -> None:
    """prewarm(n) leaves n idle connections; n concurrent streams then open no more."""

    async def go() -> tuple[int, int, list[client.Result]]:
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while await read_request(reader):
                    await asyncio.sleep(0.05)  # all 6 requests are in flight at once
                    writer.write(KEEP_ALIVE_OK)
                    await writer.drain()
            writer.close()

        server, url = await _serve(handle)
        async with server, httpx.AsyncClient() as http:
            await client.prewarm(http, url, 6)
            await asyncio.sleep(0.05)
            before = connections
            results = await asyncio.gather(
                *(client.stream(http, url, {"x": 1}, ChatStream(), 5.0) for _ in range(6))
            )
            return before, connections, results

    before, after, results = asyncio.run(go())
    assert (before, after) == (6, 6) and all(r.ok for r in results)


def test_a_prewarmed_connection_the_server_does_not_read_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that leaves every second connection unread (as llama-server's HTTP workers
    can after a burst of accepts): prewarm with a probe keeps only connections that answered
    GET /health, so a window's first request never waits on an unread one."""
    monkeypatch.setattr(http1, "PROBE_TIMEOUT_S", 0.2)

    async def go() -> tuple[int, int, list[int]]:
        opened, answered = 0, []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal opened
            opened += 1
            mine = opened
            if mine % 2 == 0:  # never read: no worker for this connection
                await asyncio.sleep(5)
                writer.close()
                return
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while head := await reader.readuntil(b"\r\n\r\n"):
                    assert head.startswith(b"GET /health ")
                    answered.append(mine)
                    writer.write(KEEP_ALIVE_OK)
                    await writer.drain()
            writer.close()

        server, url = await _serve(handle)
        async with server, httpx.AsyncClient() as http:
            await client.prewarm(http, url, 3, "/health")
            kept = http1._idle(http).count(http1._pool_key(url))
            return opened, kept, answered

    opened, kept, answered = asyncio.run(go())
    assert (opened, kept, answered) == (5, 3, [1, 3, 5])
