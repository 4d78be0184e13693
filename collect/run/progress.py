"""The live progress display of a campaign: one bar over every measured request, with an
ETA from the duration estimates corrected by what was measured.

API the runner calls (thread-safe; jobs are the scheduler's, keyed f"{phase}:{config_id}"):

    progress = CampaignProgress(0, eta=Eta(gpus, reserved, packed))
    progress.job_added(job, requests, fixed_s)  # a configuration is queued: its Job (seconds
                                                # from collect.scheduling.estimate), its measured
                                                # requests and its start-up + warm-up seconds
    progress.job_started(key)                   # its service is being launched
    progress.request_done(key)                  # one of its measured requests finished
                                                # (counts only: the ETA is computed when
                                                # the display renders, see seconds_left)
    progress.job_finished(key)                  # it ended: done, failed or skipped
    progress.job_forgotten(key)                 # a predicted job that will not run
    progress.later_rounds(rounds)               # (Job, requests) of each round after this
                                                # one, as far as they are known
    progress.eta = Eta(...)                     # a new round's queue: the new Eta keeps
                                                # what the old one measured (its ratio)

How the ETA corrects itself (`Eta`): a job's estimate is a fixed part (start-up +
warm-up) plus an equal share per request. A started job's work done, in estimated
seconds, is its fixed part once its first request finished plus the shares of its
finished requests; ratio = wall seconds the started jobs took so far / their work done
(1 until a request has finished). Every unfinished job has ratio x (estimate - work done)
left (a job still starting: its estimate x ratio minus the time it has been starting, at
least its request part). The ETA is the makespan of that remaining work replayed through
the same Scheduler (running jobs first, then the queued ones), so packing is accounted for.

Rounds (plan `repeat`): a campaign runs its rounds one after another, each with its own
queue, so the ETA adds to this round's replay the makespan of each later round's jobs (as
estimated, replayed the same way on their own) times the same ratio; the ratio counts the
work of earlier rounds too. The bar's total covers every round's measured requests.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from specsweep.collect.scheduling.schedule import Job, Scheduler, makespan, simulate

# the ETA is recomputed at most this often (a packed campaign's replay costs tens of ms of
# CPU that the measurement loop, on another thread of the same process, waits for)
ETA_EVERY_S = 1.0


@dataclass
class _Track:
    job: Job
    requests: int
    fixed_s: float
    started: float | None = None
    done: int = 0
    ended: float | None = None

    def work_done(self) -> float:
        """Estimated seconds of this job's work that is behind it."""
        if not self.done:
            return 0.0
        per_request = max(self.job.seconds - self.fixed_s, 0.0) / max(self.requests, 1)
        return self.fixed_s + self.done * per_request


