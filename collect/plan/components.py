"""Plan components: the hosts services run on (one host, or the nodes of a Ray cluster), the
union of engines they run, GPU telemetry and the assumed speeds of time estimates.

Hosts and engines are pydantic models with `kind` as their discriminator; `collect.hosts.create` and
`collect.engines.create` pick the implementation for a kind. Each engine's model is its module's
`Config` under collect/engines/; the `Engine` union here is built from the modules found there.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from specsweep.collect.engines import config_models
from specsweep.collect.plan.fields import (  # noqa: F401 - re-exported: plans import them from here
    NAME_PATTERN,
    EngineConfig,
    Method,
    ModelInfo,
    Name,
    Strict,
)

# --- hosts -------------------------------------------------------------------------------


class BlockingService(Strict):
    """Something else on the host that a phase must stop first (e.g. a service on GPU0
    that a TP8 phase needs) and that specsweep starts again afterwards, also on failure."""

    name: Name = Field(description="Label, referred to by phases' stop_services.")
    stop: list[str] = Field(min_length=1, description="Command (argv) that stops it.")
    start: list[str] = Field(min_length=1, description="Command (argv) that starts it again.")
    gpus: list[int] = Field(
        default_factory=list,
        description="GPUs it holds: no configuration is placed on them, except those of a "
        "phase that stops this service (which then runs with nothing else on the host).",
    )


class _NoGPUList:
    """What a host without a declared GPU list answers, so that the planner and the runner ask
    every host the same questions (SSHHost has these as plan fields)."""

    @property
    def gpus(self) -> list[int] | None:
        return None

    @property
    def gpu_memory_gib(self) -> float | None:
        return None

    @property
    def gpu_wait_s(self) -> float:
        return 0.0

    @property
    def pack(self) -> bool:
        return False

    @property
    def replicas(self) -> bool:
        return False


class _GPUHost(Strict):
    """The GPU fields a local and an SSH host share (one definition, one meaning)."""

    gpus: list[int] | None = Field(
        None,
        description="GPU indices services may use; default: what nvidia-smi lists "
        "(none without nvidia-smi or its driver: a CPU-only machine).",
    )
    gpu_memory_gib: float | None = Field(
        None,
        gt=0,
        description="Memory of each GPU in GiB (nvidia-smi's memory.total / 1024), "
        "for `check`'s memory budget; `check --probe` reads it from the host instead.",
    )
    gpu_wait_s: float = Field(
        0,
        ge=0,
        description="How long a service waits for busy GPUs to free up before its "
        "configuration is skipped (0: skip at once).",
    )
    pack: bool = Field(
        True,
        description="With GPUs: run configurations side by side on disjoint GPU sets (each "
        "keeps its GPUs for all its workloads; units record who shared the host in "
        "units.colocated_with). Without GPUs configurations always run one at a time. false: "
        "one at a time (e.g. a CPU engine on a machine that has GPUs).",
    )
    replicas: bool = Field(
        True,
        description="With `pack`: a configuration whose estimated work is long next to the "
        "others' runs as several replicas (service starts on GPUs of their own, each a "
        "share of its workloads; services.replica says which), when that shortens the "
        "packed order by more than the start-ups it adds (collect/scheduling/replicas.py). "
        "false: one service start per configuration.",
    )
    blocking_services: list[BlockingService] = Field(
        default_factory=list, description="Services phases may stop (see Phase.stop_services)."
    )


class LocalHost(_GPUHost):
    kind: Literal["local"] = Field(description="Run services as processes on this machine.")
    name: str = Field("localhost", description="Label stored with every row from this host.")


class SSHHost(_GPUHost):
    kind: Literal["ssh"] = Field(description="A machine reached over SSH.")
    name: str | None = Field(None, description="Label stored with every row; default: address.")
    address: str = Field(description="Host name or address (an ~/.ssh/config Host alias works).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port; default 22 or config.")
    user: str | None = Field(None, description="Login user; default: ssh_config, then $USER.")
    key_file: str | None = Field(None, description="Private key file; default: agent and ~/.ssh.")
    password_env: str | None = Field(
        None,
        description="Name of an environment variable holding the password (never the password).",
    )
    known_hosts_file: str | None = Field(
        None, description="known_hosts to check the host key against; default ~/.ssh/known_hosts."
    )
    accept_unknown_host_key: bool = Field(
        False, description="Accept and remember a host key not in known_hosts (off: reject it)."
    )
    use_ssh_config: bool = Field(True, description="Honour ~/.ssh/config for this address.")
    manager: Literal["process", "systemd"] = Field(
        "process",
        description="How services run: 'process' (setsid/nohup, pid file, log file) or "
        "'systemd' (a generated unit per configuration, systemctl, journalctl).",
    )
    workdir: str = Field(
        "~/.specsweep", description="Remote folder for logs, pid files and unit files."
    )
    tunnel: bool = Field(
        False, description="Reach service ports through an SSH port-forward (port not exposed)."
    )
    forward: Literal["auto", "openssh", "paramiko"] = Field(
        "auto",
        description="How a port-forward is made: 'openssh' (an `ssh -tt -L` process holding "
        "a session, so that sshd turns Nagle off, with the same host-key policy; bytes are "
        "copied outside specsweep's process: lower timing "
        "error, docs/measurements/2026-12-03-tunnel-timing.md), 'paramiko' (threads in "
        "specsweep's process), 'auto' (openssh where an `ssh` client exists and no "
        "password_env is set, else paramiko). services.transport records which one ran.",
    )
    connect_timeout_s: float = Field(15, gt=0, description="Seconds per connection attempt.")
    reconnect_attempts: int = Field(
        5, ge=0, le=50, description="Reconnects (with exponential backoff) after a dropped link."
    )


class ExternalHost(_NoGPUList, Strict):
    kind: Literal["external"] = Field(
        description="A server that is already running: specsweep neither starts nor stops "
        "it, but checks its health, fingerprints it and measures it."
    )
    name: str = Field("external", description="Label stored with every row.")
    url: str = Field(
        pattern=r"^https?://[^\s/]+(:\d+)?/?$", description="Base URL, e.g. http://gpu1:30000."
    )

    @property
    def blocking_services(self) -> list[BlockingService]:
        return []


Host = Annotated[LocalHost | SSHHost | ExternalHost, Field(discriminator="kind")]


# --- a Ray cluster (the plan's `cluster:` block) ------------------------------------------
# Absent (the default), a campaign runs on its one host and nothing imports ray. Present, each
# configuration of the runner's queue becomes a Ray task that starts its server on the node
# Ray picked, as a local process with the GPUs Ray assigned, measures it with the client on the
# same node and returns the rows to the driver, the only writer of the results file
# (collect/cluster/). So `host` must be `kind: local`: it describes every node. `cluster` is
# not part of the plan's hash (where a campaign runs, like `repeat`: the environment rows
# record each node), so a campaign started on one host can be resumed on a cluster. The model
# lives here, with the host's, because the driver (collect/cluster/) sits above the plan.


class Cluster(Strict):
    """Several hosts through Ray: each configuration is a Ray task on one node, with its
    `tp` GPUs there; the driver (where `collect run` runs) writes every row."""

    kind: Literal["ray"] = Field(
        description="The distributed engine: Ray (`pip install "
        "specsweep[ray]`, the same version on every node)."
    )
    address: str = Field(
        "auto",
        description="Which Ray cluster: 'auto' (one started with `ray start` that this "
        "machine belongs to, or $RAY_ADDRESS), 'local' (start a one-node cluster here), "
        "'HOST:6379' (the head's address) or 'ray://HOST:10001' (Ray Client).",
    )
    max_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Times a configuration whose node or worker died is run again elsewhere "
        "(Ray's task retries; a configuration that fails by itself is not retried).",
    )
    pin: dict[Name, str] = Field(
        default_factory=dict,
        description="Phase, method or family name -> a custom resource name (`ray start "
        "--resources '{\"h200a\": 1}'`): its configurations run only on nodes that have it.",
    )
    gpu: bool | None = Field(
        None,
        description="Whether each configuration takes `tp` of Ray's GPUs on its node; default: "
        "yes for SGLang and vLLM, for llama.cpp only with a CUDA build (binary auto-cuda) or "
        "layers offloaded (-ngl / --n-gpu-layers other than 0); otherwise one CPU.",
    )


def _fits_the_plan(cluster: Cluster | None, info: ValidationInfo) -> Cluster | None:
    """With a cluster, `host` describes every node (a local host) and `pin` names phases or
    methods of the plan. `host.blocking_services` are allowed: each runs on the nodes that
    joined Ray with the custom resource `specsweep:<name>` and without its GPUs; a phase
    that stops it runs each configuration alone on such a node, stopping and starting the
    service around it (collect/cluster/blocking.py)."""
    if cluster is None:
        return None
    host = info.data.get("host")
    if host is not None and host.kind != "local":
        raise ValueError(
            f"a cluster runs every service as a local process on its node: "
            f"host.kind must be 'local', not {host.kind!r}"
        )
    methods = info.data.get("methods") or []
    names = {n for m in methods for n in (m.name, m.family) if n} | _phase_names(info.data)
    unknown = sorted(set(cluster.pin) - names)
    if names and unknown:
        raise ValueError(
            f"cluster.pin names {unknown}, neither phases nor methods of the plan "
            f"(or families) {sorted(names)}"
        )
    return cluster


def _phase_names(data: dict[str, Any]) -> set[str]:
    """The plan's phase names, or the default ones (one per tp: tp1, tp2, ...)."""
    phases = data.get("phases")
    if phases:
        return {p.name for p in phases}
    methods = data.get("methods") or []
    tps = {t for m in methods for t in (m.tp or data.get("tp") or [1])}
    return {f"tp{t}" for t in tps}


