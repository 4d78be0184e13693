"""HTTP/1.1 reply parsing details: interim 1xx replies are skipped (over a real socket),
repeated header lines keep every value, conflicting Content-Length is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from specsweep.collect.engines.llamacpp import ChatStream
from specsweep.collect.http import client
from specsweep.collect.http.reply import BadReply, Reply
from tests.support.raw_server import raw_server, read_request

EARLY_HINTS = (
    b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n"
)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [
    b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
    b'data: {"choices": [{"delta": {"content": " there"}}]}\n\n',
    b"data: [DONE]\n\n",
]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """103 Early Hints (on its own, or in one write with the real head), then a 200
    streamed in chunks, each in its own write."""
    head = await read_request(reader)
    path = head.split(b" ", 2)[1]
    if path == b"/apart":
        writer.write(EARLY_HINTS)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(HEAD)
    else:
        writer.write(EARLY_HINTS + b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD)
    for event in EVENTS:
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(_chunk(event))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with raw_server(_handle) as url:
        yield url


@pytest.mark.parametrize("path", ["/apart", "/together"])
def test_interim_replies_are_skipped_not_errors(base_url: str, path: str) -> None:
    async def go() -> client.Result:
        async with httpx.AsyncClient() as http:
            return await client.stream(http, base_url + path, {"x": 1}, ChatStream(), 5.0)

    result = asyncio.run(go())
    assert (result.error_kind, result.error_message) == (None, None)
    assert result.text == "hi there"
    assert len(result.chunk_times_s) == 2 and 0 < result.ttft_s < result.e2e_s


def _parsed(head: bytes) -> Reply:
    reply = Reply(lambda stamp, data: False, 0.0)
    reply.feed(0.0, head)
    return reply


def test_repeated_header_lines_keep_every_value() -> None:
    reply = _parsed(
        b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
        b"Connection: keep-alive\r\nconnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    assert reply.headers["set-cookie"] == ["a=1", "b=2"]
    assert reply.header("connection") == "keep-alive, close"
    assert not reply.keep_alive  # `close` on any line of the field counts


def test_transfer_encoding_over_two_lines_is_chunked() -> None:
    reply = _parsed(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nTransfer-Encoding:\r\n\r\n"
    )
    assert reply.framing == "chunked"


def test_content_length_repeated_must_agree() -> None:
    assert _parsed(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n").left == 3
    with pytest.raises(BadReply, match="Content-Length"):
        _parsed(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\n")


def test_an_interim_reply_alone_is_not_the_reply() -> None:
    reply = _parsed(EARLY_HINTS)
    assert reply.status == 0 and reply.began and reply.headers == {}
    reply.feed(0.0, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    assert reply.status == 404 and reply.complete
