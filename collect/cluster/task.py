"""What one Ray task runs on its node: one job of the runner's queue (a configuration and the
workloads it has left), with the code a single-host campaign runs.

The task builds the Plan from the plan's text, a local host named "<hostname>/<node id[:8]>"
(so that nodes differ even on one machine), the engine (prepared on the node), and a scratch
Store in a temporary DuckDB file, where the same contracts validate every row; it runs
`collect.run.configuration.run_config` there with the GPUs Ray assigned (none for a CPU
engine) and returns every row the scratch file got, as plain dicts per table, with the notes
the run would have printed. The scratch file is deleted. The task writes nothing else: the
driver lands the rows (collect/cluster/land.py). A task whose worker or node dies returns
nothing, so none of its rows reach the results file; Ray runs it again elsewhere (the
driver's max_retries). Its server dies with the worker (collect.hosts.local: a server is
killed when the process that started it dies), also when the driver cancels it (Ctrl-C).
A job of a phase that stops blocking services stops them on this node first and has them
started again when it ends, however it ends (collect/cluster/blocking.py); when one will
not stop, the task measures nothing and says why ("skipped").
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import ray

from specsweep.collect import engines, hosts
from specsweep.collect.cluster import blocking
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import configuration as serve
from specsweep.collect.run.campaign import Campaign
from specsweep.collect.run.fingerprint import put_environment, record_environment
from specsweep.schema.store import Store

# every table a configuration's run writes (campaigns and method_params are the driver's)
TABLES = (
    "environment",
    "services",
    "units",
    "requests",
    "windows",
    "server_metrics",
    "gpu_samples",
    "endpoint_errors",
    "quarantine",
)


class Notes:
    """The progress display a configuration's run talks to, on a node: the notes are kept
    for the driver to print; status lines and per-request ticks are dropped (the driver's
    bar advances when the rows land)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, text: str) -> None:
        self.lines.append(text)

    def status(self, text: str) -> None:
        """Nothing: a node has no console."""

    def request_done(self, key: str) -> None:
        """Nothing: the driver counts the requests it lands."""


def node_name() -> str:
    """'<hostname>/<Ray node id, first 8 hex>': the services' and environment rows' host."""
    node_id = ray.get_runtime_context().get_node_id()
    return f"{socket.gethostname()}/{node_id[:8]}"


def run_job(
    plan_text: str,
    campaign_id: str,
    key: str,
    phase: str,
    config_id: str,
    workloads: list[str],
    run: int,
    log_dir: str,
    gpu: bool = True,
) -> dict[str, Any]:
    """Run job `key` (the configuration `config_id` of `phase`, these workloads, run `run`)
    on this node; {"node": name, "rows": {table: [row, ...]}, "notes": [...],
    "skipped": why nothing was measured, or ''}. A phase that stops blocking services
    stops them here first and starts them again after (collect/cluster/blocking.py); its
    configuration then also gets their GPUs when it uses GPUs (`gpu`)."""
    plan = parse_plan(plan_text)
    if plan.campaign_id() != campaign_id:  # the driver sent this text: a bug, not a fault
        raise RuntimeError(f"plan text is campaign {plan.campaign_id()}, not {campaign_id}")
    node = node_name()
    config = _config(plan, phase, config_id)
    services = blocking.services_of(plan, phase)
    gpus = gpu_indices(ray.get_gpu_ids())
    if services:  # the node's every Ray GPU is this task's; the services' GPUs join them
        gpus = blocking.gpus_for(gpus, services, config.tp) if gpu else ()
    # the host's GPUs are those Ray assigned: none for a CPU task, which then claims no GPU
    # that Ray may give another task on this node
    host = hosts.create(plan.host.model_copy(update={"name": node, "gpus": list(gpus)}))
    todo = [w for w in plan.workloads_of(config) if w.name in workloads]
    engine = engines.create(plan.engine)
    notes = Notes()
    with tempfile.TemporaryDirectory(prefix="specsweep-task-") as scratch:
        path = Path(scratch) / "scratch.duckdb"
        store = Store(path)
        try:
            engine.prepare(host)
            record_environment(store, campaign_id, host, plan)
            put_environment(
                store,
                campaign_id,
                node,
                {
                    "ray.node_id": ray.get_runtime_context().get_node_id(),
                    "ray.version": ray.__version__,
                    "ray.gpu_ids": ",".join(map(str, ray.get_gpu_ids())) or "none",
                },
            )
            c = Campaign(store, plan, campaign_id, host, engine, _log_dir(log_dir), notes, run=run)  # type: ignore[arg-type]
            with blocking.stopped(host, services, notes) as state:
                if not state.failure:
                    serve.run_config(
                        c, key, config, todo, gpus or None, port_offset=gpus[0] if gpus else 0
                    )
            if state.start_errors:  # beside the notes: the results file keeps it
                put_environment(
                    store,
                    campaign_id,
                    node,
                    {
                        f"blocking.{name}.start_error": error
                        for name, error in state.start_errors.items()
                    },
                )
        finally:
            host.close()
        return {"node": node, "rows": dump(path), "notes": notes.lines, "skipped": state.failure}


def gpu_indices(ids: list[Any]) -> tuple[int, ...]:
    """The GPU indices Ray assigned. On a node started with CUDA_VISIBLE_DEVICES, Ray hands
    out ids from that list, as strings (ray.get_gpu_ids: "a subset of the IDs in
    CUDA_VISIBLE_DEVICES"), so `CUDA_VISIBLE_DEVICES=1,2,3 ray start` gives the physical
    indices 1-3, which NVML and the server's CUDA_VISIBLE_DEVICES both use. A UUID there
    (GPU-..., MIG-...) is no index: refused, naming it, before a server starts."""
    try:
        return tuple(int(g) for g in ids)
    except ValueError:
        raise RuntimeError(
            f"Ray assigned GPU ids {ids}, not indices: start this node's "
            "`ray start` with CUDA_VISIBLE_DEVICES as GPU indices "
            "(e.g. 1,2,3), not UUIDs"
        ) from None


def _log_dir(path: str) -> Path:
    """The driver's log folder, where this node can make it (a shared or alike file
    system), else one under the node's temporary folder (services.log_tail keeps the end)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        return Path(path)
    except OSError:
        return Path(tempfile.gettempdir()) / "specsweep-logs" / Path(path).name


def _config(plan: Any, phase: str, config_id: str) -> Any:
    """The phase's ServiceConfig with this id (a best_of phase: whichever method it is)."""
    for p in plan.all_phases():
        if p.name != phase:
            continue
        for config in plan.phase_configs(p, [m.name for m in plan.methods]):
            if config.config_id == config_id:
                return config
    raise RuntimeError(f"no configuration {config_id} in phase {phase} of the plan")


def dump(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of the scratch file's tables, as Python values (lists, datetimes, None)."""
    out: dict[str, list[dict[str, Any]]] = {}
    con = duckdb.connect(str(path), read_only=True)
    try:
        for table in TABLES:  # fixed names
            cursor = con.execute(f"SELECT * FROM {table}")
            columns = [d[0] for d in cursor.description]
            out[table] = [dict(zip(columns, row)) for row in cursor.fetchall()]
    finally:
        con.close()
    return out
