"""The plan on simulated services: its phases as scheduler jobs, the serial and the packed
order on a simulated clock, round after round, and what `check` and `simulate` print.

Rounds (plan `repeat`) as the runner runs them: one after another, each starting every
configuration of each phase once in its round's order (collect.scheduling.order: a job's
`rank`). A best_of phase picks once, in round 1, when its source phase has finished (the
ranking reads run 1: collect.scheduling.ranking); later rounds queue its picks at once.
`device_time_lines` puts the plan's rounds beside one start per configuration.

Durations come from `collect.scheduling.estimate` (measured figures where the store has them, else
the plan's `estimates`); start-ups are drawn from `estimates.startup_s` with a seed, the
same draw for both orders. Only jobs are simulated: the scheduler is the real one, and so is
the choice of replicas (`collect.scheduling.replicas`, as the runner makes it). `simulate
--hosts 1,2,4` packs the plan on N copies of its host (a job never spans hosts) and prints
each count's makespan beside its bounds, with replicas and without.

Two modules: `jobs` (the plan as scheduler jobs and their simulated timelines) and `printout`
(what `check` and `simulate` print).
"""

from __future__ import annotations

from specsweep.collect.scheduling.simulation.jobs import (
    PlanJobs,
    Simulation,
    host_gpus,
    simulate_plan,
)
from specsweep.collect.scheduling.simulation.printout import (
    device_time_lines,
    duration,
    measured_from,
    report_lines,
)

__all__ = [
    "PlanJobs",
    "Simulation",
    "device_time_lines",
    "duration",
    "host_gpus",
    "measured_from",
    "report_lines",
    "simulate_plan",
]
