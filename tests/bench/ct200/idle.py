#!/usr/bin/env python3
"""GPU idle share of a plan's packed order, as `specsweep simulate` computes that order.

    .venv/bin/python tests/bench/ct200/idle.py PLAN [DB]

prints the packed makespan, its two lower bounds and the idle share of the packed order over
every GPU of the host and over the GPUs that no blocking service holds (docs/gpu8-ct200.md;
simulate prints the first three, not the idle share). DB: a results file whose measured speeds
replace the plan's assumed ones, as `simulate --db`. The same formula reads a real campaign's
`services` rows in tests/unit/collect/test_ct200_shape_dry_run.py:

    idle share over GPUs G in [t0, t1] = 1 - sum over services s of
        |gpus(s) & G| * (end(s) - start(s))  /  (|G| * (t1 - t0))

with each service's interval clipped to [t0, t1]; a service's time counts from its start
(requested_at, start-up included: the GPUs are taken) to its stop.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

Busy = tuple[Sequence[int], float, float]  # (GPUs, start, end)


def idle_share(busy: Iterable[Busy], gpus: Sequence[int], t0: float, t1: float) -> float:
    """The module docstring's formula; 0 <= result <= 1 when no GPU is used twice at once."""
    wanted = set(gpus)
    used = sum(
        len(wanted.intersection(g)) * max(0.0, min(end, t1) - max(start, t0))
        for g, start, end in busy
    )
    return 1.0 - used / (len(wanted) * (t1 - t0))


def main(argv: list[str]) -> int:
    from specsweep.collect.plan.file import load_plan
    from specsweep.collect.scheduling.estimate import Estimator
    from specsweep.collect.scheduling.schedule import makespan
    from specsweep.collect.scheduling.simulation import duration, measured_from, simulate_plan

    plan = load_plan(argv[0])
    est = Estimator(plan, measured_from(Path(argv[1]) if len(argv) > 1 else None, plan))
    sim = simulate_plan(plan, est, seed=0)
    end = makespan(sim.packed)
    busy = [(slot.gpus, slot.start, slot.end) for slot in sim.packed]
    free = [g for g in sim.gpus if g not in sim.reserved]
    print(f"packed makespan {duration(end)} ({end:.0f} s)")
    print(f"lower bound {duration(sim.bound)}; dependency-aware {duration(sim.dependency_bound)}")
    print(f"idle share, GPUs {list(sim.gpus)}: {idle_share(busy, sim.gpus, 0.0, end):.1%}")
    print(f"idle share, GPUs {free} (no blocking service): {idle_share(busy, free, 0.0, end):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
