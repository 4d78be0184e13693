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
import struct
import sys
import time
import weakref
from collections.abc import Callable
from urllib.parse import urlsplit

READ_SIZE = 1 << 16  # at most per read
ERROR_BODY = 500  # bytes of a non-200 reply kept for the error message
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35) if sys.platform == "linux" else None
TIMESPEC = struct.Struct("@ll")
ANC_SIZE = socket.CMSG_SPACE(TIMESPEC.size) if SO_TIMESTAMPNS else 0

# called with (arrival stamp, body bytes); returns True once it wants no more of the reply
Sink = Callable[[float, bytes], bool]


class ConnectFailed(Exception):
    """No connection: unresolvable, refused, or the TLS handshake failed."""


class ConnectionBroke(Exception):
    """The connection ended or failed before the reply was complete."""


class NoReply(ConnectionBroke):
    """The connection ended before any byte of the reply came: a pooled keep-alive
    connection the server (or a tunnel in between) closed as the request went out, or a
    new one an SSH tunnel dropped. Nothing was measured; the request may be sent again."""


class BadReply(Exception):
    """The reply does not parse as HTTP/1.1."""


def _pool_key(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConnectFailed(f"not an http(s) URL: {url!r}")
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


async def prewarm(owner: object, url: str, n: int) -> None:
    """Open connections to url's server until the owner's pool holds n idle ones, so that a
    window of n streams does not open them all at once as its first requests go out (at
    hundreds of streams that held the loop for tens of ms while first chunks arrived)."""
    key, idle = _pool_key(url), _idle(owner)
    for _ in range(n - idle.count(key)):
        idle.give(key, await Connection.open(*key))


async def post(owner: object, url: str, headers: dict[str, str], body: bytes, sink: Sink,
               t0: float, reuse: bool = True) -> tuple[int, bytes]:
    """POST body to url; a 200 reply's body goes to sink until it says done or the body ends.
    Returns (status, the first bytes of any other reply's body). Stamps are >= t0. With
    `reuse`, an idle pooled connection is taken if there is one; else a new connection is
    opened. NoReply when the connection ends before the reply began."""
    parts = urlsplit(url)
    key, idle = _pool_key(url), _idle(owner)
    conn = (idle.take(key) if reuse else None) or await Connection.open(*key)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}",
             *(f"{k}: {v}" for k, v in headers.items()), f"Content-Length: {len(body)}"]
    reply = Reply(sink, t0)
    try:
        status, error_body = await conn.exchange(
            "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body, reply
        )
    except ConnectionBroke as exc:
        conn.close()
        if not reply.head:
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


