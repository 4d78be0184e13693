"""SSH port forwards: a local listener on 127.0.0.1 whose connections reach a remote
(host, port), either through direct-tcpip channels of a paramiko transport, a thread per
link in this process (`Tunnel`), or through an OpenSSH `ssh -L` process
(`OpenSSHTunnel`, where an `ssh` client exists).

OpenSSH is the default (`forward_kind`), paramiko the fallback (no `ssh` client, a
password_env, or ssh refusing to start), by what a forward adds to a streamed request
(tests/bench/bench_tunnel.py, two runs on 2026-12-04, docs/benchmarks-tunnel.md): at 64
streams paramiko's per-chunk delay is 26-28 ms median and 149-165 ms p99 against OpenSSH's
1.0-1.5 and 6.6-16 ms (its threads copy bytes in the client's own process, under its GIL);
at 1 stream it adds 0.4 ms to TTFT's median against OpenSSH's 0.2 ms; a request on a new
connection waits 3-10 ms more than direct (p90 46-49 ms) against OpenSSH's 0.1-0.3 ms.
Throughput is not the reason: a stream carries a few KB/s. The ssh command line holds
options and paths only (key file, known_hosts); ssh runs in batch mode, so a password is
never asked for nor passed (password_env hosts use paramiko)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from specsweep.collect.plan.components import SSHHost

log = logging.getLogger("specsweep.collect")


class Tunnel:
    """127.0.0.1:<free port> -> direct-tcpip channel -> remote (host, port); thread per link."""

    kind = "paramiko-tunnel"  # services.transport

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
            self._open.difference_update((conn, chan))
            close_quietly(conn, chan)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # stop listening now, not after select returns
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        close_quietly(*self._open)


def close_quietly(*ends: socket.socket | paramiko.Channel) -> None:
    """Close each end of a link. A channel of a transport whose socket just broke (a dropped
    link) raises EOFError while it sends its close, before paramiko's reader notices: a
    link's thread would end in a traceback on the user's terminal."""
    for end in list(ends):
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


class OpenSSHTunnel:
    """127.0.0.1:<free port> -> an `ssh -L` process -> remote (host, port): the bytes are
    copied by OpenSSH in its own process, off this one's GIL. `ssh` is the command up to its
    destination (options: host-key policy, key, port; see `ssh_command`).

    With `pty` (the default) the process also holds a session running `sleep`, not `-N`:
    sshd turns off Nagle's algorithm (TCP_NODELAY, in ssh_packet_set_interactive) only when
    a session starts, and without it a small chunk waits for the client's delayed ACK
    (measured: p99 error ~45 ms at 16 and 64 streams; see
    docs/measurements/2026-12-03-tunnel-timing.md). The session has a terminal (`-tt`) so
    that the remote `sleep` gets SIGHUP and ends with the connection. The process dies with this one
    (PR_SET_PDEATHSIG) and is stopped by close(); one that exits (a dropped link) is started
    again on the same port, up to `restarts` times in a row."""

    kind = "ssh-tunnel"  # services.transport

    def __init__(
        self,
        ssh: list[str],
        remote: tuple[str, int],
        timeout_s: float,
        restarts: int = 5,
        pty: bool = True,
    ):
        self.remote, self._ssh, self._timeout_s, self._pty = remote, ssh, timeout_s, pty
        with socket.socket() as s:  # free now; ssh binds it moments later
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self._closed = threading.Event()
        self.proc = self._start()
        threading.Thread(
            target=self._watch, args=(restarts,), daemon=True, name=f"ssh-tunnel-{self.port}"
        ).start()

    def _start(self) -> subprocess.Popen[bytes]:
        """A running ssh that listens on self.port; with pty, once the remote shell has
        read its rc files and runs `sleep` (so a prompt close() never cuts them short)."""
        from specsweep.collect.hosts.local import (  # the long-lived forker
            _die_with_parent,
            _spawner,
        )

        *options, destination = self._ssh
        host = f"[{self.remote[0]}]" if ":" in self.remote[0] else self.remote[0]  # IPv6
        forward = f"127.0.0.1:{self.port}:{host}:{self.remote[1]}"
        session = ["-tt", destination, _REMOTE] if self._pty else ["-N", destination]
        argv = [*options, "-L", forward, *session]
        with tempfile.TemporaryFile() as err:  # the child keeps its own descriptor
            proc = _spawner().submit(
                subprocess.Popen, argv, stdin=subprocess.DEVNULL, stderr=err,
                stdout=subprocess.PIPE if self._pty else subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=functools.partial(_die_with_parent, os.getpid()),
            ).result()  # fmt: skip
            if _ready(proc, self.port, time.monotonic() + self._timeout_s + 5):
                return proc
            _stop(proc)
            err.seek(0)
            why = " ".join(err.read().decode("utf-8", "replace").split()) or "no output"
        raise OSError(f"ssh -L {forward} did not start listening: {why}")

    def _watch(self, restarts: int) -> None:
        failures = 0
        while not self._closed.is_set():
            self.proc.wait()
            while not self._closed.is_set() and failures < restarts:
                if failures:  # the first restart at once, then 0.5 s, doubling
                    time.sleep(0.5 * 2 ** (failures - 1))
                try:
                    self.proc = self._start()
                except OSError:
                    failures += 1
                    continue
                failures = 0
                if self._closed.is_set():  # close() ran while this one started
                    _stop(self.proc)
                break
            else:
                return

    def close(self) -> None:
        self._closed.set()
        _stop(self.proc)


_READY = "specsweep-forward-ready"
_REMOTE = f"echo {_READY}; exec sleep 2147483647"  # run by the remote login shell


def _ready(proc: subprocess.Popen[bytes], port: int, deadline: float) -> bool:
    """Whether ssh printed the remote shell's _READY (when its stdout is a pipe) and
    accepts connections on port, before deadline; its stdout is closed either way."""
    seen = b"" if proc.stdout else _READY.encode()
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if _READY.encode() not in seen:
                if select.select([proc.stdout], [], [], 0.05)[0]:
                    data = os.read(proc.stdout.fileno(), 4096)  # type: ignore[union-attr]
                    if not data:  # end of file: ssh is exiting
                        time.sleep(0.05)
                    seen += data
                continue
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            time.sleep(0.02)
        return False
    finally:
        if proc.stdout:
            proc.stdout.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ssh_command(
    target: dict[str, Any],
    destination: str,
    known_hosts: Path,
    accept_unknown: bool,
    use_ssh_config: bool,
    timeout_s: float,
) -> list[str]:
    """The OpenSSH client command that reaches the host as paramiko does (`target`: the
    connect() arguments; destination: the plan's address, so ~/.ssh/config applies to it),
    with the same host-key policy: known_hosts only, an unknown key rejected (accepted
    and remembered with accept_unknown), a changed key always rejected; never a prompt."""
    argv = ["ssh", "-e", "none", *(["-F", "none"] if not use_ssh_config else [])]
    options = {
        "HostName": target["hostname"], "Port": target["port"], "User": target["username"],
        "UserKnownHostsFile": known_hosts, "GlobalKnownHostsFile": "/dev/null",
        "StrictHostKeyChecking": "accept-new" if accept_unknown else "yes",
        "BatchMode": "yes", "ExitOnForwardFailure": "yes",
        "ConnectTimeout": max(1, round(timeout_s)),
        "ServerAliveInterval": 15, "ServerAliveCountMax": 3, "LogLevel": "ERROR",
    }  # fmt: skip
    if target.get("key_filename"):
        options["IdentityFile"] = target["key_filename"]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    return [*argv, destination]


def forward_kind(cfg: SSHHost) -> str:
    """The forward a host opens: 'ssh-tunnel' (OpenSSH) or 'paramiko-tunnel'. 'auto' takes
    OpenSSH where an ssh client exists and no password is needed (ssh runs in batch mode)."""
    if cfg.forward == "openssh":
        return "ssh-tunnel"
    usable = shutil.which("ssh") is not None and cfg.password_env is None
    return "ssh-tunnel" if cfg.forward == "auto" and usable else "paramiko-tunnel"


def open_forward(
    kind: str,
    cfg: SSHHost,
    target: Callable[[], dict[str, Any]],
    transport: Callable[[], paramiko.Transport],
    remote: tuple[str, int],
) -> Tunnel | OpenSSHTunnel:
    """A forward of `kind` to remote; with forward 'auto', paramiko's where ssh fails."""
    if kind == "ssh-tunnel":
        command = ssh_command(target(), cfg.address, known_hosts(cfg),
                             cfg.accept_unknown_host_key, cfg.use_ssh_config,
                             cfg.connect_timeout_s)  # fmt: skip
        try:
            return OpenSSHTunnel(command, remote, cfg.connect_timeout_s, cfg.reconnect_attempts)
        except OSError as exc:
            if cfg.forward == "openssh":
                raise
            log.warning("ssh -L failed (%s); forwarding through paramiko instead", exc)
    return Tunnel(transport, remote)


def known_hosts(cfg: SSHHost) -> Path:
    """The known_hosts file both clients check host keys against."""
    return Path(os.path.expanduser(cfg.known_hosts_file or "~/.ssh/known_hosts"))
