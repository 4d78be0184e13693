"""GPU packing: which configurations run at the same time, on which GPUs of one host.

A `Job` is one configuration of one phase (a service start running all its workloads); it
needs `gpus` GPUs (its tp) for `seconds` (the estimate from `collect.planning.estimate`, start-up
included). The `Scheduler` hands out disjoint GPU sets; the runner (threads) and
`simulate` (a discrete-event clock) drive it the same way:

    while not s.done():
        for job, gpus in s.start(): launch(job, gpus)
        key = wait_for_any_finish(); s.finish(key); s.add(jobs that became known)

Packing policy (packed=True), applied each time `start()` is called:

- A job is ready when every key in its `after` has finished (finished = done or failed:
  the runner calls `finish` either way).
- Ready jobs are taken in priority order: jobs other jobs wait for first (their
  dependants cannot start before them), then longest first (LPT: a long job started late
  sets the makespan), then widest, then the order they were added. Each job that fits in
  the GPUs free right now starts (lower-priority jobs fill GPUs a wider job cannot use).
- Reserved GPUs (held by `host.blocking_services`) are given only to `alone` jobs. An
  alone job (a phase that stops those services, e.g. TP8 needing GPU0) starts only when
  nothing runs and no other ready job could start instead: alone jobs hold the whole host,
  so running them where nothing else is left to do wastes no GPU time beside them. An
  alone job other jobs wait for takes precedence instead (the host drains, then it runs).
- GPU sets: the lowest free indices, unreserved GPUs first.

packed=False is the serial order: one job at a time in the order added (a job whose
`after` has not finished waits, and so do the jobs behind it). A CPU host is gpus=()
with jobs of gpus=0.

`simulate(jobs, ...)` replays a job list on a simulated clock and returns the timeline;
`lower_bound` is the area bound the packed makespan is compared with (see its docstring).
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


class Scheduler:
    """Disjoint GPU sets for jobs, in the packing policy of the module docstring."""

    def __init__(self, gpus: Sequence[int], reserved: Sequence[int] = (), packed: bool = True):
        unknown = sorted(set(reserved) - set(gpus))
        if unknown:
            raise ValueError(f"reserved GPUs {unknown} are not among the host's GPUs {list(gpus)}")
        self.gpus = tuple(gpus)
        self.reserved = frozenset(reserved)
        self.packed = packed
        self._pending: list[Job] = []  # in the order added
        self._running: dict[str, tuple[Job, tuple[int, ...]]] = {}
        self._finished: set[str] = set()

    def add(self, job: Job) -> None:
        """Queue a job; ValueError naming it when it can never run."""
        usable = len(self.gpus) if job.alone else len(self.gpus) - len(self.reserved)
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
        picked = self._pick_packed() if self.packed else self._pick_serial()
        started = []
        for job in picked:
            gpus = self._take(job)
            self._pending.remove(job)
            self._running[job.key] = (job, gpus)
            started.append((job, gpus))
        return started

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

    # --- policy ------------------------------------------------------------------------

    def _ready(self) -> list[Job]:
        return [j for j in self._pending if j.after <= self._finished]

    def _pick_serial(self) -> list[Job]:
        if self._running or not self._pending:
            return []
        first = self._pending[0]
        return [first] if first.after <= self._finished else []

    def _pick_packed(self) -> list[Job]:
        ready = sorted(self._ready(), key=self._priority)
        if not ready:
            return []
        waited_for = {k for j in self._pending for k in j.after}
        if ready[0].alone and ready[0].key in waited_for:
            return [] if self._running else [ready[0]]  # drain the host, then run it
        free = len(self._free(alone=False))
        picked = []
        for job in ready:
            if not job.alone and job.gpus <= free:
                picked.append(job)
                free -= job.gpus
        if picked or self._running:
            return picked
        return [ready[0]]  # only alone jobs are ready and nothing runs

    def _priority(self, job: Job) -> tuple[bool, bool, float, int, int]:
        waited_for = any(job.key in j.after for j in self._pending)
        return (not waited_for, job.alone, -job.seconds, -job.gpus, self._pending.index(job))

    def _free(self, alone: bool) -> list[int]:
        busy = {g for _, gpus in self._running.values() for g in gpus}
        free = [g for g in self.gpus if g not in busy]
        unreserved = [g for g in free if g not in self.reserved]
        return unreserved + ([g for g in free if g in self.reserved] if alone else [])

    def _take(self, job: Job) -> tuple[int, ...]:
        if job.alone and self._running:
            raise RuntimeError(f"alone job {job.key} picked while others run")  # policy bug
        free = self._free(job.alone)
        return tuple(sorted(free[: job.gpus]))


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


def lower_bound(slots: Sequence[Slot], gpus: Sequence[int], reserved: Sequence[int]) -> float:
    """No order can finish sooner than: the alone jobs one after another (each holds the
    whole host, reserved GPUs included), plus every other job's GPU-seconds spread over
    the GPUs those jobs may use (the host's minus the reserved ones). A CPU host (no GPUs)
    runs one service at a time, so there the bound is the sum of the durations."""
    alone = sum(s.end - s.start for s in slots if s.job.alone)
    shared = [s for s in slots if not s.job.alone]
    usable = len(gpus) - len(set(reserved))
    if not usable:
        return alone + sum(s.end - s.start for s in shared)
    return alone + sum(s.job.gpus * (s.end - s.start) for s in shared) / usable


def dependency_bound(slots: Sequence[Slot], gpus: Sequence[int], reserved: Sequence[int]) -> float:
    """A tighter lower bound that also sees `after`: the alone jobs one after another, plus,
    for the other jobs, the largest of (a) their area bound, (b) their longest dependency
    chain, and (c) for each job h: the longest chain ending with h, then what h's
    dependants need after it ends: their area, their longest job, or the sum of the wide
    ones (more than half the usable GPUs: no two of them fit at once)."""
    dur = {s.job.key: s.end - s.start for s in slots}
    jobs = {s.job.key: s.job for s in slots}
    alone = sum(dur[k] for k, j in jobs.items() if j.alone)
    usable = len(gpus) - len(set(reserved))
    shared = {k: j for k, j in jobs.items() if not j.alone}
    if not usable or not shared:
        return lower_bound(slots, gpus, reserved)
    chain: dict[str, float] = {}
    for key in _topological(jobs):
        before = [chain[a] for a in jobs[key].after if a in chain]
        chain[key] = (dur[key] if key in shared else 0.0) + max(before, default=0.0)
    best = max(lower_bound(slots, gpus, reserved) - alone, max(chain.values()))
    for head in shared:
        after_head = [k for k in _dependants(jobs, head) if k in shared]
        if after_head:
            need = max(
                sum(shared[k].gpus * dur[k] for k in after_head) / usable,
                max(dur[k] for k in after_head),
                sum(dur[k] for k in after_head if 2 * shared[k].gpus > usable),
            )
            best = max(best, chain[head] + need)
    return alone + best


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