ClusterField = Annotated[Cluster | None, AfterValidator(_fits_the_plan)]


# --- engines -----------------------------------------------------------------------------


# One plan model per engine module under collect/engines/ (its `Config`), found by discovery.
Engine = Annotated[Union[tuple(config_models())], Field(discriminator="kind")]  # noqa: UP007


# --- GPU telemetry ------------------------------------------------------------------------


class Telemetry(Strict):
    """GPU sampling while each measured window runs (table gpu_samples): NVML on a local
    host (nvidia-smi where libnvidia-ml cannot be loaded), `nvidia-smi -lms` over SSH."""

    enabled: bool = Field(
        True, description="Sample the GPUs a service holds (nothing happens without GPUs)."
    )
    period_s: float = Field(0.1, ge=0.02, le=60, description="Seconds between samples of each GPU.")


# --- assumed speeds -----------------------------------------------------------------------


class Estimates(Strict):
    """Assumed speeds for duration estimates (ETA, `check`, `simulate`) before the store has
    measurements; `collect.scheduling.estimate` replaces them with measured figures as they
    exist."""

    startup_s: float | tuple[float, float] = Field(
        (60.0, 90.0),
        description="Seconds from launch to a healthy server: a value or a [low, high] range "
        "(ETA uses the midpoint, `simulate` draws from the range).",
    )
    decode_tps: dict[int, float] = Field(
        {1: 30.0},
        description="Baseline decode speed of ONE request alone (tokens/s) by tp, e.g. "
        "{1: 27, 4: 60}; a tp not listed takes the nearest listed one.",
    )
    speedup: dict[str, float] = Field(
        default_factory=dict,
        description="Decode speed of a method as a multiple of the baseline's, e.g. "
        "{dflash-linear: 2.5}; methods not listed: 1.",
    )
    prefill_tps: float = Field(
        4000.0, gt=0, description="Prompt tokens per second a request's prefill processes."
    )
    concurrency_slowdown: float = Field(
        0.05,
        ge=0,
        description="How one request's decode slows with load: at concurrency c it runs at "
        "decode_tps / (1 + concurrency_slowdown * (c - 1)).",
    )

    @field_validator("startup_s")
    @classmethod
    def _ordered_range(cls, value: float | tuple[float, float]) -> float | tuple[float, float]:
        low, high = value if isinstance(value, tuple) else (value, value)
        if not 0 <= low <= high:
            raise ValueError(f"startup_s must be >= 0 and [low, high] ordered, got {value}")
        return value

    @field_validator("decode_tps", "speedup")
    @classmethod
    def _positive_speeds(cls, speeds: dict[Any, float]) -> dict[Any, float]:
        bad = {k: v for k, v in speeds.items() if not v > 0 or (isinstance(k, int) and k < 1)}
        if bad:
            raise ValueError(f"speeds and tp sizes must be > 0, got {bad}")
        return speeds

    def startup_range(self) -> tuple[float, float]:
        s = self.startup_s
        return s if isinstance(s, tuple) else (s, s)


# --- a service to start (not part of the YAML) ---------------------------------------


class ServiceConfig(BaseModel):
    """One service to start: engine + method + tp. Not part of the YAML."""

    model_config = ConfigDict(frozen=True)
    method: Method
    tp: int
    engine: Engine
    phase: str = ""
    workloads: tuple[str, ...] | None = None

    @property
    def config_id(self) -> str:
        """Stable hash of engine + method + tp + flags + env (not of timeouts; the method's
        name is in it, so an A/A control differs from its baseline by its name alone)."""
        e = self.engine
        key = {
            "engine": e.kind,
            "model": e.model,
            "args": e.args,
            "env": e.env,
            "method": self.method.name,
            "method_args": self.method.args,
            "method_env": self.method.env,
            "tp": self.tp,
        }
        if e.tp_args.get(self.tp):
            key["tp_args"] = e.tp_args[self.tp]
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
