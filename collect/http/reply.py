"""One HTTP/1.1 response parsed as its bytes arrive (collect/http/connection.py's reader callback
feeds it): status line and headers, then the body by its framing (chunked, Content-Length,
or until the server closes), each read stamped with the kernel's receive time."""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Callable

ERROR_BODY = 500  # bytes of a non-200 reply kept for the error message
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35) if sys.platform == "linux" else None
TIMESPEC = struct.Struct("@ll")

# called with (arrival stamp, body bytes); returns True once it wants no more of the reply
Sink = Callable[[float, bytes], bool]


class ConnectionBroke(Exception):
    """The connection ended or failed before the reply was complete."""


class BadReply(Exception):
    """The reply does not parse as HTTP/1.1."""


class Reply:
    """One response, parsed as bytes arrive: status and headers, then the body by its
    framing (chunked, Content-Length, or until the server closes)."""

    def __init__(self, sink: Sink, t0: float):
        self.sink, self.last = sink, t0
        self.head = bytearray()
        self.began = False  # a byte of the reply came (an interim 1xx reply counts)
        self.status = 0
        self.headers: dict[str, list[str]] = {}  # lower-case name -> every line's value
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
            self.began = True
            body = self._take_head(data)
            if body is None:
                return False
            data = body
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

    def _take_head(self, data: bytes) -> bytes | None:
        """Add data to the head; once the final reply's head is complete, parse it and
        return the body bytes after it (None until then). Interim 1xx replies (100
        Continue, 103 Early Hints) are skipped: the final reply follows on the connection."""
        self.head += data
        while True:
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return None
            rest = bytes(self.head[end + 4 :])
            self._parse_head(bytes(self.head[:end]))
            if not 100 <= self.status < 200 or self.status == 101:
                return rest
            self.status, self.headers, self.head = 0, {}, bytearray(rest)

    def _parse_head(self, head: bytes) -> None:
        status_line, *fields = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise BadReply(f"not an HTTP/1.x status line: {status_line[:100]!r}")
        self.status = int(parts[1])
        for line in fields:  # a repeated field keeps every value, in order
            name, _, value = line.partition(":")
            self.headers.setdefault(name.strip().lower(), []).append(value.strip())
        encoding = self.header("content-encoding") or "identity"
        if encoding != "identity":
            raise BadReply(f"compressed reply ({encoding}) was not asked for")
        self.keep_alive = (
            "close" not in _tokens(self.header("connection")) and parts[0] == "HTTP/1.1"
        )
        if "chunked" in _tokens(self.header("transfer-encoding")):
            self.framing = "chunked"
        elif "content-length" in self.headers:
            self.framing, self.left = "length", self._content_length()
            self.complete = self.left == 0
        else:
            self.framing, self.keep_alive = "close", False

    def header(self, name: str) -> str:
        """Every value of a field, joined by commas as HTTP defines; lower case."""
        return ", ".join(self.headers.get(name, [])).lower()

    def _content_length(self) -> int:
        """The body length; repeated values must agree (RFC 9112 6.3)."""
        values = set(_tokens(self.header("content-length")))
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise BadReply(f"bad Content-Length {self.header('content-length')!r}")
        return int(values.pop())

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


def _tokens(value: str) -> list[str]:
    """The comma-separated elements of a field value."""
    return [t.strip() for t in value.split(",") if t.strip()]


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
