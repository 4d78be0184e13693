"""The HTTP side of the engine-shaped test servers: a request, a reply writer (whole bodies
or a chunked event stream) and `serve`, which runs a server on 127.0.0.1:0 in a background
thread (stdlib asyncio, HTTP/1.1 keep-alive)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found"}


@dataclass
class Request:
    method: str
    path: str
    body: bytes

    def json(self) -> dict[str, Any]:
        return json.loads(self.body or b"{}")


class Reply:
    """Writes HTTP/1.1 responses: whole bodies or a chunked event stream."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def send(self, status: int, body: str | dict, ctype: str = "application/json") -> None:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        head = f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\n"
        self.writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await self.writer.drain()

    async def start_stream(self) -> None:
        self.writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        await self.writer.drain()

    async def event(self, payload: dict | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.writer.drain()

    async def end_stream(self) -> None:
        await self.event("[DONE]")
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()


@contextmanager
def serve(server: Any) -> Iterator[str]:
    """Run `server` on 127.0.0.1:0 in a background thread; yield its base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    start = asyncio.start_server(server.connection, "127.0.0.1", 0)
    listener = asyncio.run_coroutine_threadsafe(start, loop).result(10)
    try:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    finally:
        asyncio.run_coroutine_threadsafe(_shutdown(listener), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _shutdown(listener: asyncio.Server) -> None:
    listener.close()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
