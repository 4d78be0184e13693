"""The SSH host: commands, servers, files and port forwards on a remote machine (paramiko).

Every command goes out as one line built with `shlex.join`, so each argument reaches the
remote program literally; the remote login shell must be POSIX-like (sh, dash, bash, zsh).
Host keys are checked against known_hosts and unknown keys rejected unless the plan says
otherwise. A dropped link is reconnected with exponential backoff (0.5 s, doubling) and the
interrupted call is retried once. Servers run under a manager (`collect.managers`).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import paramiko

from collect.components import SSHHost
from collect.hosts import Process
from collect.managers import ProcessManager, SystemdManager

T = TypeVar("T")
SSH_CONFIG = "~/.ssh/config"
GPU_QUERY = "index,name,memory.total,memory.used,driver_version"
APP_QUERY = "gpu_uuid,pid,used_memory"

# One round trip; a constant script, so nothing in it comes from the plan.
_FINGERPRINT = rf"""echo "os=$(uname -srmo 2>/dev/null || uname -a)"
echo "hostname=$(uname -n)"
echo "cpu.count=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "cpu.model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
echo "memory.total_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo 2>/dev/null)"
echo "python=$(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu={GPU_QUERY} --format=csv,noheader,nounits | sed 's/^/gpu=/'
fi
"""


class SSHError(RuntimeError):
    """The SSH host cannot do what was asked (configuration, link, authentication)."""


class HostKeyRejected(SSHError):
    """The server's host key is not in known_hosts and accepting unknown keys is off."""


class CommandTimeout(SSHError):
    """A remote command ran longer than its timeout (the link itself is fine)."""


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        raise HostKeyRejected(
            f"host key of {hostname} ({key.get_name()} {key.fingerprint}) is not in "
            f"{self.known_hosts}; check it and add it (e.g. ssh-keyscan), or set "
            "accept_unknown_host_key: true in the plan"
        )


