"""How the SSH host logs in: paramiko's connect() arguments from the plan's SSH fields over
~/.ssh/config's (`target`), the password from the environment variable the plan names
(`password`), and how both are told in a failure's one line: the user@host:port tried
(`address`) and the authentication methods, by name, never a secret (`tried`). Also
`SSHError`, what the SSH host raises when it cannot do what was asked."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

import paramiko

from specsweep.collect.plan.components import SSHHost

SSH_CONFIG = "~/.ssh/config"


class SSHError(RuntimeError):
    """The SSH host cannot do what was asked (configuration, link, authentication)."""


def target(cfg: SSHHost, name: str) -> dict[str, Any]:
    """paramiko connect() arguments: the plan's fields over ~/.ssh/config's."""
    conf: dict[str, Any] = {}
    path = Path(os.path.expanduser(SSH_CONFIG))
    if cfg.use_ssh_config and path.exists():
        conf = dict(paramiko.SSHConfig.from_path(str(path)).lookup(cfg.address))
    key = cfg.key_file and os.path.expanduser(cfg.key_file)
    if key and not Path(key).exists():
        raise SSHError(f"{name}: key_file {key} does not exist")
    configured = [os.path.expanduser(k) for k in conf.get("identityfile", [])]
    key = key or next((k for k in configured if Path(k).exists()), None)
    target: dict[str, Any] = {
        "hostname": conf.get("hostname", cfg.address),
        "port": cfg.port or int(conf.get("port", 22)),
        "username": cfg.user or conf.get("user") or getpass.getuser(),
        "key_filename": key,
        "look_for_keys": key is None,
    }
    if "proxycommand" in conf:
        target["sock"] = paramiko.ProxyCommand(conf["proxycommand"])
    return target


def password(cfg: SSHHost, name: str) -> str | None:
    """The password in the environment variable cfg.password_env names; None without one."""
    var = cfg.password_env
    if var is None:
        return None
    if var not in os.environ:
        raise SSHError(f"{name}: password_env names {var}, which is not set")
    return os.environ[var]


def address(cfg: SSHHost, target: dict[str, Any] | None = None) -> str:
    """user@host:port as connect() is given them (the plan's values before ssh_config's)."""
    t = target or {}
    user = t.get("username") or cfg.user or getpass.getuser()
    return f"{user}@{t.get('hostname', cfg.address)}:{t.get('port', cfg.port or 22)}"


def tried(cfg: SSHHost, target: dict[str, Any], password: str | None) -> list[str]:
    """The authentication methods connect() tries, by name (never a secret)."""
    methods = [f"publickey ({target['key_filename']})"] if target["key_filename"] else []
    if os.environ.get("SSH_AUTH_SOCK"):
        methods.append("publickey (ssh-agent)")
    if target["look_for_keys"]:
        methods.append("publickey (~/.ssh/id_*)")
    if password is not None:
        methods.append(f"password (${cfg.password_env})")
    return methods
