"""The driver of a campaign across a Ray cluster: where `collect run` runs, the only writer.

`collect.run.runner.run` (called by `collect.cluster.launch.run` with `connect=RayCluster`) does
what it does for one host (the campaigns row, resume, runs, phases, status) with a `RayCluster`
as where the campaign runs (it satisfies `collect.hosts.base.Cluster`), and hands its job queue (the
runner's `_Queue`: phases, best_of picks, --only, replicas) to `RayCluster.run_jobs`, which
turns each job into a Ray TASK (never an actor: an actor holds its GPUs until killed):

- resources: `num_gpus = tp` when the configuration needs GPUs (`Cluster.gpu`, else by
  engine: SGLang and vLLM always, llama.cpp with a CUDA build or layers offloaded), one CPU
  otherwise; `{pin: 0.001}` of a custom resource when the plan pins the phase, method or
  family to one (`ray start --resources '{"h200a": 1}'`). Ray places the task on one node
  that has them all and sets its CUDA_VISIBLE_DEVICES; a job no node could ever hold is
  skipped, as a too-wide tp is on one host.
- blocking services: a job of a phase that stops some asks for each one's custom resource
  `specsweep:<service>` (1: one such task per node at a time) and for all the GPUs Ray has
  on such a node; the task stops them there, runs, and starts them again
  (collect/cluster/blocking.py says how and why per task). Such a phase does not hold the
  whole cluster: the driver's queue sees its jobs as ordinary ones (not `alone`), and Ray
  keeps everything else off the node while one runs.
- retries: `max_retries = cluster.max_retries`, `retry_exceptions=False`: Ray reruns a task
  whose worker or node died, elsewhere if need be; an error of the task itself ends the
  campaign (as a worker thread's does on one host). A task that died returned nothing, so
  its units are absent (not complete) and its retry, or a resume, redoes them.
- order: every job the queue has ready is submitted at once (the queue runs packed; Ray
  queues what does not fit now); a best_of phase is queued when its source phase's rows
  have landed.
- Ctrl-C or SIGTERM: every task still running is cancelled with force (its worker is killed
  and its server with it: collect.hosts.local), the interrupt goes on, and the runner marks
  the campaign interrupted (exit 130 for Ctrl-C, 143 for SIGTERM, as on one host). Units a
  cancelled task measured are lost, not half-written: a resume redoes them. A blocking
  service such a task had stopped is started again by its guard on the node.

Every node needs specsweep (and its engine, model files and any engine.api_key_env
variable) as the driver has them: a task parses the plan and resolves paths there.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from specsweep.collect.cluster import blocking
from specsweep.collect.cluster.land import land
from specsweep.collect.cluster.task import run_job
from specsweep.collect.hosts.base import HostUnreachable
from specsweep.collect.plan.model import Plan, ServiceConfig
from specsweep.collect.redact import redact
from specsweep.collect.run.campaign import Campaign
from specsweep.collect.run.progress import Eta, eta_text
from specsweep.collect.scheduling.schedule import Job, Scheduler

log = logging.getLogger("specsweep.collect")
POLL_S = 0.2  # how often the driver looks for finished tasks and signals
CANCEL_WAIT_S = 30.0  # how long an interrupt waits for the cancelled tasks to end
CONNECT_TIMEOUT_S = 10.0  # a HOST:PORT that does not answer in this long is unreachable


class RayCluster:
    """The campaign's host on the driver: connects to the plan's Ray cluster, records what it
    is (its nodes come in with each task's rows), and runs the runner's jobs as tasks."""

    def __init__(self, plan: Plan, plan_text: str):
        assert plan.cluster is not None
        self.plan, self.cfg, self.name = plan, plan.host, "cluster"
        self.plan_text = plan_text  # what each task parses again (campaigns.plan_yaml is
        # redacted: a secret written in the plan would not survive it)
        self.cluster = plan.cluster
        self._owned = not ray.is_initialized()
        if self._owned:
            _connect(self.cluster.address)
        self.remote = ray.remote(run_job)

    def gpu_indices(self) -> list[int]:
        """No GPUs on the driver: Ray places them, node by node (so the runner's queue
        asks no GPU set of its scheduler)."""
        return []

    def busy_gpus(self) -> set[int]:
        return set()

    def reap_orphans(self) -> list[int]:
        """Nothing to reap: a server dies with the task's worker."""
        return []

    def read_file(self, path: str) -> str:
        """A file as a node reads it (engines that read the model's files to prepare)."""
        return ray.get(ray.remote(num_cpus=0)(_read).remote(path), timeout=120)

    def fingerprint(self) -> dict[str, str]:
        """The cluster as the campaign starts (host 'cluster'): Ray's version, its address,
        every live node's resources; each node's own facts come with its tasks' rows."""
        nodes = {
            n["NodeManagerHostname"] + "/" + n["NodeID"][:8]: _resources(n["Resources"])
            for n in ray.nodes()
            if n["Alive"]
        }
        return {
            "cluster.kind": "ray",
            "ray.version": ray.__version__,
            "cluster.address": redact(self.cluster.address),
            "cluster.nodes": str(len(nodes)),
            "cluster.resources": json.dumps(nodes, sort_keys=True),
        }

    def close(self) -> None:
        if self._owned and ray.is_initialized():
            ray.shutdown()

    def run_jobs(self, c: Campaign, queue: Any) -> None:
        """Run the queue's jobs as Ray tasks until none is left (the module docstring)."""
        queue.packed = True  # Ray places the jobs: the queue hands out every ready one
        queue.scheduler = _NodeScheduler([], packed=True)
        queue.room = gpu_room(self.plan)  # replicas: split onto the nodes' GPUs
        c.progress.eta = Eta((), (), True)
        queue.expand()
        if queue.jobs:
            c.progress.note(
                f"{len(queue.jobs)} configuration(s) to run on the Ray cluster "
                f"({_describe(ray.cluster_resources())}), estimated "
                f"{eta_text(c.progress.eta.seconds_left())} on enough nodes"
            )
        running: dict[ray.ObjectRef, str] = {}
        with c.signals_stop() as stop:
            try:
                while True:
                    queue.expand()
                    for job, _ in queue.scheduler.start():
                        # a phase that stops blocking services stops them per task, on
                        # its node: not on the driver (the queue's begin would)
                        stops = bool(queue.jobs[job.key][0].stop_services)
                        go = stops or queue.begin(job)
                        ref = self._submit(c, queue, job.key) if go else None
                        if ref is None:
                            queue.finish(job.key)
                            continue
                        c.progress.job_started(job.key)
                        running[ref] = job.key
                    if not running:
                        if queue.expand():
                            continue
                        break
                    done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
                    stop.check()  # Ctrl-C / SIGTERM raise here (Campaign.signals_stop)
                    for ref in done:
                        key = running.pop(ref)
                        self._land(c, key, ref)
                        queue.finish(key)
            except BaseException:
                c.stopping.set()
                _cancel(list(running))
                raise
            finally:
                queue.start_blocking_services()

    def _submit(self, c: Campaign, queue: Any, key: str) -> ray.ObjectRef | None:
        """The job as a task on a node that can hold it; None (said why) when none can."""
        phase, config, workloads = queue.jobs[key]
        options = self.options(phase.name, config)
        missing = _infeasible(options) or blocking.ask(self.plan, phase.name, config.tp)[2]
        if missing:
            log.error("%s (tp %s) skipped: %s", config.method.name, config.tp, missing)
            c.progress.note(f"[red]{config.method.name} (tp {config.tp}) skipped: {missing}[/red]")
            return None
        log_dir = str(Path(c.log_dir).resolve())
        return self.remote.options(**options).remote(
            self.plan_text,
            c.campaign_id,
            key,
            phase.name,
            config.config_id,
            [w.name for w in workloads],
            c.run,
            log_dir,
            needs_gpus(self.plan),
        )

    def options(self, phase: str, config: ServiceConfig) -> dict[str, Any]:
        """Ray task options for one configuration (the module docstring says which)."""
        gpus = config.tp if needs_gpus(self.plan) else 0
        pin = self.cluster.pin
        resource = (
            pin.get(phase) or pin.get(config.method.name) or pin.get(config.method.family or "")
        )
        resources = {resource: 0.001} if resource else {}
        services, node_gpus, _ = blocking.ask(self.plan, phase, config.tp)
        if services:  # the whole node: every GPU Ray has there, one such task at a time
            gpus = node_gpus
            resources.update(services)
        return {
            "num_cpus": 1,
            "num_gpus": gpus,
            "resources": resources,
            "max_retries": self.cluster.max_retries,
            "retry_exceptions": False,
            "name": f"specsweep {config.method.name} tp{config.tp}",
        }

    def _land(self, c: Campaign, key: str, ref: ray.ObjectRef) -> None:
        """Land a finished task's rows; a task lost for good (its node died more often than
        max_retries) is said and left to a resume; an error inside it ends the campaign."""
        try:
            result = ray.get(ref)
        except RayTaskError:
            raise
        except RayError as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.error("%s lost after %s retries: %s", key, self.cluster.max_retries, text)
            c.progress.note(
                f"[red]{key} lost (node or worker died, retried "
                f"{self.cluster.max_retries} times); resume redoes it[/red]"
            )
            return
        land(c, key, result)
        if result.get("skipped"):  # its note came with the rows; the driver's log too
            log.error("%s not measured on %s: %s", key, result["node"], result["skipped"])


class _NodeScheduler(Scheduler):
    """The driver's queue order, without `alone`: a phase that stops blocking services
    holds one node (Ray's resources see to it), not the whole cluster."""

    def add(self, job: Job) -> None:
        super().add(replace(job, alone=False))


def gpu_room(plan: Plan) -> tuple[int, int] | None:
    """(GPUs of a node, how many nodes have that many or more) for the replica split, from
    the live nodes' GPU counts: the most common count, so a node short of GPUs (GPU0 kept
    for something else) neither shrinks the rest nor counts as a whole node; None when the
    configurations take no GPUs (no replicas then) or no node has one."""
    if not needs_gpus(plan):
        return None
    counts = [int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n["Alive"]]
    counts = [c for c in counts if c > 0]
    if not counts:
        return None
    common = max(sorted(set(counts)), key=counts.count)
    return common, sum(c >= common for c in counts)


def needs_gpus(plan: Plan) -> bool:
    """Whether a configuration takes tp GPUs (Cluster.gpu, else by engine)."""
    assert plan.cluster is not None
    if plan.cluster.gpu is not None:
        return plan.cluster.gpu
    return plan.engine.uses_gpus


def _connect(address: str) -> None:
    """ray.init for the plan's address; HostUnreachable (host 'cluster': the CLI's one line
    and exit 4, the campaign marked unreachable) when no cluster answers. A HOST:PORT is
    tried first with a plain TCP connect: ray.init would retry a silent address for many
    minutes. SIGTERM keeps the handler it had (ray.init sets its own, which would exit
    with 15 instead of the CLI's 143)."""
    if address not in ("auto", "local") and "://" not in address:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
        except (OSError, ValueError) as exc:
            raise HostUnreachable("cluster", address, f"no Ray head answers: {exc}") from None
    before = signal.getsignal(signal.SIGTERM)
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address == "local":
            ray.init(include_dashboard=False, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:  # e.g. 'auto' and no cluster started on this machine
        raise HostUnreachable("cluster", address, str(exc)) from None
    with suppress(ValueError):  # not the main thread: ray.init set nothing either
        signal.signal(signal.SIGTERM, before)


def _infeasible(options: dict[str, Any]) -> str:
    """Why no live node could ever run a task with these options ('' when one can)."""
    need = {"CPU": options["num_cpus"], "GPU": options["num_gpus"], **options["resources"]}
    need = {k: v for k, v in need.items() if v}
    for node in ray.nodes():
        if node["Alive"] and all(node["Resources"].get(k, 0) >= v for k, v in need.items()):
            return ""
    return f"no node of the Ray cluster has {_describe(need)}"


def _describe(resources: dict[str, float]) -> str:
    shown = {
        k: v for k, v in resources.items() if not k.startswith(("node:", "memory", "object_store"))
    }
    return ", ".join(f"{v:g} {k}" for k, v in sorted(shown.items())) or "nothing"


def _resources(resources: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items() if not k.startswith("node:")}


def _cancel(refs: list[ray.ObjectRef]) -> None:
    """Cancel tasks with force (the worker dies, its server with it) and wait for them to
    end, at most CANCEL_WAIT_S in all."""
    for ref in refs:
        with suppress(Exception):
            ray.cancel(ref, force=True)
    with suppress(Exception):
        ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S)


def _read(path: str) -> str:
    return Path(path).expanduser().read_text()
