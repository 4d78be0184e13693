"""The plan's `cluster:` block: run one campaign across the nodes of a Ray cluster.

Absent (the default), a campaign runs on its one host and nothing imports ray. Present, each
configuration of the runner's queue becomes a Ray task that starts its server on the node
Ray picked, as a local process with the GPUs Ray assigned, measures it with the client on the
same node and returns the rows to the driver, the only writer of the results file
(collect/cluster/). So `host` must be `kind: local`: it describes every node. `cluster` is
not part of the plan's hash (where a campaign runs, like `repeat`: the environment rows
record each node), so a campaign started on one host can be resumed on a cluster.
This model lives here, beside the code that runs it (as each engine's `Config` does), and
imports nothing of ray: `Plan` imports it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo

from collect.plan.fields import Name, Strict


class Cluster(Strict):
    """Several hosts through Ray: each configuration is a Ray task on one node, with its
    `tp` GPUs there; the driver (where `collect run` runs) writes every row."""

    kind: Literal["ray"] = Field(description="The distributed engine: Ray (`pip install "
                                 "specsweep[ray]`, the same version on every node).")
    address: str = Field(
        "auto",
        description="Which Ray cluster: 'auto' (one started with `ray start` that this "
        "machine belongs to, or $RAY_ADDRESS), 'local' (start a one-node cluster here), "
        "'HOST:6379' (the head's address) or 'ray://HOST:10001' (Ray Client).",
    )
    max_retries: int = Field(
        2, ge=0, le=10,
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
        raise ValueError(f"a cluster runs every service as a local process on its node: "
                         f"host.kind must be 'local', not {host.kind!r}")
    methods = info.data.get("methods") or []
    names = {n for m in methods for n in (m.name, m.family) if n} | _phase_names(info.data)
    unknown = sorted(set(cluster.pin) - names)
    if names and unknown:
        raise ValueError(f"cluster.pin names {unknown}, neither phases nor methods of the plan "
                         f"(or families) {sorted(names)}")
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
