"""The plan on simulated services: its phases as scheduler jobs, the serial and the packed
order on a simulated clock, and what `check` and `simulate` print.

Durations come from `collect.planning.estimate` (measured figures where the store has them, else
the plan's `estimates`); start-ups are drawn from `estimates.startup_s` with a seed, the
same draw for both orders. Only jobs are simulated: the scheduler is the real one, and so is
the choice of replicas (`collect.planning.replicas`, as the runner makes it). `simulate
--hosts 1,2,4` packs the plan on N copies of its host (a job never spans hosts) and prints
each count's makespan beside its bounds, with replicas and without.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from collect.plan.model import Plan, ServiceConfig, Workload
from collect.plan.phases import BestOf, Phase
from collect.planning.estimate import Estimator, Measured, load_measured
from collect.planning.ranking import pick
from collect.planning.replicas import Candidate, replica_of, split
from collect.planning.schedule import (
    Job,
    Scheduler,
    Slot,
    dependency_bound,
    lower_bound,
    makespan,
    simulate,
)
from schema.controls import aa_control_name

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
    (f"...#{i}" for replica i >= 2 of a configuration split by `collect.planning.replicas`,
    each phase's configurations one batch, as the runner splits them; `usable`: the GPUs
    of one host the batch may use, 0 for no replicas, on `hosts` hosts).

    The baseline of a best_of phase does not depend on the choice, so its job is known from
    the start; the chosen methods' jobs come when every job of the source phase has
    finished, chosen as the runner does (median speedup over the source's windows) from
    the estimator's speeds: measured where the store has them, else assumed.
    """

    def __init__(self, plan: Plan, est: Estimator, gpu_host: bool, usable: int = 0, hosts: int = 1):
        self.plan, self.est, self.gpu_host = plan, est, gpu_host
        self.usable, self.hosts = usable, hosts
        self.configs: dict[str, tuple[Phase, ServiceConfig]] = {}
        self.workloads: dict[str, tuple[Workload, ...]] = {}  # key -> the job's workloads
        self.methods: dict[str, list[str]] = {}  # phase -> methods that run (once known)
        self._open: dict[str, set[str]] = {}  # phase -> keys not finished yet

    def initial(self) -> list[Job]:
        jobs = []
        for phase in self.plan.all_phases():
            picked = (
                None
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

    def _jobs(self, phase: Phase, methods: list[str], after: Iterable[str] = ()) -> list[Job]:
        batch = []
        for config in self.plan.phase_configs(phase, methods):
            key = f"{phase.name}:{config.config_id}"
            workloads = tuple(self.plan.workloads_of(config))
            if key in self.configs or not workloads:
                continue
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
    serial: list[Slot]
    packed: list[Slot]
    gpus: tuple[int, ...]  # one host's
    reserved: tuple[int, ...]  # one host's
    configs: dict[str, tuple[Phase, ServiceConfig]]
    hosts: int = 1
    stride: int = 0  # GPU g of host h is numbered h * stride + g in `packed`

    @property
    def bound(self) -> float:
        return lower_bound(self.packed, self.gpus, self.reserved, self.hosts)

    @property
    def dependency_bound(self) -> float:
        return dependency_bound(self.packed, self.gpus, self.reserved, self.hosts)


def simulate_plan(
    plan: Plan, est: Estimator, seed: int | None = 0, hosts: int = 1, replicas: bool | None = None
) -> Simulation:
    """Serial and packed order of the plan on simulated services; the packed one on `hosts`
    copies of the plan's host, with replicas unless the plan's `host.replicas` is false
    (or `replicas` says otherwise). Start-up: the measured median when the store has one,
    else drawn from `estimates.startup_s` with the seed (seed None: the midpoint, as the
    ETA uses). Both orders get the same draws."""
    gpus, reserved = host_gpus(plan)
    split_ = plan.host.replicas if replicas is None else replicas
    timelines, stride = [], 0
    for packed in (False, True):
        usable = len(gpus) - len(reserved) if packed and split_ and gpus else 0
        jobs = PlanJobs(plan, est, gpu_host=bool(gpus), usable=usable, hosts=hosts)
        scheduler = Scheduler(
            gpus, reserved, packed=packed and bool(gpus), hosts=hosts if packed and gpus else 1
        )
        stride = scheduler.stride
        timelines.append(
            simulate(scheduler, jobs.initial(), _durations(jobs, est, seed), jobs.on_finish)
        )
    return Simulation(timelines[0], timelines[1], gpus, reserved, jobs.configs, hosts, stride)


def _durations(jobs: PlanJobs, est: Estimator, seed: int | None) -> Callable[[Job], float]:
    low, high = est.assume.startup_range()

    def duration(job: Job) -> float:
        _, config = jobs.configs[job.key]
        if seed is None or (config.method.name, config.tp) in est.measured.startup_s:
            return job.seconds
        startup = random.Random(f"{seed}:{job.key}").uniform(low, high)
        return est.config_s(config, list(jobs.workloads[job.key]), startup_s=startup)

    return duration


# --- what `check` and `simulate` print ---------------------------------------------------


def measured_from(db: Path | None, plan: Plan) -> Measured:
    """The store's figures for the plan, or none when no results file is given."""
    if db is None:
        return Measured()
    if not db.exists():
        raise FileNotFoundError(f"results file {db} does not exist")
    from schema.store import Store

    with Store(db) as store:
        return load_measured(store, plan)


def sources(est: Estimator, configs: Iterable[ServiceConfig]) -> Counter[str]:
    """Where the decode speed of each measured window comes from."""
    return Counter(
        est.decode_tps(c.method.name, c.tp, w.name, conc).source
        for c in configs
        for w in est.plan.workloads_of(c)
        for _ in w.max_tokens
        for conc in w.concurrency
    )


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s"


def clock(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def gpu_list(gpus: Iterable[int]) -> str:
    """0,1,2,3 -> 0-3; 1,3 -> 1,3; none -> cpu."""
    runs: list[list[int]] = []
    for g in sorted(gpus):
        if runs and g == runs[-1][-1] + 1:
            runs[-1].append(g)
        else:
            runs.append([g])
    return (
        ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs) or "cpu"
    )


def summary_lines(sim: Simulation, est: Estimator) -> list[str]:
    """Makespans, bounds and where the figures came from (for `check` and `simulate`)."""
    configs = list({k.partition("#")[0]: c for k, (_, c) in sim.configs.items()}.values())
    got = sources(est, configs)
    serial, packed = makespan(sim.serial), makespan(sim.packed)
    lines = [
        "decode speeds per window: "
        + ", ".join(f"{n} {source}" for source, n in sorted(got.items(), key=lambda kv: -kv[1]))
    ]
    measured_starts = sum((c.method.name, c.tp) in est.measured.startup_s for c in configs)
    low, high = est.assume.startup_range()
    lines.append(
        f"start-ups: {measured_starts} of {len(configs)} measured, the others "
        f"assumed {low:g}-{high:g} s"
    )
    lines.append(f"serial order (one service at a time): {duration(serial)}")
    if not sim.gpus:
        lines.append("a CPU host runs one service at a time: no packed order")
        return lines
    plural = "s" if len(sim.reserved) > 1 else ""
    held = f", GPU{plural} {gpu_list(sim.reserved)} only for alone phases" if sim.reserved else ""
    hosts = f"{sim.hosts} hosts, each with " if sim.hosts > 1 else ""
    lines.append(f"packed order on {hosts}GPUs {gpu_list(sim.gpus)}{held}: {duration(packed)}")
    over = f", shared by {sim.hosts} hosts" if sim.hosts > 1 else ""
    lines.append(
        f"lower bound {duration(sim.bound)} (alone jobs back to back + the other "
        f"jobs' GPU-seconds / {len(sim.gpus) - len(sim.reserved)} unreserved GPUs"
        f"{over}); packed / lower bound = {packed / sim.bound:.2f}"
    )
    dep = sim.dependency_bound
    lines.append(
        f"dependency-aware lower bound {duration(dep)} (also sees best_of waits and "
        f"wide jobs that cannot run side by side); packed / it = {packed / dep:.2f}"
    )
    return lines


def gantt_lines(sim: Simulation) -> list[str]:
    """The packed order as a table: job (replica i >= 2 as method#i), host, GPUs, start, end."""
    rows = [("phase", "method", "tp", "host", "GPUs", "start", "end")]
    for slot in sorted(sim.packed, key=lambda s: (s.start, s.gpus)):
        phase, config = sim.configs[slot.job.key]
        i = replica_of(slot.job.key)
        host = slot.gpus[0] // sim.stride if slot.gpus and sim.stride else 0
        local = [g - host * sim.stride for g in slot.gpus]
        rows.append(
            (
                phase.name,
                config.method.name + (f"#{i}" if i > 1 else ""),
                str(config.tp),
                str(host + 1),
                gpu_list(local),
                clock(slot.start),
                clock(slot.end),
            )
        )
    if sim.hosts == 1:
        rows = [row[:3] + row[4:] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def hosts_lines(plan: Plan, est: Estimator, seed: int | None, counts: list[int]) -> list[str]:
    """Packed makespan on each host count (copies of the plan's host), with replicas and
    without, beside its area bound and dependency-aware bound."""
    rows = [
        (
            "hosts",
            "GPUs",
            "packed",
            "no replicas",
            "replicas",
            "area bound",
            "packed/area",
            "dependency bound",
            "packed/dep",
        )
    ]
    for n in counts:
        sim = simulate_plan(plan, est, seed, hosts=n)
        plain = makespan(simulate_plan(plan, est, seed, hosts=n, replicas=False).packed)
        packed, area, dep = makespan(sim.packed), sim.bound, sim.dependency_bound
        extra = sum(replica_of(k) > 1 for k in sim.configs)
        rows.append(
            (
                str(n),
                str(n * len(sim.gpus)),
                duration(packed),
                duration(plain),
                f"+{extra}",
                duration(area),
                f"{packed / area:.3f}",
                duration(dep),
                f"{packed / dep:.3f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def report_lines(
    plan: Plan, db: Path | None, seed: int | None, gantt: bool, hosts: list[int] | None = None
) -> list[str]:
    """`check`'s time estimate (seed None: start-ups at their midpoint) or, with the
    packed order's table, `simulate`'s report; with `hosts`, the packed order on each of
    those host counts too (the table for the first)."""
    est = Estimator(plan, measured_from(db, plan))
    counts = hosts or [1]
    sim = simulate_plan(plan, est, seed, hosts=counts[0])
    where = f"measured in {db} where it has them, else assumed" if db else "assumed (plan)"
    head = [f"time estimate, speeds {where}:"]
    body = summary_lines(sim, est)
    if hosts and not sim.gpus:
        body.append("--hosts: the plan's host has no GPUs; several CPU hosts are not simulated")
    if hosts and sim.gpus:
        body += [
            f"on {', '.join(map(str, counts))} host(s) of GPUs {gpu_list(sim.gpus)} "
            "each (a job never spans hosts):",
            *(f"  {line}" for line in hosts_lines(plan, est, seed, counts)),
        ]
    where = f" on {counts[0]} hosts" if counts[0] > 1 else ""
    table = [f"packed order (simulated{where}):", *gantt_lines(sim)] if gantt and sim.gpus else []
    return head + [f"  {line}" for line in body] + table
