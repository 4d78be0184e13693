"""The campaign runner: every configuration of a plan, every workload, into the store.

Units of work are (campaign, config, workload). Each unit's request rows, server
metrics and its `units` row land in one transaction, so after any interruption a unit
is either complete or absent; rerunning the same plan skips complete units (resume) and
starts each configuration with unfinished units once, running all of them on that start.
A configuration whose server fails to start is recorded in `services` with its log tail
and skipped; the campaign goes on. This module decides what runs when and where (phases,
the scheduler, blocking services); `collect.run.campaign` says what is left to run and
writes the `campaigns` row, `collect.run.configuration` runs one configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from pathlib import Path

from collect import engines, hosts
from collect.hosts.base import Cluster, Host, HostUnreachable
from collect.plan.families import family_members, resolve
from collect.plan.model import Plan, ServiceConfig, Workload
from collect.plan.phases import BestOf, Phase
from collect.plan.workloads import request_count
from collect.planning.estimate import Estimator, load_measured
from collect.planning.schedule import Job, Scheduler
from collect.redact import redact
from collect.run import configuration as serve
from collect.run.campaign import (
    Campaign,
    begin_campaign,
    campaign_status,
    finish_campaign,
    record_method_params,
    todo,
)
from collect.run.fingerprint import put_environment, record_environment
from collect.run.progress import CampaignProgress, Eta, eta_text
from schema.store import Store

log = logging.getLogger("specsweep.collect")


def run(
    plan: Plan,
    plan_text: str,
    db_path: Path,
    log_dir: Path,
    show_progress: bool = True,
    phases: list[str] | None = None,
    only: list[str] | None = None,
    repeat: int | None = None,
    connect: Callable[[Plan, str], Cluster] | None = None,
) -> str:
    """Run (or resume) the plan's campaign, or only the named phases, or only the
    configurations named METHOD or METHOD/TP; `repeat` runs (default: the plan's), each
    complete before the next starts; returns campaign_id. A plan with `cluster:` runs on
    `connect(plan, plan_text)`: collect.cluster.run's RayCluster (a layer above this one)."""
    if plan.cluster is not None and connect is None:
        raise ValueError("a plan with `cluster:` runs through collect.cluster.run")
    campaign_id = plan.campaign_id()
    runs = repeat or plan.repeat
    selected = select_phases(plan, phases)
    chosen = select_configs(plan, only)
    with Store(db_path) as store:
        with store.transaction():  # the campaigns row and its methods' parameters together
            begin_campaign(store, plan, plan_text, campaign_id)
            record_method_params(store, plan, campaign_id)
        status = "interrupted"
        host: Host | Cluster | None = None
        try:
            host = hosts.create(plan.host) if connect is None else connect(plan, plan_text)
            for pid in host.reap_orphans():  # remote hosts only; others have none
                log.warning("stopped a server (pid %s) left running by an interrupted run", pid)
            engine = engines.create(plan.engine)
            engine.prepare(host)
            record_environment(store, campaign_id, host, plan)
            with CampaignProgress(0, enabled=show_progress) as progress:
                c = Campaign(
                    store,
                    plan,
                    campaign_id,
                    host,
                    engine,
                    log_dir / campaign_id,
                    progress,
                    only=chosen,
                )
                for c.run in range(1, runs + 1):
                    if runs > 1:
                        progress.note(f"run {c.run} of {runs}")
                    _run_phases(c, selected)
                status = campaign_status(c, runs)
        except HostUnreachable as exc:  # at the start, or a dropped link that stayed down
            status = "unreachable"
            put_environment(store, campaign_id, exc.host, {"host.last_error": str(exc)})
            raise
        finally:
            if host is not None:
                host.close()
            finish_campaign(store, campaign_id, status)
    return campaign_id


def select_phases(plan: Plan, names: list[str] | None) -> list[Phase]:
    phases = plan.all_phases()
    if not names:
        return phases
    unknown = sorted(set(names) - {p.name for p in phases})
    if unknown:
        raise ValueError(f"unknown phase(s) {unknown}; the plan has {[p.name for p in phases]}")
    return [p for p in phases if p.name in names]


def select_configs(plan: Plan, specs: list[str] | None) -> list[tuple[str, int | None]] | None:
    """Parse --only values, METHOD or METHOD/TP (a family's name: all its members);
    ValueError naming what is unknown."""
    if not specs:
        return None
    methods, families = {m.name for m in plan.methods}, family_members(plan.methods)
    tps = {p.tp for p in plan.all_phases()}
    out: list[tuple[str, int | None]] = []
    for spec in specs:
        method, _, tp = spec.partition("/")
        if method not in methods | set(families):
            raise ValueError(f"--only {spec}: no method {method!r}; the plan has {sorted(methods)}")
        if tp and (not tp.isdigit() or int(tp) not in tps):
            raise ValueError(f"--only {spec}: tp must be one of the plan's {sorted(tps)}")
        out += [(m, int(tp) if tp else None) for m in resolve([method], families)]
    return out


def _run_phases(c: Campaign, phases: list[Phase]) -> None:
    """Run the phases' configurations through the scheduler, each in a worker thread.

    Packed (a host with GPUs and `host.pack`): every configuration whose methods are known
    is queued at once and runs as soon as a disjoint GPU set is free; a best_of phase
    queues its baseline at once and its chosen methods when its source phase has finished.
    Serial: one configuration at a time, phase by phase, in plan order. Ctrl-C or SIGTERM
    (in this, the main thread) sets `c.stopping`: every worker keeps what it measured as
    an incomplete unit and stops its server before the interrupt goes on.
    """
    queue = _Queue(c, phases)
    if not isinstance(c.host, Host):  # a Cluster: each job a task on one of its nodes
        return c.host.run_jobs(c, queue)
    queue.expand()
    if queue.jobs:  # before the first start: what the estimates (plan or store) expect
        how = "packed on GPUs " + ",".join(map(str, queue.gpus)) if queue.packed else "serial"
        c.progress.note(
            f"{len(queue.jobs)} configuration(s) to run ({how}), estimated "
            f"{eta_text(c.progress.eta.seconds_left())}"
        )
    with c.signals_stop() as stop, ThreadPoolExecutor(max_workers=max(1, len(queue.gpus))) as pool:
        running: dict[Future[None], str] = {}
        try:
            while True:
                queue.expand()
                for job, gpus in queue.scheduler.start():
                    if queue.begin(job):
                        c.progress.job_started(job.key)
                        running[pool.submit(_run_job, c, queue, job.key, gpus)] = job.key
                    else:
                        queue.finish(job.key)
                if not running:
                    if queue.expand():
                        continue
                    break
                finished, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
                stop.check()  # Ctrl-C / SIGTERM raise here (Campaign.signals_stop says why)
                for future in finished:
                    key = running.pop(future)
                    queue.finish(key)
                    future.result()  # a worker's unexpected error ends the campaign
        except BaseException:
            c.stopping.set()
            for future in running:
                with suppress(BaseException):
                    future.result(timeout=STOP_WAIT_S)
            raise
        finally:
            queue.start_blocking_services()


STOP_WAIT_S = 120.0  # how long an interrupt waits for each worker to stop its server


class BlockingServiceError(RuntimeError):
    """A blocking service would not stop; its phase is skipped."""


class _Queue:
    """What the scheduler runs: jobs (phase, config, workloads) added as phases become
    ready, and the blocking services a running phase has stopped."""

    def __init__(self, c: Campaign, phases: list[Phase]):
        self.c = c
        inventory = c.host.gpu_indices()
        blocking = c.plan.host.blocking_services
        reserved = sorted({g for b in blocking for g in b.gpus} & set(inventory))
        foreign = sorted(c.host.busy_gpus() - set(reserved)) if inventory else []
        if foreign:
            c.progress.note(f"GPUs {foreign} run processes specsweep did not start: not used")
        self.gpus = [g for g in inventory if g not in foreign]
        self.packed = bool(self.gpus) and c.plan.host.pack
        self.scheduler = Scheduler(self.gpus, reserved, packed=self.packed)
        c.progress.eta = Eta(self.gpus, reserved, self.packed)
        self.estimator = Estimator(c.plan, load_measured(c.store, c.plan))
        self.waiting = list(phases)  # phases with configurations not queued yet
        self.jobs: dict[str, tuple[Phase, ServiceConfig, list[Workload]]] = {}
        self.open: dict[str, set[str]] = {}  # phase -> keys queued and not finished
        self.stopped: dict[str, list[str]] = {}  # phase -> blocking services it stopped
        self.skipped: set[str] = set()  # phases skipped (a blocking service would not stop)
        self.room: tuple[int, int] | None = None  # a cluster's (GPUs a node, GPU nodes)

    def expand(self) -> bool:
        """Queue the configurations of every phase that is ready; True if any was."""
        added = False
        for phase in list(self.waiting):
            if not self.packed and (any(self.open.values()) or phase is not self.waiting[0]):
                break
            source = phase.methods.best_of if isinstance(phase.methods, BestOf) else None
            ready = source is None or not (
                self.open.get(source) or any(p.name == source for p in self.waiting)
            )
            if ready:
                self.waiting.remove(phase)
                configs = todo(self.c, phase, announce=True)
            elif self.packed:  # the baseline does not depend on the ranking
                configs = todo(self.c, phase, methods=[])
            else:
                break
            added |= self._add(phase, configs)
        return added

    def _add(self, phase: Phase, todo: list[tuple[ServiceConfig, list[Workload]]]) -> bool:
        """Queue the phase's configurations: each one job, or (packed, host.replicas) one
        that is long next to the others as replicas, jobs keyed f"{key}#{i}" (i >= 2) with
        a share of its workloads each (collect.planning.replicas says when and how)."""
        from collect.planning.replicas import Candidate, split
        from collect.run.replay import waits_for

        batch = [
            Candidate(
                f"{phase.name}:{config.config_id}",
                config,
                tuple(workloads),
                config.tp if self.gpus or self.room else 0,
                alone=bool(phase.stop_services),
            )
            for config, workloads in todo
            if phase.name not in self.skipped
            and f"{phase.name}:{config.config_id}" not in self.jobs
            and self._chosen(config)
        ]
        usable, hosts = self.room or (len(self.gpus) - len(self.scheduler.reserved), 1)
        shares = split(
            self.estimator, batch, usable, hosts, enabled=self.packed and self.c.plan.host.replicas
        )
        added = False
        for one in batch:
            config = one.config
            for r in shares[one.key]:
                job = Job(
                    r.key,
                    one.gpus if self.gpus else 0,
                    r.seconds,  # Ray places a cluster's
                    waits_for(self.c.plan, config, r.workloads, self.jobs),
                    one.alone,
                    baseline=config.method.name == self.c.plan.baseline,
                )
                try:
                    self.scheduler.add(job)
                except ValueError as exc:  # e.g. tp 8 on a host with 4 GPUs
                    log.error("%s (tp %s) skipped: %s", config.method.name, config.tp, exc)
                    self.c.progress.note(
                        f"[red]{config.method.name} (tp {config.tp}) skipped: {exc}[/red]"
                    )
                    break
                self.jobs[r.key] = (phase, config, list(r.workloads))
                self.open.setdefault(phase.name, set()).add(r.key)
                requests = sum(request_count(w) for w in r.workloads)
                self.c.progress.add_total(requests)
                self.c.progress.job_added(
                    job, requests, self.estimator.fixed_s(config, list(r.workloads))
                )
                added = True
        return added

    def _chosen(self, config: ServiceConfig) -> bool:
        only = self.c.only
        return only is None or any(
            config.method.name == m and tp in (None, config.tp) for m, tp in only
        )

    def begin(self, job: Job) -> bool:
        """Stop the blocking services the job's phase needs stopped; False (the phase is
        skipped) when one will not stop."""
        phase = self.jobs[job.key][0]
        if phase.name in self.skipped:
            return False
        if phase.stop_services and phase.name not in self.stopped:
            self.stopped[phase.name] = []
            try:
                for name in phase.stop_services:
                    _stop_blocking(self.c, name)
                    self.stopped[phase.name].append(name)
            except BlockingServiceError as exc:
                log.error("phase %s skipped: %s", phase.name, exc)
                self.c.progress.note(f"[red]phase {phase.name} skipped: {exc}[/red]")
                self.skipped.add(phase.name)
                self._start_again(phase.name)
                return False
        return True

    def finish(self, key: str) -> None:
        self.scheduler.finish(key)
        self.c.progress.job_finished(key)
        phase = self.jobs[key][0].name
        self.open[phase].discard(key)
        pending = self.open[phase] or any(p.name == phase for p in self.waiting)
        if not pending or phase in self.skipped:
            self._start_again(phase)

    def _start_again(self, phase: str) -> None:
        for name in reversed(self.stopped.pop(phase, [])):
            _start_blocking(self.c, name)

    def start_blocking_services(self) -> None:
        """Start every blocking service still stopped (the campaign ends or stops)."""
        for phase in list(self.stopped):
            self._start_again(phase)


def _stop_blocking(c: Campaign, name: str) -> None:
    service = next(s for s in c.plan.host.blocking_services if s.name == name)
    rc, _, err = c.host.run(service.stop, timeout_s=300)
    if rc != 0:
        raise BlockingServiceError(
            f"could not stop blocking service {name!r} (exit {rc}): {redact(err.strip())[-500:]}"
        )
    c.progress.note(f"stopped blocking service {name}")


def _start_blocking(c: Campaign, name: str) -> None:
    service = next(s for s in c.plan.host.blocking_services if s.name == name)
    rc, _, err = c.host.run(service.start, timeout_s=300)
    if rc != 0:
        log.error(
            "could not start blocking service %s again (exit %s): %s",
            name,
            rc,
            redact(err.strip())[-500:],
        )
        c.progress.note(f"[red]blocking service {name} did NOT start again[/red]")
    else:
        c.progress.note(f"started blocking service {name} again")


def _run_job(c: Campaign, queue: _Queue, key: str, gpus: tuple[int, ...]) -> None:
    _, config, workloads = queue.jobs[key]
    serve.run_config(
        c, key, config, workloads, gpus or None, port_offset=gpus[0] if queue.packed else 0
    )
