"""The host a plan's `host` block names (local, ssh, external)."""

from __future__ import annotations

from specsweep.collect.hosts.base import Host
from specsweep.collect.plan.components import ExternalHost, LocalHost, SSHHost


def create(cfg: LocalHost | SSHHost | ExternalHost) -> Host:
    if cfg.kind == "local":
        from specsweep.collect.hosts.local import Local

        return Local(cfg)
    if cfg.kind == "external":
        from specsweep.collect.hosts.external import External

        return External(cfg)
    if cfg.kind == "ssh":
        from specsweep.collect.hosts.ssh import SSH  # paramiko is only needed for remote hosts

        return SSH(cfg)
    raise ValueError(f"unknown host kind {cfg.kind!r}")
