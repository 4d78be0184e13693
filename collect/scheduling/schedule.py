"""GPU packing: which configurations run at the same time, on which GPUs of one host.

A `Job` is one configuration of one phase (a service start running all its workloads); it
needs `gpus` GPUs (its tp) for `seconds` (the estimate from `collect.scheduling.estimate`, start-up
included). The `Scheduler` hands out disjoint GPU sets; the runner (threads) and
`simulate` (a discrete-event clock) drive it the same way:

    while not s.done():
        for job, gpus in s.start(): launch(job, gpus)
        key = wait_for_any_finish(); s.finish(key); s.add(jobs that became known)

Packing policy (packed=True), applied each time `start()` is called:

- A job is ready when every key in its `after` has finished (finished = done or failed:
  the runner calls `finish` either way).
- Ready jobs are taken in priority order: jobs other jobs wait for first (their
  dependants cannot start before them), then by `rank`, the job's place in its round's
  order of its phase (collect.scheduling.order: the counterbalanced order that cancels drift
  must hold when jobs run side by side too, so every phase's first job comes before any
  phase's second), then the baseline's (every comparison needs it: a campaign cut short,
  as a lent GPU's last minutes cut one, can still compare what it finished), then longest
  first (LPT: a long job started late sets the makespan), then widest, then the order they
  were added. Each job that fits in the GPUs free right now starts (lower-priority jobs
  fill GPUs a wider job cannot use).
- Reserved GPUs (held by `host.blocking_services`) are given only to `alone` jobs. An
  alone job (a phase that stops those services, e.g. TP8 needing GPU0) starts only when
  nothing runs and no other ready job could start instead: alone jobs hold the whole host,
  so running them where nothing else is left to do wastes no GPU time beside them. An
  alone job other jobs wait for takes precedence instead (the host drains, then it runs).
- GPU sets: the lowest free indices, unreserved GPUs first.

packed=False is the serial order: one job at a time in the order added (a job whose
`after` has not finished waits, and so do the jobs behind it). A CPU host is gpus=()
with jobs of gpus=0.

hosts=N (`simulate --hosts`): N copies of the host; a job's GPUs come from one host, an
alone job holds only its own host (see `Scheduler`).

`simulate(jobs, ...)` replays a job list on a simulated clock and returns the timeline;
`lower_bound` is the area bound the packed makespan is compared with, `dependency_bound`
the bound that also sees best_of waits (see their docstrings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    key: str  # unique; the runner uses f"{phase}:{config_id}"
    gpus: int  # GPUs it needs (its tp)
    seconds: float  # estimated duration including start-up (ordering + simulation)
    after: frozenset[str] = frozenset()  # keys of jobs that must finish before it starts
    alone: bool = False  # nothing else on the host while it runs; may use reserved GPUs
    baseline: bool = False  # the plan's baseline method: first among jobs of equal rank
    rank: int = 0  # its place in its round's order of its phase (0 first): see the docstring


class Scheduler:
    """Disjoint GPU sets for jobs, in the packing policy of the module docstring.

    hosts=N (simulation of several hosts): N copies of the host, GPU g of host h numbered
    h * stride + g (stride = the largest index + 1; host 0 keeps the plan's numbers); a job's
    GPUs come from one host, an alone job holds its host, a waited-for alone job drains one
    host (the one with the fewest busy GPUs) while the others go on."""

    def __init__(
        self, gpus: Sequence[int], reserved: Sequence[int] = (), packed: bool = True, hosts: int = 1
    ):
        unknown = sorted(set(reserved) - set(gpus))
        if unknown:
            raise ValueError(f"reserved GPUs {unknown} are not among the host's GPUs {list(gpus)}")
        self.stride = max(gpus, default=-1) + 1
        self.host_gpus = [tuple(h * self.stride + g for g in gpus) for h in range(hosts)]
        self.gpus = tuple(g for host in self.host_gpus for g in host)
        self.reserved = frozenset(h * self.stride + g for h in range(hosts) for g in reserved)
        self.packed = packed
        self._pending: list[Job] = []  # in the order added
        self._running: dict[str, tuple[Job, tuple[int, ...]]] = {}
        self._finished: set[str] = set()
        self._draining: int | None = None  # the host left to empty for a waited-for alone job

    def add(self, job: Job) -> None:
        """Queue a job; ValueError naming it when it can never run."""
        one = self.host_gpus[0] if self.host_gpus else ()
        usable = len(one) - (0 if job.alone else len(self.reserved & set(one)))
        if job.gpus > usable:
            where = "GPUs" if job.alone else "GPUs not reserved by blocking services"
            raise ValueError(f"job {job.key} needs {job.gpus} GPUs; the host has {usable} {where}")
        known = self._finished | set(self._running) | {j.key for j in self._pending}
        if job.key in known:
            raise ValueError(f"job {job.key} was added twice")
        missing = sorted(job.after - known)
        if missing:
            raise ValueError(f"job {job.key} waits for unknown jobs {missing}")
        self._pending.append(job)

    def start(self) -> list[tuple[Job, tuple[int, ...]]]:
        """Jobs to start now, each with its GPU set; they count as running from here."""
        if not self.packed:
            busy: dict[int, list[Job]] = {0: []}
            return [self._place(job, 0, busy) for job in self._pick_serial()]
        return self._pick_packed()

    def finish(self, key: str) -> None:
        """The job ended (done or failed): its GPUs are free, its dependants may start."""
        if key not in self._running:
            raise KeyError(f"job {key} is not running")
        del self._running[key]
        self._finished.add(key)

    def done(self) -> bool:
        return not self._pending and not self._running

    def running(self) -> dict[str, tuple[int, ...]]:
        """Key -> GPU set of every running job."""
        return {key: gpus for key, (_, gpus) in self._running.items()}

    def pending(self) -> list[Job]:
        """Jobs not started yet, in the order added."""
        return list(self._pending)

    def host_of(self, gpus: tuple[int, ...]) -> int:
        return gpus[0] // self.stride if gpus and self.stride else 0

    # --- policy ------------------------------------------------------------------------

    def _ready(self) -> list[Job]:
        return [j for j in self._pending if j.after <= self._finished]

    def _pick_serial(self) -> list[Job]:
        if self._running or not self._pending:
            return []
        first = self._pending[0]
        return [first] if first.after <= self._finished else []

    def _pick_packed(self) -> list[tuple[Job, tuple[int, ...]]]:
        ready = sorted(self._ready(), key=self._priority)
        if not ready:
            return []
        busy: dict[int, list[Job]] = {h: [] for h in range(len(self.host_gpus))}  # + picked
        for job, gpus in self._running.values():
            busy[self.host_of(gpus)].append(job)
        picked: list[tuple[Job, tuple[int, ...]]] = []
        waited_for = {k for j in self._pending for k in j.after}
        if ready[0].alone and ready[0].key in waited_for:
            idle = [h for h, jobs in busy.items() if not jobs]
            if idle:  # run it there at once; the other hosts go on
                picked.append(self._place(ready[0], idle[0], busy))
                self._draining = None
            elif self._draining is None:  # empty one host for it
                self._draining = min(busy, key=lambda h: (sum(j.gpus for j in busy[h]), h))
            ready = ready[1:]
        else:
            self._draining = None
        for job in ready:
            if job.alone:
                continue
            fits = [
                h
                for h in busy
                if h != self._draining
                and not any(j.alone for j in busy[h])
                and job.gpus <= len(self._free(h))
            ]
            if fits:  # the fullest host it fits on: wide jobs keep room elsewhere
                host = min(fits, key=lambda h: (len(self._free(h)), h))
                picked.append(self._place(job, host, busy))
        for job in ready:  # alone jobs: on a host nothing else runs on or was given
            idle = [h for h, jobs in busy.items() if not jobs and h != self._draining]
            if job.alone and idle and not (job.key in waited_for and self._draining is not None):
                picked.append(self._place(job, idle[0], busy))
        return picked

    def _place(
        self, job: Job, host: int, busy: dict[int, list[Job]]
    ) -> tuple[Job, tuple[int, ...]]:
        """Start the job on the host: the host's lowest free indices, unreserved GPUs first."""
        if job.alone and busy[host]:
            raise RuntimeError(f"alone job {job.key} picked while others run")  # policy bug
        gpus = tuple(sorted(self._free(host, alone=job.alone)[: job.gpus]))
        busy[host].append(job)
        self._pending.remove(job)
        self._running[job.key] = (job, gpus)
        return job, gpus

    def _priority(self, job: Job) -> tuple[bool, bool, int, bool, float, int, int]:
        waited_for = any(job.key in j.after for j in self._pending)
        return (
            not waited_for,
            job.alone,
            job.rank,
            not job.baseline,
            -job.seconds,
            -job.gpus,
            self._pending.index(job),
        )

    def _free(self, host: int, alone: bool = False) -> list[int]:
        taken = {g for _, gpus in self._running.values() for g in gpus}
        free = [g for g in self.host_gpus[host] if g not in taken] if self.host_gpus else []
        unreserved = [g for g in free if g not in self.reserved]
        return unreserved + ([g for g in free if g in self.reserved] if alone else [])


# --- simulation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One job's place in a simulated timeline."""

    job: Job
    gpus: tuple[int, ...]
    start: float
    end: float


def simulate(
    scheduler: Scheduler,
    jobs: Iterable[Job],
    duration: Callable[[Job], float] = lambda job: job.seconds,
    on_finish: Callable[[Job, float], Iterable[Job]] = lambda job, now: (),
    first: Iterable[Job] = (),
) -> list[Slot]:
    """Run the jobs on a simulated clock from 0: each lasts `duration(job)` seconds
    (default its estimate); `on_finish` returns jobs that become known when one ends
    (best_of phases). `first` jobs are started before the others are added (the ETA
    replays jobs already running this way). Returns the timeline in start order."""
    for job in first:
        scheduler.add(job)
    timeline = [Slot(job, gpus, 0.0, duration(job)) for job, gpus in scheduler.start()]
    running = list(timeline)
    for job in jobs:
        scheduler.add(job)
    now = 0.0
    while not scheduler.done():
        for job, gpus in scheduler.start():
            slot = Slot(job, gpus, now, now + duration(job))
            running.append(slot)
            timeline.append(slot)
        if not running:
            stuck = [j.key for j in scheduler.pending()]
            raise RuntimeError(f"jobs {stuck} can never start (their `after` never finishes)")
        ending = min(running, key=lambda s: (s.end, s.job.key))
        running.remove(ending)
        now = ending.end
        scheduler.finish(ending.job.key)
        for job in on_finish(ending.job, now):
            scheduler.add(job)
    return timeline


def makespan(timeline: Sequence[Slot]) -> float:
    return max((s.end for s in timeline), default=0.0)


def lower_bound(
    slots: Sequence[Slot], gpus: Sequence[int], reserved: Sequence[int], hosts: int = 1
) -> float:
    """No order can finish sooner than: the alone jobs one after another (each holds the
    whole host, reserved GPUs included), plus every other job's GPU-seconds spread over
    the GPUs those jobs may use (the host's minus the reserved ones), all of it shared by
    `hosts` copies of the host (`gpus`, `reserved`: one host's). A CPU host (no GPUs)
    runs one service at a time, so there the bound is the sum of the durations."""
    alone = sum(s.end - s.start for s in slots if s.job.alone)
    shared = [s for s in slots if not s.job.alone]
    usable = len(gpus) - len(set(reserved))
    if not usable:
        return (alone + sum(s.end - s.start for s in shared)) / hosts
    return (alone + sum(s.job.gpus * (s.end - s.start) for s in shared) / usable) / hosts


def dependency_bound(
    slots: Sequence[Slot], gpus: Sequence[int], reserved: Sequence[int], hosts: int = 1
) -> float:
    """A tighter lower bound that also sees `after`: the alone jobs one after another, plus,
    for the other jobs, the largest of (a) their area bound, (b) their longest dependency
    chain, and (c) for each job h: the longest chain ending with h, then what h's
    dependants need after it ends: their area, their longest job, or the sum of the wide
    ones (more than half the usable GPUs: no two of them fit at once). On several hosts
    an alone job holds only its own host, so there alone jobs count in the chains and the
    area, not back to back."""
    dur = {s.job.key: s.end - s.start for s in slots}
    jobs = {s.job.key: s.job for s in slots}
    many = hosts > 1
    alone = 0.0 if many else sum(dur[k] for k, j in jobs.items() if j.alone)
    usable = len(gpus) - len(set(reserved))
    shared = {k: j for k, j in jobs.items() if many or not j.alone}
    if not usable or not shared:
        return lower_bound(slots, gpus, reserved, hosts)
    chain: dict[str, float] = {}
    for key in _topological(jobs):
        before = [chain[a] for a in jobs[key].after if a in chain]
        chain[key] = (dur[key] if key in shared else 0.0) + max(before, default=0.0)
    best = max(lower_bound(slots, gpus, reserved, hosts) - alone, max(chain.values()))
    for head in shared:
        after_head = [k for k in _dependants(jobs, head) if k in shared]
        if after_head:
            need = max(
                sum((usable if shared[k].alone else shared[k].gpus) * dur[k] for k in after_head)
                / (usable * hosts),
                max(dur[k] for k in after_head),
                sum(dur[k] for k in after_head if shared[k].alone or 2 * shared[k].gpus > usable)
                / hosts,
            )
            best = max(best, chain[head] + need)
    return alone + max(best, _phase_bound(shared, dur, usable, hosts))


def _phase_bound(shared: dict[str, Job], dur: dict[str, float], usable: int, hosts: int) -> float:
    """For each set P of jobs that others wait for (a best_of phase's source): P must end
    (at T1) before its dependants D start. T1 >= P's GPU-seconds / the GPUs; after T1, D
    needs its area, its longest job or its wide jobs back to back (per host). A wide job
    that waits for nothing of D either runs before T1 (adding its GPU-seconds to T1) or
    after (adding its seconds to the wide chain): the cheaper mix of the two is taken."""
    gpus_all = usable * hosts
    width = {k: usable if j.alone else j.gpus for k, j in shared.items()}  # alone: its host
    best = 0.0
    for after in {j.after for j in shared.values() if j.after}:
        source = [k for k in after if k in shared]
        waiting = [k for k, j in shared.items() if after <= j.after]
        if not source or not waiting:
            continue
        wide = [k for k in waiting if 2 * width[k] > usable]
        before = sum(width[k] * dur[k] for k in source) / gpus_all
        floor = max(
            sum(width[k] * dur[k] for k in waiting) / gpus_all, max(dur[k] for k in waiting)
        )
        chain = sum(dur[k] for k in wide) / hosts
        others = [
            k
            for k, j in shared.items()
            if k not in source
            and k not in waiting
            and 2 * width[k] > usable
            and not (j.after & set(waiting))
        ]
        chain += sum(dur[k] for k in others) / hosts  # all of them after T1 to start with
        for k in sorted(others, key=lambda k: width[k]):  # cheapest to move first
            moved = min(dur[k] / hosts, max(0.0, chain - floor))
            chain -= moved
            before += moved * hosts * width[k] / gpus_all
        best = max(best, before + max(floor, chain))
    return best


def _topological(jobs: dict[str, Job]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()

    def visit(key: str) -> None:
        if key in seen or key not in jobs:
            return
        seen.add(key)
        for a in sorted(jobs[key].after):
            visit(a)
        order.append(key)

    for key in jobs:
        visit(key)
    return order


def _dependants(jobs: dict[str, Job], head: str) -> set[str]:
    """Every job that waits for head, directly or through others."""
    found: set[str] = set()
    frontier = {head}
    while frontier:
        frontier = {k for k, j in jobs.items() if j.after & frontier} - found
        found |= frontier
    return found
