"""The plan's phases as scheduler jobs and their serial and packed timelines on a simulated
clock, round after round (the package docstring says how)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from specsweep.collect.plan.model import Plan, ServiceConfig, Workload
from specsweep.collect.plan.phases import BestOf, Phase
from specsweep.collect.scheduling.estimate import Estimator
from specsweep.collect.scheduling.order import phase_seed, round_order
from specsweep.collect.scheduling.ranking import pick
from specsweep.collect.scheduling.replicas import Candidate, split
from specsweep.collect.scheduling.schedule import (
    Job,
    Scheduler,
    Slot,
    dependency_bound,
    lower_bound,
    makespan,
    simulate,
)
from specsweep.schema.controls import aa_control_name

# --- the plan as jobs --------------------------------------------------------------------


def host_gpus(plan: Plan) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(GPUs of the host, GPUs held by blocking services). host.gpus when the plan lists
    them; else none for a CPU engine (llama.cpp) and as many as the largest tp otherwise."""
    gpus = plan.host.gpus
    if gpus is None:
        widest = max(p.tp for p in plan.all_phases())
        gpus = list(range(widest)) if plan.engine.uses_gpus else []
    held = {g for b in plan.host.blocking_services for g in b.gpus}
    return tuple(gpus), tuple(sorted(held))


class PlanJobs:
    """The plan's phases as scheduler jobs, keyed f"{phase}:{config_id}" as the runner's
    (f"...#{i}" for replica i >= 2 of a configuration split by `collect.scheduling.replicas`,
    each phase's configurations one batch, as the runner splits them; `usable`: the GPUs
    of one host the batch may use, 0 for no replicas, on `hosts` hosts).

    The baseline of a best_of phase does not depend on the choice, so its job is known from
    the start; the chosen methods' jobs come when every job of the source phase has
    finished, chosen as the runner does (median speedup over the source's windows) from
    the estimator's speeds: measured where the store has them, else assumed.
    """

    def __init__(
        self,
        plan: Plan,
        est: Estimator,
        gpu_host: bool,
        usable: int = 0,
        hosts: int = 1,
        run: int = 1,
        picks: dict[str, list[str]] | None = None,
    ):
        self.plan, self.est, self.gpu_host = plan, est, gpu_host
        self.usable, self.hosts, self.run = usable, hosts, run
        self.picks = picks or {}  # best_of phase -> its methods, chosen in round 1
        self.prefix = f"r{run}/" if run > 1 else ""  # keys unique over the rounds
        self.campaign_id = plan.campaign_id()
        self.configs: dict[str, tuple[Phase, ServiceConfig]] = {}
        self.workloads: dict[str, tuple[Workload, ...]] = {}  # key -> the job's workloads
        self.methods: dict[str, list[str]] = {}  # phase -> methods that run (once known)
        self._open: dict[str, set[str]] = {}  # phase -> keys not finished yet

    def initial(self) -> list[Job]:
        jobs = []
        for phase in self.plan.all_phases():
            picked = (
                self.picks.get(phase.name)
                if isinstance(phase.methods, BestOf)
                else (phase.methods or [m.name for m in self.plan.methods])
            )
            jobs += self._jobs(phase, picked or [])
            if picked is not None:
                self.methods[phase.name] = picked
        return jobs + self._resolve(0.0)

    def on_finish(self, job: Job, now: float) -> list[Job]:
        phase = self.configs[job.key][0].name
        self._open[phase].discard(job.key)
        return self._resolve(now)

    def _ordered(self, phase: Phase, methods: list[str]) -> list[ServiceConfig]:
        """The phase's configurations in this round's order (collect.scheduling.order)."""
        configs = {c.method.name: c for c in self.plan.phase_configs(phase, methods)}
        seed = phase_seed(self.campaign_id, phase.name)
        return [configs[name] for name in round_order(list(configs), seed, self.run)]

    def _jobs(self, phase: Phase, methods: list[str], after: Iterable[str] = ()) -> list[Job]:
        batch, ranks = [], {}
        for rank, config in enumerate(self._ordered(phase, methods)):
            key = f"{self.prefix}{phase.name}:{config.config_id}"
            workloads = tuple(self.plan.workloads_of(config))
            if key in self.configs or not workloads:
                continue
            ranks[key] = rank
            batch.append(
                Candidate(
                    key,
                    config,
                    workloads,
                    config.tp if self.gpu_host else 0,
                    alone=bool(phase.stop_services),
                )
            )
        jobs, replicas = (
            [],
            split(self.est, batch, self.usable, self.hosts, enabled=self.usable > 0),
        )
        for c in batch:
            for r in replicas[c.key]:
                self.configs[r.key] = (phase, c.config)
                self.workloads[r.key] = r.workloads
                self._open.setdefault(phase.name, set()).add(r.key)
                jobs.append(
                    Job(
                        r.key,
                        c.gpus,
                        r.seconds,
                        frozenset(after),
                        alone=c.alone,
                        baseline=c.config.method.name == self.plan.baseline,
                        rank=ranks[c.key],
                    )
                )
        return jobs

    def _resolve(self, now: float) -> list[Job]:
        """Jobs of best_of phases whose source phase has just finished."""
        jobs: list[Job] = []
        for phase in self.plan.all_phases():
            bo = phase.methods
            if (
                not isinstance(bo, BestOf)
                or phase.name in self.methods
                or bo.best_of not in self.methods
                or self._open.get(bo.best_of)
            ):
                continue
            chosen = pick(self.rank(bo.best_of), bo, self.plan.methods)
            self.methods[phase.name] = [self.plan.baseline, *chosen]
            done = [k for k, (p, _) in self.configs.items() if p.name == bo.best_of]
            jobs += self._jobs(phase, chosen, after=done)
        return jobs

    def rank(self, phase_name: str) -> list[str]:
        """Methods of a phase, fastest first by median estimated speedup over its windows."""
        phase = next(p for p in self.plan.all_phases() if p.name == phase_name)
        scores = []
        for config in self.plan.phase_configs(phase, self.methods[phase_name]):
            m = config.method.name
            ratios = [
                self.est.decode_tps(m, phase.tp, w.name, c).value
                / self.est.decode_tps(self.plan.baseline, phase.tp, w.name, c).value
                for w in self.plan.workloads_of(config)
                for c in w.concurrency
            ]
            if m not in (self.plan.baseline, aa_control_name(self.plan.baseline)) and ratios:
                scores.append((-statistics.median(ratios), m))
        return [m for _, m in sorted(scores)]


