"""A byte-level HTTP test server: `handler(reader, writer)` writes whatever bytes a test
needs (malformed, interim, truncated replies) on 127.0.0.1, port 0, from a background
thread's event loop; `read_request` reads the request such a handler answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextmanager
def raw_server(handler: Handler) -> Iterator[str]:
    """Serve handler; yields the base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(handler, "127.0.0.1", 0), loop
    ).result(5)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """Read one request, its head and then as many body bytes as its Content-Length says
    (none without one); returns the head."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(ln.split(b":")[1])
            for ln in head.split(b"\r\n")
            if ln.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)
    return head
