"""The measurement path's HTTP/1.1 client: one POST, a streamed reply, every read stamped
with the time the kernel received it.

Why not httpx here (it still serves every other request): a stamp taken in user space lands
only when the event loop gets round to the socket, and under load (hundreds of streams on a
few cores, or a busy machine) that wait grew to tens of ms and was counted as latency.
Linux stamps every received packet when SO_TIMESTAMPNS is set on the socket (CLOCK_REALTIME,
handed over by recvmsg); converted to perf_counter's clock at the read, it is the arrival
time whatever the loop or the scheduler was doing, as long as the socket is read before
the stream's next packet comes: TCP merges data queued unread into one buffer with the
newest stamp (so nothing is ever stamped before it fully arrived, and a late reader is no
worse off than a user-space stamp). Where no kernel stamp comes (other systems), the read
is stamped with perf_counter() in the loop's reader callback, the earliest moment user
space sees it.

The reply is parsed in that reader callback too (chunked framing here, events by the
caller's sink), so no task wakes up per chunk. Keep-alive connections are pooled per owner
(the caller's httpx client) and checked before reuse; a reply is reused only when it was
read to its end. No proxies: a proxy would add its own delay to every stamp.

What makes a read late, found at 256 streams on a loaded 2-core machine (tests/bench,
2026-12-02; a stamp suffers only when the stream's next packet came first, 10 ms there):
- Bursts of work in one loop turn. A cold batch opens its connections all in one turn
  (each task connects and sends in one step; socket() and a loopback connect() cost
  0.15-0.2 ms each there): 256 of them held the loop 40-55 ms while the first streams'
  first chunks arrived, which put TTFT p99 at 17-38 ms against 7-9 ms for a vLLM-style
  client. With the pool warmed to the concurrency before measuring: 0.1-1.5 ms, unless
  a scheduler stall (below) hits the batch's start (25 ms in one of two runs).
- CPU per event, which every other stream's read waits for: result.text += text copied
  the whole text per event (quadratic in the reply's length),
  json.loads wrapped the C scanner in two Python layers (4.5 vs 2 us per event), and a
  64 KiB buffer per connection was zeroed and copied out of. Without them one event
  costs about 7 us in the callback; capacity went from 0.77-0.97x the vLLM-style
  client's to 1.0-1.1x. Neither GC (collections of at most 1.5-5 ms) nor the selector was
  a cause.
- What is left is the scheduler: the client process descheduled for 20-80 ms while the
  server process and other jobs hold both cores. Then chunks merge and take the newest
  stamp, and at 64 or 256 streams one such stall can decide a p99.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import weakref
from urllib.parse import urlsplit

from specsweep.collect.http.reply import (  # noqa: F401 - part of this module's interface
    ERROR_BODY,
    SO_TIMESTAMPNS,
    TIMESPEC,
    BadReply,
    ConnectionBroke,
    Reply,
    Sink,
)

READ_SIZE = 1 << 16  # at most per read
ANC_SIZE = socket.CMSG_SPACE(TIMESPEC.size) if SO_TIMESTAMPNS else 0


class ConnectFailed(Exception):
    """No connection: unresolvable, refused, or the TLS handshake failed."""


class NoReply(ConnectionBroke):
    """The connection ended before any byte of the reply came: a pooled keep-alive
    connection the server (or a tunnel in between) closed as the request went out, or a
    new one an SSH tunnel dropped. Nothing was measured; the request may be sent again."""


def _pool_key(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConnectFailed(f"not an http(s) URL: {url!r}")
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


PROBE_TIMEOUT_S = 2.0  # a probe unanswered this long: the server is not reading that connection


async def prewarm(owner: object, url: str, n: int, probe: str | None = None) -> None:
    """Open connections to url's server until the owner's pool holds n idle ones, so that a
    window of n streams does not open them all at once as its first requests go out (at
    hundreds of streams that held the loop for tens of ms while first chunks arrived).

    With `probe` (a GET path, e.g. /health), each new connection must answer one request
    before the next is opened, and one that does not within PROBE_TIMEOUT_S is closed and
    another opened in its place (at most 2n opens in all).
    llama-server's HTTP workers (cpp-httplib) stay bound to a keep-alive connection until it
    has been idle 5 s, and a burst of accepted connections can leave some without a worker:
    in the default campaign's 2 req/s windows (2026-12-03), the first five requests sat
    unread for 5-9 s on connections opened together before the window, while later ones
    were served at once, which read as TTFTs of 11 s. A probed connection has a worker."""
    key, idle = _pool_key(url), _idle(owner)
    missing = n - idle.count(key)
    for _ in range(2 * missing):
        if missing <= 0:
            return
        conn = await Connection.open(*key)
        if probe is None or await _answers(conn, url, probe):
            idle.give(key, conn)
            missing -= 1
        else:
            conn.close()


async def _answers(conn: Connection, url: str, path: str) -> bool:
    """Whether conn answers `GET path` (any status, the whole reply read) in time."""
    host = urlsplit(url).netloc.rpartition("@")[2]
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("latin-1")
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await conn.exchange(request, Reply(lambda _t, _data: False, 0.0))
    except (TimeoutError, ConnectionBroke, OSError):
        return False
    conn.read_rest()
    return conn.reusable()


async def post(
    owner: object,
    url: str,
    headers: dict[str, str],
    body: bytes,
    sink: Sink,
    t0: float,
    reuse: bool = True,
) -> tuple[int, bytes]:
    """POST body to url; a 200 reply's body goes to sink until it says done or the body ends.
    Returns (status, the first bytes of any other reply's body). Stamps are >= t0. With
    `reuse`, an idle pooled connection is taken if there is one; else a new connection is
    opened. NoReply when the connection ends before the reply began."""
    parts = urlsplit(url)
    key, idle = _pool_key(url), _idle(owner)
    conn = (idle.take(key) if reuse else None) or await Connection.open(*key)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {parts.netloc.rpartition('@')[2]}",
        *(f"{k}: {v}" for k, v in headers.items()),
        f"Content-Length: {len(body)}",
    ]
    reply = Reply(sink, t0)
    try:
        status, error_body = await conn.exchange(
            "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body, reply
        )
    except ConnectionBroke as exc:
        conn.close()
        if not reply.began:
            raise NoReply(str(exc)) from None
        raise
    except BaseException:
        conn.close()
        raise
    conn.read_rest()
    if conn.reusable():
        idle.give(key, conn)
    else:
        conn.close()
    return status, error_body


class Connection:
    """One TCP (optionally TLS) connection whose replies are read by a reader callback."""

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject | None = None):
        self.sock, self.tls = sock, tls
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.reply: Reply | None = None
        self.done: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, scheme: str, host: str, port: int) -> Connection:
        loop = asyncio.get_running_loop()
        try:  # an IP address needs no resolver (whose thread pool would queue many streams)
            infos = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
            )
        except OSError:
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise ConnectFailed(f"cannot resolve {host}: {exc}") from None
        error: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if SO_TIMESTAMPNS:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            conn = cls(sock)
            if scheme == "https":
                await conn._handshake(loop, host)
            return conn
        raise ConnectFailed(f"cannot connect to {host}:{port}: {error}")

    async def _handshake(self, loop: asyncio.AbstractEventLoop, host: str) -> None:
        self.tls = ssl.create_default_context().wrap_bio(
            self.incoming, self.outgoing, server_hostname=host
        )
        try:
            while True:
                try:
                    self.tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    await loop.sock_sendall(self.sock, self.outgoing.read())
                    data = await loop.sock_recv(self.sock, READ_SIZE)
                    if not data:
                        raise ConnectionResetError("closed by the server") from None
                    self.incoming.write(data)
            await loop.sock_sendall(self.sock, self.outgoing.read())
        except (ssl.SSLError, OSError) as exc:
            self.close()
            raise ConnectFailed(f"TLS handshake with {host} failed: {exc}") from None

    async def exchange(self, request: bytes, reply: Reply) -> tuple[int, bytes]:
        """Send the request and read the reply until it is over (by the reader callback)."""
        loop = asyncio.get_running_loop()
        if self.tls:
            self.tls.write(request)
            request = self.outgoing.read()
        try:
            await loop.sock_sendall(self.sock, request)
        except OSError as exc:
            raise ConnectionBroke(f"sending the request failed: {exc}") from None
        self.reply, self.done = reply, loop.create_future()
        loop.add_reader(self.sock.fileno(), self._readable)
        try:
            await self.done
        finally:
            loop.remove_reader(self.sock.fileno())
        return reply.status, bytes(reply.error_body[:ERROR_BODY])

    def _readable(self) -> None:
        assert self.reply is not None and self.done is not None
        if self.done.done():
            return
        try:  # a new bytes of READ_SIZE, shrunk to the read: cheaper than a copy out of a buffer
            data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.done.set_exception(ConnectionBroke(str(exc)))
            return
        stamp = self.reply.arrival(ancillary)
        try:
            data = self._plain(data)
            if data is None:
                return
            over = self.reply.feed(stamp, data) if data else self.reply.eof()
        except Exception as exc:  # the sink's ProtocolError too: the awaiting request gets it
            self.done.set_exception(exc)
            return
        if over:
            self.done.set_result(None)

    def _plain(self, data: bytes) -> bytes | None:
        """Decrypted bytes of a read (b"" at the end of the stream, None for nothing yet)."""
        if self.tls is None:
            return data
        if not data:
            return b""
        self.incoming.write(data)
        out = bytearray()
        try:
            while piece := self.tls.read(READ_SIZE):
                out += piece
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return bytes(out)
        return bytes(out) if out else None

    def read_rest(self) -> None:
        """Once the sink is done, take what already arrived of the reply (typically the
        chunked end right behind the stream's last event), so the connection can be reused."""
        if self.reply is None or self.reply.complete or not self.reply.sink_done:
            return
        try:
            data = self._plain(self.sock.recv(READ_SIZE))
            if data:
                self.reply.feed(self.reply.last, data)
        except (OSError, BadReply):
            self.reply.keep_alive = False

    def reusable(self) -> bool:
        """The reply was read to its end and the server keeps the connection open."""
        return self.reply is not None and self.reply.complete and self.reply.keep_alive

    def alive(self) -> bool:
        """An idle connection is usable when nothing (no EOF, no stray byte) is waiting."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
        except OSError:
            pass
        return False

    def close(self) -> None:
        self.sock.close()


class _Idle:
    """Idle keep-alive connections of one owner, by (scheme, host, port)."""

    def __init__(self) -> None:
        self.conns: dict[tuple[str, str, int], list[Connection]] = {}

    def take(self, key: tuple[str, str, int]) -> Connection | None:
        conns = self.conns.get(key, [])
        while conns:
            conn = conns.pop()
            if conn.alive():
                return conn
            conn.close()
        return None

    def count(self, key: tuple[str, str, int]) -> int:
        """Idle connections kept for key (dead ones are noticed only when taken)."""
        return len(self.conns.get(key, []))

    def give(self, key: tuple[str, str, int], conn: Connection) -> None:
        self.conns.setdefault(key, []).append(conn)

    def close(self) -> None:
        for conns in self.conns.values():
            for conn in conns:
                conn.close()
        self.conns.clear()


_IDLE: weakref.WeakKeyDictionary[object, _Idle] = weakref.WeakKeyDictionary()


def _idle(owner: object) -> _Idle:
    """The owner's pool; its connections are closed when the owner is collected."""
    idle = _IDLE.get(owner)
    if idle is None:
        idle = _IDLE[owner] = _Idle()
        weakref.finalize(owner, idle.close)
    return idle
