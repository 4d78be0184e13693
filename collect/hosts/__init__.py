"""Hosts: where services run and how they are started and stopped. `base` holds the `Host`
protocol; `local` (this machine), `ssh` (a machine over SSH, with `managers` for its process or
systemd services, `facts` for its hardware and GPUs, `tunnel` for port forwards, paramiko's
or an OpenSSH `ssh -L`, `login` for how it logs in, and `reach` for why it cannot be
reached) and `external` (a server someone else runs) implement it; `create(cfg)` picks one by
the plan's `kind`."""

from __future__ import annotations

from collect.hosts.base import Host, Process
from collect.plan.components import ExternalHost, LocalHost, SSHHost

__all__ = ["Host", "Process", "create"]


def create(cfg: LocalHost | SSHHost | ExternalHost) -> Host:
    if cfg.kind == "local":
        from collect.hosts.local import Local

        return Local(cfg)
    if cfg.kind == "external":
        from collect.hosts.external import External

        return External(cfg)
    if cfg.kind == "ssh":
        from collect.hosts.ssh import SSH  # paramiko is only needed for remote hosts

        return SSH(cfg)
    raise ValueError(f"unknown host kind {cfg.kind!r}")
