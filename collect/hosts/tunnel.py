"""SSH port forwards: a local listener on 127.0.0.1 whose connections reach a remote
(host, port) through direct-tcpip channels of a paramiko transport, a thread per link."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable

import paramiko


class Tunnel:
    """127.0.0.1:<free port> -> direct-tcpip channel -> remote (host, port); thread per link."""

    def __init__(self, transport: Callable[[], paramiko.Transport], remote: tuple[str, int]):
        self._transport, self.remote = transport, remote
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._open: set[socket.socket | paramiko.Channel] = set()
        threading.Thread(target=self._accept, daemon=True, name=f"tunnel-{self.port}").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                if not select.select([self._listener], [], [], 0.2)[0]:
                    continue
                conn, peer = self._listener.accept()
            except (OSError, ValueError):  # closed by close()
                return
            threading.Thread(target=self._serve, args=(conn, peer), daemon=True).start()

    def _serve(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            chan = self._transport().open_channel("direct-tcpip", self.remote, peer, timeout=15)
        except Exception:  # noqa: BLE001 - the client sees its connection closed
            conn.close()
            return
        self._open.update((conn, chan))
        try:
            _pump(conn, chan, self._closed)
        except (OSError, ValueError, EOFError):
            pass  # either end went away
        finally:
            for end in (conn, chan):
                self._open.discard(end)
                end.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # stop listening now, not after select returns
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for end in list(self._open):
            with contextlib.suppress(Exception):
                end.close()


def _pump(conn: socket.socket, chan: paramiko.Channel, closed: threading.Event) -> None:
    """Copy bytes both ways until either side closes."""
    while not closed.is_set():
        ready, _, _ = select.select([conn, chan], [], [], 0.5)
        for src, dst in ((conn, chan), (chan, conn)):
            if src in ready:
                data = src.recv(65536)
                if not data:
                    return
                dst.sendall(data)