class Reply:
    """One response, parsed as bytes arrive: status and headers, then the body by its
    framing (chunked, Content-Length, or until the server closes)."""

    def __init__(self, sink: Sink, t0: float):
        self.sink, self.last = sink, t0
        self.head = bytearray()
        self.status = 0
        self.framing = ""
        self.left = 0  # chunked: data bytes left in this chunk (-2: its CRLF); length: body left
        self.raw = bytearray()  # chunked framing not yet decoded
        self.in_trailer = False
        self.sink_done = False
        self.complete = False  # the whole message was read
        self.keep_alive = True
        self.error_body = bytearray()

    def arrival(self, ancillary: list[tuple[int, int, bytes]]) -> float:
        """The kernel's receive stamp of this read on perf_counter's clock, else now; never
        before the previous read or t0, never after now (the realtime clock may step)."""
        wall_ns, now = time.time_ns(), time.perf_counter()
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) == TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack(data)
                now = min(now, now - (wall_ns - sec * 1_000_000_000 - nsec) / 1e9)
                break
        self.last = max(self.last, now)
        return self.last

    def feed(self, stamp: float, data: bytes) -> bool:
        """Take one read; True when the exchange is over (the sink is done or the reply ended)."""
        if not self.status:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return False
            data = bytes(self.head[end + 4:])
            self._parse_head(bytes(self.head[:end]))
        if self.framing == "chunked":
            data = self._dechunk(data)
        elif self.framing == "length":
            if len(data) > self.left:
                self.keep_alive = False  # bytes beyond the reply: do not reuse the connection
            data = data[: self.left]
            self.left -= len(data)
            self.complete = self.left == 0
        return self._deliver(stamp, data) or self.complete

    def eof(self) -> bool:
        """The server closed the connection."""
        self.keep_alive = False
        if self.framing == "close":
            self.complete = True
            return True
        raise ConnectionBroke("the server closed the connection before the reply was complete")

    def _deliver(self, stamp: float, data: bytes) -> bool:
        if self.status == 200:
            self.sink_done = self.sink_done or (bool(data) and self.sink(stamp, data))
            return self.sink_done
        self.error_body += data
        return len(self.error_body) >= ERROR_BODY

    def _parse_head(self, head: bytes) -> None:
        status_line, *fields = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise BadReply(f"not an HTTP/1.x status line: {status_line[:100]!r}")
        self.status = int(parts[1])
        headers = {}
        for line in fields:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get("content-encoding", "identity") != "identity":
            raise BadReply(f"compressed reply ({headers['content-encoding']}) was not asked for")
        self.keep_alive = headers.get("connection") != "close" and parts[0] == "HTTP/1.1"
        if "chunked" in headers.get("transfer-encoding", ""):
            self.framing = "chunked"
        elif "content-length" in headers:
            self.framing, self.left = "length", int(headers["content-length"])
            self.complete = self.left == 0
        else:
            self.framing, self.keep_alive = "close", False

    def _dechunk(self, data: bytes) -> bytes:
        """Body bytes of the chunked framing received so far; sets complete at its end."""
        pieces: list[bytes | bytearray] = []
        if not self.raw and self.left == 0 and not self.in_trailer:
            pos = _whole_chunks(data, 0, pieces)  # the usual read: whole chunks, no copy
            if pos == len(data):
                return b"".join(pieces)
            data = data[pos:]
        raw = self.raw
        raw += data
        pos, n = 0, len(raw)
        while pos < n and not self.complete:
            if self.left == 0 and not self.in_trailer:
                pos = _whole_chunks(raw, pos, pieces)  # the usual case, at Python speed
                if pos >= n:
                    break
            if self.left > 0:  # chunk data
                stop = min(pos + self.left, n)
                pieces.append(raw[pos:stop])
                self.left -= stop - pos
                pos = stop
                self.left = self.left or -2
                continue
            end = raw.find(b"\r\n", pos)
            if end < 0:
                break
            line, pos = raw[pos:end], end + 2
            if self.left == -2:
                if line:
                    raise BadReply("chunk data longer than its declared size")
                self.left = 0
            elif self.in_trailer:
                self.complete = not line
            else:
                self._chunk_size(line)
        self.keep_alive = self.keep_alive and not (self.complete and pos < n)
        del raw[:pos]
        return b"".join(pieces)

    def _chunk_size(self, line: bytearray) -> None:
        try:
            size = int(line.split(b";", 1)[0] if b";" in line else line, 16)
        except ValueError:
            raise BadReply(f"bad chunk size line {line[:40]!r}") from None
        self.left = size
        self.in_trailer = size == 0


def _whole_chunks(raw: bytes | bytearray, pos: int, pieces: list[bytes | bytearray]) -> int:
    """Append the data of the complete non-empty chunks from pos on; return where they end."""
    n = len(raw)
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            return pos
        try:
            stop = end + 2 + int(raw[pos:end], 16)
        except ValueError:  # an extension or a bad line: the general path decides
            return pos
        if stop == end + 2 or stop + 2 > n or not raw.startswith(b"\r\n", stop):
            return pos
        pieces.append(raw[end + 2 : stop])
        pos = stop + 2


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
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_NUMERICHOST)
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
            self.incoming, self.outgoing, server_hostname=host)
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
