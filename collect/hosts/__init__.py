"""Hosts: where services run and how they are started and stopped. `base` holds the `Host`
protocol; `local` (this machine), `ssh` (a machine over SSH, with `managers` for its process or
systemd services, `facts` for its hardware and GPUs, `tunnel` for port forwards, paramiko's
or an OpenSSH `ssh -L`, `login` for how it logs in, and `reach` for why it cannot be
reached) and `external` (a server someone else runs) implement it; `create(cfg)` picks one by
the plan's `kind`."""

from specsweep.collect.hosts.base import Host, Process
from specsweep.collect.hosts.create import create

__all__ = ["Host", "Process", "create"]
