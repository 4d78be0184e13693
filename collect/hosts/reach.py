"""Why an SSH connection failed, in one line: the reason `HostUnreachable` carries (name not
resolved, refused, timed out, host key rejected, authentication failed) and whether another
attempt may succeed. Also the host-key policy that rejects keys missing from known_hosts."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import paramiko


class HostKeyRejected(paramiko.SSHException):
    """The server's host key is not in known_hosts and accepting unknown keys is off."""


class RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        raise HostKeyRejected(
            f"host key rejected: the key is unknown: {key.get_name()} {key.fingerprint} is not "
            f"in {self.known_hosts} (for {hostname}); policy: unknown keys are rejected "
            "(accept_unknown_host_key: false); check the key and add it (e.g. ssh-keyscan), "
            "or set accept_unknown_host_key: true in the plan"
        )


def why(
    exc: BaseException, timeout_s: float, banner: bool, tried: list[str], known: Path
) -> tuple[str, bool]:
    """(one-line reason, worth retrying) for an exception from paramiko's connect().
    banner: whether the server's SSH banner arrived before the failure."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = list(exc.errors.values())
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            return "connection refused (nothing listens on that port)", True
        exc = errors[0] if errors else exc
    if isinstance(exc, socket.gaierror):
        return f"name not resolved ({exc.strerror})", True
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)", True
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timed out after {timeout_s:g} s (connect_timeout_s) connecting", True
    if isinstance(exc, HostKeyRejected):
        return str(exc), False
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"host key rejected: the key changed: the server offers {exc.key.get_name()} "
            f"{exc.key.fingerprint}, {known} has {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}; policy: a changed key is always rejected "
            "(remove the old line if the change is expected)", False
        )  # fmt: skip
    if isinstance(exc, paramiko.AuthenticationException):
        allowed = getattr(exc, "allowed_types", None)
        server = f"; the server accepts {', '.join(allowed)}" if allowed else ""
        methods = ", ".join(tried) or "none (no key file, agent or password)"
        return f"authentication failed (tried {methods}{server})", False
    if not banner:
        return (
            f"timed out after {timeout_s:g} s waiting for the SSH banner (connect_timeout_s)",
            True,
        )
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower(), True
    return f"SSH handshake failed: {exc or type(exc).__name__}", True