class Eta:
    """Seconds left in the campaign (see the module docstring for the formula)."""

    def __init__(
        self,
        gpus: Sequence[int] = (),
        reserved: Sequence[int] = (),
        packed: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.gpus, self.reserved, self.packed, self.clock = gpus, reserved, packed, clock
        self._jobs: dict[str, _Track] = {}
        self._lock = threading.Lock()
        self.past = (0.0, 0.0)  # (wall, estimated) seconds of earlier rounds' work done
        self.later_s = 0.0  # estimated seconds of the rounds after this one

    def inherit(self, earlier: Eta) -> None:
        """This round's ETA goes on from an earlier round's: its work done counts in the
        ratio."""
        with earlier._lock:
            self.past = earlier._measured()

    def set_later(self, rounds: Sequence[Sequence[Job]]) -> None:
        """The jobs of each round after this one: their makespans, each replayed alone (a job
        that can never run here, e.g. tp 8 on 4 GPUs, is skipped, as the runner skips it)."""
        later = [self._replay([], [(j, j.after) for j in self._runnable(jobs)]) for jobs in rounds]
        with self._lock:
            self.later_s = sum(later)

    def _runnable(self, jobs: Sequence[Job]) -> list[Job]:
        probe = Scheduler(self.gpus, self.reserved, packed=self.packed)
        out = []
        for job in jobs:
            try:
                probe.add(replace(job, after=frozenset()))
            except ValueError:
                continue
            out.append(job)
        return out

    def add(self, job: Job, requests: int, fixed_s: float) -> None:
        with self._lock:
            self._jobs[job.key] = _Track(job, requests, min(fixed_s, job.seconds))

    def forget(self, key: str) -> None:
        with self._lock:
            self._jobs.pop(key, None)

    def started(self, key: str) -> None:
        with self._lock:
            self._jobs[key].started = self.clock()

    def request_done(self, key: str) -> None:
        with self._lock:
            self._jobs[key].done += 1

    def finished(self, key: str) -> None:
        with self._lock:
            track = self._jobs[key]
            track.ended = self.clock()
            if track.started is None:  # skipped before it started: no time measured
                del self._jobs[key]

    def _measured(self) -> tuple[float, float]:
        """(wall, estimated) seconds of the work done so far, earlier rounds' included."""
        now = self.clock()
        pairs = [
            ((t.ended or now) - t.started, t.work_done())
            for t in self._jobs.values()
            if t.started is not None and t.work_done() > 0
        ]
        return self.past[0] + sum(p[0] for p in pairs), self.past[1] + sum(p[1] for p in pairs)

    def ratio(self) -> float:
        """Measured wall seconds over estimated seconds of the work done so far."""
        spent, estimated = self._measured()
        return spent / estimated if estimated > 0 else 1.0

    def seconds_left(self, this_round: bool = False) -> float | None:
        """Seconds to the end of the campaign's last round (this_round: of this one)."""
        with self._lock:
            later = 0.0 if this_round else self.later_s
            if not self._jobs and not later:
                return None
            ratio = self.ratio()
            return self._round_left(ratio) + ratio * later

    def _round_left(self, ratio: float) -> float:
        """This round's remaining makespan (the module docstring); call with the lock."""
        now = self.clock()
        running, queued = [], []
        for t in self._jobs.values():
            if t.ended is not None:
                continue
            left = ratio * (t.job.seconds - t.work_done())
            if t.started is not None and not t.done:
                request_part = ratio * (t.job.seconds - t.fixed_s)
                left = max(left - (now - t.started), request_part)
            rest = replace(t.job, seconds=max(left, 0.0), after=frozenset())
            (running if t.started is not None else queued).append((rest, t.job.after))
        return self._replay(running, queued)

    def _replay(
        self, running: list[tuple[Job, frozenset[str]]], queued: list[tuple[Job, frozenset[str]]]
    ) -> float:
        known = {job.key for job, _ in running + queued}
        queued_jobs = [replace(j, after=after & known) for j, after in queued]
        scheduler = Scheduler(self.gpus, self.reserved, packed=self.packed)
        first = [job for job, _ in running]
        if not self.packed:  # serial: the running job, then the queue in order
            return sum(j.seconds for j in first + queued_jobs)
        return makespan(simulate(scheduler, queued_jobs, first=first))


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class CampaignProgress:
    """A rich progress bar; a no-op when disabled (tests, no terminal)."""

    def __init__(self, total: int, enabled: bool = True, eta: Eta | None = None):
        self.console = Console(stderr=True)
        self.eta = eta or Eta()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            _EtaColumn(self),
            console=self.console,
            disable=not enabled,
        )
        self._left: tuple[float | None, float] = (None, -math.inf)  # ETA, when computed
        self._stale = True  # an input changed since
        self._task = self._progress.add_task("campaign", total=total)
        self._queued, self._later = total, 0  # requests of rounds queued so far, of later ones
        self._round = ""  # 'round 2 of 3' once the runner says

    @property
    def eta(self) -> Eta:
        return self._eta

    @eta.setter
    def eta(self, eta: Eta) -> None:
        """A new round's Eta goes on from the one before (Eta.inherit)."""
        if hasattr(self, "_eta"):
            eta.inherit(self._eta)
        self._eta = eta
        self._stale = True

    def __enter__(self) -> CampaignProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    @property
    def total(self) -> int:
        """Measured requests of every round: those queued so far and the later rounds'."""
        return self._queued + self._later

    def add_total(self, n: int) -> None:
        """More requests to come (a phase's work is known once it starts)."""
        self._queued += n
        self._progress.update(self._task, total=self.total)

    def later_rounds(self, rounds: Sequence[Sequence[tuple[Job, int]]]) -> None:
        """(job, its measured requests) of each round after this one: in the ETA and the
        bar's total."""
        self.eta.set_later([[job for job, _ in jobs] for jobs in rounds])
        self._later = sum(n for jobs in rounds for _, n in jobs)
        self._progress.update(self._task, total=self.total)
        self._stale = True

    def advance(self) -> None:
        self._progress.advance(self._task)

    def set_round(self, run: int, runs: int) -> None:
        """The round running now heads the bar's description: 'round 2 of 3: <status>'."""
        self._round = f"round {run} of {runs}"
        self.status("")

    def status(self, text: str) -> None:
        self._progress.update(self._task, description=": ".join(filter(None, (self._round, text))))

    @property
    def description(self) -> str:
        return self._progress.tasks[0].description

    def note(self, text: str) -> None:
        self._progress.console.print(text)

    # --- the ETA's inputs ---------------------------------------------------------------

    def job_added(self, job: Job, requests: int, fixed_s: float) -> None:
        self.eta.add(job, requests, fixed_s)
        self._stale = True

    def job_started(self, key: str) -> None:
        self.eta.started(key)
        self._stale = True

    def request_done(self, key: str) -> None:
        """One measured request ended: counts only. The ETA (a scheduler replay, tens of
        ms for a packed campaign) is left to the display's refresh (`seconds_left`)."""
        self.eta.request_done(key)
        self.advance()
        self._stale = True

    def job_finished(self, key: str) -> None:
        self.eta.finished(key)
        self._stale = True

    def job_forgotten(self, key: str) -> None:
        self.eta.forget(key)
        self._stale = True

    def seconds_left(self) -> float | None:
        """The ETA as the display renders it (rich's refresh thread, not the measurement
        loop): recomputed when something changed, at most every ETA_EVERY_S, and counted
        down in between."""
        left, at = self._left
        now = time.monotonic()
        if self._stale and now - at >= ETA_EVERY_S:
            self._stale = False  # a change during the computation marks it stale again
            left, at = self._left = (self.eta.seconds_left(), now)
        return None if left is None else max(left - (now - at), 0.0)


class _EtaColumn(ProgressColumn):
    def __init__(self, owner: CampaignProgress):
        super().__init__()
        self.owner = owner

    def render(self, task: Task) -> Text:
        return Text(eta_text(self.owner.seconds_left()), style="progress.remaining")
