"""Replicas: a configuration whose work is long next to the others' runs as k service starts
(replicas), each a job of its own with its own GPUs and a share of the workloads.

The unit of a share is a whole workload: a unit (config, workload, run) lands in one
transaction from one service, so a window is never split across replicas and resume works
as before. Replica 1 keeps the job's key; replica i >= 2 is f"{key}#{i}" (the runner's and
`simulate`'s keys alike); services.replica records i. Every replica runs the same
configuration (same config_id): only the workloads differ.

How many (`split`), for one batch of jobs released together (a phase's configurations):

- A replica pays one more start-up and warm-up (`Estimator.fixed_s`), on its own GPUs.
- Each job's workloads go to k replicas balanced by estimated seconds (longest first onto
  the least loaded: LPT).
- The batch's score is what packing it may take: max(area + slack, width, longest).
  area = the batch's GPU-seconds / the GPUs its jobs may use on all hosts (m; the replicas'
  start-ups included); slack = (1 - g/m) x the longest narrow replica (g GPUs, 2g <= the
  usable GPUs of a host): Graham's bound, list scheduling ends by area + (1 - 1/m) x the
  longest job, so long pieces cost time beyond the area even when the area is met (it
  also stands for the GPUs other phases' jobs hold meanwhile, which a batch does not see;
  a simulation of the batch alone chose worse splits for the CT200 plan); width:
  jobs g or more GPUs wide fit usable // g at a time on a host (two TP4 replicas on 7 free
  GPUs run one after the other), so they need their seconds / (hosts x usable // g);
  longest = the longest replica.
- For each target length T (every length a replica can have), every job takes the fewest
  replicas whose longest is at most T; a target replaces the unsplit batch (or a longer
  target) only when it lowers the score by more than one start-up and warm-up: a split
  that gains less is not worth the GPU time it costs.
- Never split: a job with one workload, a job that holds the host alone (a phase that
  stops blocking services: on one host its replicas would run one after another), a job
  whose replicas could only run one after another (width).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specsweep.collect.plan.model import ServiceConfig, Workload
from specsweep.collect.scheduling.estimate import Estimator


@dataclass(frozen=True)
class Candidate:
    """One configuration of a batch, before it is split."""

    key: str
    config: ServiceConfig
    workloads: tuple[Workload, ...]
    gpus: int  # GPUs of one replica (its tp; 0 on a CPU host)
    alone: bool = False


@dataclass(frozen=True)
class Replica:
    key: str  # the candidate's key for replica 1, f"{key}#{i}" after
    index: int  # 1, 2, ...
    workloads: tuple[Workload, ...]  # in the plan's order
    seconds: float  # start-up + warm-up + its workloads


def replica_key(key: str, index: int) -> str:
    return key if index == 1 else f"{key}#{index}"


def replica_of(key: str) -> int:
    """The replica number a job key carries (1 without a #)."""
    _, mark, index = key.rpartition("#")
    return int(index) if mark and index.isdigit() else 1


def shares(
    est: Estimator, c: Candidate, k: int, seconds: dict[str, float] | None = None
) -> list[Replica]:
    """The candidate's workloads in k replicas balanced by estimated seconds (LPT: longest
    first onto the least loaded); each replica keeps the plan's order of its workloads.
    `seconds`: each workload's estimate, when the caller has them already."""
    seconds = seconds or {w.name: est.workload_s(c.config, w) for w in c.workloads}
    bins: list[list[Workload]] = [[] for _ in range(min(k, len(c.workloads)))]
    load = [0.0] * len(bins)
    order = {w.name: i for i, w in enumerate(c.workloads)}
    for w in sorted(c.workloads, key=lambda w: (-seconds[w.name], order[w.name])):
        i = min(range(len(bins)), key=lambda b: (load[b], b))
        bins[i].append(w)
        load[i] += seconds[w.name]
    bins = sorted(
        (sorted(b, key=lambda w: order[w.name]) for b in bins), key=lambda b: order[b[0].name]
    )
    return [
        Replica(
            replica_key(c.key, i),
            i,
            tuple(b),
            est.fixed_s(c.config, b) + sum(seconds[w.name] for w in b),
        )
        for i, b in enumerate(bins, start=1)
    ]


def score(
    split_: dict[str, list[Replica]], gpus: dict[str, int], usable: int, hosts: int = 1
) -> float:
    """What the batch may take packed: max(area + slack, width, longest) (module docstring)."""
    reps = [(gpus[key], r.seconds) for key, rs in split_.items() for r in rs]
    m = max(usable * hosts, 1)
    area = sum(g * s for g, s in reps) / m
    slack = max(((1 - g / m) * s for g, s in reps if 2 * g <= usable), default=0.0)
    width = max(
        (
            sum(s for h, s in reps if h >= g) / (hosts * (usable // g))
            for g in {g for g, _ in reps if 0 < g <= usable}
        ),
        default=0.0,
    )
    return max(area + slack, width, max((s for _, s in reps), default=0.0))


def split(
    est: Estimator, batch: Sequence[Candidate], usable: int, hosts: int = 1, enabled: bool = True
) -> dict[str, list[Replica]]:
    """Candidate key -> its replicas (one when it is not split), by the rule of the module
    docstring; `usable`: the GPUs of one host the batch's jobs may use, on `hosts` hosts."""
    options = {}
    for c in batch:
        seconds = {w.name: est.workload_s(c.config, w) for w in c.workloads}
        most = len(c.workloads) if enabled and usable > 0 and c.gpus > 0 and not c.alone else 1
        options[c.key] = [shares(est, c, k, seconds) for k in range(1, most + 1)]
    gpus = {c.key: c.gpus for c in batch}
    best = {key: opts[0] for key, opts in options.items()}
    best_score = score(best, gpus, usable, hosts)
    fixed = max((est.fixed_s(c.config, list(c.workloads)) for c in batch), default=0.0)
    targets = sorted(
        {max(r.seconds for r in o) for opts in options.values() for o in opts}, reverse=True
    )
    for target in targets:  # every job cut to its fewest replicas no longer than target
        choice = {
            key: next((o for o in opts if max(r.seconds for r in o) <= target), opts[-1])
            for key, opts in options.items()
        }
        now = score(choice, gpus, usable, hosts)
        if now < best_score - fixed:  # it must win more than the start-up it adds
            best, best_score = choice, now
    return best
