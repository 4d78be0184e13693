"""The SSH host: commands, servers, files and port forwards on a remote machine (paramiko;
forwards through an OpenSSH `ssh -L` process where one can run, `collect.hosts.tunnel`).

Every command goes out as one line built with `shlex.join`, so each argument reaches the
remote program literally; the remote login shell must be POSIX-like (sh, dash, bash, zsh).
It logs in as `collect.hosts.login` says (the plan over ~/.ssh/config). Host keys are
checked against known_hosts and unknown keys rejected unless the plan says otherwise. A
dropped link is reconnected with exponential backoff (0.5 s, doubling) and the interrupted
call is retried once; a host that cannot be reached raises `HostUnreachable` with a one-line
reason (`collect.hosts.reach`). Servers run under a manager (`collect.hosts.managers`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

import paramiko
import tenacity

from specsweep.collect.hosts import facts, login, reach
from specsweep.collect.hosts.base import HostUnreachable, Process
from specsweep.collect.hosts.login import SSHError
from specsweep.collect.hosts.managers import ProcessManager, SystemdManager
from specsweep.collect.hosts.tunnel import (
    OpenSSHTunnel,
    Tunnel,
    forward_kind,
    known_hosts,
    open_forward,
)
from specsweep.collect.plan.components import SSHHost

T = TypeVar("T")
# paramiko's transport thread logs each failure (with a traceback) that connect() or the
# next call raises anyway, and that this module turns into one line: keep it quiet
TRANSPORT_LOG = "specsweep.ssh.transport"
logging.getLogger(TRANSPORT_LOG).setLevel(logging.CRITICAL)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
WILDCARD = {"0.0.0.0", "::", ""}

# A port nothing listens on now (the server binds it moments later).
_FREE_PORT = (
    "import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])"
)


class CommandTimeout(SSHError):
    """A remote command ran longer than its timeout (the link itself is fine)."""


class SSH:
    """A machine reached over SSH; servers run under cfg.manager."""

    def __init__(self, cfg: SSHHost):
        self.cfg = cfg
        self.name = cfg.name or cfg.address
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._tunnels: dict[tuple[str, int], Tunnel | OpenSSHTunnel] = {}
        self._forwarder = forward_kind(cfg)  # paramiko's after an 'auto' ssh -L failed
        self._tunnels_lock = threading.Lock()  # services packed side by side open tunnels
        self.hostname = cfg.address
        self._reconnect(stale=None, attempts=1)
        uid, _, home = self.run(["sh", "-c", 'id -u; printf %s "$HOME"'])[1].partition("\n")
        self.home = PurePosixPath(home or "/")
        self.workdir = self.remote_path(cfg.workdir)
        root = uid.strip() == "0"
        self.manager: ProcessManager | SystemdManager = (
            SystemdManager(self, root, self.home)
            if cfg.manager == "systemd"
            else ProcessManager(self)
        )

    # --- connection -----------------------------------------------------------------------

    def _connect_once(self) -> paramiko.SSHClient:
        """A connected client, or HostUnreachable saying why in one line."""
        try:
            target = login.target(self.cfg, self.name)
            password = login.password(self.cfg, self.name)
        except SSHError as exc:
            raise HostUnreachable(self.name, login.address(self.cfg), str(exc)) from None
        client = paramiko.SSHClient()
        client.set_log_channel(TRANSPORT_LOG)
        known = known_hosts(self.cfg)
        if not known.exists() and self.cfg.accept_unknown_host_key:
            known.parent.mkdir(parents=True, exist_ok=True)
            known.touch()
        if known.exists():
            client.load_host_keys(str(known))  # also where AutoAddPolicy remembers new keys
        accept = self.cfg.accept_unknown_host_key
        client.set_missing_host_key_policy(
            paramiko.AutoAddPolicy() if accept else reach.RejectUnknown(known)
        )
        t = self.cfg.connect_timeout_s
        self.hostname = target["hostname"]
        try:
            client.connect(
                **target, password=password, timeout=t, banner_timeout=t,
                auth_timeout=t, channel_timeout=t, allow_agent=True,
            )  # fmt: skip
        except (OSError, EOFError, paramiko.SSHException) as exc:
            link = client.get_transport()
            banner = link is not None and bool(link.remote_version)
            client.close()
            tried = login.tried(self.cfg, target, password)
            why, retry = reach.why(exc, t, banner, tried, known)
            raise HostUnreachable(self.name, login.address(self.cfg, target), why, retry) from exc
        except BaseException:
            client.close()
            raise
        client.get_transport().set_keepalive(15)  # type: ignore[union-attr]
        return client

    def _active(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return transport is not None and transport.is_active()

    def _reconnect(self, stale: paramiko.SSHClient | None, attempts: int | None = None) -> None:
        """Replace the client `stale` (unless another thread already has), with backoff;
        HostUnreachable when no attempt connects (at once for host key and authentication).

        Up to `attempts` connects, the k-th retry after 0.5 * 2**(k-1) s (0.5, 1, 2 ...);
        only a HostUnreachable marked `retry` is retried. A failure after more than one
        attempt says how many ("... (3 attempts)")."""
        with self._lock:
            if self._client is not stale and self._active():
                return
            if self._client is not None:
                self._client.close()
                self._client = None
            attempts = self.cfg.reconnect_attempts if attempts is None else attempts
            if attempts == 0:
                why = "link lost and reconnect_attempts is 0"
                raise HostUnreachable(self.name, login.address(self.cfg), why)
            retrying = tenacity.Retrying(
                stop=tenacity.stop_after_attempt(attempts),
                reraise=True,
                wait=tenacity.wait_exponential(multiplier=0.5),
                retry=tenacity.retry_if_exception(_worth_retrying),
            )
            try:
                self._client = retrying(self._connect_once)
            except HostUnreachable as exc:
                tried = retrying.statistics["attempt_number"]
                if tried == 1:
                    raise
                reason = f"{exc.reason} ({tried} attempts)"
                raise HostUnreachable(exc.host, exc.address, reason) from exc.__cause__

    def _transport(self) -> paramiko.Transport:
        if not self._active():
            self._reconnect(stale=self._client)
        return self._client.get_transport()  # type: ignore[union-attr,return-value]

    def _is_link_error(self, exc: Exception) -> bool:
        if isinstance(exc, (SSHError, HostUnreachable, paramiko.AuthenticationException)):
            return False
        if isinstance(exc, (EOFError, ConnectionError, socket.timeout, paramiko.SSHException)):
            return True
        return isinstance(exc, OSError) and not self._active()  # not e.g. sftp ENOENT

    def _call(self, fn: Callable[[], T]) -> T:
        """fn(); after a link error, reconnect and run it once more."""
        client = self._client
        try:
            return fn()
        except Exception as exc:
            if not self._is_link_error(exc):
                raise
        self._reconnect(stale=client)
        return fn()

    # --- commands and files ---------------------------------------------------------------

    def run(self, cmd: list[str], timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run cmd (each argument quoted) and return (exit code, stdout, stderr)."""
        line = shlex.join(cmd)
        return self._call(lambda: self._exec(line, timeout_s))

    def _exec(self, line: str, timeout_s: float) -> tuple[int, str, str]:
        transport = self._transport()
        chan = transport.open_session(timeout=self.cfg.connect_timeout_s)
        with contextlib.closing(chan):
            chan.exec_command(line)
            chan.shutdown_write()
            out, err = _drain(chan, timeout_s, line)
            if chan.exit_status == -1 and not transport.is_active():
                raise ConnectionError(f"{self.name}: link dropped while running {line[:80]}")
            text = (out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
            return chan.exit_status, *text

    def remote_path(self, path: str) -> PurePosixPath:
        """path with a leading ~ replaced by the remote home."""
        if path == "~" or path.startswith("~/"):
            return self.home / path[2:]
        return PurePosixPath(path)

    def read_file(self, path: str) -> str:
        """A remote text file (SFTP)."""
        return self._sftp(path, "r").decode("utf-8", "replace")

    def write_file(self, path: str, text: str) -> None:
        """Write a remote text file (SFTP)."""
        self._sftp(path, "w", text.encode())

    def _sftp(self, path: str, mode: str, data: bytes = b"") -> bytes:
        def io() -> bytes:
            remote = str(self.remote_path(path))
            sftp = paramiko.SFTPClient.from_transport(self._transport())
            with sftp, sftp.open(remote, mode) as f:  # type: ignore[union-attr]
                if "w" in mode:
                    f.write(data)
                    return b""
                return f.read()

        return self._call(io)

    # --- the host interface ---------------------------------------------------------------

    def start(self, argv: list[str], env: dict[str, str], log_path: Path) -> Process:
        """Start argv; log_path is a remote path (relative: under workdir)."""
        log = self.remote_path(str(log_path))
        return self.manager.start(argv, env, self.workdir / log, self.workdir)

    def reap_orphans(self) -> list[int]:
        return self.manager.reap(self.workdir)

    def log_dir(self, default: Path) -> PurePosixPath:
        """Where service logs go on the remote machine (not the local default)."""
        return self.workdir / "logs"

    def free_port(self, address: str) -> int:
        """A free port on the remote machine (needs python3 there)."""
        rc, out, err = self.run(["python3", "-c", _FREE_PORT, address])
        if rc != 0 or not out.strip().isdigit():
            raise SSHError(f"{self.name}: cannot pick a free port on {address}: {err.strip()}")
        return int(out)

    def endpoint(self, address: str, port: int) -> str:
        """Base URL for a server bound to address:port there: through a forward when the
        plan asks for a tunnel or the server listens on loopback only, else directly."""
        if self.cfg.tunnel or address in LOOPBACK:
            remote = "127.0.0.1" if address in WILDCARD else address
            return f"http://127.0.0.1:{self.forward(port, remote)}"
        return f"http://{self.hostname if address in WILDCARD else address}:{port}"

    def transport(self, address: str) -> str:
        """Where `endpoint` forwards, the forward's kind ('ssh-tunnel': an OpenSSH process;
        'paramiko-tunnel': threads in this process), else 'direct'. Through a forward,
        receive stamps are taken when it wrote the bytes to loopback, not when they
        crossed the network."""
        return self._forwarder if self.cfg.tunnel or address in LOOPBACK else "direct"

    def alive(self, proc: Process) -> bool:
        return self.manager.alive(proc)

    def stop(self, proc: Process, grace_s: float = 10.0) -> None:
        """SIGTERM the server (or the unit's main process), SIGKILL what is left of its group
        (cgroup) once it has exited or after grace_s; idempotent."""
        self.manager.stop(proc, grace_s)

    def log_tail(self, proc: Process, lines: int = 40) -> str:
        return self.manager.log_tail(proc, lines)

    def fingerprint(self) -> dict[str, str]:
        """Hardware and OS facts stored in `environment`."""
        return facts.fingerprint(self)

    def gpu_processes(self) -> list[dict[str, str]]:
        """Compute processes on the GPUs (gpu_uuid, pid, used_memory); [] without nvidia-smi."""
        return facts.gpu_processes(self)

    def gpu_indices(self) -> list[int]:
        """GPUs services may use: the plan's list, else what nvidia-smi lists."""
        return list(self.cfg.gpus) if self.cfg.gpus is not None else facts.gpu_indices(self)

    def busy_gpus(self) -> set[int]:
        return facts.busy_gpus(self)

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """A local port on 127.0.0.1 whose connections reach remote_host:remote_port."""
        key = (remote_host, remote_port)
        with self._tunnels_lock:
            if key not in self._tunnels:
                target = functools.partial(login.target, self.cfg, self.name)
                tunnel = open_forward(self._forwarder, self.cfg, target, self._transport, key)
                self._tunnels[key], self._forwarder = tunnel, tunnel.kind
            return self._tunnels[key].port

    def describe(self, command: str) -> str:
        return f"{self.name}: {command}"

    def close(self) -> None:
        for tunnel in self._tunnels.values():
            tunnel.close()
        self._tunnels.clear()
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> SSH:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(self, cmd: list[str]) -> paramiko.Channel:
        """Start a long-running command (e.g. nvidia-smi -lms) on its own channel, stderr
        merged into stdout: read it with recv() as it comes; close() ends it."""

        def open_channel() -> paramiko.Channel:
            chan = self._transport().open_session(timeout=self.cfg.connect_timeout_s)
            chan.set_combine_stderr(True)
            chan.exec_command(shlex.join(cmd))
            return chan

        return self._call(open_channel)


def _drain(chan: paramiko.Channel, timeout_s: float, line: str) -> tuple[bytes, bytes]:
    """Read stdout and stderr together (neither can fill its window) until the exit."""
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout_s
    while True:
        while chan.recv_ready():
            out += chan.recv(65536)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        if chan.closed or (chan.exit_status_ready() and chan.eof_received):
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout(f"no exit within {timeout_s:g} s: {line[:120]}")
        select.select([chan], [], [], min(remaining, 1.0))
        if chan.eof_received:  # the pipe stays readable after EOF: do not spin
            time.sleep(0.005)
    while chan.recv_ready():
        out += chan.recv(65536)
    while chan.recv_stderr_ready():
        err += chan.recv_stderr(65536)
    return bytes(out), bytes(err)


def _worth_retrying(exc: BaseException) -> bool:
    """A HostUnreachable that says a later connect may succeed (refused, timed out; not
    host key or authentication); any other exception ends _reconnect at once."""
    return isinstance(exc, HostUnreachable) and exc.retry
