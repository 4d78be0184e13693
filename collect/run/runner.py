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
from dataclasses import replace
from pathlib import Path

from specsweep.collect import engines, hosts
from specsweep.collect.hosts.base import Cluster, Host, HostUnreachable
from specsweep.collect.plan.model import Plan, ServiceConfig, Workload
from specsweep.collect.plan.phases import BestOf, Phase
from specsweep.collect.plan.workloads import request_count
from specsweep.collect.redact import redact
from specsweep.collect.run import configuration as serve
from specsweep.collect.run.campaign import (
    Campaign,
    begin_campaign,
    campaign_status,
    finish_campaign,
    record_method_params,
    select_configs,
    select_phases,
    todo,
    waves,
)
from specsweep.collect.run.fingerprint import put_environment, record_environment
from specsweep.collect.run.progress import CampaignProgress, Eta, eta_text
from specsweep.collect.run.replay import waits_for
from specsweep.collect.scheduling.estimate import Estimator, load_measured
from specsweep.collect.scheduling.replicas import Candidate, Replica, split
from specsweep.collect.scheduling.schedule import Job, Scheduler
from specsweep.schema.store import Store

log = logging.getLogger("specsweep.collect")
Todo = list[tuple[ServiceConfig, list[Workload]]]  # campaign.todo's: configs, workloads left
Queued = dict[str, tuple[Phase, ServiceConfig, list[Workload]]]  # job key -> what it runs
Shares = list[tuple[Job, tuple[Workload, ...]]]  # a configuration's jobs: one per replica
ConfigJobs = tuple[ServiceConfig, Shares]


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
    configurations named METHOD or METHOD/TP; `repeat` rounds (default: the plan's), each
    complete before the next starts, each starting every configuration once in its
    counterbalanced order (collect.scheduling.order); a raced phase (plan `search`) up to its
    max_rounds, each round starting the race's survivors (collect.scheduling.race), and the
    phases picking from it in a later wave (`waves`); returns campaign_id. A plan with
    `cluster:` runs on `connect(plan, plan_text)`: collect.cluster.launch.run's RayCluster (a layer
    above this one)."""
    if plan.cluster is not None and connect is None:
        raise ValueError("a plan with `cluster:` runs through collect.cluster.launch.run")
    campaign_id = plan.campaign_id()
    selected = select_phases(plan, phases)
    runs = max(plan.rounds_of(p, repeat) for p in plan.all_phases())
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
                    repeat=repeat,
                )
                for wave in waves(plan, selected):
                    rounds = max(plan.rounds_of(p, repeat) for p in wave)
                    for c.run in range(1, rounds + 1):
                        progress.set_round(c.run, rounds)
                        _run_phases(c, wave, rounds)
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


def _run_phases(c: Campaign, phases: list[Phase], runs: int = 1) -> None:
    """Run round `c.run` (of `runs`) of the phases' configurations through the scheduler,
    each in a worker thread, in the round's order (collect.scheduling.order: each job's `rank`).

    Packed (a host with GPUs and `host.pack`): every configuration whose methods are known
    is queued at once and runs as soon as a disjoint GPU set is free; in round 1 a best_of
    phase queues its baseline at once and its chosen methods when its source phase has
    finished (later rounds know them: the ranking reads run 1). Serial: one configuration
    at a time, phase by phase in plan order, each phase in the round's order. Ctrl-C or
    SIGTERM (in this, the main thread) sets `c.stopping`: every worker keeps what it
    measured as an incomplete unit and stops its server before the interrupt goes on.
    """
    queue = _Queue(c, phases, runs)
    if not isinstance(c.host, Host):  # a Cluster: each job a task on one of its nodes
        c.progress.note(f"round {c.run} of {runs}")
        return c.host.run_jobs(c, queue)
    queue.expand()
    if queue.jobs:  # before the first start: what the estimates (plan or store) expect
        how = "packed on GPUs " + ",".join(map(str, queue.gpus)) if queue.packed else "serial"
        eta, more = c.progress.eta, runs > c.run
        rest = f", {eta_text(eta.seconds_left())} to the end of round {runs}" if more else ""
        c.progress.note(
            f"round {c.run} of {runs}: {len(queue.jobs)} configuration(s) to run ({how}), "
            f"estimated {eta_text(eta.seconds_left(this_round=True))}{rest}"
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
    """What the scheduler runs: jobs (phase, config, workloads) of round `c.run` added as
    phases become ready, and the blocking services a running phase has stopped; the jobs
    of the rounds after it go to the ETA."""

    def __init__(self, c: Campaign, phases: list[Phase], runs: int = 1):
        self.c, self.phases, self.runs = c, list(phases), runs
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
        self.jobs: Queued = {}
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
            running = self.open.get(source) or any(p.name == source for p in self.waiting)
            # later rounds know the picks: the ranking reads run 1, done by then
            ready = source is None or self.c.run > 1 or not running
            if ready:
                self.waiting.remove(phase)
                configs = todo(self.c, phase, announce=True)
            elif self.packed:  # the baseline does not depend on the ranking
                configs = todo(self.c, phase, methods=[])
            else:
                break
            added |= self._add(phase, configs)
        if added:
            self.c.progress.later_rounds(self._later_rounds())
        return added

    def _add(self, phase: Phase, todo: Todo) -> bool:
        """Queue the phase's configurations (their jobs: `_jobs`); a job the scheduler
        refuses (e.g. tp 8 on a host with 4 GPUs) is said and skipped."""
        added = False
        for config, jobs in self._jobs(phase, todo, self.jobs, self.c.run):
            name = f"{config.method.name} (tp {config.tp})"
            for job, workloads in jobs:
                try:
                    self.scheduler.add(job)
                except ValueError as exc:
                    log.error("%s skipped: %s", name, exc)
                    self.c.progress.note(f"[red]{name} skipped: {exc}[/red]")
                    break
                self.jobs[job.key] = (phase, config, ws := list(workloads))
                self.open.setdefault(phase.name, set()).add(job.key)
                requests = sum(map(request_count, ws))
                self.c.progress.add_total(requests)
                self.c.progress.job_added(job, requests, self.estimator.fixed_s(config, ws))
                added = True
        return added

    def _jobs(self, phase: Phase, todo: Todo, queued: Queued, run: int) -> list[ConfigJobs]:
        """The jobs of the phase's configurations not in `queued`, in `todo`'s order (the
        round's: a job's `rank` is its place there): each one job, or (packed,
        host.replicas) one that is long next to the others as replicas, jobs keyed
        f"{key}#{i}" (i >= 2) with a share of its workloads each (collect.scheduling.replicas
        says when and how). In round 1 a baseline whose replies others replay
        (collect.run.replay) comes first, whatever its rank: they wait for it."""
        wide, alone = self.gpus or self.room, bool(phase.stop_services)  # Ray places a cluster's
        ranked = [
            (rank, Candidate(key, c, tuple(w), c.tp if wide else 0, alone))
            for rank, (c, w) in enumerate(todo)
            if phase.name not in self.skipped
            and (key := f"{phase.name}:{c.config_id}") not in queued
            and self._chosen(c)
        ]
        usable, hosts = self.room or (len(self.gpus) - len(self.scheduler.reserved), 1)
        enabled = self.packed and self.c.plan.host.replicas
        shares = split(self.estimator, [one for _, one in ranked], usable, hosts, enabled=enabled)
        known = dict(queued)
        for _, one in ranked:
            known.update((r.key, (phase, one.config, list(r.workloads))) for r in shares[one.key])
        out = [(one.config, self._shares(one, r, shares[one.key], known, run))
               for r, one in ranked]  # fmt: skip
        waited = {key for _, jobs in out for job, _ in jobs for key in job.after}
        return sorted(out, key=lambda item: not any(j.key in waited for j, _ in item[1]))

    def _shares(
        self, one: Candidate, rank: int, shares: list[Replica], known: Queued, run: int
    ) -> Shares:
        """A configuration's job for each of its replicas, waiting (in round 1) for what it
        replays."""
        base, gpus = one.config.method.name == self.c.plan.baseline, one.gpus if self.gpus else 0
        after = [waits_for(self.c.plan, one.config, r.workloads, known, run) for r in shares]
        return [
            (Job(r.key, gpus, r.seconds, a, one.alone, base, rank), r.workloads)
            for r, a in zip(shares, after, strict=True)
        ]

    def _later_rounds(self) -> list[list[tuple[Job, int]]]:
        """The jobs of each round after this one, as far as they are known (a best_of
        phase's picks once its source has run in round 1), each with its measured requests,
        for the ETA and the progress bar."""
        rounds = []
        for run in range(self.c.run + 1, self.runs + 1):
            queued: Queued = {}
            jobs: list[tuple[Job, int]] = []
            for phase in self.phases:
                unknown = self.c.run == 1 and isinstance(phase.methods, BestOf)
                methods = [] if unknown and phase in self.waiting else None  # picks not known
                left = todo(replace(self.c, run=run), phase, methods=methods)
                for config, found in self._jobs(phase, left, queued, run):
                    queued.update((job.key, (phase, config, list(w))) for job, w in found)
                    jobs += [(job, sum(map(request_count, w))) for job, w in found]
            rounds.append(jobs)
        return rounds

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
        why = redact(err.strip())[-500:]
        log.error("could not start blocking service %s again (exit %s): %s", name, rc, why)
        c.progress.note(f"[red]blocking service {name} did NOT start again[/red]")
    else:
        c.progress.note(f"started blocking service {name} again")


def _run_job(c: Campaign, queue: _Queue, key: str, gpus: tuple[int, ...]) -> None:
    _, config, workloads = queue.jobs[key]
    serve.run_config(
        c, key, config, workloads, gpus or None, port_offset=gpus[0] if queue.packed else 0
    )