class SSH:
    """A machine reached over SSH; servers run under cfg.manager."""

    def __init__(self, cfg: SSHHost):
        self.cfg = cfg
        self.name = cfg.name or cfg.address
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._tunnels: list[_Tunnel] = []
        self._reconnect(stale=None, attempts=1)
        home = self.run(["sh", "-c", 'printf %s "$HOME"'])[1]
        self.home = PurePosixPath(home or "/")
        self.workdir = self.remote_path(cfg.workdir)
        root = self.run(["id", "-u"])[1].strip() == "0"
        self.manager: ProcessManager | SystemdManager = (
            SystemdManager(self, root, self.home)
            if cfg.manager == "systemd"
            else ProcessManager(self)
        )

    # --- connection -----------------------------------------------------------------------

    def _target(self) -> dict[str, Any]:
        """paramiko connect() arguments: the plan's fields over ~/.ssh/config's."""
        conf: dict[str, Any] = {}
        path = Path(os.path.expanduser(SSH_CONFIG))
        if self.cfg.use_ssh_config and path.exists():
            conf = dict(paramiko.SSHConfig.from_path(str(path)).lookup(self.cfg.address))
        key = self.cfg.key_file and os.path.expanduser(self.cfg.key_file)
        if key and not Path(key).exists():
            raise SSHError(f"{self.name}: key_file {key} does not exist")
        configured = [os.path.expanduser(k) for k in conf.get("identityfile", [])]
        key = key or next((k for k in configured if Path(k).exists()), None)
        target: dict[str, Any] = {
            "hostname": conf.get("hostname", self.cfg.address),
            "port": self.cfg.port or int(conf.get("port", 22)),
            "username": self.cfg.user or conf.get("user") or getpass.getuser(),
            "key_filename": key,
            "look_for_keys": key is None,
        }
        if "proxycommand" in conf:
            target["sock"] = paramiko.ProxyCommand(conf["proxycommand"])
        return target

    def _password(self) -> str | None:
        name = self.cfg.password_env
        if name is None:
            return None
        if name not in os.environ:
            raise SSHError(f"{self.name}: password_env names {name}, which is not set")
        return os.environ[name]

    def _connect_once(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        known = Path(os.path.expanduser(self.cfg.known_hosts_file or "~/.ssh/known_hosts"))
        if not known.exists() and self.cfg.accept_unknown_host_key:
            known.parent.mkdir(parents=True, exist_ok=True)
            known.touch()
        if known.exists():
            client.load_host_keys(str(known))  # also where AutoAddPolicy remembers new keys
        accept = self.cfg.accept_unknown_host_key
        client.set_missing_host_key_policy(
            paramiko.AutoAddPolicy() if accept else _RejectUnknown(known)
        )
        t = self.cfg.connect_timeout_s
        try:
            client.connect(
                **self._target(), password=self._password(), timeout=t, banner_timeout=t,
                auth_timeout=t, channel_timeout=t, allow_agent=True,
            )  # fmt: skip
        except BaseException:
            client.close()
            raise
        client.get_transport().set_keepalive(15)  # type: ignore[union-attr]
        return client

    def _active(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return transport is not None and transport.is_active()

    def _reconnect(self, stale: paramiko.SSHClient | None, attempts: int | None = None) -> None:
        """Replace the client `stale` (unless another thread already has), with backoff."""
        with self._lock:
            if self._client is not stale and self._active():
                return
            if self._client is not None:
                self._client.close()
                self._client = None
            attempts = self.cfg.reconnect_attempts if attempts is None else attempts
            error: Exception | None = None
            for i in range(attempts):
                if i:
                    time.sleep(0.5 * 2 ** (i - 1))
                try:
                    self._client = self._connect_once()
                    return
                except (paramiko.AuthenticationException, paramiko.BadHostKeyException):
                    raise
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    error = exc
            raise SSHError(f"{self.name}: cannot connect ({attempts} attempts): {error}")

    def _transport(self) -> paramiko.Transport:
        if not self._active():
            self._reconnect(stale=self._client)
        return self._client.get_transport()  # type: ignore[union-attr,return-value]

    def _is_link_error(self, exc: Exception) -> bool:
        if isinstance(exc, (SSHError, paramiko.AuthenticationException)):
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

        def read() -> str:
            with self._client.open_sftp() as sftp, sftp.open(str(self.remote_path(path))) as f:  # type: ignore[union-attr]
                return f.read().decode("utf-8", "replace")

        self._transport()
        return self._call(read)

    def write_file(self, path: str, text: str) -> None:
        """Write a remote text file (SFTP)."""

        def write() -> None:
            with self._client.open_sftp() as sftp, sftp.open(str(self.remote_path(path)), "w") as f:  # type: ignore[union-attr]
                f.write(text.encode())

        self._transport()
        self._call(write)

    # --- the host interface ---------------------------------------------------------------

    def start(self, argv: list[str], env: dict[str, str], log_path: Path) -> Process:
        """Start argv; its log is workdir/logs/<log_path's name> on the remote machine."""
        log = self.workdir / "logs" / PurePosixPath(log_path).name
        return self.manager.start(argv, env, log, self.workdir)

    def alive(self, proc: Process) -> bool:
        return self.manager.alive(proc)

    def stop(self, proc: Process, grace_s: float = 10.0) -> None:
        """SIGTERM the server's group (or unit), SIGKILL after grace_s; idempotent."""
        self.manager.stop(proc, grace_s)

    def log_tail(self, proc: Process, lines: int = 40) -> str:
        return self.manager.log_tail(proc, lines)

    def fingerprint(self) -> dict[str, str]:
        """Hardware and OS facts stored in `environment`."""
        _, out, _ = self.run(["sh", "-c", _FINGERPRINT])
        return parse_fingerprint(out)

    def gpu_processes(self) -> list[dict[str, str]]:
        """Processes on the GPUs (gpu_uuid, pid, used_memory); empty without nvidia-smi."""
        script = 'command -v nvidia-smi >/dev/null 2>&1 || exit 0; exec nvidia-smi "$@"'
        query = [f"--query-compute-apps={APP_QUERY}", "--format=csv,noheader"]
        _, out, _ = self.run(["sh", "-c", script, "sh", *query])
        return parse_csv(out, APP_QUERY.split(","))

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """A local port on 127.0.0.1 whose connections reach remote_host:remote_port."""
        tunnel = _Tunnel(self._transport, (remote_host, remote_port))
        self._tunnels.append(tunnel)
        return tunnel.port

    def close(self) -> None:
        for tunnel in self._tunnels:
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


def parse_csv(text: str, fields: list[str]) -> list[dict[str, str]]:
    """nvidia-smi csv,noheader rows as dicts."""
    rows = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values)))
    return rows


def parse_fingerprint(out: str) -> dict[str, str]:
    """The `key=value` lines of the fingerprint script as `environment` facts."""
    facts: dict[str, str] = {}
    gpu_lines = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key == "gpu":
            gpu_lines.append(value)
        elif key:
            facts[key] = value.strip() or "unknown"
    kb = facts.pop("memory.total_kb", "unknown")
    facts["memory.total_gb"] = f"{int(kb) / 1024**2:.1f}" if kb.isdigit() else "unknown"
    gpus = parse_csv("\n".join(gpu_lines), GPU_QUERY.split(","))
    facts["gpus"] = str(len(gpus)) if gpus else "none"
    for gpu in gpus:
        i = gpu["index"]
        facts[f"gpu.{i}.name"] = gpu["name"]
        facts[f"gpu.{i}.memory_total_mib"] = gpu["memory.total"]
        facts[f"gpu.{i}.memory_used_mib"] = gpu["memory.used"]
        facts["gpu.driver"] = gpu["driver_version"]
    return facts


class _Tunnel:
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