# --- simulation --------------------------------------------------------------------------


@dataclass
class Simulation:
    """Each round's serial and packed timeline (from 0 each: a round starts when the one
    before has ended), and the campaign's, end to end."""

    serial_rounds: list[list[Slot]]
    packed_rounds: list[list[Slot]]
    gpus: tuple[int, ...]  # one host's
    reserved: tuple[int, ...]  # one host's
    configs: dict[str, tuple[Phase, ServiceConfig]]  # every round's job keys
    round_of: dict[str, int]  # job key -> its round (1, 2, ...)
    hosts: int = 1
    stride: int = 0  # GPU g of host h is numbered h * stride + g in `packed`

    @property
    def serial(self) -> list[Slot]:
        return end_to_end(self.serial_rounds)

    @property
    def packed(self) -> list[Slot]:
        return end_to_end(self.packed_rounds)

    @property
    def bound(self) -> float:
        """The area bound of each round, added up (no round starts before the last ends)."""
        return sum(lower_bound(r, self.gpus, self.reserved, self.hosts) for r in self.packed_rounds)

    @property
    def dependency_bound(self) -> float:
        return sum(
            dependency_bound(r, self.gpus, self.reserved, self.hosts) for r in self.packed_rounds
        )


def end_to_end(rounds: list[list[Slot]]) -> list[Slot]:
    """The rounds' timelines one after another: each shifted by the makespans before it."""
    out, offset = [], 0.0
    for timeline in rounds:
        out += [replace(s, start=s.start + offset, end=s.end + offset) for s in timeline]
        offset += makespan(timeline)
    return out


def simulate_plan(
    plan: Plan,
    est: Estimator,
    seed: int | None = 0,
    hosts: int = 1,
    replicas: bool | None = None,
    rounds: int | None = None,
    startup_s: float | None = None,
) -> Simulation:
    """Serial and packed order of the plan's rounds (default: its `repeat`) on simulated
    services; the packed one on `hosts` copies of the plan's host, with replicas unless the
    plan's `host.replicas` is false (or `replicas` says otherwise). Start-up: the measured
    median when the store has one, else `startup_s` when given, else drawn from
    `estimates.startup_s` with the seed (seed None: the midpoint, as the ETA uses). Both
    orders get the same draws."""
    gpus, reserved = host_gpus(plan)
    split_ = plan.host.replicas if replicas is None else replicas
    runs = plan.repeat if rounds is None else rounds
    timelines: list[list[list[Slot]]] = []
    configs: dict[str, tuple[Phase, ServiceConfig]] = {}
    round_of: dict[str, int] = {}
    stride = 0
    for packed in (False, True):
        usable = len(gpus) - len(reserved) if packed and split_ and gpus else 0
        timelines.append([])
        picks: dict[str, list[str]] = {}
        for run in range(1, runs + 1):
            jobs = PlanJobs(plan, est, bool(gpus), usable, hosts, run, picks)
            scheduler = Scheduler(
                gpus, reserved, packed=packed and bool(gpus), hosts=hosts if packed and gpus else 1
            )
            stride = scheduler.stride
            duration = _durations(jobs, est, seed, startup_s)
            timelines[-1].append(simulate(scheduler, jobs.initial(), duration, jobs.on_finish))
            picks = picks or jobs.methods  # round 1's choices, for the rounds after it
            configs.update(jobs.configs)
            round_of.update(dict.fromkeys(jobs.configs, run))
    return Simulation(*timelines, gpus, reserved, configs, round_of, hosts, stride)


def _durations(
    jobs: PlanJobs, est: Estimator, seed: int | None, startup_s: float | None = None
) -> Callable[[Job], float]:
    low, high = est.assume.startup_range()

    def duration(job: Job) -> float:
        _, config = jobs.configs[job.key]
        measured = (config.method.name, config.tp) in est.measured.startup_s
        if measured or (seed is None and startup_s is None):
            return job.seconds
        drawn = startup_s is None
        startup = random.Random(f"{seed}:{job.key}").uniform(low, high) if drawn else startup_s
        return est.config_s(config, list(jobs.workloads[job.key]), startup_s=startup)

    return duration
